"""The independent audit of a task: replay its events and recompute every number with the reference."""

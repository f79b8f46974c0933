"""Benchmarks that produce the README's figures; each prints its table and the command that made it."""

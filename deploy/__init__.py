"""FGBDT-Chain: deploy."""

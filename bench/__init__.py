"""Benchmarks that produce the documentation's figures; each prints its table and the command that made it."""

"""FGBDT-Chain: api."""

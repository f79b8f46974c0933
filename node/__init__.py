"""FGBDT-Chain: node."""

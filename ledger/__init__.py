"""FGBDT-Chain: ledger."""

"""Differential privacy: the budget accountant, the private summaries a party publishes (PSD, binning sketch),
the distribution weights derived from them, and secure aggregation."""

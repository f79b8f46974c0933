"""The systems FV-tree is compared with, in the same harness: LightGBM on the federation's bins, and the
federated GBDT systems SimFL, TFL, FederBoost and FedXGBllr."""

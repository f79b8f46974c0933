"""The simulator: FV-tree with every party in one process, the experiment harness, and the Python API
(``fgbdt_chain.train`` and the scikit-learn estimators)."""

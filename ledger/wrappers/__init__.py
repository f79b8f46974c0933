"""Typed wrappers over the deployed contracts: the task contract, the ERC-2771 forwarder, a level's drive
and the model as the chain recorded it."""

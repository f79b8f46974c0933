"""Local chains: anvil found and started, and the embedded py-evm chain behind an HTTP JSON-RPC endpoint."""

"""The JSON-RPC client: transport, typed calls, revert decoding, ABI coding, new-block subscriptions, usage counts."""

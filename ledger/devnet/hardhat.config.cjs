// The Hardhat network that `ledger.devnet.nodes.start_hardhat` serves: anvil's chain id and block gas limit, and the
// hardfork the contracts are compiled for (ledger/toolchain/compile.py EVM_VERSION).
module.exports = {
  networks: {
    hardhat: {
      chainId: 31337,
      blockGasLimit: 1000000000,
      hardfork: "cancun",
    },
  },
};

"""FGBDT-Chain: ledger.

The chain side of the project, in Python:

* ``reference``: the pure-Python specification of the contract math (the contracts equal it bit for bit);
* ``compile``: Solidity sources under ``contracts/`` to ABI + bytecode (native solc or solc-js), cached by hash;
* ``client``: signed transactions, revert decoding (``errors``), event decoding, per-call gas, nonces; anvil or an
  embedded py-evm chain behind the same API;
* ``contracts``: typed wrappers of ``FGBDTMath`` and ``FGBDTChain``; ``encoding``: histogram layout, node hashes,
  Merkle commitments, endorsement digests and signatures; ``federation``: one tree level, step by step;
* ``anvil``: start/stop anvil from the project's npm dependencies (used by ``fgbdt devnet`` and the tests).
"""

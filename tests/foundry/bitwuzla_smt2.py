"""Bitwuzla as halmos's solver: ``python bitwuzla_smt2.py QUERY.smt2`` prints what the ``bitwuzla`` binary would.

halmos (``make contract-checks``) writes each query as an SMT-LIB file and runs its solver command on it. Its default
solver, yices, bit-blasts the 256-bit division in Solidity's checked multiplication (``sdiv(x * y, x) == y``) and did
not prove that a squared gradient of 32 bits cannot overflow within 60 s; Bitwuzla's word-level rewriting proves such
queries in milliseconds. Bitwuzla comes from PyPI as Python bindings (halmos would otherwise download its binary from
GitHub), so this script stands in for the binary: it parses and runs the file's commands, models on.
"""

from __future__ import annotations

import sys

import bitwuzla


def main(path: str) -> int:
    options = bitwuzla.Options()
    options.set(bitwuzla.Option.PRODUCE_MODELS, True)
    bitwuzla.Parser(bitwuzla.TermManager(), options).parse(path)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))

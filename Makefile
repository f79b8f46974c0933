# FGBDT-Chain: `make demo` and `make test` install what they need (idempotent) and run.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
NODE_STAMP := node_modules/.installed
PYTEST_ARGS ?= -n auto

.PHONY: all demo test lint typecheck docs unit bench clean install artifacts screenshots contract-checks symbolic fuzz

all: test

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev,chain,docs,scale]'
	touch $@

# The EVM toolchain (solc-js and anvil) comes from npm; skipped where npm is missing (the embedded chain serves).
$(NODE_STAMP): $(wildcard package.json package-lock.json)
	@if [ ! -f package.json ]; then mkdir -p node_modules; touch $@; \
	elif command -v npm >/dev/null 2>&1; then npm ci --no-audit --no-fund --loglevel=error && touch $@; \
	else echo "npm not found: contracts are compiled and run on the embedded chain only" >&2; mkdir -p node_modules; touch $@; fi

install: $(STAMP) $(NODE_STAMP)

# Slither and halmos (docs/contract-checks.md) in a virtualenv of their own, from pyproject.toml's dependency group
# `contracts`: slither-analyzer 0.11.6 needs web3 < 8 and halmos 0.3.3 rich < 14.1, which the package's own
# environment must not be held back to.
CHECKS_VENV ?= .venv-checks
CHECKS_STAMP := $(CHECKS_VENV)/.installed
# forge's native binary from npm (@foundry-rs/forge-<platform>), first on PATH since halmos and Slither call forge by
# name: npm's node_modules/.bin/forge wrapper exits 0 whatever forge returns, which would pass a failing test
CHECKS_PATH := PATH="$$(ls -d $(CURDIR)/node_modules/@foundry-rs/forge-*/bin | head -n 1):$(CURDIR)/node_modules/.bin:$$PATH"

$(CHECKS_STAMP): pyproject.toml
	test -x $(CHECKS_VENV)/bin/python || $(PYTHON) -m venv $(CHECKS_VENV)
	$(CHECKS_VENV)/bin/python -m pip install --quiet --upgrade pip
	$(CHECKS_VENV)/bin/python -m pip install --quiet --group contracts
	touch $@

# The contracts checked as audited projects check theirs: forge's guard, invariant and differential tests
# (tests/foundry), halmos's symbolic checks of the arithmetic, Slither (every High or Medium finding fixed or triaged
# in the source) and forge lint.
contract-checks: install $(CHECKS_STAMP)
	$(CHECKS_PATH) FGBDT_PYTHON=$(PY) forge test
	$(MAKE) --no-print-directory symbolic
	$(CHECKS_PATH) FGBDT_SOLC_NO_CODEGEN=1 $(CHECKS_VENV)/bin/slither contracts/FGBDTChain.sol $(SLITHER_ARGS)
	$(CHECKS_PATH) FGBDT_SOLC_NO_CODEGEN=1 $(CHECKS_VENV)/bin/slither contracts/FGBDTForwarder.sol $(SLITHER_ARGS)
	$(CHECKS_PATH) $(LINT_DIRS) forge lint contracts --deny warnings

# Slither through the solc stand-in with foundry.toml's settings (crytic-compile reads them from `forge config`),
# OpenZeppelin's own findings left out, failing on any untriaged High or Medium one
SLITHER_ARGS = --compile-force-framework solc --filter-paths node_modules --fail-medium

# forge lint compiles without code generation: into directories of its own, since artifacts without bytecode or AST
# in the shared cache would be taken as current by halmos's build
LINT_DIRS = FOUNDRY_OUT=build/foundry/lint/out FOUNDRY_CACHE_PATH=build/foundry/lint/cache

# halmos on forge's build (foundry.toml's out directory), an overflow or division-by-zero panic counted as a failure
# like a failed assert, z3's integer arithmetic, Bitwuzla and cvc5 as the solvers (tests/foundry/halmos_solver.py,
# which hands each query to a long-lived server, tests/foundry/halmos_server.py, that exits after a minute without
# one). A query the solvers leave open after 120 s is a TIMEOUT, which halmos counts as a failed check (exit status
# 1), like a counterexample.
HALMOS_ARGS = --forge-build-out build/foundry/out --panic-error-codes 0x01,0x11,0x12 --solver-timeout-assertion 120s
HALMOS_SOLVER = $(CHECKS_VENV)/bin/python tests/foundry/halmos_solver.py

# halmos's symbolic checks of the arithmetic (docs/contract-checks.md), part of make test. First the squaring lemma
# the solver applies to the other checks' queries (|t| <= 2^121: t * t does not wrap and sdiv(t * t, t) == t),
# proven with the solver's other steps only (--without-squares); then the side score, the split gain, the leaf value,
# the reward division and two parties' split Shapley values, every one proven (check_payout unrolls its shift loop
# with the `--loop 3` of its NatSpec, check_splitShapley2 its coalition loops with `--loop 4`).
SYMBOLIC_CHECKS ?= check_(sideScore|splitGain|leafValue|payout|splitShapley2)\(
symbolic: install $(CHECKS_STAMP)
	$(CHECKS_PATH) $(CHECKS_VENV)/bin/halmos --contract SymbolicTest --match-test '^check_squareLemma\(' $(HALMOS_ARGS) \
		--solver-command "$(HALMOS_SOLVER) --without-squares"
	$(CHECKS_PATH) $(CHECKS_VENV)/bin/halmos --contract SymbolicTest --match-test '^$(SYMBOLIC_CHECKS)' $(HALMOS_ARGS) \
		--solver-command "$(HALMOS_SOLVER)"

# The contract checks at bench size (10,000 runs per property), recorded in bench/results/fuzz.json.
fuzz: install $(CHECKS_STAMP)
	$(CHECKS_PATH) $(PY) -m bench.fuzz

demo: install
	$(VENV)/bin/fgbdt demo

# After editing a contract: recompile and rewrite the artifacts the package ships (a test checks they match).
artifacts: install
	$(PY) -m fgbdt_chain.ledger.toolchain.compile --write

lint: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

typecheck: $(STAMP)
	$(VENV)/bin/mypy -p fgbdt_chain

# The documentation site into out/site; every warning is an error. Offline: nothing is fetched while it builds.
# (The MkDocs 2 notices that Material and the plugins print on every build are switched off.)
docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 DISABLE_MKDOCS_2_WARNING=true $(VENV)/bin/mkdocs build --strict --quiet -d out/site

# the suite on every core (pytest-xdist); PYTEST_ARGS= runs it serially
unit: install
	$(PY) -m pytest -q $(PYTEST_ARGS)

# lint, types and the site first (quick; a failure there ends the run early), then the contract checks and the suite
# side by side: the checks are mostly one process at a time (forge, halmos's exploration) and the suite's chain tests
# often wait on their chains, so together they keep both cores busier than one after the other. Each part's output
# is printed whole when it ends.
test: lint typecheck docs
	$(MAKE) --no-print-directory -j2 --output-sync=target contract-checks unit

# The dashboard's screenshots that docs/dashboard.md shows, taken by its browser tests.
screenshots: install
	DASHBOARD_SCREENSHOTS=docs/img/dashboard $(PY) -m pytest -q -p no:cacheprovider tests/api/test_dashboard_browser.py

clean:
	rm -rf $(VENV) $(CHECKS_VENV) node_modules build .pytest_cache .mypy_cache .ruff_cache out

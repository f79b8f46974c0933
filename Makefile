# FGBDT-Chain: `make demo` and `make test` install what they need (idempotent) and run.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
NODE_STAMP := node_modules/.installed
PYTEST_ARGS ?= -n auto

.PHONY: all demo test lint typecheck docs unit bench clean install artifacts screenshots

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

test: lint typecheck docs unit

# The dashboard's screenshots that docs/dashboard.md shows, taken by its browser tests.
screenshots: install
	DASHBOARD_SCREENSHOTS=docs/img/dashboard $(PY) -m pytest -q -p no:cacheprovider tests/api/test_dashboard_browser.py

clean:
	rm -rf $(VENV) node_modules build .pytest_cache .mypy_cache .ruff_cache out

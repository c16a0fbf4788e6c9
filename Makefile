# `make demo` and `make test` are the two commands a new machine needs.
VENV ?= .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip install --quiet --disable-pip-version-check
# uv installs the packages: pip asks the package index about each one after the other (some three minutes of round
# trips on a new machine), uv all at once (a quarter of a minute). pip itself stays in the venv: tests build a wheel.
UV := $(VENV)/bin/uv pip install --quiet --python $(PY)
CKSUM := $(shell cat pyproject.toml | cksum | cut -d' ' -f1)
SERVING := $(VENV)/.serving-$(CKSUM)
STAMP := $(VENV)/.installed-$(CKSUM)
# `make demo PORT=8100`, or ORCHESTRACE_PORT=8100 make demo (as `orchestrace serve` reads it)
PORT ?= $(or $(ORCHESTRACE_PORT),8000)

.PHONY: demo test test-lake install chromium postgres bench clean

# What serving needs, and nothing else: `make demo` on a new machine waits for no test tool. Nothing is byte-compiled
# here (every module of every package would be); Python compiles those it imports.
$(SERVING): pyproject.toml
	test -x $(PY) || python3 -m venv $(VENV)
	test -x $(VENV)/bin/uv || $(PIP) uv
	$(UV) -e .
	touch $(SERVING)

# Nothing is byte-compiled here either: the tests write the bytecode of the modules they import (PYTEST below), and
# compiling every package took 24 s of the run.
$(STAMP): $(SERVING)
	$(UV) -e '.[test]'
	# harbor's ATIF models, which the ATIF tests validate exports with: harbor needs Python >= 3.12 to run, its models
	# only pydantic, so they are installed without its dependencies (the tests skip with a reason without them)
	$(PIP) --no-deps --ignore-requires-python harbor==0.25.0
	touch $(STAMP)

install: $(STAMP)

demo: $(SERVING)
	$(VENV)/bin/orchestrace demo --host 127.0.0.1 --port $(PORT)

chromium:
	@if ! command -v chromium >/dev/null 2>&1; then \
		if [ "$$(id -u)" = 0 ]; then \
			apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver; \
		else \
			echo "chromium is missing and we are not root: browser tests will be skipped"; \
		fi; \
	fi

# The storage, label, API, ingest and query tests again, on a DuckLake store over a throwaway PostgreSQL (issue 16);
# `--store=lake` runs only their tests that use the `settings` fixture's store. A lake test takes some 1.5 s of CPU
# (a file one 0.25 s): a file added here should earn its time. The blind review, paper and search tests are not here
# (a minute of the run's three, and 20 s): their SQL is plain reads and writes, the same on both stores. Nor are the
# importers' API tests (24 s): what they store goes through the same store_traces as test_api_traces'. Nor are the
# level-of-detail tests (55 s): the suite had to come back under 15 minutes, and a lake's snapshots are checked by
# tests/test_lake_reads.py in the file run; `make test-lake LAKE_TESTS=tests/test_lod.py` runs them on a lake.
LAKE_TESTS := tests/test_store_schema.py tests/test_store_lake.py tests/test_annotations.py tests/test_api_traces.py \
	tests/test_otlp_receiver.py tests/test_analysis.py tests/test_corpus_facts.py

# The tests write bytecode even where the environment says not to (PYTHONDONTWRITEBYTECODE): each pytest process
# would otherwise rewrite the asserts of some 450 modules again (10-15 s a process), and each server or CLI a test
# starts would compile the app anew. The files land in __pycache__ folders, which git ignores.
PYTEST := env -u PYTHONDONTWRITEBYTECODE $(VENV)/bin/pytest

# The whole suite on DuckDB files, then the LAKE_TESTS on a lake; each on both cores (pytest-xdist), a test file's
# tests on one worker so that its module fixtures (servers, browsers) start once. Each run leaves its tests' times in
# test-output/ (JUnit XML), to find what made the suite slower.
test: install chromium postgres
	$(PYTEST) -q -n 2 --dist loadfile --junitxml=test-output/junit-files.xml
	$(PYTEST) -q -n 2 --dist loadfile --store=lake --junitxml=test-output/junit-lake.xml $(LAKE_TESTS)

postgres:
	@if ! ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1; then \
		if [ "$$(id -u)" = 0 ]; then \
			apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql; \
		else \
			echo "postgresql is missing and we are not root: the lake tests will be skipped"; \
		fi; \
	fi

test-lake: install postgres
	$(PYTEST) -q -n 2 --dist loadfile --store=lake $(LAKE_TESTS)

bench: install
	$(PY) benchmarks/ingest.py

clean:
	rm -rf $(VENV) data .pytest_cache test-output

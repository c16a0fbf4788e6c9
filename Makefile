# `make demo` and `make test` are the two commands a new machine needs.
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-$(shell cat pyproject.toml | cksum | cut -d' ' -f1)

.PHONY: demo test install chromium bench clean

$(STAMP): pyproject.toml
	test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[test]'
	touch $(STAMP)

install: $(STAMP)

demo: install
	$(VENV)/bin/orchestrace demo --host 127.0.0.1 --port 8000

chromium:
	@if ! command -v chromium >/dev/null 2>&1; then \
		if [ "$$(id -u)" = 0 ]; then \
			apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver; \
		else \
			echo "chromium is missing and we are not root: browser tests will be skipped"; \
		fi; \
	fi

test: install chromium
	$(VENV)/bin/pytest -q

bench: install
	$(PY) benchmarks/ingest.py

clean:
	rm -rf $(VENV) data .pytest_cache test-output

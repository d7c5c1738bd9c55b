# The two README commands: `make run` and `make test`. Everything else is a helper for those.
VENV ?= .venv
PY := $(VENV)/bin/python
PIP := $(VENV)/bin/pip
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

.PHONY: run test generate bench kcat java venv venv-test clean

$(VENV)/bin/python:
	python3 -m venv $(VENV)
	$(PIP) install -q --upgrade pip setuptools wheel

$(VENV)/.installed: pyproject.toml | $(VENV)/bin/python
	$(PIP) install -q -e .
	touch $@

$(VENV)/.installed-test: pyproject.toml | $(VENV)/bin/python
	$(PIP) install -q -e '.[test,spark]'
	touch $(VENV)/.installed $@

venv: $(VENV)/.installed
venv-test: $(VENV)/.installed-test

## run one broker in the foreground on 127.0.0.1:9092, data under ./data
run: venv
	$(VENV)/bin/odradek serve --config config/single-node.yaml

kcat:
	@command -v kcat >/dev/null 2>&1 || { $(SUDO) apt-get update -qq && $(SUDO) apt-get install -y -qq kcat; }

java:  # the PySpark tests need a JVM
	@command -v java >/dev/null 2>&1 || { $(SUDO) apt-get update -qq && $(SUDO) apt-get install -y -qq openjdk-17-jre-headless; }

## create/update .venv with the test extras, install kcat (and a JVM for Spark) if missing, run the suite
test: venv-test kcat java
	$(VENV)/bin/ruff check .
	$(PY) -m pytest $(PYTEST_ARGS)

## regenerate the protocol codec from ../shared/kafka-spec
generate: venv
	$(PY) -m protocol.codegen

bench: venv-test
	$(PY) benchmarks/bench_codec.py
	$(PY) benchmarks/bench_records.py

clean:
	rm -rf $(VENV) .pytest_cache .hypothesis

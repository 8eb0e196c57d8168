"""Metrics take a registry; label values are bounded by configuration."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry, generate_latest

from stef.judges.heuristic.judge import HeuristicJudge
from stef.metrics import (
    DEAD_LETTER_REASONS,
    BoundedLabels,
    Metrics,
    judge_error_reason,
    record_time,
)
from stef.models import Result
from stef.pipeline import Pipeline
from stef.rules import AppRules, RuleSet
from stef.stages.validate import validate


def test_observe_result_counts_every_contract_metric() -> None:
    registry = CollectorRegistry()
    m = Metrics(registry, known_apps=["sales"], max_agents=1)
    pipe = Pipeline(RuleSet(AppRules()), HeuristicJudge())
    good = pipe.judge_record(
        validate(
            {
                "question": "How many users in 2023?",
                "app": "sales",
                "sql": "SELECT COUNT(*) FROM u WHERE year = 2023",
                "agent": "bot",
                "agent_version": "1",
            }
        )
    )
    unsafe = pipe.judge_record(
        validate({"question": "q", "sql": "DELETE FROM u", "app": "hr", "agent": "other-bot"})
    )
    m.observe_result(good)
    m.observe_result(unsafe)
    m.observe_invalid("sales")
    g = registry.get_sample_value
    assert g("stef_records_total", {"app": "sales", "outcome": "evaluated"}) == 1
    assert g("stef_records_total", {"app": "unknown", "outcome": "evaluated"}) == 1
    assert g("stef_records_total", {"app": "sales", "outcome": "invalid"}) == 1
    assert g("stef_score_count", {"app": "sales", "agent": "bot@1"}) == 1
    assert g("stef_score_bucket", {"app": "sales", "agent": "bot@1", "le": "90.0"}) == 0
    assert g("stef_score_bucket", {"app": "sales", "agent": "bot@1", "le": "100.0"}) == 1
    assert (
        g(
            "stef_evaluations_total",
            {
                "app": "sales",
                "agent": "bot@1",
                "tier": "excellent",
                "verdict": "Correct",
                "filter_status": "fully_applied",
            },
        )
        == 1
    )
    assert g("stef_unsafe_sql_total", {"app": "unknown"}) == 1
    assert g("stef_issues_total", {"app": "unknown", "issue": "unsafe_sql"}) == 1
    assert g("stef_enrichment_total", {"app": "sales", "status": "missing"}) == 1
    assert g("stef_confidence_count", {"app": "sales"}) == 1
    # max_agents=1: the second agent is folded into "other"
    assert g("stef_score_count", {"app": "unknown", "agent": "other"}) == 1


def test_llm_cache_lag_reload() -> None:
    registry = CollectorRegistry()
    m = Metrics(registry)
    m.observe_llm_call("gpt", "ok", 1.5, prompt_tokens=100, completion_tokens=20, cost_usd=0.01)
    m.observe_cache(True)
    m.observe_cache(False)
    m.set_lag("t", 0, 7)
    m.observe_rules_reload("error")
    g = registry.get_sample_value
    assert (
        g(
            "stef_llm_request_duration_seconds_bucket",
            {"model": "gpt", "outcome": "ok", "le": "2.0"},
        )
        == 1
    )
    assert (
        g(
            "stef_llm_request_duration_seconds_bucket",
            {"model": "gpt", "outcome": "ok", "le": "120.0"},
        )
        == 1
    )
    assert g("stef_llm_tokens_total", {"model": "gpt", "kind": "prompt"}) == 100
    assert g("stef_llm_cost_usd_total", {"model": "gpt"}) == 0.01
    assert g("stef_cache_hits_total") == 1 and g("stef_cache_misses_total") == 1
    assert g("stef_consumer_lag", {"topic": "t", "partition": "0"}) == 7
    assert g("stef_rules_reload_total", {"outcome": "error"}) == 1
    assert g("stef_rules_reload_total", {"outcome": "success"}) == 0


# ----------------------------------------------------------------- label values from input


def _result(**fields: str) -> Result:
    record = {"question": "How many users in 2023?", "sql": "SELECT COUNT(*) FROM u", **fields}
    return Pipeline(RuleSet(AppRules()), HeuristicJudge()).judge_record(validate(record))


def _label_values(registry: CollectorRegistry, name: str) -> set[str]:
    return {
        sample.labels[name]
        for family in registry.collect()
        for sample in family.samples
        if name in sample.labels
    }


def test_long_agent_values_without_known_agents_are_other() -> None:
    """20 records of agent "G" * 10000 and nothing configured: one series, labelled other."""
    registry = CollectorRegistry()
    m = Metrics(registry)
    result = _result(agent="G" * 10_000)
    for _ in range(20):
        m.observe_result(result)
    assert _label_values(registry, "agent") == {"other"}
    assert registry.get_sample_value("stef_score_count", {"app": "default", "agent": "other"}) == 20
    longest = max(
        len(value)
        for family in registry.collect()
        for sample in family.samples
        for value in sample.labels.values()
    )
    assert longest <= 64


@pytest.mark.parametrize(
    "agent",
    ["two words", "line\nbreak", 'quo"te', "agent{x}", "ünïcode", "\u200b", "a" * 65],
    ids=["space", "newline", "quote", "braces", "non-ascii", "zero-width", "65-chars"],
)
def test_agent_values_that_do_not_look_like_labels_are_other(agent: str) -> None:
    m = Metrics(CollectorRegistry())
    assert m.agent_label(agent, None) == "other"


def test_label_like_agents_are_kept_up_to_max_agents() -> None:
    m = Metrics(CollectorRegistry(), max_agents=2)
    assert m.agent_label("sql-agent", "2.1") == "sql-agent@2.1"
    assert m.agent_label("team/bot:v1", None) == "team/bot:v1"
    assert m.agent_label("third", None) == "other"
    assert m.agent_label("sql-agent", "2.1") == "sql-agent@2.1"
    assert m.agent_label(None, "1") == "unknown"


def test_configured_agents_only() -> None:
    m = Metrics(CollectorRegistry(), known_agents=["sql-agent@2.0", "a b"])
    assert m.agent_label("sql-agent", "2.0") == "sql-agent@2.0"
    assert m.agent_label("a b", None) == "a b"  # configured values are trusted as they are
    assert m.agent_label("sql-agent", "2.1") == "other"
    assert m.agent_label("G" * 10_000, None) == "other"


def test_unconfigured_apps_are_bounded_like_agents() -> None:
    registry = CollectorRegistry()
    m = Metrics(registry, max_apps=1)
    m.observe_result(_result(app="A" * 10_000))
    m.observe_result(_result(app="sales"))
    m.observe_result(_result(app="support"))
    m.observe_invalid("x\ny")
    g = registry.get_sample_value
    assert g("stef_records_total", {"app": "sales", "outcome": "evaluated"}) == 1
    assert g("stef_records_total", {"app": "unknown", "outcome": "evaluated"}) == 2
    assert g("stef_records_total", {"app": "unknown", "outcome": "invalid"}) == 1
    assert _label_values(registry, "app") == {"sales", "unknown"}


def test_configured_apps_stay_exact() -> None:
    m = Metrics(CollectorRegistry(), known_apps=["sales", "two words"])
    assert m.app_label("two words") == "two words"
    assert m.app_label("support") == "unknown"
    assert m.app_label(None) == "default"


def test_issue_labels_outside_the_contract_are_other() -> None:
    registry = CollectorRegistry()
    m = Metrics(registry)
    result = _result(app="sales").model_copy(update={"issues": ["x" * 5000, "logic_error"]})
    m.observe_result(result)
    assert _label_values(registry, "issue") == {"other", "logic_error"}
    assert registry.get_sample_value("stef_issues_total", {"app": "sales", "issue": "other"}) == 1


# ------------------------------------------------------------ first events, dead letters, process


def test_unknown_app_and_other_agent_exist_at_zero_before_any_record() -> None:
    """increase() needs an earlier sample: the first unsafe statement of an app without rules
    (label ``unknown``) must move a series that was already scraped at zero."""
    registry = CollectorRegistry()
    m = Metrics(registry, known_apps=["sales"])
    m.prime_app("sales")
    g = registry.get_sample_value
    for app in ("sales", "unknown"):
        assert g("stef_unsafe_sql_total", {"app": app}) == 0
        for outcome in ("evaluated", "judge_error", "skipped_sampling", "invalid"):
            assert g("stef_records_total", {"app": app, "outcome": outcome}) == 0
        assert g("stef_score_count", {"app": app, "agent": "other"}) == 0
    unsafe = _result(app="hr", sql="DROP TABLE u")
    m.observe_result(unsafe)
    assert g("stef_unsafe_sql_total", {"app": "unknown"}) == 1


def test_dead_letters_by_reason_primed_and_bounded() -> None:
    registry = CollectorRegistry()
    m = Metrics(registry)
    g = registry.get_sample_value
    for reason in DEAD_LETTER_REASONS:
        assert g("stef_dead_letters_total", {"reason": reason}) == 0
    m.observe_invalid("sales", "not_json")
    m.observe_invalid("sales")  # no reason given: the outcome only
    m.observe_internal_error("sales")
    m.observe_dead_letter("sink_rejected")
    m.observe_dead_letter("x" * 500)
    assert g("stef_dead_letters_total", {"reason": "not_json"}) == 1
    assert g("stef_dead_letters_total", {"reason": "internal_error"}) == 1
    assert g("stef_dead_letters_total", {"reason": "sink_rejected"}) == 1
    assert g("stef_dead_letters_total", {"reason": "other"}) == 1
    assert g("stef_records_total", {"app": "sales", "outcome": "invalid"}) == 2


def test_judge_errors_by_bounded_reason() -> None:
    registry = CollectorRegistry()
    m = Metrics(registry)
    base = _result(app="sales")
    for error in ("timeout: 30 s", "http_503: busy", "rate_limited: 429", "weird\nthing: x", None):
        m.observe_result(base.model_copy(update={"outcome": "judge_error", "error": error}))
    g = registry.get_sample_value
    assert g("stef_judge_errors_total", {"app": "sales", "reason": "timeout"}) == 1
    assert g("stef_judge_errors_total", {"app": "sales", "reason": "http_503"}) == 1
    assert g("stef_judge_errors_total", {"app": "sales", "reason": "rate_limited"}) == 1
    assert g("stef_judge_errors_total", {"app": "sales", "reason": "other"}) == 2
    assert judge_error_reason("http_9999: x") == "other"


def test_freshness_gauge_keeps_the_newest_record_time() -> None:
    registry = CollectorRegistry()
    m = Metrics(registry)
    newer = _result(app="sales", timestamp="2025-06-03T00:08:26Z")
    older = _result(app="sales", timestamp="2025-06-02T23:00:00+00:00")
    undated = _result(app="sales")
    for r in (newer, older, undated):
        m.observe_result(r)
    value = registry.get_sample_value("stef_newest_record_timestamp_seconds", {"app": "sales"})
    assert value == datetime(2025, 6, 3, 0, 8, 26, tzinfo=UTC).timestamp()
    assert record_time("2025-06-03T00:08:26") == value  # naive: UTC
    assert record_time("yesterday") is None


def test_process_collector_on_and_created_series_off() -> None:
    registry = CollectorRegistry()
    Metrics(registry)
    text = generate_latest(registry).decode()
    assert "_created" not in text
    if Path("/proc/self/stat").exists():
        assert registry.get_sample_value("process_resident_memory_bytes") > 0
        assert registry.get_sample_value("process_cpu_seconds_total") is not None


def test_bounded_labels_configured_or_the_first_seen() -> None:
    """One class bounds the label values that come from input (apps, agents, model names)."""
    fixed = BoundedLabels(2, "unknown", ["sales"])
    assert [fixed(v) for v in ("sales", "support", "sales")] == ["sales", "unknown", "sales"]
    fixed.known = {"sales", "support"}  # a rules reload adds an app
    assert fixed("support") == "support"
    first = BoundedLabels(2, "other")
    seen = [first(v) for v in ("a", "bad value", "b", "c", "a")]
    assert seen == ["a", "other", "b", "other", "a"]
    metrics = Metrics(CollectorRegistry(), known_agents=[], max_agents=5)
    assert metrics.agent_label("sql-agent", "2.0") == "other"  # none configured: all other


def test_without_known_apps_the_first_max_apps_are_labels() -> None:
    metrics = Metrics(CollectorRegistry(), max_apps=2)
    labels = [metrics.app_label(a) for a in ("sales", "x" * 100, "support", "hr", None)]
    assert labels == ["sales", "unknown", "support", "unknown", "default"]

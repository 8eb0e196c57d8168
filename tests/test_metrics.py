"""Metrics take a registry; label values are bounded by configuration."""

from __future__ import annotations

from prometheus_client import CollectorRegistry

from stef.judges.heuristic.judge import HeuristicJudge
from stef.metrics import Metrics
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

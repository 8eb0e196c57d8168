"""Results carry the text a reviewer reads (``input``), unless ``results_include_input`` is off."""

from __future__ import annotations

import json

from stef.judges.heuristic.judge import HeuristicJudge
from stef.rules import AppRules, RuleSet
from stef.service.wiring import build_pipeline
from stef.settings import load_settings

RECORD = {
    "id": "r1",
    "app": "sales",
    "question": "Orders in EMEA",
    "enriched_question": "Orders in EMEA (region_name)",
    "sql": "SELECT order_id FROM orders WHERE region_name = 'EMEA'",
}


def _result(env: dict[str, str]) -> dict[str, object]:
    settings = load_settings(env=env)
    pipe = build_pipeline(settings, RuleSet(AppRules()), HeuristicJudge())
    processed = pipe.process(json.dumps(RECORD).encode(), {"file": "t", "line": 1})
    assert processed.value is not None
    out: dict[str, object] = json.loads(processed.value)
    return out


def test_results_carry_question_enriched_question_and_sql_by_default() -> None:
    assert _result({})["input"] == {
        "question": RECORD["question"],
        "enriched_question": RECORD["enriched_question"],
        "sql": RECORD["sql"],
    }


def test_setting_leaves_the_input_out() -> None:
    result = _result({"STEF_RESULTS_INCLUDE_INPUT": "false"})
    assert "input" not in result
    assert result["id"] == "r1"

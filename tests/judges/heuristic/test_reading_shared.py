"""The LLM path reads a record for its prompt and again for the heuristic second opinion: the
second reading is the first, and never another record's."""

from __future__ import annotations

from typing import Any

import pytest

from stef.judges.base import JudgeRequest
from stef.judges.heuristic import judge as heuristic_judge
from stef.judges.heuristic.judge import HeuristicOptions, heuristic, reading
from stef.pipeline import judge_request
from stef.rules import AppRules
from stef.stages.validate import validate


def _request(question: str, sql: str) -> JudgeRequest:
    record = validate({"id": "r", "question": question, "sql": sql})
    request, _ = judge_request(record, AppRules())
    return request


def _counting(monkeypatch: pytest.MonkeyPatch) -> list[JudgeRequest]:
    read: list[JudgeRequest] = []
    original = heuristic_judge._evidence

    def counted(request: JudgeRequest, options: HeuristicOptions) -> Any:
        read.append(request)
        return original(request, options)

    monkeypatch.setattr(heuristic_judge, "_evidence", counted)
    return read


def test_the_second_opinion_reuses_the_prompts_reading(monkeypatch: pytest.MonkeyPatch) -> None:
    request = _request("How many orders in 2023?", "SELECT COUNT(*) FROM orders WHERE year = 2022")
    read = _counting(monkeypatch)
    qs, matches, findings = reading(request)
    output = heuristic(request)
    assert read == [request]
    assert output.question_spec == qs and output.filter_matches == matches
    labels = list(dict.fromkeys(f.label for f in findings))
    assert [i for i in output.issues if i != "none"] == labels


def test_another_record_or_other_options_is_read_again(monkeypatch: pytest.MonkeyPatch) -> None:
    wrong = _request("How many orders in 2023?", "SELECT COUNT(*) FROM orders WHERE year = 2022")
    right = _request("How many orders in 2023?", "SELECT COUNT(*) FROM orders WHERE year = 2023")
    fresh = heuristic(right)
    read = _counting(monkeypatch)
    heuristic(wrong)
    assert heuristic(right) == fresh
    heuristic(right, HeuristicOptions(operator_mismatch=True))
    assert read == [wrong, right, right]

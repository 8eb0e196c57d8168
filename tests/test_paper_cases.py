"""`stef judge` on the hand-written paper cases meets every `expect` (SPEC §2, paper §5)."""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from stef.cli import main
from tests.conftest import ROOT

CASES_FILE = ROOT / "tests" / "fixtures" / "paper-cases.jsonl"
CASES = [json.loads(line) for line in CASES_FILE.read_text().splitlines() if line.strip()]


def _judge(
    case: dict[str, Any],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> dict[str, Any]:
    rules = tmp_path / "rules.yaml"
    rules.write_text(yaml.safe_dump(case["rules"]))
    record = {k: case[k] for k in ("id", "question", "sql", "enriched_question") if k in case}
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(json.dumps(record).encode())))
    assert main(["judge", "--rules", str(rules)]) == 0
    return json.loads(capsys.readouterr().out)  # type: ignore[no-any-return]


@pytest.mark.parametrize("case", CASES, ids=[c["id"] for c in CASES])
def test_paper_case(
    case: dict[str, Any],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    result = _judge(case, tmp_path, monkeypatch, capsys)
    expect = case["expect"]
    assert result["outcome"] == "evaluated"
    assert result["judge"]["backend"] == "heuristic"
    if "filter_status" in expect:
        assert result["components"]["filter_status"] == expect["filter_status"]
    for name in expect.get("normalizations", []):
        assert name in result["normalizations"]
    for name in expect.get("normalizations_absent", []):
        assert name not in result["normalizations"]
    for flag in expect.get("flags", []):
        assert flag in result["flags"]
    if "leniency" in expect:
        assert result["components"]["leniency"] == expect["leniency"]
    if "unsafe" in expect:
        unsafe = result["safety"]["mutating"] or result["safety"]["multiple_statements"]
        assert unsafe is expect["unsafe"]
        assert ("unsafe_sql" in result["issues"]) is expect["unsafe"]
    if "verdict" in expect:
        assert result["components"]["verdict"] == expect["verdict"]
    c = result["components"]
    expected_score = round(
        (c["filter_score"] + c["verdict_score"] + c["leniency"])
        / 10
        * 100
        * c["confidence_multiplier"],
        2,
    )
    if result["safety"]["mutating"] or result["safety"]["multiple_statements"]:
        # The safety override: 0 and poor whatever the paper's components say.
        assert (result["score"], result["tier"]) == (0.0, "poor")
        assert "safety_override" in result["normalizations"]
    else:
        assert result["score"] == expected_score


def test_cases_file_matches_shared_copy() -> None:
    """The fixture is a copy of ../shared/data/paper-cases.jsonl, so CI needs no shared folder."""
    shared = ROOT.parent / "shared" / "data" / "paper-cases.jsonl"
    if shared.exists():
        assert shared.read_text() == CASES_FILE.read_text()
    assert len(CASES) == 17

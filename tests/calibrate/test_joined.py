"""``stef calibrate --results R --labels L``: labels joined to judged results by id (nothing is
judged again), the disagreements listed, the most confident first."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from stef.cli import main
from tests.conftest import write_jsonl


def _res(rid: str, score: float | None) -> dict[str, Any]:
    return {
        "id": rid,
        "app": "sales",
        "outcome": "evaluated" if score is not None else "judge_error",
        "score": score,
        "issues": ["filters_missing"],
        "judge": {"backend": "llm"},
        "components": {"verdict": "Correct"},
        "input": {"question": f"q {rid}", "sql": "SELECT 1"},
    }


@pytest.fixture
def files(tmp_path: Path) -> tuple[Path, Path]:
    results = write_jsonl(
        tmp_path / "r.jsonl",
        [_res("a", 95.0), _res("b", 80.0), _res("c", 10.0), _res("d", 60.0), _res("e", None)],
    )
    labels = write_jsonl(
        tmp_path / "l.jsonl",
        [
            {"id": "a", "label": False, "note": "wrong table"},  # 20 above 75: wrong
            {"id": "b", "label": True},
            {"id": "c", "label": True},  # 65 below: the most confident miss
            {"id": "d", "label": False},
            {"id": "e", "label": True},  # a judge error: counted, never a disagreement
            {"id": "zz", "label": True},  # names no result
            {"id": "d", "label": None},  # the last line wins: d skipped, left out
        ],
    )
    return results, labels


def test_json_joins_by_id_and_lists_disagreements(
    files: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    results, labels = files
    argv = ["calibrate", "--results", str(results), "--labels", str(labels), "--json"]
    assert main(argv) == 0
    out = json.loads(capsys.readouterr().out)
    # d's last line is a skip: left out; zz names nothing
    assert out["n"] == 4 and out["judge_errors"] == 1
    assert out["labels_unmatched"] == 1
    assert [d["id"] for d in out["disagreements"]] == ["c", "a"]
    assert out["disagreements"][1]["note"] == "wrong table"
    assert out["disagreements"][0]["question"] == "q c"


def test_disagreements_limit_and_text(
    files: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    results, labels = files
    argv = ["calibrate", "--results", str(results), "--labels", str(labels)]
    assert main([*argv, "--disagreements", "1"]) == 0
    text = capsys.readouterr().out
    tail = text.split("disagreements at 75", 1)[1]
    assert "c  app sales  labelled correct  score 10" in tail and "  a  app" not in tail


@pytest.mark.parametrize(
    "extra",
    [
        ["--results", "r.jsonl"],
        ["--labels", "l.jsonl"],
        ["x.jsonl", "--results", "r", "--labels", "l"],
    ],
)
def test_half_given_is_a_usage_error(extra: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["calibrate", *extra]) == 2
    assert "--results and --labels" in capsys.readouterr().err


def test_a_disagreement_without_a_score_is_listed_with_a_dash() -> None:
    """Under a calibration its p_correct decides it, and the text's score format raised on a
    result without a score."""
    from stef.calibrate.joined import render_disagreements

    row = {"id": "n", "app": "sales", "label": True, "score": None, "p_correct": 0.38}
    text = render_disagreements([{**row, "issues": [], "note": "", "question": None}], 0.55)
    assert "n  app sales  labelled correct  score - p_correct 0.38" in text

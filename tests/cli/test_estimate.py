"""``stef estimate``: per-app JSON, random-order labels only by default, clear errors."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from stef.cli import main
from stef.report.figures import per_app
from tests.conftest import write_jsonl


def _result(rid: str, app: str, p: float | None) -> dict[str, Any]:
    judge: dict[str, Any] = {"backend": "llm"}
    if p is not None:
        judge["p_correct"] = p
    return {"id": rid, "app": app, "outcome": "evaluated", "score": 50.0, "judge": judge}


def test_json_per_app(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    results = write_jsonl(
        tmp_path / "r.jsonl",
        [_result(f"s{i}", "sales", 0.8) for i in range(10)]
        + [_result(f"h{i}", "hr", None) for i in range(4)]
        + [{"id": "x", "app": "sales", "outcome": "judge_error", "judge": {"backend": "llm"}}],
    )
    labels = write_jsonl(
        tmp_path / "l.jsonl",
        [
            {"id": "s0", "label": True, "queue": "random"},
            {"id": "s1", "label": False, "queue": "random"},
            {"id": "s2", "label": False, "queue": "teaching"},  # picked by doubt: not a sample
            {"id": "h0", "label": True},
            {"id": "h1", "label": None},  # skipped
        ],
    )
    assert main(["estimate", "--results", str(results), "--labels", str(labels), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    sales = out["sales"]
    assert (sales["n"], sales["n_labelled"]) == (10, 2)
    assert sales["estimate"] == pytest.approx(0.8 + ((1 - 0.8) + (0 - 0.8)) / 2)
    assert sales["low"] <= sales["estimate"] <= sales["high"]
    assert sales["labels_only"]["estimate"] == 0.5
    hr = out["hr"]  # no calibrated probability: no estimate, the labels alone
    assert hr["estimate"] is None and hr["n_labelled"] == 1
    assert hr["labels_only"]["estimate"] == 1.0
    assert out["(all)"]["n"] == 14
    assert main(["estimate", "--results", str(results), "--labels", str(labels), "--json",
                 "--all-labels"]) == 0  # fmt: skip
    assert json.loads(capsys.readouterr().out)["sales"]["n_labelled"] == 3


def test_bad_labels_line_is_one_clear_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    results = write_jsonl(tmp_path / "r.jsonl", [_result("a", "sales", 0.5)])
    labels = tmp_path / "l.jsonl"
    labels.write_text('{"id": "a", "label": true}\n{"id": "b", "label": "yes"}\n')
    assert main(["estimate", "--results", str(results), "--labels", str(labels)]) == 1
    err = capsys.readouterr().err
    assert f"{labels}:2:" in err and "Traceback" not in err


def test_labels_left_out_for_their_order_are_said(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    results = write_jsonl(tmp_path / "r.jsonl", [_result(f"s{i}", "sales", 0.7) for i in range(5)])
    labels = write_jsonl(
        tmp_path / "l.jsonl",
        [{"id": f"s{i}", "label": i % 2 == 0, "queue": "teaching"} for i in range(3)],
    )
    assert main(["estimate", "--results", str(results), "--labels", str(labels)]) == 0
    out = capsys.readouterr().out
    # Before: only "needs at least two labelled records", with 3 labels in the file.
    assert "3 labels given in teaching order were left out" in out
    assert "--order random" in out and "--all-labels" in out
    args = ["estimate", "--results", str(results), "--labels", str(labels), "--all-labels"]
    assert main(args) == 0
    assert "left out" not in capsys.readouterr().out


def test_a_missing_labels_file_is_an_error_not_an_empty_sample(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    results = write_jsonl(tmp_path / "r.jsonl", [_result("s0", "sales", 0.8)])
    missing = tmp_path / "labels.jsonl"
    assert main(["estimate", "--results", str(results), "--labels", str(missing)]) == 1
    assert f"{missing}: no such file" in capsys.readouterr().err
    assert main(["report", str(results), "-o", str(tmp_path / "r.html"), "--labels", str(missing)])
    assert not (tmp_path / "r.html").exists()


def test_an_app_named_like_the_total_is_counted_once(tmp_path: Path) -> None:
    rows = per_app([_result("a", "(all)", 0.8), _result("b", "sales", 0.6)], {})
    assert [(g.app, g.received) for g in rows] == [("(all)", 2), ("(all)", 1), ("sales", 1)]

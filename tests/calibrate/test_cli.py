"""``stef calibrate``: the JSON keys, the readable report, usage errors and the shared dev set."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from stef.cli import main
from tests.calibrate.conftest import KEYS, OVERALL_KEYS, labels_file
from tests.conftest import ROOT, SHARED_DATA


def test_cli_json_has_exactly_the_keys(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    for var in ("STEF_LLM_BASE_URL", "STEF_LLM_API_KEY"):
        monkeypatch.delenv(var, raising=False)
    plot = tmp_path / "hist.svg"
    assert main(["calibrate", str(labels_file(tmp_path)), "--json", "--plot", str(plot)]) == 0
    out = json.loads(capsys.readouterr().out)
    assert set(out) == KEYS | OVERALL_KEYS | {
        "backend", "pass_threshold", "best_threshold", "positive_class", "sql", "resamples",
        "seed", "plot", "pass_rule", "calibration", "probability", "reference",
    }  # fmt: skip
    # Two records carry gold_sql: a's generated SQL reads another table (Incorrect), b's too.
    assert out["reference"]["n"] == 2
    assert set(out["reference"]) == {
        "kappa", "auc", "ece", "n", "generated_databases", "by_source", "by_decided", "decided",
        "execution_ms",
    }  # fmt: skip
    assert sum(f["n"] for f in out["reference"]["by_decided"].values()) == 2
    # The invalid record (question: 7) is left out as invalid input, not counted as a judge error.
    assert out["n"] == 3 and out["judge_errors"] == 0
    assert set(out["confusion"]) == {"tp", "fp", "tn", "fn"}
    assert plot.read_text().startswith("<svg ")


def test_cli_table_names_the_positive_class_and_best_threshold(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    for var in ("STEF_LLM_BASE_URL", "STEF_LLM_API_KEY"):
        monkeypatch.delenv(var, raising=False)
    args = ["calibrate", str(labels_file(tmp_path)), "--pass-threshold", "60"]
    # The score threshold decides only without a calibration (the heuristic ships one).
    assert main([*args, "--calibration", "none"]) == 0
    text = capsys.readouterr().out
    assert "positive class: correct" in text
    assert "pass threshold: score >= 60" in text
    assert "kappa-maximising threshold" in text
    for dim in ("by source", "by app", "by error type", "by verdict"):
        assert dim in text
    assert "reference verdict (records with gold_sql, 8 generated databases a record)" in text
    assert "decided by" in text


def test_cli_usage_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = labels_file(tmp_path)
    with pytest.raises(SystemExit) as stopped:  # the parser's range, before a file is read
        main(["calibrate", str(path), "--resamples", "100"])
    assert stopped.value.code == 2
    assert main(["calibrate", str(tmp_path / "missing.jsonl")]) == 1
    capsys.readouterr()


@pytest.mark.skipif(not (SHARED_DATA / "judge-dev.jsonl").exists(), reason="no shared dev set")
def test_dev_set_first_records(capsys: pytest.CaptureFixture[str]) -> None:
    dev = SHARED_DATA / "judge-dev.jsonl"
    rules = str(ROOT / "examples" / "rules-judge-dev")
    assert main(["calibrate", str(dev), "--rules", rules, "--limit", "60", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["n"] == 60
    c = out["confusion"]
    assert c["tp"] + c["fp"] + c["tn"] + c["fn"] == 60

"""stef calibrate reads labels in the agent's own field names through --config's field_mapping,
and counts records that are not valid input as invalid, never as judge errors (issue 25 §4)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from stef.cli import main
from tests.conftest import ROOT

SAMPLE = ROOT / "examples" / "judge-sample.jsonl"


def _agent_names(tmp_path: Path) -> Path:
    """The bundled labelled sample, rewritten in an agent's own field names."""
    out = tmp_path / "labels.jsonl"
    with out.open("w") as fh:
        for line in SAMPLE.read_text().splitlines():
            rec = json.loads(line)
            agent = {
                "request": {"messages": [{"content": rec["question"]}]},
                "generated": {"sql": rec["sql"]},
                "label": rec["label"],
            }
            fh.write(json.dumps(agent) + "\n")
    return out


def _calibrate(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(["calibrate", *args, "--no-progress", "--calibration", "none", "--json"])
    out, err = capsys.readouterr()
    return code, out, err


def test_labels_in_the_agents_field_names_are_judged_through_the_mapping(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "stef.yaml"
    config.write_text(
        "field_mapping:\n  question: request.messages[0].content\n  sql: generated.sql\n"
    )
    code, out, err = _calibrate(capsys, str(_agent_names(tmp_path)), "--config", str(config))
    assert code == 0, err
    figures = json.loads(out)
    assert figures["n"] == len(SAMPLE.read_text().splitlines())
    assert figures["judge_errors"] == 0
    assert "not valid input" not in err


def test_without_the_mapping_every_record_is_invalid_and_the_run_says_why(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Before: every record became a judge error, kappa read -0.99 and the exit status was 0.
    code, out, err = _calibrate(capsys, str(_agent_names(tmp_path)))
    assert code == 1
    assert out == ""
    assert "every one of" in err and "missing_field" in err and "field_mapping" in err

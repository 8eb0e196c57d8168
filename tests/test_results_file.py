"""A results file written by a newer STEF version (a field added at the top or inside a part)
opens in every command that reads results, with the figures of the same file without it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import stef
from stef.cli import main
from tests.conftest import ROOT

LOG = ROOT / "examples" / "agent_log.jsonl"


def _newer(line: str) -> str:
    """``line`` as a newer STEF version might write it: new fields at the top and nested."""
    obj = json.loads(line)
    obj["added_in_a_later_version"] = {"any": ["shape"]}
    obj["judge"]["added_too"] = 1
    if isinstance(obj.get("components"), dict):
        obj["components"]["added_here"] = None
    return json.dumps(obj)


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    folder = tmp_path_factory.mktemp("newer")
    now, newer = folder / "now.jsonl", folder / "newer.jsonl"
    assert main(["replay", str(LOG), "--no-progress", "-o", str(now)]) == 0
    lines = [line for line in now.read_text().splitlines() if line.strip()]
    newer.write_text("".join(_newer(line) + "\n" for line in lines))
    return now, newer


def test_summary_reads_newer_fields_and_gives_the_same_figures(
    files: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    figures = []
    for path in files:
        capsys.readouterr()
        assert main(["summary", str(path), "--format", "json"]) == 0
        figures.append(json.loads(capsys.readouterr().out))
    assert figures[0] == figures[1] and figures[0]["total"]["records"] > 0


def test_load_results_passes_over_newer_fields(files: tuple[Path, Path]) -> None:
    now, newer = (stef.load_results(p) for p in files)
    assert now == newer and len(now) > 0


def test_report_review_and_estimate_read_the_same_file(
    files: tuple[Path, Path], tmp_path: Path
) -> None:
    _, newer = files
    assert main(["report", str(newer), "-o", str(tmp_path / "report.html")]) == 0
    labels = tmp_path / "labels.jsonl"
    first = json.loads(newer.read_text().splitlines()[0])
    labels.write_text(json.dumps({"id": first["id"], "label": True}) + "\n")
    assert main(["estimate", "--results", str(newer), "--labels", str(labels)]) == 0


def test_a_line_that_is_not_a_result_still_stops_summary(
    files: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _, newer = files
    broken = tmp_path / "broken.jsonl"
    broken.write_text(newer.read_text() + json.dumps({"id": "x", "outcome": "exploded"}) + "\n")
    assert main(["summary", str(broken)]) == 1
    lines = len(newer.read_text().splitlines())
    assert f"broken.jsonl:{lines + 1}: not a result" in capsys.readouterr().err

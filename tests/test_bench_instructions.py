"""The bench's instruction counts (bench/instructions.py): each side's record path runs on that
side's own code under valgrind's callgrind, the counter on only over the measured windows; the
same code counts the same, and a change far below the timed figures' noise shows."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import pytest

from bench import against, instructions
from tests.conftest import ROOT, valid_record

RECORDS = [
    record
    for line in (ROOT / "examples" / "agent_log.jsonl").read_text().splitlines()[:12]
    if line.startswith("{") and valid_record(record := json.loads(line))
]

# Appended to a copy's stef/pipeline.py: every record costs a little more, far less than the
# tenth by which timed figures move between processes.
_DEARER = """

def _dearer_process(self, *args, **kwargs):
    sum(range(3000))
    return _plain_process(self, *args, **kwargs)


_plain_process = Pipeline.process
Pipeline.process = _dearer_process
"""


def _copy(into: Path, extra: str = "") -> Path:
    shutil.copytree(ROOT / "stef", into / "stef", ignore=shutil.ignore_patterns("__pycache__"))
    (into / "rules").symlink_to(ROOT / "rules")
    with (into / "stef" / "pipeline.py").open("a", encoding="utf-8") as f:
        f.write(extra)
    return into


@pytest.fixture(scope="module")
def counted(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """This tree, a copy of its code, and a copy made dearer, counted over a small sample."""
    copy = _copy(tmp_path_factory.mktemp("copy"))
    dearer = _copy(tmp_path_factory.mktemp("dearer"), _DEARER)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(instructions, "STRIDE", 1)
        mp.setattr(instructions, "LLM_RECORDS", 4)
        return instructions.compare({"this tree": ROOT, "copy": copy, "dearer": dearer}, RECORDS)


def test_each_figure_is_counted_on_each_side(counted: dict[str, Any]) -> None:
    for side in ("this tree", "copy", "dearer"):
        figures = counted["sides"][side]
        assert (figures["records"], figures["llm_records"]) == (len(RECORDS), 4)
        # The record path parses the SQL and does everything else besides.
        parse = figures["parse_instructions_per_record"]
        assert 0 < parse < figures["deterministic_instructions_per_record"]
        assert figures["llm_instructions_per_record"] > 0
        ratio = figures["deterministic_vs_parse_instruction_ratio"]
        assert ratio == pytest.approx(
            parse / figures["deterministic_instructions_per_record"], 1e-3
        )


def test_the_same_code_counts_the_same(counted: dict[str, Any]) -> None:
    ratios = counted["first_over_second"]
    # Figures a record only: above 1 is dearer for each (a ratio to the parse would read the
    # other way).
    assert set(ratios) == {
        "parse_instructions_per_record",
        "deterministic_instructions_per_record",
        "llm_instructions_per_record",
    }
    for key, ratio in ratios.items():
        # The same code in two folders: within half a percent over the bench's sample; a
        # little more over these few records.
        assert abs(ratio - 1) < 0.01, key


def test_a_change_of_a_few_percent_shows(counted: dict[str, Any]) -> None:
    mine, dearer = counted["sides"]["this tree"], counted["sides"]["dearer"]
    assert dearer["parse_instructions_per_record"] == pytest.approx(
        mine["parse_instructions_per_record"], rel=0.01
    )
    for key in ("deterministic_instructions_per_record", "llm_instructions_per_record"):
        # A few percent dearer, where timed figures of the same code differ by a tenth.
        assert 1.02 < dearer[key] / mine[key] < 1.3, key


def test_a_tree_without_its_own_stef_is_refused(tmp_path: Path) -> None:
    (tmp_path / "rules").symlink_to(ROOT / "rules")
    with pytest.raises(RuntimeError, match="another tree's stef"):
        instructions.measure(tmp_path, RECORDS[:2])


def test_a_worker_that_fails_is_a_clear_error(tmp_path: Path) -> None:
    (tmp_path / "stef").mkdir()
    (tmp_path / "stef" / "__init__.py").write_text("raise ImportError('broken on purpose')\n")
    (tmp_path / "rules").symlink_to(ROOT / "rules")
    with pytest.raises(RuntimeError, match=r"counted worker in .* failed \(exit 1\)"):
        instructions.measure(tmp_path, RECORDS[:2])


def test_a_hung_worker_is_stopped(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "stef").mkdir()
    (tmp_path / "stef" / "__init__.py").write_text("import time\ntime.sleep(600)\n")
    (tmp_path / "rules").symlink_to(ROOT / "rules")
    monkeypatch.setattr(instructions, "TIMEOUT_S", 5)
    with pytest.raises(RuntimeError, match="ran past 5 s and was stopped"):
        instructions.measure(tmp_path, RECORDS[:2])


def test_without_valgrind_the_comparison_is_not_measured(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(instructions.shutil, "which", lambda tool: None)
    with pytest.raises(instructions.Unavailable, match="apt-get install valgrind"):
        instructions.measure(ROOT, RECORDS)
    out = against._rounds(
        "instructions", lambda: instructions.compare({"a": ROOT, "b": ROOT}, RECORDS), "counted"
    )
    assert "apt-get install valgrind" in out["error"]


def test_the_report_sets_both_sides_counts_side_by_side() -> None:
    from bench.run import _markdown

    def side(det: int, llm: int) -> dict[str, Any]:
        return {
            "records": 401,
            "llm_records": 200,
            "parse_instructions_per_record": 670_000,
            "deterministic_instructions_per_record": det,
            "deterministic_vs_parse_instruction_ratio": round(670_000 / det, 4),
            "llm_instructions_per_record": llm,
        }

    counted = {
        "sides": {"this tree": side(8_300_000, 14_000_000), "main": side(8_200_000, 14_300_000)},
        "first_over_second": {
            "parse_instructions_per_record": 1.0,
            "deterministic_instructions_per_record": 1.0122,
            "deterministic_vs_parse_instruction_ratio": 0.988,
            "llm_instructions_per_record": 0.979,
        },
    }
    report = {
        "run_at": "now",
        "machine": "m",
        "python": "3.11",
        "sqlglot": "x",
        "corpus_records": 2402,
        "sections": {},
        "against": {"ref": "main", "commit": "0" * 40, "sections": {}, "instructions": counted},
        "comparison": [],
    }
    text = _markdown(report)
    assert "### instructions, both sides counted (callgrind)" in text
    assert "| deterministic_instructions_per_record | 8300000 | 8200000 | 1.0122 |" in text
    assert "| llm_instructions_per_record | 14000000 | 14300000 | 0.979 |" in text
    report["against"]["instructions"] = {"error": "valgrind not found (apt-get install valgrind)"}
    text = _markdown(report)
    assert "### instructions, both sides counted: not measured" in text
    assert "apt-get install valgrind" in text


def test_against_counts_both_sides_without_running_refs_own_bench(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import argparse

    # REF's own bench runs only the sections it has a figure of (deterministic, llm): asked for
    # the counts alone, it is not run at all (it once ran every section of REF's bench).
    monkeypatch.setattr(instructions, "STRIDE", 4)
    monkeypatch.setattr(instructions, "LLM_RECORDS", 2)
    monkeypatch.setattr(against, "_their_sections", _refused)
    args = argparse.Namespace(llm_latency_ms=200.0, llm_concurrency=64, backlog=10)
    commit = against.resolve(ROOT, "HEAD")
    # This tree's counts, made by the section in the same run, are not made again: REF's are.
    mine = {"records": 3, "llm_instructions_per_record": 1, "parse_instructions_per_record": 1}
    out = against.run_against(
        ROOT, "HEAD", commit, ["instructions"], args, ROOT, RECORDS, {"instructions": mine}
    )
    assert out["sections"] == {}
    assert "paired" not in out and "paired_llm" not in out
    assert set(out["instructions"]["sides"]) == {"this tree", "HEAD"}
    assert out["instructions"]["sides"]["this tree"] == mine
    assert out["instructions"]["sides"]["HEAD"]["llm_instructions_per_record"] > 1
    head = out["instructions"]["sides"]["HEAD"]
    ratio = out["instructions"]["first_over_second"]["llm_instructions_per_record"]
    assert ratio == round(1 / head["llm_instructions_per_record"], 4)


def _refused(*args: object) -> dict[str, Any]:
    raise AssertionError("REF's own bench was run")


def test_a_counter_that_never_switched_on_is_not_a_count(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # callgrind_control exits 0 on most failures: a window counted with the counter off must
    # not read as a path that costs nothing.
    real = shutil.which("callgrind_control")
    assert real is not None
    wrapper = tmp_path / "bin" / "callgrind_control"
    wrapper.parent.mkdir()
    wrapper.write_text(f'#!/bin/sh\ncase "$*" in *--instr=on*) exit 0 ;; esac\nexec {real} "$@"\n')
    wrapper.chmod(0o755)
    monkeypatch.setenv("PATH", f"{wrapper.parent}:{os.environ['PATH']}")
    with pytest.raises(RuntimeError, match="no instructions counted"):
        instructions.measure(ROOT, RECORDS[:2])


def test_any_failure_of_a_side_leaves_the_rest_of_the_report() -> None:
    def fails() -> dict[str, Any]:
        return {"x": 1 / 0}

    out = against._rounds("instructions", fails, "counted")
    assert set(out) == {"error"} and out["error"].startswith("ZeroDivisionError")

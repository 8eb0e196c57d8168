"""`make bench --against REF`'s paired rounds (bench/paired.py): each side's record path (the
deterministic one, and the LLM one against a fake endpoint) runs on that side's own code, in
alternating rounds, and a tree without its own stef is refused."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from bench import paired
from tests.conftest import ROOT, valid_record

RECORDS = [
    json.loads(line)
    for line in (ROOT / "examples" / "agent_log.jsonl").read_text().splitlines()[:12]
    if line.startswith("{")
]


def test_both_sides_are_measured_in_alternating_rounds() -> None:
    out = paired.run_rounds({"this tree": ROOT, "again": ROOT}, RECORDS, rounds=2)
    assert out["rounds"] == 2
    for side in ("this tree", "again"):
        figures = out["sides"][side]
        assert len(figures["ratio_by_round"]) == 2
        assert all(r > 0 for r in figures["ratio_by_round"])
        assert figures["record_path_cpu_ms"] > 0
    assert out["first_over_second"] > 0


def test_a_tree_without_its_own_stef_is_refused(tmp_path: Path) -> None:
    # The worker would import the installed stef instead: its figures would be this tree's.
    (tmp_path / "rules").symlink_to(ROOT / "rules")
    with pytest.raises(RuntimeError, match="another tree's stef"):
        paired.run_rounds({"this tree": ROOT, "empty": tmp_path}, RECORDS, rounds=1)


def test_both_sides_llm_path_is_measured_in_alternating_rounds() -> None:
    valid = [r for r in RECORDS if valid_record(r)]
    out = paired.run_llm_rounds(
        {"this tree": ROOT, "again": ROOT}, valid, rounds=2, concurrency=4, latency_ms=20, records=8
    )
    assert (out["rounds"], out["concurrency"], out["records"]) == (2, 4, 8)
    for side in ("this tree", "again"):
        figures = out["sides"][side]
        assert len(figures["cpu_ms_by_round"]) == 2
        assert all(c > 0 for c in figures["cpu_ms_by_round"])
        assert figures["cpu_ms_per_record"] > 0 and figures["records_per_s"] > 0
    assert out["cpu_first_over_second"] > 0


def test_a_tree_without_its_own_stef_is_refused_on_the_llm_path(tmp_path: Path) -> None:
    with pytest.raises(RuntimeError, match="another tree's stef"):
        paired.run_llm_rounds(
            {"this tree": ROOT, "empty": tmp_path}, RECORDS, rounds=1, concurrency=2, records=2
        )


def test_the_report_sets_both_sides_llm_rounds_side_by_side() -> None:
    from bench.run import _markdown

    def side(cpu: float, per_s: float, by_round: list[float]) -> dict[str, Any]:
        return {"cpu_ms_per_record": cpu, "records_per_s": per_s, "cpu_ms_by_round": by_round}

    paired_llm = {
        "rounds": 2,
        "concurrency": 64,
        "latency_ms": 200.0,
        "records": 640,
        "sides": {
            "this tree": side(4.9, 160.0, [4.8, 5.0]),
            "main": side(4.5, 171.2, [4.4, 4.6]),
        },
        "cpu_first_over_second": 1.089,
    }
    report = {
        "run_at": "now",
        "machine": "here",
        "python": "3.11",
        "sqlglot": "30",
        "corpus_records": 640,
        "sections": {},
        "against": {"ref": "main", "commit": "0" * 40, "paired_llm": paired_llm},
        "comparison": [],
    }
    text = _markdown(report)
    assert "### llm, both sides in 2 alternating rounds (CPU time)" in text
    assert "| this tree | 4.9 | 160.0 | 4.8, 5.0 |" in text
    assert "| main | 4.5 | 171.2 | 4.4, 4.6 |" in text
    assert "this tree / ref, CPU ms a record: 1.089" in text


def test_rounds_that_fail_are_reported_and_the_comparison_stands() -> None:
    from bench.against import _rounds
    from bench.run import _against_markdown

    def too_old() -> dict[str, Any]:
        raise RuntimeError("paired worker in /tmp/ref failed: ModuleNotFoundError")

    failed = _rounds("llm", too_old)
    assert failed == {"error": "paired worker in /tmp/ref failed: ModuleNotFoundError"}
    row = {"figure": "llm.llm_vs_plain_ratio", "this tree": 0.7, "main": 0.8, "this / ref": 0.875}
    text = "\n".join(
        _against_markdown({"ref": "main", "commit": "0" * 40, "paired_llm": failed}, [row])
    )
    assert "| llm.llm_vs_plain_ratio | 0.7 | 0.8 | 0.875 |" in text
    assert "### llm, both sides in alternating rounds: not measured" in text
    assert "```\npaired worker in /tmp/ref failed: ModuleNotFoundError\n```" in text


def test_a_side_that_leaves_records_unevaluated_is_not_measured() -> None:
    # Dead letters (or judge errors) cost a fraction of a call: such a side would read cheap.
    invalid = [r for r in RECORDS if not valid_record(r)]
    assert invalid
    with pytest.raises(RuntimeError, match=r"evaluated 0 of 4 records"):
        paired.run_llm_rounds(
            {"this tree": ROOT, "again": ROOT}, invalid, rounds=1, concurrency=2, records=4
        )


def _tree_starting_with(tmp_path: Path, code: str) -> Path:
    """A tree whose interpreter runs ``code`` at start (``sitecustomize`` on its path)."""
    (tmp_path / "stef").symlink_to(ROOT / "stef")
    (tmp_path / "rules").symlink_to(ROOT / "rules")
    (tmp_path / "sitecustomize.py").write_text(code)
    return tmp_path


def test_a_worker_that_prints_after_its_figures_is_a_clear_error(tmp_path: Path) -> None:
    tree = _tree_starting_with(tmp_path, "import atexit\natexit.register(print, 'bye')\n")
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text("".join(json.dumps(r) + "\n" for r in RECORDS[:2]))
    with pytest.raises(RuntimeError, match="printed no figures as its last line") as failed:
        paired._worker(tree, str(corpus), str(tree / "rules"))
    assert str(failed.value).endswith("bye'")  # what it printed, quoted


def test_a_worker_that_hangs_is_stopped(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    tree = _tree_starting_with(tmp_path, "import time\ntime.sleep(60)\n")
    monkeypatch.setattr(paired, "WORKER_TIMEOUT_S", 2)
    with pytest.raises(RuntimeError, match=r"ran past 2 s and was stopped"):
        paired._worker(tree, str(tree / "none.jsonl"), str(tree / "rules"))

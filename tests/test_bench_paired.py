"""`make bench --against REF`'s paired rounds (bench/paired.py): each side's record path runs on
that side's own code, in alternating rounds, and a tree without its own stef is refused."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench import paired
from tests.conftest import ROOT

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

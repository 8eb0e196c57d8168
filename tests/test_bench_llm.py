"""`make bench`'s LLM section (bench/llm.py): beside the wall-clock ratio, each side's CPU per
record and the endpoint's share of a core, so a report says which process held the window."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest

from bench import llm
from stef.errors import InvalidInput
from stef.stages.validate import validate
from tests.conftest import ROOT


def _valid(line: str) -> dict[str, object] | None:
    try:
        record: dict[str, object] = json.loads(line)
        validate(record)
    except (ValueError, InvalidInput):
        return None
    return record


RECORDS = [
    r
    for r in map(_valid, (ROOT / "examples" / "agent_log.jsonl").read_text().splitlines()[:40])
    if r is not None
]


def _spin(seconds: float) -> None:
    end = time.process_time() + seconds
    while time.process_time() < end:
        pass


def test_a_process_cpu_is_read_and_a_missing_one_is_none() -> None:
    if not os.path.exists(f"/proc/{os.getpid()}/stat"):
        pytest.skip("no /proc on this system: the endpoint's figures are left out there")
    before = llm._cpu_of(os.getpid())
    _spin(0.3)
    after = llm._cpu_of(os.getpid())
    assert before is not None and after is not None
    assert after - before >= 0.2  # clock ticks: a coarse but true count
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    assert llm._cpu_of(gone.pid) is None  # reaped: no /proc entry is left


def test_the_section_reports_each_sides_cpu_beside_the_wall_ratio() -> None:
    figures = llm.measure(RECORDS, latency_ms=400, concurrency=4)
    assert figures["evaluated"] == figures["records"] > 0
    assert figures["llm_path_cpu_ms_per_record"] > 0
    assert figures["plain_client_cpu_ms_per_record"] > 0
    cpu_ratio = figures["plain_client_cpu_ms_per_record"] / figures["llm_path_cpu_ms_per_record"]
    assert figures["llm_vs_plain_cpu_ratio"] == pytest.approx(cpu_ratio, rel=0.05)
    by_round = figures["llm_vs_plain_ratio_by_round"]
    assert len(by_round) == 3 and all(r > 0 for r in by_round)  # one ratio per round
    assert min(by_round) <= figures["llm_vs_plain_ratio_median"] <= max(by_round)
    # Four records in flight at 400 ms: the endpoint's latency holds both sides, not a core.
    assert 0 < figures["llm_path_process_cores"] < 1.5
    assert 0 < figures["plain_client_process_cores"] < 1.5
    if os.path.exists(f"/proc/{os.getpid()}/stat"):
        assert 0 <= figures["endpoint_cores_beside_llm_path"] < 1.5
        assert 0 <= figures["endpoint_cores_beside_plain_client"] < 1.5


def test_stefs_windows_start_with_the_question_readings_cold(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Building the plain client's bodies reads every record; the caches it fills would serve
    # STEF's windows the readings of the very records they time.
    from stef.question import _question_literals

    sizes: list[int] = []
    run = llm._Side.run

    def counted(self: llm._Side, *args: object) -> None:
        sizes.append(_question_literals.cache_info().currsize)
        run(self, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(llm._Side, "run", counted)
    llm.measure(RECORDS[:8], latency_ms=400, concurrency=4)
    assert sizes[0] == 0  # the first window (the plain client's) starts with nothing cached

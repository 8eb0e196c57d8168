"""The garbage collector of a replica (``gc_gen0``): set once the replica is built, for the run
only, and left alone when the setting is 0."""

from __future__ import annotations

import gc
from pathlib import Path

from stef.judges.base import JudgeReply, JudgeRequest
from stef.judges.heuristic.judge import HeuristicJudge
from stef.models import JudgeInfo
from stef.service.collector import restore_collector, settle_collector
from stef.service.loop import Service
from tests.service.conftest import file_settings, read_jsonl, valid_log


class WatchingJudge:
    """The heuristic judge, noting the collector's thresholds and frozen count at each record."""

    def __init__(self) -> None:
        self.inner = HeuristicJudge()
        self.seen: list[tuple[tuple[int, int, int], int]] = []

    @property
    def info(self) -> JudgeInfo:
        return self.inner.info

    def judge(self, request: JudgeRequest) -> JudgeReply:
        self.seen.append((gc.get_threshold(), gc.get_freeze_count()))
        return self.inner.judge(request)


def test_settle_freezes_what_is_alive_and_restore_undoes_it() -> None:
    before = gc.get_threshold()
    held = [{"alive": i} for i in range(100)]
    settled = settle_collector(12_345)
    try:
        assert settled == before
        assert gc.get_threshold() == (12_345, before[1], before[2])
        assert gc.get_freeze_count() >= len(held)
    finally:
        restore_collector(settled)
    assert gc.get_threshold() == before
    assert gc.get_freeze_count() == 0


def test_zero_leaves_the_collector_as_it_is() -> None:
    before = gc.get_threshold()
    assert settle_collector(0) is None
    restore_collector(None)
    assert gc.get_threshold() == before
    assert gc.get_freeze_count() == 0


def test_a_run_judges_under_the_setting_and_gives_the_collector_back(tmp_path: Path) -> None:
    before = gc.get_threshold()
    for gen0, frozen in ((4_321, True), (0, False)):
        judge = WatchingJudge()
        run_dir = tmp_path / str(gen0)
        run_dir.mkdir()
        settings = file_settings(run_dir, valid_log(run_dir, 5), gc_gen0=gen0)
        assert Service(settings, backend=judge).run() == 0
        assert len(read_jsonl(run_dir / "results.jsonl")) == 5
        expected = (gen0, before[1], before[2]) if gen0 else before
        assert {thresholds for thresholds, _ in judge.seen} == {expected}
        assert all((count > 0) is frozen for _, count in judge.seen)
        assert gc.get_threshold() == before
        assert gc.get_freeze_count() == 0

"""A full disk under the LLM cache file degrades to no file cache, counted; the run goes on
(issue 21 §5). The disk is a real 64 KiB tmpfs, which needs the right to mount (root, or
CAP_SYS_ADMIN); without it the test is skipped."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry
from structlog.testing import capture_logs

from stef.judges.llm.judge import LlmJudge
from stef.pipeline import Pipeline
from tests.disks import small_tmpfs
from tests.judges.llm.conftest import make_record


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    with small_tmpfs(tmp_path / "disk", 64) as where:
        yield where


def test_a_full_disk_under_the_cache_drops_the_file_and_judges_on(
    small_disk: Path,
    server: object,
    judge_factory: Callable[..., LlmJudge],
    pipeline_for: Callable[[LlmJudge], Pipeline],
    registry: CollectorRegistry,
) -> None:
    judge = judge_factory(server, cache_path=small_disk / "cache.sqlite", cache_size=0)
    pipeline = pipeline_for(judge)
    # Long questions fill 64 KiB within a few dozen entries (each reply is cached as JSON).
    pad = "and in which region, by which channel, for which quarter " * 20
    with capture_logs() as logs:
        outcomes = [
            pipeline.judge_record(
                make_record(id=str(i), question=f"Total spend {i} {pad}?")
            ).outcome
            for i in range(80)
        ]
    # Before: the first INSERT past the disk's end raised out of the judge: judge errors.
    assert outcomes == ["evaluated"] * 80
    assert registry.get_sample_value("stef_cache_failures_total") == 1
    dropped = [x for x in logs if x["event"] == "judge_cache_file_dropped"]
    assert len(dropped) == 1 and dropped[0]["log_level"] == "warning"

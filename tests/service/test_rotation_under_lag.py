"""``stef run --follow`` behind a slow LLM loses no generation of a burst of rotations (issue 32,
item 1): 150 lines, a rotation, three times within a second, then 150 more, done while the service
is starting and lagging; with rename rotations, and with a copytruncate before the renames."""

from __future__ import annotations

import json
import os
import shutil
import signal
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from stef.testing.fake_server import Delay, FakeLlmServer
from tests.service.conftest import ServiceProcess, read_jsonl, valid_record

pytestmark = pytest.mark.integration


def _write(log: Path, gen: int) -> set[str]:
    records = [{**valid_record(i), "id": f"g{gen}-{i:03d}"} for i in range(150)]
    with log.open("ab") as f:
        for rec in records:
            f.write(json.dumps(rec).encode() + b"\n")
    return {r["id"] for r in records}


def _mv(src: Path, dst: Path) -> None:
    time.sleep(0.05)  # a shell's mv after mv: the whole burst still takes well under a second
    os.rename(src, dst)


def _rename_rotation(log: Path, generations: int) -> None:
    """``mv app.log.2 app.log.3; mv app.log.1 app.log.2; mv app.log app.log.1; : > app.log``."""
    for n in range(generations, 0, -1):
        _mv(log.with_name(f"{log.name}.{n}"), log.with_name(f"{log.name}.{n + 1}"))
    _mv(log, log.with_name(f"{log.name}.1"))
    log.write_bytes(b"")


def _copytruncate(log: Path) -> None:
    shutil.copyfile(log, log.with_name(f"{log.name}.1"))
    with log.open("r+b") as f:
        f.truncate(0)


@pytest.mark.parametrize("first", ["rename", "copytruncate"])
def test_a_burst_of_rotations_behind_a_slow_llm_loses_no_generation(
    tmp_path: Path, service_factory: Callable[..., ServiceProcess], first: str
) -> None:
    log, results = tmp_path / "app.log", tmp_path / "results.jsonl"
    log.write_bytes(b"")
    with FakeLlmServer() as llm:
        llm.script(*[Delay(2.0)] * 4)  # the first answers take seconds: the service lags
        proc = service_factory(
            "--source",
            f"file:{log}",
            "--follow",
            "--concurrency",
            "2",
            "--results",
            f"file:{results}",
            "--dead-letters",
            f"file:{tmp_path / 'dead.jsonl'}",
            config={"commit_interval_s": 0.2},
            env={"STEF_LLM_BASE_URL": llm.base_url, "STEF_LLM_MODEL": "fake-model"},
        )
        started = time.monotonic()
        want = _write(log, 0)
        if first == "copytruncate":
            _copytruncate(log)
        else:
            _rename_rotation(log, 0)
        want |= _write(log, 1)
        _rename_rotation(log, 1)
        want |= _write(log, 2)
        _rename_rotation(log, 2)
        want |= _write(log, 3)
        assert time.monotonic() - started < 1.0

        def judged() -> set[str]:
            return {r["id"] for r in read_jsonl(results)}

        proc.wait_for(lambda: judged() >= want, timeout_s=180, what="every generation")
        proc.signal(signal.SIGTERM)
        assert proc.wait(60) == 0
    assert judged() == want

"""``stef run --follow`` as a sidecar: a restart resumes past what was acknowledged (no record is
judged twice), and rotation by rename or by copytruncate loses no line and re-judges none."""

from __future__ import annotations

import gzip
import json
import os
import shutil
import signal
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.service.conftest import ServiceProcess, read_jsonl, valid_record

pytestmark = pytest.mark.integration


def _append(path: Path, *ids: int) -> None:
    with path.open("ab") as f:
        for i in ids:
            f.write(json.dumps(valid_record(i)).encode() + b"\n")


class _Sidecar:
    def __init__(self, tmp_path: Path, factory: Callable[..., ServiceProcess]) -> None:
        self.log = tmp_path / "agent.jsonl"
        self.results = tmp_path / "results.jsonl"
        self.factory = factory
        self.tmp_path = tmp_path

    def start(self) -> ServiceProcess:
        proc = self.factory(
            "--source",
            f"file:{self.log}",
            "--follow",
            "--results",
            f"file:{self.results}",
            "--dead-letters",
            f"file:{self.tmp_path / 'dead.jsonl'}",
            config={"commit_interval_s": 0.1},
        )
        proc.wait_ready()
        return proc

    def ids(self) -> list[str]:
        return [r["id"] for r in read_jsonl(self.results)]

    def stop(self, proc: ServiceProcess) -> None:
        proc.signal(signal.SIGTERM)
        assert proc.wait(30) == 0


def _want(*ids: int) -> list[str]:
    return [f"r-{i:06d}" for i in ids]


def test_a_restart_resumes_without_re_judging(
    tmp_path: Path, service_factory: Callable[..., ServiceProcess]
) -> None:
    car = _Sidecar(tmp_path, service_factory)
    _append(car.log, *range(5))
    first = car.start()
    first.wait_for(lambda: len(car.ids()) == 5, timeout_s=30, what="the first five")
    car.stop(first)
    # The checkpoint sits beside the results, hidden from log-rotation globs.
    state = json.loads((tmp_path / ".results.jsonl.stef-checkpoint").read_text())
    assert state["line"] == 5 and state["offset"] == car.log.stat().st_size

    second = car.start()
    second.wait_for(lambda: second.events("service_started") != [], what="the second start")
    assert second.events("checkpoint_resumed")[0]["line"] == 5
    _append(car.log, 5, 6)
    second.wait_for(lambda: len(car.ids()) >= 7, timeout_s=30, what="the new lines")
    car.stop(second)
    assert sorted(car.ids()) == _want(*range(7))  # 5, then only the 2 new lines


def test_sigkill_redelivers_at_most_what_was_not_checkpointed(
    tmp_path: Path, service_factory: Callable[..., ServiceProcess]
) -> None:
    car = _Sidecar(tmp_path, service_factory)
    _append(car.log, *range(5))
    first = car.start()
    first.wait_for(lambda: len(car.ids()) == 5, timeout_s=30, what="the first five")
    state = tmp_path / ".results.jsonl.stef-checkpoint"
    first.wait_for(
        lambda: state.exists() and json.loads(state.read_text())["line"] == 5,
        timeout_s=10,
        what="the checkpoint of all five",
    )
    first.signal(signal.SIGKILL)
    first.wait(10)
    _append(car.log, 5)
    second = car.start()
    second.wait_for(lambda: len(car.ids()) >= 6, timeout_s=30, what="the new line")
    car.stop(second)
    assert sorted(car.ids()) == _want(*range(6))


def test_rename_rotation_while_stopped_loses_nothing_and_repeats_nothing(
    tmp_path: Path, service_factory: Callable[..., ServiceProcess]
) -> None:
    car = _Sidecar(tmp_path, service_factory)
    _append(car.log, 0, 1, 2)
    first = car.start()
    first.wait_for(lambda: len(car.ids()) == 3, timeout_s=30, what="the first three")
    car.stop(first)
    _append(car.log, 3)  # the writer went on while the sidecar was down
    os.rename(car.log, tmp_path / "agent.jsonl.1")
    _append(car.log, 4, 5)
    second = car.start()
    second.wait_for(lambda: len(car.ids()) >= 6, timeout_s=30, what="both files")
    _append(car.log, 6)
    second.wait_for(lambda: len(car.ids()) >= 7, timeout_s=30, what="the appended line")
    car.stop(second)
    assert sorted(car.ids()) == _want(*range(7))


def test_copytruncate_rotation_loses_nothing_and_repeats_nothing(
    tmp_path: Path, service_factory: Callable[..., ServiceProcess]
) -> None:
    car = _Sidecar(tmp_path, service_factory)
    _append(car.log, 0, 1, 2)
    proc = car.start()
    proc.wait_for(lambda: len(car.ids()) == 3, timeout_s=30, what="the first three")
    # copytruncate: the rotator copies the log away, then truncates it in place.
    (tmp_path / "agent.jsonl.1").write_bytes(car.log.read_bytes())
    with car.log.open("r+b") as f:
        f.truncate(0)
    _append(car.log, 3)
    proc.wait_for(lambda: len(car.ids()) >= 4, timeout_s=30, what="the line after truncation")
    car.stop(proc)
    _append(car.log, 4)
    again = car.start()
    again.wait_for(lambda: len(car.ids()) >= 5, timeout_s=30, what="the line after restart")
    car.stop(again)
    assert sorted(car.ids()) == _want(*range(5))


def test_stopped_across_three_rotations_one_compressed_loses_no_generation(
    tmp_path: Path, service_factory: Callable[..., ServiceProcess]
) -> None:
    """logrotate with compress + delaycompress ran three times while the sidecar was down: the
    generations are read in order (agent.jsonl.3.gz, .2.gz, .1, then the live file)."""
    car = _Sidecar(tmp_path, service_factory)
    _append(car.log, 0, 1)
    first = car.start()
    first.wait_for(lambda: len(car.ids()) == 2, timeout_s=30, what="the first two")
    car.stop(first)
    _append(car.log, 2)
    for ids in [(3, 4), (5, 6), (7,)]:
        for n in (2, 1):
            for suffix in ("", ".gz"):
                old = tmp_path / f"agent.jsonl.{n}{suffix}"
                if old.exists():
                    os.rename(old, tmp_path / f"agent.jsonl.{n + 1}{suffix}")
        os.rename(car.log, tmp_path / "agent.jsonl.1")
        second = tmp_path / "agent.jsonl.2"
        if second.exists():
            with second.open("rb") as src, gzip.open(f"{second}.gz", "wb") as dst:
                shutil.copyfileobj(src, dst)
            second.unlink()
        _append(car.log, *ids)
    again = car.start()
    again.wait_for(lambda: len(car.ids()) >= 8, timeout_s=30, what="every generation")
    car.stop(again)
    assert sorted(car.ids()) == _want(*range(8))  # each once

"""``stef backfill`` that cannot finish its range says where it stopped: SIGTERM or a broker lost
mid-range exit 1 with the partition and offset of the first record not done, and a rerun with
``--resume`` finishes the range from there. A ``--from`` before 1970 is a one-line error."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

import pytest
import yaml

from stef.exits import Exit
from stef.testing.fake_server import FakeLlmServer
from tests.brokers import Broker, tansu_broker
from tests.service.conftest import ROOT, read_jsonl
from tests.service.test_backfill import _produce_singly

pytestmark = pytest.mark.integration

RECORDS = 20


def _cmd(broker: Broker, topic: str, start: datetime, tmp_path: Path) -> list[str]:
    config = tmp_path / "stef.yaml"
    # Two records in flight, about one fetched ahead (a record batch a fetch): a stop lands
    # while most of the range is unread.
    settings = {
        "source_unreachable_timeout_s": 2,
        "max_inflight": 2,
        "kafka_consumer": {"max_partition_fetch_bytes": 512, "fetch_max_bytes": 512},
    }
    config.write_text(yaml.safe_dump(settings), encoding="utf-8")
    return [
        sys.executable, "-m", "stef.cli", "backfill", "--source", broker.url(topic),
        "--from", start.isoformat(), "--dead-letters", f"file:{tmp_path / 'dead.jsonl'}",
        "--concurrency", "1", "--config", str(config),
    ]  # fmt: skip


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("STEF_")}
    return {**env, **extra}


def _stopped_run(
    cmd: list[str], results: Path, stop: Callable[[subprocess.Popen[str]], None]
) -> tuple[int, str]:
    """Run ``cmd`` against a slow fake LLM (0.3 s a record); ``stop`` it after 2 results."""
    with FakeLlmServer(latency_s=0.3) as llm:
        env = _env(STEF_LLM_BASE_URL=llm.base_url, STEF_LLM_MODEL="fake-judge")
        proc = subprocess.Popen(
            [*cmd, "--results", f"file:{results}"],
            cwd=ROOT,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            deadline = time.monotonic() + 60
            while len(read_jsonl(results)) < 2 and proc.poll() is None:
                assert time.monotonic() < deadline, "no result in time"
                time.sleep(0.05)
            assert proc.poll() is None, "the backfill ended before it could be stopped"
            stop(proc)
            _, stderr = proc.communicate(timeout=90)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.communicate(timeout=10)
    return proc.returncode, stderr


def _resume_spec(stderr: str) -> tuple[str, int]:
    """The ``--resume`` the stopped run printed, and its offset (one partition)."""
    found = re.findall(r"--resume (\S+) to finish", stderr)
    assert len(found) == 1, stderr[-3000:]
    partition, offset = (int(x) for x in found[0].split(":"))
    assert partition == 0
    assert f"partition 0 at offset {offset}" in stderr
    return str(found[0]), offset


def _ids(path: Path) -> list[int]:
    return sorted(int(r["id"].removeprefix("r-")) for r in read_jsonl(path))


def _finish(cmd: list[str], tmp_path: Path, spec: str, offset: int) -> None:
    """A rerun with ``--resume`` judges exactly the records from the offset to the end."""
    second = tmp_path / "second.jsonl"
    rerun = subprocess.run(
        [*cmd, "--results", f"file:{second}", "--resume", spec],
        cwd=ROOT, env=_env(), capture_output=True, text=True, timeout=90, check=False,
    )  # fmt: skip
    assert rerun.returncode == Exit.OK, rerun.stderr[-3000:]
    assert _ids(second) == list(range(offset, RECORDS))


def test_sigterm_mid_range_exits_1_saying_where_and_a_rerun_resumes_there(
    tmp_path: Path, kafka_broker: Broker
) -> None:
    topic = kafka_broker.create_topic(f"bf-stop-{uuid.uuid4().hex[:8]}", 1)
    start = datetime.now(UTC)
    _produce_singly(kafka_broker, topic, range(RECORDS))  # record i at offset i
    cmd = _cmd(kafka_broker, topic, start, tmp_path)
    first = tmp_path / "first.jsonl"
    # Before the fix a SIGTERM drained and exited 0, as if the range were done.
    code, stderr = _stopped_run(cmd, first, lambda p: p.send_signal(signal.SIGTERM))
    assert code == Exit.FAILURE, stderr[-3000:]
    spec, offset = _resume_spec(stderr)
    assert 2 <= offset < RECORDS
    assert set(range(offset)) <= set(_ids(first))  # everything before it is done
    _finish(cmd, tmp_path, spec, offset)


def test_a_broker_lost_mid_range_exits_1_saying_where_and_a_rerun_resumes_there(
    tmp_path: Path,
) -> None:
    first = tmp_path / "first.jsonl"
    with tansu_broker() as broker:
        topic = broker.create_topic(f"bf-lost-{uuid.uuid4().hex[:8]}", 1)
        start = datetime.now(UTC)
        _produce_singly(broker, topic, range(RECORDS))
        cmd = _cmd(broker, topic, start, tmp_path)
        # Before the fix the backfill waited for the broker for ever (the 90 s timeout here).
        started = time.monotonic()
        code, stderr = _stopped_run(cmd, first, lambda _: broker.stop())
        took = time.monotonic() - started
    assert code == Exit.FAILURE, stderr[-3000:]
    assert took < 60
    _, offset = _resume_spec(stderr)
    assert 2 <= offset < RECORDS
    assert set(range(offset)) <= set(_ids(first))


def test_a_start_before_1970_is_a_one_line_error(tmp_path: Path) -> None:
    for flags in (
        ("--from", "1969-12-31T23:59Z"),
        ("--from", "2026-01-01T00:00Z", "--to", "1900-01-01T00:00Z"),
    ):
        done = subprocess.run(
            [sys.executable, "-m", "stef.cli", "backfill", "--source",
             "kafka://127.0.0.1:9/agent-logs", "--dead-letters", f"file:{tmp_path / 'd.jsonl'}",
             *flags],
            cwd=ROOT, env=_env(), capture_output=True, text=True, timeout=60, check=False,
        )  # fmt: skip
        assert done.returncode == Exit.USAGE, done.stderr
        assert len(done.stderr.strip().splitlines()) == 1, done.stderr
        assert "1970" in done.stderr

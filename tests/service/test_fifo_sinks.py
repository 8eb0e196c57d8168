"""``stef run`` with a named pipe for its results: one without a reader held start-up in its
open (a SIGTERM recorded but not acted on until a reader came); the wait now honours the stop,
and a reader that comes gets the results, as ``file:/dev/stdout`` on a pipe still does. With a
Kafka source (Tansu), a wait longer than max_poll_interval_ms at start or mid-run costs the
consumer no group membership and judges no record twice."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.brokers import FAST_GROUP, Broker
from tests.service.conftest import ROOT, ServiceProcess, kafka_config, valid_record

pytestmark = pytest.mark.integration

N = 20  # records in the Kafka test


def _to_fifo(
    tmp_path: Path,
    service_factory: Callable[..., ServiceProcess],
    env: dict[str, str] | None = None,
) -> tuple[ServiceProcess, Path]:
    log, fifo = tmp_path / "agent.jsonl", tmp_path / "results.fifo"
    log.write_text(json.dumps(valid_record(0)) + "\n")
    os.mkfifo(fifo)
    proc = service_factory(
        "--source",
        f"file:{log}",
        "--follow",
        "--results",
        f"file:{fifo}",
        "--dead-letters",
        f"file:{tmp_path / 'dead.jsonl'}",
        env=env,
    )
    proc.wait_for(
        lambda: bool(proc.events("sink_waiting_for_reader")), timeout_s=60, what="the wait"
    )
    return proc, fifo


def test_sigterm_stops_a_run_waiting_for_its_fifos_reader(
    tmp_path: Path, service_factory: Callable[..., ServiceProcess]
) -> None:
    """Stopped before its outputs were open, the run never says it started (it logged
    service_started, and was ready, for the moment between the wait's end and the stop)."""
    proc, _ = _to_fifo(tmp_path, service_factory)
    asked = time.monotonic()
    proc.signal(signal.SIGTERM)
    assert proc.wait(30) == 0
    assert time.monotonic() - asked < 10
    assert proc.events("service_stopped")[0]["received"] == 0
    assert proc.events("signal_received")
    assert not proc.events("service_started")


def test_a_reader_that_comes_gets_the_results(
    tmp_path: Path, service_factory: Callable[..., ServiceProcess]
) -> None:
    proc, fifo = _to_fifo(tmp_path, service_factory)
    lines: list[bytes] = []

    def read() -> None:
        with fifo.open("rb") as f:
            lines.append(f.readline())

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    reader.join(60)
    assert [json.loads(line)["id"] for line in lines] == ["r-000000"]
    proc.signal(signal.SIGTERM)
    assert proc.wait(30) == 0


def test_sigterm_stops_a_run_whose_fifo_reader_went_after_sigusr1(
    tmp_path: Path, service_factory: Callable[..., ServiceProcess]
) -> None:
    """SIGUSR1 closes the FIFO, its reader sees the end and goes, and the next result waits for
    a new reader: SIGTERM then ended the drain (its timeout) but not the run, the shutdown's
    flush waiting for good on that line (still running 25 s after SIGTERM)."""
    proc, fifo = _to_fifo(tmp_path, service_factory, env={"STEF_DRAIN_TIMEOUT_S": "1"})
    with fifo.open("rb") as f:
        assert json.loads(f.readline())["id"] == "r-000000"
        proc.signal(signal.SIGUSR1)
        proc.wait_for(
            lambda: bool(proc.events("outputs_reopen_requested")), timeout_s=30, what="SIGUSR1"
        )
    with (tmp_path / "agent.jsonl").open("a") as log:
        log.write(json.dumps(valid_record(1)) + "\n")
    proc.wait_for(
        lambda: len(proc.events("sink_waiting_for_reader")) == 2, timeout_s=30, what="the wait"
    )
    proc.signal(signal.SIGTERM)
    assert proc.wait(40) == 0  # the 1 s drain, then at most the flush's 10 s
    [stopped] = proc.events("service_stopped")
    assert stopped["drained"] is False


def test_results_to_dev_stdout_on_a_pipe(tmp_path: Path) -> None:
    """Not a FIFO of its own: the pipe has its reader, and the open does not wait."""
    log = tmp_path / "agent.jsonl"
    log.write_text("".join(json.dumps(valid_record(i)) + "\n" for i in range(3)))
    env = {k: v for k, v in os.environ.items() if not k.startswith("STEF_")}
    args = ["--source", f"file:{log}", "--results", "file:/dev/stdout", "--metrics-port", "off"]
    args += ["--dead-letters", f"file:{tmp_path / 'dead.jsonl'}"]
    done = subprocess.run(
        [sys.executable, "-m", "stef.cli", "run", *args],
        cwd=ROOT,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr.decode()[-2000:]
    ids = sorted(json.loads(line)["id"] for line in done.stdout.splitlines())
    assert ids == ["r-000000", "r-000001", "r-000002"]


def _kafka_into_fifo(
    tmp_path: Path,
    kafka_broker: Broker,
    service_factory: Callable[..., ServiceProcess],
    consumer: dict[str, Any],
    *flags: str,
) -> tuple[ServiceProcess, str]:
    """``stef run`` on a new 2-partition topic holding N valid records, in a new group, its
    results into the FIFO ``tmp_path/results.fifo`` (made here, no reader yet); the topic."""
    topic, group = kafka_broker.create_topic(partitions=2), f"stef-{uuid.uuid4().hex[:8]}"
    kafka_broker.produce(topic, [json.dumps(valid_record(i)).encode() for i in range(N)])
    fifo = tmp_path / "results.fifo"
    os.mkfifo(fifo)
    proc = service_factory(
        *("--source", kafka_broker.url(topic, group), "--results", f"file:{fifo}"),
        *("--dead-letters", f"file:{tmp_path / 'dead.jsonl'}", *flags),
        config=kafka_config(kafka_consumer=consumer),
    )
    return proc, topic


def test_a_kafka_source_joins_its_group_once_the_fifo_has_a_reader(
    tmp_path: Path, kafka_broker: Broker, service_factory: Callable[..., ServiceProcess]
) -> None:
    """The consumer is not polled while a results FIFO waits for its reader, here for twice
    max_poll_interval_ms: it has not joined its group yet (kafka-python joins in poll), so
    there is no membership to lose and no partition assigned to it. Once the reader comes it
    joins, and every record is judged once."""
    fifo, consumer = tmp_path / "results.fifo", {**FAST_GROUP, "max_poll_interval_ms": 3000}
    proc, _ = _kafka_into_fifo(tmp_path, kafka_broker, service_factory, consumer)
    proc.wait_for(
        lambda: bool(proc.events("sink_waiting_for_reader")), timeout_s=60, what="the wait"
    )
    time.sleep(2 * consumer["max_poll_interval_ms"] / 1000)
    assert not proc.events("partitions_assigned")
    with fifo.open("rb") as f:
        ids = Counter(json.loads(f.readline())["id"] for _ in range(N))
        proc.signal(signal.SIGTERM)
        assert proc.wait(60) == 0
        assert f.read() == b""  # nothing judged twice after the N
    assert ids == Counter(valid_record(i)["id"] for i in range(N))
    # One join, after the wait: its revocation of nothing (kafka-python's eager protocol calls
    # the listener at every join), then the stop's.
    assert [e["partitions"] for e in proc.events("partitions_assigned")] == [[0, 1]]
    assert [e["partitions"] for e in proc.events("partitions_revoked")] == [[], [0, 1]]


def test_a_kafka_source_keeps_its_group_while_a_reopened_fifo_waits(
    tmp_path: Path, kafka_broker: Broker, service_factory: Callable[..., ServiceProcess]
) -> None:
    """Mid-run the wait is a write's, not the loop's: after SIGUSR1 the FIFO's reader goes, and
    the next result waits for a new one, here for twice max_poll_interval_ms. The loop keeps
    polling the paused consumer, so it stays in its group: no partition is revoked, and every
    record is judged once."""
    fifo, consumer = tmp_path / "results.fifo", {**FAST_GROUP, "max_poll_interval_ms": 3000}
    proc, topic = _kafka_into_fifo(
        tmp_path, kafka_broker, service_factory, consumer, "--max-inflight", "4"
    )
    with fifo.open("rb") as f:
        ids = Counter(json.loads(f.readline())["id"] for _ in range(N))
        proc.signal(signal.SIGUSR1)
        proc.wait_for(
            lambda: bool(proc.events("outputs_reopen_requested")), timeout_s=30, what="SIGUSR1"
        )
    waits = len(proc.events("sink_waiting_for_reader"))  # 0 or 1: the first reader came early
    kafka_broker.produce(topic, [json.dumps(valid_record(i)).encode() for i in range(N, 2 * N)])
    proc.wait_for(
        lambda: len(proc.events("sink_waiting_for_reader")) > waits, timeout_s=30, what="the wait"
    )
    time.sleep(2 * consumer["max_poll_interval_ms"] / 1000)
    with fifo.open("rb") as f:
        ids.update(json.loads(f.readline())["id"] for _ in range(N))
        proc.signal(signal.SIGTERM)
        assert proc.wait(60) == 0
        assert f.read() == b""  # nothing judged twice
    assert ids == Counter(valid_record(i)["id"] for i in range(2 * N))
    assert [e["partitions"] for e in proc.events("partitions_revoked")] == [[], [0, 1]]

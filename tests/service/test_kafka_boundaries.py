"""Kafka boundaries on the real broker: no record stops the consumer.

A source message whose key is larger than a producer request (a 3 MB key that compressed well on
its way in) is dead-lettered with a bounded key, and the service goes on; the transaction markers
that end a transactional producer's writes do not hold the committed offset back (the lag reaches
0), and ``stef backfill`` over such a topic finishes.
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import uuid
import warnings
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

import pytest

from stef.io.deadletter import MAX_KEY_BYTES
from tests.brokers import Broker
from tests.service.conftest import (
    ROOT,
    ServiceProcess,
    caught_up,
    kafka_config,
    read_jsonl,
    valid_record,
)

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition

pytestmark = pytest.mark.integration


def _args(broker: Broker, source: str, results: str, dead: str) -> list[str]:
    return [
        "--source",
        broker.url(source, f"stef-{uuid.uuid4().hex[:8]}"),
        "--results",
        broker.url(results),
        "--dead-letters",
        broker.url(dead),
        "--concurrency",
        "2",
    ]


def _topics(broker: Broker) -> tuple[str, str, str]:
    tag = uuid.uuid4().hex[:8]
    return (
        broker.create_topic(f"in-{tag}", 1),
        broker.create_topic(f"results-{tag}", 1),
        broker.create_topic(f"dead-{tag}", 1),
    )


def test_a_key_larger_than_a_request_is_dead_lettered_and_the_service_goes_on(
    kafka_broker: Broker, service_factory: Callable[..., ServiceProcess]
) -> None:
    source, results, dead = _topics(kafka_broker)
    big_key = b"k" * 3_000_000  # gzip makes it a few KiB on the wire: the broker takes it
    producer = KafkaProducer(
        bootstrap_servers=kafka_broker.bootstrap,
        compression_type="gzip",
        max_request_size=8 * 1024 * 1024,
        linger_ms=0,
        acks="all",
    )
    try:
        producer.send(source, key=big_key, value=b"not json").get(timeout=30)
        for i in range(3):  # one batch each (Tansu's end offsets)
            value = json.dumps(valid_record(i)).encode()
            producer.send(source, key=b"ok", value=value).get(timeout=30)
    finally:
        producer.close(timeout=5)

    proc = service_factory(*_args(kafka_broker, source, results, dead), config=kafka_config())
    proc.wait_ready()
    # Before the fix the dead letter was refused by the producer (its key alone is 3 MB), its
    # replacement too, and the service exited without committing: a crash loop on restart.
    proc.wait_for(lambda: caught_up(proc, 1), timeout_s=90, what="the partition to be done")
    (letter_msg,) = kafka_broker.consume_all(dead, expect=1, timeout_s=30)
    assert letter_msg.key == big_key[:MAX_KEY_BYTES]
    letter = json.loads(letter_msg.value)
    assert letter["reason"] == "not_json"
    assert letter["payload"] == "not json"
    assert letter["key_truncated"] is True
    assert letter["key_bytes"] == len(big_key)
    assert letter["key_sha256"] == hashlib.sha256(big_key).hexdigest()
    res = kafka_broker.consume_all(results, expect=3, timeout_s=30)
    assert sorted(json.loads(m.value)["id"] for m in res) == [f"r-{i:06d}" for i in range(3)]
    proc.signal(signal.SIGTERM)
    assert proc.wait(60) == 0


def _transactions(broker: Broker, topic: str, sizes: list[int]) -> int:
    """Commit one transaction per size, of valid records numbered from 0; the end offset after
    them (each commit marker takes an offset of its own)."""
    producer = KafkaProducer(
        bootstrap_servers=broker.bootstrap,
        transactional_id=f"tx-{uuid.uuid4().hex[:8]}",
        linger_ms=0,
        acks="all",
    )
    i = 0
    try:
        producer.init_transactions()
        for size in sizes:
            producer.begin_transaction()
            for _ in range(size):
                producer.send(topic, value=json.dumps(valid_record(i)).encode()).get(timeout=30)
                i += 1
            producer.commit_transaction()
    finally:
        producer.close(timeout=5)
    return i + len(sizes)


def test_transaction_markers_do_not_hold_the_commit_or_the_lag_back(
    kafka_broker: Broker, service_factory: Callable[..., ServiceProcess]
) -> None:
    source, results, dead = _topics(kafka_broker)
    end = _transactions(kafka_broker, source, [3, 1])
    args = _args(kafka_broker, source, results, dead)
    group = args[1].rpartition("group=")[2]
    proc = service_factory(*args, config=kafka_config())
    proc.wait_ready()
    # Before the fix the commit stopped at the last record + 1, one short of the end (the
    # marker after it): stef_consumer_lag stayed at 1 for ever.
    proc.wait_for(lambda: caught_up(proc, 1), timeout_s=90, what="a lag of 0")
    proc.signal(signal.SIGTERM)
    assert proc.wait(60) == 0
    tp = TopicPartition(source, 0)
    probe = KafkaConsumer(bootstrap_servers=kafka_broker.bootstrap, group_id=group)
    try:
        assert probe.committed(tp) == end
    finally:
        probe.close()
    assert len(kafka_broker.consume_all(results, expect=4, timeout_s=30)) == 4


def test_backfill_over_a_transactional_topic_finishes(tmp_path: Path, kafka_broker: Broker) -> None:
    topic = kafka_broker.create_topic(f"bf-tx-{uuid.uuid4().hex[:8]}", 1)
    start = datetime.now(UTC)
    _transactions(kafka_broker, topic, [3, 2])
    out = tmp_path / "results.jsonl"
    env = {k: v for k, v in os.environ.items() if not k.startswith("STEF_")}
    # Before the fix the range's end (a commit marker) was never reached: this timed out.
    done = subprocess.run(
        [
            sys.executable, "-m", "stef.cli", "backfill", "--source", kafka_broker.url(topic),
            "--from", start.isoformat(), "--results", f"file:{out}",
            "--dead-letters", f"file:{tmp_path / 'dead.jsonl'}",
        ],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=90, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    assert sorted(r["id"] for r in read_jsonl(out)) == [f"r-{i:06d}" for i in range(5)]

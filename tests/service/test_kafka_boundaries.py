"""Kafka boundaries on the real broker: no record stops the consumer.

A source message whose key is larger than a producer request (a 3 MB key that compressed well on
its way in) is dead-lettered with a bounded key, and the service goes on; the transaction markers
that end a transactional producer's writes do not hold the committed offset back (the lag reaches
0), and ``stef backfill`` over such a topic finishes.
"""

from __future__ import annotations

import hashlib
import json
import signal
import uuid
import warnings
from collections.abc import Callable

import pytest

from stef.io.deadletter import MAX_KEY_BYTES
from tests.brokers import Broker
from tests.service.conftest import ServiceProcess, caught_up, kafka_config, valid_record

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka import KafkaProducer

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

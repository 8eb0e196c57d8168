"""Compressed topics on the real broker: records produced with each codec go through ``stef run``,
and its results and dead letters are written back with the same codec (read back here through
kafka-python's decoder for it, counted, so the codec is known to have been used end to end)."""

from __future__ import annotations

import json
import signal
import uuid
import warnings
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from stef.io import kafka_batches
from tests.brokers import Broker
from tests.service.conftest import ServiceProcess, caught_up, kafka_config, make_log

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    import kafka.record.default_records as default_records
    from kafka import KafkaProducer

pytestmark = pytest.mark.integration

_DECODERS = {
    "gzip": "gzip_decode",
    "snappy": "snappy_decode",
    "lz4": "lz4_decode",
    "zstd": "zstd_decode",
}


@pytest.fixture
def decoded(monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, int]]:
    """Batches this process decompresses, per codec."""
    counts = dict.fromkeys(_DECODERS, 0)
    for codec, name in _DECODERS.items():
        real = getattr(default_records, name)

        def counting(data: Any, _real: Any = real, _codec: str = codec) -> Any:
            counts[_codec] += 1
            return _real(data)

        monkeypatch.setattr(default_records, name, counting)
    # Once a KafkaSource started in this process, batches decompress through STEF's bounded
    # reader instead (stef.io.kafka_batches): counted alike.
    real_bounded = kafka_batches._decompress
    names = {getattr(default_records.DefaultRecordBatch, f"CODEC_{c.upper()}"): c for c in counts}

    def counting_bounded(codec: int, data: Any, limit: int) -> bytes:
        counts[names[codec]] += 1
        return real_bounded(codec, data, limit)

    monkeypatch.setattr(kafka_batches, "_decompress", counting_bounded)
    yield counts


def _produce(broker: Broker, topic: str, values: list[bytes], codec: str) -> None:
    producer = KafkaProducer(
        bootstrap_servers=broker.bootstrap, compression_type=codec, linger_ms=20, acks="all"
    )
    try:
        futures = [producer.send(topic, value=v) for v in values]
        producer.flush(timeout=60)
        for f in futures:
            f.get(timeout=60)
    finally:
        producer.close(timeout=5)


@pytest.mark.parametrize("codec", ["gzip", "snappy", "lz4", "zstd"])
def test_a_compressed_topic_is_judged_and_results_are_compressed(
    codec: str,
    kafka_broker: Broker,
    service_factory: Callable[..., ServiceProcess],
    decoded: dict[str, int],
) -> None:
    log = make_log(40)
    tag = uuid.uuid4().hex[:8]
    source = kafka_broker.create_topic(f"in-{codec}-{tag}", 2)
    results = kafka_broker.create_topic(f"results-{codec}-{tag}", 1)
    dead = kafka_broker.create_topic(f"dead-{codec}-{tag}", 1)
    _produce(kafka_broker, source, log.payloads, codec)

    proc = service_factory(
        "--source",
        kafka_broker.url(source, f"stef-{tag}"),
        "--results",
        kafka_broker.url(results),
        "--dead-letters",
        kafka_broker.url(dead),
        config=kafka_config(kafka_compression=codec),
    )
    proc.wait_ready()
    proc.wait_for(
        lambda: proc.total("stef_records_total") >= len(log.payloads) and caught_up(proc, 2),
        timeout_s=90,
        what=f"the {codec} topic",
    )
    proc.signal(signal.SIGTERM)
    assert proc.wait(60) == 0
    assert proc.events("service_stopped")[0]["received"] == len(log.payloads)

    before = decoded[codec]
    out = kafka_broker.consume_all(results, expect=len(log.valid_ids))
    letters = kafka_broker.consume_all(dead, expect=len(log.invalid))
    assert {json.loads(m.value)["id"] for m in out} == log.valid_ids
    assert len(out) == len(log.valid_ids)
    assert len(letters) == len(log.invalid)
    # Results and dead letters came back as batches of this codec.
    assert decoded[codec] - before >= 2
    assert all(n == 0 for c, n in decoded.items() if c != codec)

"""A Kafka record batch that cannot be read is dead-lettered and passed, on the real broker.

Before: a record whose header key is not UTF-8 left ``stef run`` spinning at 100% CPU for good,
deaf to SIGTERM (kafka-python's fetcher loops on the dead record iterator); a batch flagged gzip
whose data is not gzip ended the run (exit 1); a zstd batch of 131 KB holding a 4 GiB record
took 4.2 GiB of memory. The batches are built by hand (CRC-32C right) and produced as they are.
"""

from __future__ import annotations

import json
import os
import signal
import struct
import subprocess
import sys
import time
import uuid
import warnings
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import crc32c
import pytest

from stef.io import kafka_batches
from tests.brokers import Broker
from tests.service.conftest import ROOT, ServiceProcess, kafka_config, read_jsonl, valid_record

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka import KafkaProducer
    from kafka.codec import gzip_encode, lz4_encode, snappy_encode, zstd_encode
    from kafka.record import memory_records
    from kafka.record.default_records import DefaultRecordBatch

pytestmark = pytest.mark.integration

_CODECS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}


def _varint(n: int) -> bytes:
    n = (n << 1) ^ (n >> 63)  # zigzag
    out = bytearray()
    while True:
        byte = n & 0x7F
        n >>= 7
        if n:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _record(delta: int, value: bytes, headers: list[tuple[bytes, bytes]] | None = None) -> bytes:
    headers = headers or []
    body = b"\x00" + _varint(0) + _varint(delta) + _varint(-1) + _varint(len(value)) + value
    body += _varint(len(headers))
    for key, val in headers:
        body += _varint(len(key)) + key + _varint(len(val)) + val
    return _varint(len(body)) + body


def _batch(section: bytes, count: int, codec: str = "none") -> bytes:
    now = int(time.time() * 1000)
    after_crc = (
        struct.pack(">hiqqqhii", _CODECS[codec], count - 1, now, now, -1, -1, -1, count) + section
    )
    head = struct.pack(">qiibI", 0, 9 + len(after_crc), -1, 2, crc32c.crc32c(after_crc))
    return head + after_crc


def _produce(broker: Broker, topic: str, value: bytes) -> None:
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, acks="all", linger_ms=0)
    try:
        producer.send(topic, value=value).get(timeout=60)
    finally:
        producer.close(timeout=5)


def _produce_raw(broker: Broker, topic: str, batch: bytes) -> None:
    """Send ``batch`` as it is: the producer's own batch is swapped for it once built."""
    real_close = memory_records.MemoryRecordsBuilder.close

    def close(self: Any) -> None:
        first = not self._closed
        real_close(self)
        if first:
            self._buffer = bytearray(batch)

    memory_records.MemoryRecordsBuilder.close = close
    try:
        producer = KafkaProducer(
            bootstrap_servers=broker.bootstrap,
            acks="all",
            linger_ms=0,
            retries=0,
            enable_idempotence=False,
            max_request_size=max(2 * len(batch), 1 << 20),
        )
        try:
            producer.send(topic, value=b"placeholder").get(timeout=60)
        finally:
            producer.close(timeout=5)
    finally:
        memory_records.MemoryRecordsBuilder.close = real_close


def _good(i: int) -> bytes:
    return json.dumps(valid_record(i)).encode()


_BAD_KEY = [(b"\xff\xfe", b"v")]


def _header_key_not_utf8() -> tuple[bytes, int]:
    """Five records; the third's header key is not UTF-8: the first two read, the rest not."""
    records = [_record(i, _good(100 + i), _BAD_KEY if i == 2 else []) for i in range(5)]
    return _batch(b"".join(records), 5), 2


def _not_gzip() -> tuple[bytes, int]:
    return _batch(b"this is not gzip data at all" * 4, 1, "gzip"), 0


def _zstd_bomb() -> tuple[bytes, int]:
    import zstandard

    value = b" " * (kafka_batches.MAX_BATCH_BYTES + 16 * 1024 * 1024)
    return _batch(zstandard.ZstdCompressor().compress(_record(0, value)), 1, "zstd"), 0


@pytest.mark.parametrize(
    ("make", "reason"),
    [(_header_key_not_utf8, "unreadable"), (_not_gzip, "unreadable"), (_zstd_bomb, "too_large")],
    ids=["header-key-not-utf8", "not-gzip", "zstd-bomb"],
)
def test_an_unreadable_batch_is_dead_lettered_and_the_partition_goes_on(
    make: Callable[[], tuple[bytes, int]],
    reason: str,
    kafka_broker: Broker,
    service_factory: Callable[..., ServiceProcess],
    tmp_path: Path,
) -> None:
    batch, readable = make()
    count = struct.unpack_from(">i", batch, 57)[0]
    tag = uuid.uuid4().hex[:8]
    topic = kafka_broker.create_topic(f"in-batch-{tag}", 1)
    _produce(kafka_broker, topic, _good(0))
    _produce_raw(kafka_broker, topic, batch)
    _produce(kafka_broker, topic, _good(1))
    total = 2 + count
    results, dead = tmp_path / "results.jsonl", tmp_path / "dead.jsonl"
    proc = service_factory(
        "--source",
        kafka_broker.url(topic, f"stef-{tag}"),
        "--results",
        f"file:{results}",
        "--dead-letters",
        f"file:{dead}",
        config=kafka_config(),
    )
    proc.wait_ready()
    proc.wait_for(
        lambda: len(read_jsonl(results)) + len(read_jsonl(dead)) >= total,
        timeout_s=90,
        what="every offset out",
    )
    proc.signal(signal.SIGTERM)
    assert proc.wait(60) == 0
    assert len(read_jsonl(results)) == 2 + readable
    letters = read_jsonl(dead)
    assert [d["reason"] for d in letters] == [reason] * (count - readable)
    # Said of the batch (a record decompressed whole would be too large as a record).
    assert all(d["error"].startswith("Kafka record batch of ") for d in letters)
    offsets = sorted(d["source"]["offset"] for d in letters)
    assert offsets == list(range(1 + readable, 1 + count))
    assert proc.events("service_stopped")[0]["received"] == total


def test_a_long_unreadable_batch_comes_out_a_few_letters_a_poll_each_offset_once(
    kafka_broker: Broker,
) -> None:
    """The rest of a batch past ``max_records`` fails again at the next poll, from the middle
    of the batch: the records before the seek are read and dropped again, and their offsets
    were taken for the first not read (the same 100 letters for ever, 4,488 in 25 s)."""
    from stef.io.kafka import KafkaSource

    records = [_record(i, _good(200 + i), _BAD_KEY if i == 2 else []) for i in range(12)]
    topic = kafka_broker.create_topic(f"in-long-{uuid.uuid4().hex[:8]}", 1)
    _produce_raw(kafka_broker, topic, _batch(b"".join(records), 12))
    source = KafkaSource(
        [kafka_broker.bootstrap], topic, f"g-{topic}", auto_offset_reset="earliest"
    )
    source.start()
    seen: list[tuple[int, str | None]] = []
    try:
        deadline = time.monotonic() + 60
        while len(seen) < 12 and time.monotonic() < deadline:
            for envelope in source.poll(3, 0.5):
                seen.append((envelope.position["offset"], (envelope.invalid or (None,))[0]))
                envelope.on_done()
    finally:
        source.close()
    assert seen == [(0, None), (1, None)] + [(i, "unreadable") for i in range(2, 12)]


def _source_of(broker: Broker, topic: str) -> Any:
    from stef.io.kafka import KafkaSource

    source = KafkaSource([broker.bootstrap], topic, f"g-{topic}", auto_offset_reset="earliest")
    source.start()
    return source


def _first_poll(source: Any, max_records: int = 100) -> list[tuple[int, str | None]]:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        out = source.poll(max_records, 0.5)
        if out:
            for envelope in out:
                envelope.on_done()
            return [(e.position["offset"], (e.invalid or (None,))[0]) for e in out]
    raise AssertionError("nothing came")


def test_an_unreadable_batch_of_a_partition_no_longer_assigned_gives_no_letter(
    kafka_broker: Broker,
) -> None:
    """Its next owner reads (and letters) it. kafka-python 3 refuses the seek with a
    ValueError, which left ``poll`` (the guard caught only the assert older ones raised)."""
    from kafka import KafkaConsumer, TopicPartition

    topic = kafka_broker.create_topic(f"in-gone-{uuid.uuid4().hex[:8]}", 1)
    source = _source_of(kafka_broker, topic)
    consumer = KafkaConsumer(bootstrap_servers=kafka_broker.bootstrap)  # nothing assigned
    try:
        exc = kafka_batches.UnreadableBatch("a header key that is not UTF-8", end=5)
        exc.partition, exc.first = TopicPartition(topic, 0), 2
        assert source._skip_unreadable(consumer, exc, 2, 10) == []
    finally:
        consumer.close()
        source.close()


def test_bytes_left_after_a_batch_s_last_record_cost_no_record(kafka_broker: Broker) -> None:
    """A batch whose records were all read, with bytes left over after them: the letter went
    to the next batch's first offset (a good record, never judged); at the end of the
    partition the seek went past it, and the partition was read again from its start."""
    topic = kafka_broker.create_topic(f"in-tail-{uuid.uuid4().hex[:8]}", 1)
    _produce(kafka_broker, topic, _good(0))
    _produce_raw(kafka_broker, topic, _batch(_record(0, _good(1)) + _record(1, _good(2)), 1))
    _produce(kafka_broker, topic, _good(3))
    source = _source_of(kafka_broker, topic)
    seen: list[tuple[int, str | None]] = []
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            for envelope in source.poll(100, 0.3):
                seen.append((envelope.position["offset"], (envelope.invalid or (None,))[0]))
                envelope.on_done()
    finally:
        source.close()
    assert seen == [(0, None), (1, None), (2, None)]


def test_a_partition_paused_before_the_error_comes_back_does_not_spin(
    kafka_broker: Broker,
) -> None:
    """Good records, then a broken one in the same batch: kafka-python keeps the error for the
    next poll and drops it if the partition is paused meanwhile (the loop pauses the source
    when its window is full). On resume the fetcher looped for ever on the dead records."""
    topic = kafka_broker.create_topic(f"in-pause-{uuid.uuid4().hex[:8]}", 1)
    records = [_record(i, _good(100 + i), _BAD_KEY if i == 2 else []) for i in range(5)]
    _produce_raw(kafka_broker, topic, _batch(b"".join(records), 5))
    _produce(kafka_broker, topic, _good(9))
    source = _source_of(kafka_broker, topic)
    try:
        assert _first_poll(source) == [(0, None), (1, None)]
        source.pause()
        assert source.poll(0, 0.05) == []
        source.resume()
        seen = _first_poll(source)
        while len(seen) < 4:
            seen += _first_poll(source)
    finally:
        source.close()
    assert seen == [(2, "unreadable"), (3, "unreadable"), (4, "unreadable"), (5, None)]


def test_a_backfill_passes_an_unreadable_batch(tmp_path: Path, kafka_broker: Broker) -> None:
    """``stef backfill`` reads through its own consumer: it spun on the same record."""
    topic = kafka_broker.create_topic(f"bf-batch-{uuid.uuid4().hex[:8]}", 1)
    _produce(kafka_broker, topic, _good(0))
    # One record a batch: Tansu's end offsets are wrong after a batch of several records.
    _produce_raw(kafka_broker, topic, _batch(_record(0, _good(9), _BAD_KEY), 1))
    _produce(kafka_broker, topic, _good(1))
    results, dead = tmp_path / "results.jsonl", tmp_path / "dead.jsonl"
    env = {k: v for k, v in os.environ.items() if not k.startswith("STEF_")}
    since = (datetime.now(UTC) - timedelta(hours=1)).isoformat()
    args = ["--source", kafka_broker.url(topic), "--from", since]
    args += ["--results", f"file:{results}", "--dead-letters", f"file:{dead}"]
    done = subprocess.run(
        [sys.executable, "-m", "stef.cli", "backfill", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert len(read_jsonl(results)) == 2
    assert [(d["reason"], d["source"]["offset"]) for d in read_jsonl(dead)] == [("unreadable", 1)]


def test_bounded_decompression_reads_what_kafka_python_reads() -> None:
    """Each codec, as kafka-python's producer writes it (snappy in xerial's blocks), decompresses
    to the same bytes; past the limit it stops, having decompressed at most that much."""
    data = b"".join(_record(i, _good(i)) for i in range(2000))
    for name, encode in (
        ("gzip", gzip_encode),
        ("snappy", snappy_encode),
        ("lz4", lz4_encode),
        ("zstd", zstd_encode),
    ):
        codec = getattr(DefaultRecordBatch, f"CODEC_{name.upper()}")
        packed = memoryview(encode(data))
        assert kafka_batches._decompress(codec, packed, len(data)) == data, name
        if name == "gzip":  # zeros after a member are padding, as kafka-python reads them
            padded = memoryview(bytes(packed) + bytes(64))
            assert kafka_batches._decompress(codec, padded, len(data)) == data
        with pytest.raises(kafka_batches._TooLarge):
            kafka_batches._decompress(codec, packed, len(data) - 1)

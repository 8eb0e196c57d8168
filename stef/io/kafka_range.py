"""A time range of a Kafka topic as a finite source, for ``stef backfill``.

The partitions are assigned by hand (no consumer group), so a backfill neither joins nor
commits for the live group and never moves its offsets. The range is turned into offsets once,
at start, through the broker's time index: per partition, from the first record at or after
``start`` to the first record at or after ``end`` (or the end of the partition then). The source
is exhausted once every partition has been read to its end offset.
"""

from __future__ import annotations

import time
from datetime import datetime
from typing import Any

import structlog

# kafka-python ships no type information.
from kafka import KafkaConsumer, TopicPartition  # type: ignore[import-untyped]
from kafka.errors import KafkaError  # type: ignore[import-untyped]

from stef.errors import ConfigError
from stef.io import Envelope

log = structlog.get_logger(__name__)


class KafkaRangeSource:
    """Records of ``topic`` with timestamps in ``[start, end)``.

    Args:
        bootstrap: ``host:port`` bootstrap servers.
        topic: the topic to read.
        start: the first instant of the range (timezone-aware).
        end: the end of the range, excluded; None: up to the end of the topic at start.
        consumer_options: further ``KafkaConsumer`` settings (client id, TLS ...); group
            settings are ignored, the source has no group.
    """

    def __init__(
        self,
        bootstrap: list[str],
        topic: str,
        start: datetime,
        end: datetime | None = None,
        *,
        consumer_options: dict[str, Any] | None = None,
    ) -> None:
        self.bootstrap = bootstrap
        self.topic = topic
        self.start_at = start
        self.end_at = end
        self._options = {
            k: v
            for k, v in (consumer_options or {}).items()
            if "group" not in k and "session" not in k
        }
        self._consumer: KafkaConsumer | None = None
        self._bounds: dict[TopicPartition, tuple[int, int]] = {}
        self._next: dict[TopicPartition, int] = {}

    @property
    def total(self) -> int:
        """How many records the range holds (known after :meth:`start`)."""
        return sum(hi - lo for lo, hi in self._bounds.values())

    def start(self) -> None:
        if self._consumer is not None:
            return  # started early by the command, to size its progress bar
        where = f"kafka://{','.join(self.bootstrap)}/{self.topic}"
        try:
            consumer = KafkaConsumer(
                **self._options,
                bootstrap_servers=self.bootstrap,
                group_id=None,
                enable_auto_commit=False,
            )
            partitions = consumer.partitions_for_topic(self.topic)
            if not partitions:
                raise ConfigError(f"source {where}: no such topic")
            tps = [TopicPartition(self.topic, p) for p in sorted(partitions)]
            ends = consumer.end_offsets(tps)
            first = self._offsets(consumer, tps, self.start_at, ends)
            last = self._offsets(consumer, tps, self.end_at, ends) if self.end_at else ends
        except KafkaError as exc:
            raise ConfigError(f"source {where}: cannot read the range: {exc}") from exc
        self._bounds = {tp: (first[tp], max(first[tp], last[tp])) for tp in tps}
        todo = [tp for tp, (lo, hi) in self._bounds.items() if hi > lo]
        consumer.assign(todo)
        for tp in todo:
            consumer.seek(tp, self._bounds[tp][0])
            self._next[tp] = self._bounds[tp][0]
        self._consumer = consumer
        log.info(
            "backfill_range",
            topic=self.topic,
            start=self.start_at.isoformat(),
            end=self.end_at.isoformat() if self.end_at else None,
            records=self.total,
            partitions={tp.partition: list(b) for tp, b in self._bounds.items()},
        )

    @staticmethod
    def _offsets(
        consumer: KafkaConsumer,
        tps: list[TopicPartition],
        when: datetime,
        ends: dict[TopicPartition, int],
    ) -> dict[TopicPartition, int]:
        """Per partition, the first offset at or after ``when``; its end when there is none."""
        millis = int(when.timestamp() * 1000)
        found = consumer.offsets_for_times(dict.fromkeys(tps, millis))
        out = {}
        for tp in tps:
            hit = found.get(tp)
            # A hit earlier than asked is a broker answering past its last record (Tansu).
            ok = hit is not None and hit.timestamp >= millis
            out[tp] = hit.offset if ok else ends[tp]
        return out

    def poll(self, max_records: int, timeout_s: float) -> list[Envelope]:
        consumer = self._require()
        if self.exhausted:
            time.sleep(min(timeout_s, 0.05))
            return []
        batches = consumer.poll(timeout_ms=int(timeout_s * 1000), max_records=max(1, max_records))
        out: list[Envelope] = []
        finished = []
        for tp, messages in batches.items():
            end = self._bounds[tp][1]
            for msg in messages:
                if msg.offset >= end:
                    break
                out.append(
                    Envelope(
                        payload=msg.value if msg.value is not None else b"",
                        position={
                            "topic": tp.topic,
                            "partition": tp.partition,
                            "offset": msg.offset,
                        },
                        key=msg.key,
                    )
                )
                self._next[tp] = msg.offset + 1
            if self._next[tp] >= end or (messages and messages[-1].offset >= end):
                self._next[tp] = end
                finished.append(tp)
        if finished:
            consumer.pause(*finished)
        return out

    def pause(self) -> None:
        consumer = self._require()
        consumer.pause(*consumer.assignment())

    def resume(self) -> None:
        consumer = self._require()
        consumer.resume(
            *[tp for tp in consumer.assignment() if self._next[tp] < self._bounds[tp][1]]
        )

    @property
    def exhausted(self) -> bool:
        return all(self._next.get(tp, hi) >= hi for tp, (_, hi) in self._bounds.items())

    def commit(self) -> None:
        """Nothing to commit: the backfill has no group (a rerun reads the range again)."""

    def uncommitted(self) -> int:
        """Nothing is ever committed: nothing waits for a commit."""
        return 0

    def lag(self) -> dict[tuple[str, int], int]:
        """Records of the range not yet read, per partition."""
        return {
            (tp.topic, tp.partition): max(0, hi - self._next.get(tp, hi))
            for tp, (_, hi) in self._bounds.items()
        }

    def unreachable(self) -> str | None:
        return None

    def close(self) -> None:
        if self._consumer is not None:
            try:
                self._consumer.close(autocommit=False)
            except KafkaError as exc:
                log.warning("consumer_close_failed", error=str(exc))
            self._consumer = None

    def _require(self) -> KafkaConsumer:
        if self._consumer is None:
            raise ConfigError("the backfill source is not started")
        return self._consumer

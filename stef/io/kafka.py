"""Kafka source and sink through kafka-python: a consumer group with manual, ordered commits.

Commits follow acknowledgements, not fetches: an offset is committed only once every record
before it in its partition has its result or dead letter acknowledged (:class:`OffsetTracker`).
On a rebalance the revoked partitions' in-flight work gets a bounded time to finish; what is
still running then is abandoned (its late completion no longer moves the commit), so the new
owner redelivers it: duplicates are possible, losses are not.
"""

from __future__ import annotations

import socket
import threading
import time
from datetime import datetime
from typing import Any

import structlog

# kafka-python ships no type information.
from kafka import KafkaConsumer, KafkaProducer, TopicPartition  # type: ignore[import-untyped]
from kafka.consumer.subscription_state import (  # type: ignore[import-untyped]
    ConsumerRebalanceListener,
)
from kafka.errors import (  # type: ignore[import-untyped]
    KafkaError,
    MessageSizeTooLargeError,
    NoOffsetForPartitionError,
)
from kafka.structs import OffsetAndMetadata  # type: ignore[import-untyped]

from stef.errors import CommitError, ConfigError, SinkError, SourceLost
from stef.io import AckCallback, Envelope
from stef.io.kafka_batches import UnreadableBatch, install, skip_unreadable
from stef.io.offsets import OffsetTracker

log = structlog.get_logger(__name__)


class KafkaSource:
    """Records of one topic through a consumer group.

    Args:
        bootstrap: ``host:port`` bootstrap servers.
        topic: the topic to consume.
        group: the consumer group; replicas in one group split the partitions.
        revoke_timeout_s: how long in-flight work of revoked partitions may take to finish.
        consumer_options: further ``KafkaConsumer`` settings (session timeout, client id ...).
        auto_offset_reset: where a partition without a committed offset starts (``latest``,
            Kafka's default, or ``earliest``).
        start_from: when set, a partition without a committed offset starts at the first
            record at or after this time instead (the end when there is none yet).
        unreachable_timeout_s: how long no broker may answer before :meth:`poll` raises
            :class:`~stef.errors.SourceLost`.
    """

    def __init__(
        self,
        bootstrap: list[str],
        topic: str,
        group: str,
        *,
        revoke_timeout_s: float = 10.0,
        consumer_options: dict[str, Any] | None = None,
        auto_offset_reset: str = "latest",
        start_from: datetime | None = None,
        unreachable_timeout_s: float = 120.0,
    ) -> None:
        self.bootstrap = bootstrap
        self.topic = topic
        self.group = group
        self.revoke_timeout_s = revoke_timeout_s
        self._options = dict(consumer_options or {})
        self.auto_offset_reset = auto_offset_reset
        self.start_from = start_from
        self._consumer: KafkaConsumer | None = None
        self._trackers: dict[TopicPartition, OffsetTracker] = {}
        # Where a partition revoked from this replica resumes if it is assigned back.
        self._resume: dict[TopicPartition, int] = {}
        self._lock = threading.Lock()
        self._paused = False
        self._reach: tuple[float, str | None] = (0.0, None)
        self.unreachable_timeout_s = unreachable_timeout_s
        self._unreachable_since: float | None = None
        self._checked_ends = 0.0
        self._closing = False

    # ------------------------------------------------------------------------------ protocol

    def unreachable(self) -> str | None:
        """None when a TCP connection to one bootstrap server succeeds (checked at most every
        2 s); the consumer's own connection state is not public in kafka-python."""
        checked, answer = self._reach
        if time.monotonic() - checked < 2.0:
            return answer
        answer = no_broker_answers(self.bootstrap)
        self._reach = (time.monotonic(), answer)
        return answer

    def start(self) -> None:
        options: dict[str, Any] = {
            # With start_from, a partition without a committed offset makes poll raise, and
            # is then positioned by time (kafka-python forbids that lookup in its rebalance
            # callback, which runs on its IO thread).
            "auto_offset_reset": "none" if self.start_from is not None else self.auto_offset_reset,
            "session_timeout_ms": 10_000,
            "heartbeat_interval_ms": 3_000,
            "max_poll_interval_ms": 300_000,
            **self._options,
            "bootstrap_servers": self.bootstrap,
            "group_id": self.group,
            "enable_auto_commit": False,
        }
        install()  # a batch that cannot be read is skipped, not spun on (kafka_batches)
        try:
            consumer = KafkaConsumer(**options)
            topics = consumer.topics()
        except KafkaError as exc:
            raise ConfigError(
                f"source kafka://{','.join(self.bootstrap)}/{self.topic}: cannot connect: {exc}"
            ) from exc
        if self.topic not in topics:
            log.warning("source_topic_missing", topic=self.topic)
        consumer.subscribe([self.topic], listener=_Listener(self))
        self._consumer = consumer

    def poll(self, max_records: int, timeout_s: float) -> list[Envelope]:
        consumer = self._require()
        try:
            batches = consumer.poll(
                timeout_ms=int(timeout_s * 1000), max_records=max(1, max_records)
            )
        except NoOffsetForPartitionError as exc:
            if self.start_from is None:
                raise
            self._seek_to_start(consumer, sorted(exc.args[0]), self.start_from)
            return []
        except UnreadableBatch as exc:
            if exc.partition is not None and exc.first is not None:
                return self._skip_unreadable(consumer, exc, exc.first, max_records)
            log.warning("source_poll_failed", error=str(exc)[:300])
            return []
        except KafkaError as exc:
            # The broker is gone or restarting: nothing to hand out now, the consumer reconnects
            # on the next poll, and /readyz says the source is unreachable meanwhile.
            log.warning("source_poll_failed", error=str(exc)[:300])
            time.sleep(min(timeout_s, 1.0))
            self._watch_reach()
            return []
        if not batches:
            self._watch_reach()
            self._reset_past_end(consumer)
        else:
            self._unreachable_since = None
        out: list[Envelope] = []
        for tp, messages in batches.items():
            with self._lock:
                tracker = self._trackers.get(tp)
                if tracker is None:
                    tracker = self._trackers[tp] = OffsetTracker()
            for msg in messages:
                tracker.add(msg.offset)
                out.append(
                    Envelope(
                        payload=msg.value if msg.value is not None else b"",
                        position={
                            "topic": tp.topic,
                            "partition": tp.partition,
                            "offset": msg.offset,
                        },
                        key=msg.key,
                        on_done=_done(tracker, msg.offset),
                        claim=_claim(tracker, msg.offset),
                    )
                )
        return out

    def _skip_unreadable(
        self, consumer: KafkaConsumer, exc: UnreadableBatch, first: int, max_records: int
    ) -> list[Envelope]:
        """Dead letters for the offsets of a batch that cannot be read, and a seek past them
        (:func:`skip_unreadable`); the letters are claimed like the partition's records."""
        tp = exc.partition

        def seek(stop: int) -> OffsetTracker | None:
            try:
                consumer.seek(tp, stop)
            except (KafkaError, AssertionError, ValueError):
                # Revoked meanwhile: its next owner reads it (kafka-python 3 says so with a
                # ValueError, "Unassigned partition"; older ones with an assert).
                return None
            with self._lock:
                tracker = self._trackers.get(tp)
                if tracker is None:
                    tracker = self._trackers[tp] = OffsetTracker()
            return tracker

        return skip_unreadable(exc, first, max_records, seek, claims=True)

    def _watch_reach(self) -> None:
        """Raise :class:`SourceLost` once no broker has answered for ``unreachable_timeout_s``
        (``/readyz`` fails meanwhile): kafka-python would reconnect for ever, and a restart is
        what brings a replica back in a known state."""
        why = self.unreachable()
        if why is None:
            self._unreachable_since = None
            return
        now = time.monotonic()
        if self._unreachable_since is None:
            self._unreachable_since = now
        elif now - self._unreachable_since >= self.unreachable_timeout_s:
            raise SourceLost(f"source {self.topic}: {why} for {self.unreachable_timeout_s:g} s")

    def _reset_past_end(self, consumer: KafkaConsumer) -> None:
        """A partition whose position is past its end had its log truncated or recreated (a
        broker that came back empty). Apache Kafka answers such a fetch with
        OFFSET_OUT_OF_RANGE and the consumer resets by its policy; a broker that answers with
        no records instead (Tansu) would leave the consumer waiting for ever. Reset it here by
        the same policy (checked at most every second, on polls that brought nothing)."""
        now = time.monotonic()
        if now - self._checked_ends < 1.0:
            return
        self._checked_ends = now
        for tp in consumer.assignment():
            high = consumer.highwater(tp)
            if high is None:
                continue
            try:
                position = consumer.position(tp, timeout_ms=100)
            except KafkaError:
                continue
            if position is None or position <= high:
                continue
            with self._lock:
                old = self._trackers.get(tp)
                self._trackers[tp] = OffsetTracker()
            if old is not None:
                old.close()  # records of the old log still in flight no longer move the commit
            earliest = self.auto_offset_reset == "earliest"
            if earliest:
                consumer.seek_to_beginning(tp)
            else:
                consumer.seek_to_end(tp)
            log.warning(
                "partition_reset_past_end",
                partition=tp.partition,
                position=position,
                end=high,
                reset="earliest" if earliest else "latest",
            )

    def pause(self) -> None:
        consumer = self._require()
        if not self._paused:
            consumer.pause(*consumer.assignment())
            self._paused = True

    def resume(self) -> None:
        consumer = self._require()
        if self._paused:
            consumer.resume(*consumer.paused())
            self._paused = False

    @property
    def exhausted(self) -> bool:
        return False

    def commit(self) -> None:
        """Commit every partition whose acknowledged run moved (synchronously)."""
        if self._consumer is None:
            return
        self._advance_idle(self._consumer)
        offsets = self._committable()
        if not offsets:
            return
        try:
            self._consumer.commit({tp: OffsetAndMetadata(o, "", -1) for tp, o in offsets.items()})
        except KafkaError as exc:
            # A rebalance got there first, or the coordinator is away: the next commit
            # retries; a new owner redelivers from the last commit.
            raise CommitError(
                f"offset commit of {len(offsets)} partitions failed: {exc}", source="kafka"
            ) from exc
        for tp, offset in offsets.items():
            with self._lock:
                tracker = self._trackers.get(tp)
            if tracker is not None:
                tracker.mark_committed(offset)

    def uncommitted(self) -> int:
        with self._lock:
            trackers = list(self._trackers.values())
        return sum(t.uncommitted for t in trackers)

    def _advance_idle(self, consumer: KafkaConsumer) -> None:
        """Partitions with every fetched record done may commit the consumer's position: the
        transaction markers after a transactional producer's records are offsets no fetch
        returns, and without this the commit (and the lag) would stay one short of the end."""
        with self._lock:
            idle = [(tp, t) for tp, t in self._trackers.items() if not t.in_flight]
        for tp, tracker in idle:
            try:
                position = consumer.position(tp, timeout_ms=100)
            except KafkaError:  # revoked meanwhile, or no position yet (start_from pending)
                continue
            if position is not None:
                tracker.advance(position)

    def lag(self) -> dict[tuple[str, int], int]:
        """Per assigned partition: its end minus the oldest offset not yet done; partitions whose
        end is not known yet (no fetch answered) are left out."""
        if self._consumer is None:
            return {}
        out: dict[tuple[str, int], int] = {}
        for tp in self._consumer.assignment():
            high = self._consumer.highwater(tp)
            if high is None:
                continue
            with self._lock:
                tracker = self._trackers.get(tp)
            low = tracker.low_water if tracker is not None else None
            if low is None:
                # Nothing fetched in this assignment yet: the consumer's position is the start.
                try:
                    low = self._consumer.position(tp, timeout_ms=100)
                except KafkaError:
                    continue
                if low is None:
                    continue
            out[(tp.topic, tp.partition)] = max(0, high - low)
        return out

    def in_flight(self) -> int:
        with self._lock:
            return sum(t.in_flight for t in self._trackers.values())

    def close(self) -> None:
        if self._consumer is None:
            return
        try:
            self.commit()
        except CommitError as exc:  # the consumer is closed all the same; the rest redelivered
            log.warning("commit_failed", error=str(exc))
        # The close revokes every partition, and waits for nothing: the service closes its
        # source once its drain is over (or given up: a second signal, SIGQUIT, a failure), so
        # a record still being judged had its time, and a message whose other traces an OTLP
        # source still holds is never done here. Both are read again by the group.
        self._closing = True
        try:
            self._consumer.close(autocommit=False)
        except KafkaError as exc:
            log.warning("consumer_close_failed", error=str(exc))
        finally:
            self._closing = False
        self._consumer = None

    # ---------------------------------------------------------------------------- rebalance

    def _committable(self) -> dict[TopicPartition, int]:
        with self._lock:
            trackers = list(self._trackers.items())
        out = {}
        for tp, tracker in trackers:
            offset = tracker.committable()
            if offset is not None:
                out[tp] = offset
        return out

    def on_revoked(self, revoked: list[TopicPartition]) -> None:
        """Let the records of ``revoked`` being judged finish (bounded), skip those not started,
        commit what is done in order, abandon the rest."""
        deadline = time.monotonic() + (0.0 if self._closing else self.revoke_timeout_s)
        with self._lock:
            trackers = {tp: self._trackers.pop(tp) for tp in revoked if tp in self._trackers}
        # Records fetched but not started are left to the next owner (judging them here would
        # only produce duplicates, paid LLM calls included); the ones being judged get until
        # the deadline to finish, so the commit covers them.
        for tracker in trackers.values():
            tracker.revoke()
        abandoned = redelivered = 0
        for tracker in trackers.values():
            if not tracker.wait_started(max(0.0, deadline - time.monotonic())):
                abandoned += tracker.started
            # Records still being judged, and records done after one of them: both are left
            # to the next owner, which judges them again (duplicates, never losses).
            redelivered += tracker.close()
        offsets = {}
        for tp, tracker in trackers.items():
            # kafka-python keeps the fetch position of a partition assigned again to this
            # replica: the records skipped above must be read again from here (on_assigned).
            resume = tracker.low_water
            if resume is not None:
                self._resume[tp] = resume
            offset = tracker.committable()
            if offset is not None:
                offsets[tp] = OffsetAndMetadata(offset, "", -1)
        if offsets and self._consumer is not None:
            # A synchronous commit cannot run inside kafka-python's rebalance callback. If it
            # fails, the new owner judges again what was done since the last commit.
            self._consumer.commit_async(offsets, callback=_log_revoke_commit)
        log.info(
            "partitions_revoked",
            partitions=sorted(tp.partition for tp in revoked),
            committed=len(offsets),
            abandoned=abandoned,
            redelivered=redelivered,
        )

    def on_assigned(self, assigned: list[TopicPartition]) -> None:
        with self._lock:
            for tp in assigned:
                self._trackers[tp] = OffsetTracker()
        resume, self._resume = self._resume, {}
        if self._consumer is not None:
            for tp in assigned:
                if tp in resume:
                    # Back to the oldest record not done before the revocation (a partition
                    # that went elsewhere is read from its commit by its new owner).
                    self._consumer.seek(tp, resume[tp])
        if self._paused and self._consumer is not None:
            self._consumer.pause(*assigned)
        log.info("partitions_assigned", partitions=sorted(tp.partition for tp in assigned))

    def _seek_to_start(
        self, consumer: KafkaConsumer, fresh: list[TopicPartition], when: datetime
    ) -> None:
        """Seek partitions without a committed offset to the first record at or after
        ``when`` (the broker's time index), or to their end when there is none yet."""
        millis = int(when.timestamp() * 1000)
        try:
            found = consumer.offsets_for_times(dict.fromkeys(fresh, millis))
        except KafkaError as exc:
            raise ConfigError(f"source {self.topic}: cannot look up start_from: {exc}") from exc
        for tp in fresh:
            hit = found.get(tp)
            if hit is not None and hit.timestamp < millis:
                # Not a record at or after the time: a broker that answers a time past its
                # last record with an earlier one (Tansu does). The partition starts at its end.
                hit = None
            if hit is None:
                consumer.seek_to_end(tp)
            else:
                consumer.seek(tp, hit.offset)
            log.info(
                "partition_start_from",
                partition=tp.partition,
                offset=hit.offset if hit is not None else "end",
                at=when.isoformat(),
            )

    def _require(self) -> KafkaConsumer:
        if self._consumer is None:
            raise ConfigError("the Kafka source is not started")
        return self._consumer


def no_broker_answers(bootstrap: list[str]) -> str | None:
    """None when a TCP connection to one of the ``bootstrap`` servers succeeds, else why not."""
    for server in bootstrap:
        host, _, port = server.rpartition(":")
        try:
            with socket.create_connection((host.strip("[]") or "127.0.0.1", int(port)), 1.0):
                return None
        except (OSError, ValueError):
            continue
    return f"no bootstrap server of {','.join(bootstrap)} answers"


def _rejects_one_message(exc: BaseException) -> bool:
    """The broker refused this message (too large, invalid record), not the whole topic."""
    return type(exc).__name__ in ("MessageSizeTooLargeError", "RecordTooLargeError") or (
        "InvalidRecord" in type(exc).__name__
    )


def _done(tracker: OffsetTracker, offset: int) -> Any:
    return lambda: tracker.done(offset)


def _claim(tracker: OffsetTracker, offset: int) -> Any:
    return lambda: tracker.claim(offset)


class _Listener(ConsumerRebalanceListener):  # type: ignore[misc]  # untyped base
    def __init__(self, source: KafkaSource) -> None:
        self.source = source

    def on_partitions_revoked(self, revoked: Any) -> None:
        self.source.on_revoked(list(revoked))

    def on_partitions_assigned(self, assigned: Any) -> None:
        self.source.on_assigned(list(assigned))


# The sink's producer settings unless ``kafka_producer`` says otherwise. Batching: with hundreds of
# results in flight, a 20 ms linger and 256 KiB batches send them in fewer requests (on the
# Kafka bench, 5 ms / 16 KiB: 401-449 records/s; 20 ms / 256 KiB: 446-448; 50 ms / 1 MiB:
# 447-477, within the noise; the ack wait it adds is covered by the in-flight bound). Each
# batch costs a CRC-32C: kafka-python computes it in pure Python unless ``crc32c`` (a
# dependency) is installed.
PRODUCER_DEFAULTS: dict[str, Any] = {
    "compression_type": "lz4",
    "acks": "all",
    "linger_ms": 20,
    "batch_size": 262_144,
    "retries": 5,
    "delivery_timeout_ms": 60_000,
}


class KafkaSink:
    """Records to one topic, keyed (results by record id). Acknowledged when the broker has them
    (``acks=all``); the producer's own retries are bounded by its delivery timeout.

    Args:
        bootstrap: ``host:port`` bootstrap servers.
        topic: the topic written.
        producer_options: further ``KafkaProducer`` settings (they win over ``compression``).
        compression: ``lz4``, ``zstd``, ``gzip``, ``snappy`` or ``none``.
        headers: Kafka headers put on every message (``stef backfill`` marks its output).
    """

    def __init__(
        self,
        bootstrap: list[str],
        topic: str,
        producer_options: dict[str, Any] | None = None,
        *,
        compression: str = "lz4",
        headers: list[tuple[str, bytes]] | None = None,
    ) -> None:
        self.topic = topic
        self.headers = list(headers or [])
        options: dict[str, Any] = {
            **PRODUCER_DEFAULTS,
            "compression_type": None if compression == "none" else compression,
            **(producer_options or {}),
            "bootstrap_servers": bootstrap,
        }
        try:
            self._producer = KafkaProducer(**options)
        except KafkaError as exc:
            raise ConfigError(
                f"sink kafka://{','.join(bootstrap)}/{topic}: cannot connect: {exc}"
            ) from exc

    def send(self, key: bytes | None, value: bytes, on_ack: AckCallback) -> None:
        try:
            future = self._producer.send(
                self.topic, key=key, value=value, headers=self.headers or None
            )
        except KafkaError as exc:
            rejected = isinstance(exc, MessageSizeTooLargeError)
            on_ack(SinkError(f"cannot send to {self.topic}: {exc}", rejected=rejected))
            return
        future.add_callback(lambda _meta: on_ack(None))
        future.add_errback(
            lambda exc: on_ack(
                SinkError(f"{self.topic}: {exc}", rejected=_rejects_one_message(exc))
            )
        )

    def flush(self, timeout_s: float) -> None:
        try:
            self._producer.flush(timeout=timeout_s)
        except KafkaError as exc:
            log.warning("producer_flush_failed", topic=self.topic, error=str(exc))

    def close(self) -> None:
        self.flush(30.0)
        self._producer.close(timeout=5)


def _log_revoke_commit(offsets: dict[TopicPartition, OffsetAndMetadata], response: object) -> None:
    """kafka-python's ``commit_async`` callback: a failure is logged, nothing is raised."""
    if isinstance(response, Exception):
        log.warning(
            "revoke_commit_failed",
            partitions=sorted(tp.partition for tp in offsets),
            error=str(response),
        )

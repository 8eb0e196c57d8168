"""A time range of a Kafka topic as a finite source, for ``stef backfill``.

The partitions are assigned by hand (no consumer group), so a backfill neither joins nor
commits for the live group and never moves its offsets. The range is turned into offsets once,
at start, through the broker's time index: per partition, from the first record at or after
``start`` to the first record at or after ``end`` (or the end of the partition then). The source
is exhausted once every partition has been read to its end offset, or once no broker has
answered for ``unreachable_timeout_s``; :meth:`KafkaRangeSource.unfinished` then says, per
partition, the first offset not done, which a rerun takes as ``resume``.
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
from stef.io.kafka import no_broker_answers
from stef.io.kafka_batches import UnreadableBatch, install, skip_unreadable
from stef.io.offsets import OffsetTracker

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
        resume: partition -> offset: read only these partitions, each from its offset (what
            :meth:`unfinished` said of a stopped run), instead of from ``start``.
        unreachable_timeout_s: how long no broker may answer before the source gives up.
    """

    def __init__(
        self,
        bootstrap: list[str],
        topic: str,
        start: datetime,
        end: datetime | None = None,
        *,
        consumer_options: dict[str, Any] | None = None,
        resume: dict[int, int] | None = None,
        unreachable_timeout_s: float = 120.0,
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
        self._trackers: dict[TopicPartition, OffsetTracker] = {}
        self._resume_at = dict(resume) if resume is not None else None
        self.unreachable_timeout_s = unreachable_timeout_s
        self._silent_since: float | None = None
        self._checked = 0.0
        # Why the range was left unfinished (the broker lost), once it was.
        self.stopped: str | None = None

    @property
    def total(self) -> int:
        """How many records the range holds (known after :meth:`start`)."""
        return sum(hi - lo for lo, hi in self._bounds.values())

    def start(self) -> None:
        if self._consumer is not None:
            return  # started early by the command, to size its progress bar
        where = f"kafka://{','.join(self.bootstrap)}/{self.topic}"
        install()  # a batch that cannot be read is skipped, not spun on (kafka_batches)
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
        if self._resume_at is not None:
            unknown = set(self._resume_at) - set(partitions)
            if unknown:
                raise ConfigError(f"source {where}: no partition {sorted(unknown)} to resume")
            # A resumed run reads the partitions named, each from its offset; the others were
            # done.
            first = {tp: self._resume_at.get(tp.partition, last[tp]) for tp in tps}
        self._bounds = {tp: (first[tp], max(first[tp], last[tp])) for tp in tps}
        self._trackers = {tp: OffsetTracker() for tp in tps}
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
        try:
            batches = consumer.poll(
                timeout_ms=int(timeout_s * 1000), max_records=max(1, max_records)
            )
        except UnreadableBatch as exc:
            if exc.partition in self._bounds and exc.first is not None:
                return self._skip_unreadable(consumer, exc, exc.first, max_records)
            log.warning("source_poll_failed", error=str(exc)[:300])
            batches = {}
        except KafkaError as exc:
            # The broker is gone or restarting: the consumer reconnects on the next poll; the
            # silence counts towards giving up (below).
            log.warning("source_poll_failed", error=str(exc)[:300])
            time.sleep(min(timeout_s, 1.0))
            batches = {}
        out: list[Envelope] = []
        finished = []
        for tp, messages in batches.items():
            end = self._bounds[tp][1]
            for msg in messages:
                if msg.offset >= end:
                    break
                tracker = self._trackers[tp]
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
                    )
                )
                self._next[tp] = msg.offset + 1
            if self._next[tp] >= end or (messages and messages[-1].offset >= end):
                self._next[tp] = end
                finished.append(tp)
        finished += self._past_markers(consumer, {*finished, *batches})
        if finished:
            consumer.pause(*finished)
        self._watch_silence(progress=bool(out or finished))
        return out

    def _skip_unreadable(
        self, consumer: KafkaConsumer, exc: UnreadableBatch, first: int, max_records: int
    ) -> list[Envelope]:
        """Dead letters for the offsets of the range in a batch that cannot be read, and a seek
        past them (:func:`skip_unreadable`); at the range's end the partition is paused."""
        tp = exc.partition
        end = self._bounds[tp][1]

        def seek(stop: int) -> OffsetTracker:
            self._next[tp] = stop
            if stop >= end:
                consumer.pause(tp)
            else:
                consumer.seek(tp, stop)
            return self._trackers[tp]

        return skip_unreadable(exc, first, max_records, seek, claims=False, bound=end)

    def _watch_silence(self, *, progress: bool) -> None:
        """Give up (``stopped``) once no broker has answered for ``unreachable_timeout_s``:
        kafka-python's poll only waits and reconnects, so a lost broker would hang the run."""
        now = time.monotonic()
        if progress:
            self._silent_since = None
            return
        if now - self._checked < 1.0:
            return
        self._checked = now
        why = no_broker_answers(self.bootstrap)
        if why is None:
            self._silent_since = None
            return
        if self._silent_since is None:
            self._silent_since = now
            log.warning("source_unreachable", error=why)
        elif now - self._silent_since >= self.unreachable_timeout_s:
            self.stopped = f"{why} for {self.unreachable_timeout_s:g} s"
            log.error("source_lost", error=self.stopped)

    def unfinished(self) -> dict[int, int]:
        """Per partition of the range not done: the first offset whose record is not done
        (read, written and acknowledged); a rerun with these as ``resume`` finishes the range."""
        out = {}
        for tp, (_, end) in self._bounds.items():
            tracker = self._trackers[tp]
            # Nothing pending: everything read is done (offsets skipped were markers).
            pending = tracker.low_water if tracker.in_flight else None
            at = pending if pending is not None else self._next.get(tp, end)
            if at < end:
                out[tp.partition] = at
        return out

    def _past_markers(self, consumer: KafkaConsumer, skip: set[TopicPartition]) -> list[Any]:
        """Partitions whose position reached the range's end with no record left to return: the
        last offsets of a transactional topic are commit markers no fetch returns, so the end
        is seen only through the consumer's position (which moves past them). ``skip``: the
        partitions finished, or that brought records, in this poll."""
        out = []
        for tp, (_, end) in self._bounds.items():
            if tp in skip or self._next.get(tp, end) >= end:
                continue
            try:
                position = consumer.position(tp, timeout_ms=100)
            except KafkaError:
                continue
            if position is not None and position > self._next[tp]:
                self._next[tp] = min(position, end)
                if position >= end:
                    out.append(tp)
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
        if self.stopped is not None:
            return True
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
        return self.stopped

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


def _done(tracker: OffsetTracker, offset: int) -> Any:
    return lambda: tracker.done(offset)

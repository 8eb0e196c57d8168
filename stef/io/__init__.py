"""Sources and sinks at the edges of the service: Kafka, JSONL files, stdin/stdout, dead letters.

A source hands out :class:`Envelope` objects (the raw bytes of one record and where they came
from); the service acknowledges each one once its result or dead letter is acknowledged by a
sink, and the source commits only acknowledged positions (at-least-once delivery, SPEC §4).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

# A sink calls this once per write: None when the write is acknowledged, else the error.
AckCallback = Callable[[BaseException | None], None]


@dataclass(frozen=True)
class Oversized:
    """A record too long to be held: its envelope's payload is only its first bytes.

    Attributes:
        size: the whole record's length in bytes.
        sha256: hex sha256 of the whole record.
        limit: the length the source held the record to (None: ``limits.max_record_bytes``;
            a trace export's lines and rows are held to 16 MiB).
    """

    size: int
    sha256: str
    limit: int | None = None


@dataclass(eq=False)
class Envelope:
    """One raw record and its position in the source.

    Attributes:
        payload: the record's bytes as they arrived.
        position: ``{"topic", "partition", "offset"}`` or ``{"file", "line"}`` (dead letters
            carry it as ``source``).
        key: the Kafka message key, when there was one.
        on_done: called by the service when the record is fully handled (result or dead letter
            acknowledged); the source then may commit past it.
        claim: called by a worker before it judges the record; False means the record's
            partition was revoked before its turn: it is skipped (neither judged nor written,
            never committed) and its next owner reads it again.
        oversized: set when the source did not hold the whole record (a line longer than
            the record size limit): ``payload`` is its prefix; it is dead-lettered as too large.
        invalid: set when the source already knows the record cannot be judged (an OTLP
            message that does not decode, a trace without SQL): ``(reason, error)`` of its
            dead letter.
    """

    payload: bytes
    position: dict[str, Any]
    key: bytes | None = None
    on_done: Callable[[], None] = field(default=lambda: None, repr=False)
    claim: Callable[[], bool] = field(default=lambda: True, repr=False)
    oversized: Oversized | None = None
    invalid: tuple[str, str] | None = None


class Source(Protocol):
    """Where records come from. Only the service's main thread calls these methods."""

    def start(self) -> None:
        """Connect (raises :class:`~stef.errors.ConfigError` when the source cannot be reached)."""
        ...

    def poll(self, max_records: int, timeout_s: float) -> list[Envelope]:
        """Up to ``max_records`` new records, waiting at most ``timeout_s`` for the first."""
        ...

    def pause(self) -> None:
        """Stop fetching (in-flight work is full); :meth:`poll` keeps the membership alive."""
        ...

    def resume(self) -> None:
        """Fetch again after :meth:`pause`."""
        ...

    @property
    def exhausted(self) -> bool:
        """True when the source has no more records, ever (a file read to its end, no follow)."""
        ...

    def commit(self) -> None:
        """Commit every acknowledged position (in order; a gap stops the commit).

        Raises:
            CommitError: the commit failed; the next one retries it.
        """
        ...

    def lag(self) -> dict[tuple[str, int], int]:
        """Records behind the end, per (topic, partition); empty for sources without partitions."""
        ...

    def uncommitted(self) -> int:
        """Records done (result or dead letter acknowledged) whose position is not committed."""
        ...

    def close(self) -> None:
        """Commit what is acknowledged and release the connection."""
        ...

    def unreachable(self) -> str | None:
        """None while the source can be reached, else why not (``/readyz`` reports it)."""
        ...


class Sink(Protocol):
    """Where results or dead letters go. Thread-safe: workers write concurrently."""

    def send(self, key: bytes | None, value: bytes, on_ack: AckCallback) -> None:
        """Write one record; ``on_ack`` is called once, when it is acknowledged or has failed."""
        ...

    def flush(self, timeout_s: float) -> None:
        """Push out everything buffered."""
        ...

    def close(self) -> None:
        """Flush and release."""
        ...

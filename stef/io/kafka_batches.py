"""Kafka record batches that cannot be read, told apart so the source can move past them.

kafka-python reads a fetched batch lazily, record by record. Two things in it could stop a
replica for good:

- A batch it cannot read (data that does not decompress, a record whose header key is not UTF-8,
  a record of the wrong length) raises ``CorruptRecordError`` or the codec's own exception from
  ``poll``. Its record iterator is then dead, and the next ``poll`` spins on it without end (at
  100% CPU, deaf to SIGTERM) unless the partition is sought past it; a codec's exception is not a
  ``KafkaError`` at all and ended the run.
- Decompression is unbounded: a 131 KB zstd batch of one 4 GiB record took 4.2 GiB of memory.

:func:`install` wraps two methods of kafka-python's v2 batch (``DefaultRecordBatch``, written by
every client since Kafka 0.11) so that either raises :class:`UnreadableBatch`, which says where
the batch ends, and decompression stops past :data:`MAX_BATCH_BYTES`; and wraps the fetcher's
``PartitionRecords.take`` so the error names its partition and the first offset not read. The
source seeks past those offsets and turns them into dead letters (:func:`skip_unreadable`, for
:mod:`stef.io.kafka` and :mod:`stef.io.kafka_range` alike).
"""

from __future__ import annotations

import io
import struct
import zlib
from collections.abc import Callable
from typing import Any

import structlog
from kafka.consumer.fetcher import Fetcher  # type: ignore[import-untyped]
from kafka.errors import CorruptRecordError  # type: ignore[import-untyped]
from kafka.record.default_records import DefaultRecordBatch  # type: ignore[import-untyped]

from stef.io import Envelope
from stef.io.offsets import OffsetTracker

log = structlog.get_logger(__name__)

# The most a batch may decompress to. Kafka caps a batch's compressed size (1 MiB by default);
# a text batch a hundred times smaller than this is already large.
MAX_BATCH_BYTES = 64 * 1024 * 1024


class UnreadableBatch(CorruptRecordError):  # type: ignore[misc]  # untyped base
    """A batch, or the rest of one, that cannot be read.

    Attributes:
        end: the offset after the batch's last record (None when unknown).
        reason: the dead-letter reason: ``too_large`` past :data:`MAX_BATCH_BYTES`, else
            ``unreadable``.
        partition: the topic partition, once known (set by the fetcher's wrapper).
        first: the first offset not read (likewise).
    """

    def __init__(self, detail: str, end: int | None = None, reason: str = "unreadable") -> None:
        super().__init__(detail)
        self.detail = detail
        self.end = end
        self.reason = reason
        self.partition: Any = None
        self.first: int | None = None

    def end_from(self, first: int) -> int:
        """The offset after the batch's last record; the one after ``first`` when unknown."""
        return self.end if self.end is not None else first + 1


class _TooLarge(Exception):
    pass


# Decompressed a piece at a time: a buffer of the whole limit, asked for at once, costs more
# than the decompression of a usual batch.
_PIECE = 1024 * 1024


def _bounded(stream: Any, limit: int) -> bytes:
    """Read a decompressing stream to its end, or raise :class:`_TooLarge` past ``limit``."""
    out = bytearray()
    while piece := stream.read(_PIECE):
        out += piece
        if len(out) > limit:
            raise _TooLarge
    return bytes(out)


def _decompress(codec: int, data: memoryview, limit: int) -> bytes:
    """A batch's records, decompressed within ``limit`` bytes."""
    if codec == DefaultRecordBatch.CODEC_GZIP:
        return _gunzip(data, limit)
    if codec == DefaultRecordBatch.CODEC_ZSTD:
        import zstandard  # noqa: PLC0415 (only a zstd topic needs it)

        reader = zstandard.ZstdDecompressor().stream_reader(
            io.BytesIO(data.tobytes()), read_across_frames=True
        )
        with reader:
            return _bounded(reader, limit)
    if codec == DefaultRecordBatch.CODEC_LZ4:
        import lz4.frame  # type: ignore[import-untyped]  # noqa: PLC0415 (lz4 topics only)

        decompressor = lz4.frame.LZ4FrameDecompressor()
        out = bytearray(decompressor.decompress(data.tobytes(), max_length=_PIECE))
        while not decompressor.eof and not decompressor.needs_input:
            if len(out) > limit:
                raise _TooLarge
            out += decompressor.decompress(b"", max_length=_PIECE)
        if len(out) > limit:
            raise _TooLarge
        if not decompressor.eof:
            raise ValueError("lz4 frame ends early")
        return bytes(out)
    return _snappy(data.tobytes(), limit)


def _gunzip(data: memoryview, limit: int) -> bytes:
    """Gzip, every member (as ``gzip.decompress`` reads it), a piece at a time."""
    out = bytearray()
    rest = bytes(data)
    while rest:
        member = zlib.decompressobj(16 + zlib.MAX_WBITS)
        while rest:
            out += member.decompress(rest, _PIECE)
            if len(out) > limit:
                raise _TooLarge
            rest = member.unconsumed_tail
        if not member.eof:
            raise ValueError("gzip stream ends early")
        rest = member.unused_data.lstrip(b"\0")  # zeros after a member: padding, as gzip reads it
    return bytes(out)


def _snappy(data: bytes, limit: int) -> bytes:
    """Snappy, raw or in xerial's blocks (Java clients), each block's length read from its
    header before it is decompressed (kafka-python's own reader copies the rest of the stream
    at every block: quadratic, 20 s of CPU and counting for a 48 MB batch)."""
    import snappy  # type: ignore[import-untyped]  # noqa: PLC0415 (snappy topics only)
    from kafka.codec import _detect_xerial_stream  # type: ignore[import-untyped]  # noqa: PLC0415

    if not _detect_xerial_stream(data):
        if _snappy_length(data) > limit:
            raise _TooLarge
        return bytes(snappy.decompress(data))
    out = bytearray()
    view = memoryview(data)
    cursor = 16
    while cursor < len(data):
        (size,) = struct.unpack_from("!i", data, cursor)
        cursor += 4
        if size < 0 or cursor + size > len(data):
            raise ValueError(f"xerial snappy block of {size} bytes past the stream's end")
        block = bytes(view[cursor : cursor + size])
        cursor += size
        if len(out) + _snappy_length(block) > limit:
            raise _TooLarge
        out += snappy.decompress(block)
    return bytes(out)


def _snappy_length(block: bytes) -> int:
    """The uncompressed length a raw snappy block declares (a varint at its start)."""
    length = 0
    for i, byte in enumerate(block[:5]):
        length |= (byte & 0x7F) << (7 * i)
        if byte < 0x80:
            return length
    raise ValueError("snappy block without a length")


def _maybe_uncompress(self: Any) -> None:
    if self._decompressed:
        return
    codec = self.compression_type
    if codec != self.CODEC_NONE:
        self._assert_has_codec(codec)
        try:
            uncompressed = _decompress(
                codec, memoryview(self._buffer)[self._pos :], MAX_BATCH_BYTES
            )
        except _TooLarge:
            raise UnreadableBatch(
                f"record batch at offset {self.base_offset} decompresses past "
                f"{MAX_BATCH_BYTES} bytes",
                self.next_offset,
                "too_large",
            ) from None
        except Exception as exc:  # any codec's error: the batch cannot be read
            raise UnreadableBatch(
                f"record batch at offset {self.base_offset} does not decompress: "
                f"{type(exc).__name__}: {exc}",
                self.next_offset,
            ) from None
        self._buffer = bytearray(uncompressed)
        self._pos = 0
    self._decompressed = True


_next_record = DefaultRecordBatch.__next__


def _next(self: Any) -> Any:
    try:
        return _next_record(self)
    except UnreadableBatch:
        raise
    except CorruptRecordError as exc:
        raise UnreadableBatch(
            f"record batch at offset {self.base_offset}: {exc}", self.next_offset
        ) from None


_take = Fetcher.PartitionRecords.take


def _take_naming(self: Any, n: Any = None) -> Any:
    if getattr(self, "_stef_raised", False):
        # Its iterator is dead: it would give nothing for ever, and the fetcher would loop on
        # it (a partition paused meanwhile loses the error kafka-python kept for the next
        # poll). Drained, the partition is fetched again from where reading stopped, and the
        # same error comes back.
        self.drain()
        return []
    try:
        return _take(self, n)
    except CorruptRecordError as exc:
        self._stef_raised = True
        if not isinstance(exc, UnreadableBatch):  # a failed CRC check: where it ends is unknown
            exc = UnreadableBatch(str(exc))
        exc.partition = self.topic_partition
        # A fetch from the middle of a batch reads (and drops) the records before its offset,
        # moving next_fetch_offset back there: the first offset not read is the later one.
        exc.first = max(self.next_fetch_offset, self.fetch_offset)
        raise exc from None


def install() -> None:
    """Wrap kafka-python's batch reading (idempotent; kafka-python is pinned by the lock)."""
    if DefaultRecordBatch._maybe_uncompress is _maybe_uncompress:
        return
    DefaultRecordBatch._maybe_uncompress = _maybe_uncompress
    DefaultRecordBatch.__next__ = _next
    DefaultRecordBatch.next = _next
    Fetcher.PartitionRecords.take = _take_naming


def letters(
    exc: UnreadableBatch, first: int, stop: int, tracker: OffsetTracker, *, claims: bool
) -> list[Envelope]:
    """One dead letter for each offset in ``[first, stop)`` of an unreadable batch (an empty
    payload: the record was not read), each tracked as a record of its partition. ``claims``:
    the letters are claimed like the partition's records (a group's source)."""
    tp = exc.partition
    end = exc.end_from(first)
    detail = (
        f"Kafka record batch of {tp.topic}[{tp.partition}] cannot be read from offset "
        f"{first} to {end - 1}: {exc.detail}"
    )
    log.warning(
        "source_batch_unreadable",
        topic=tp.topic,
        partition=tp.partition,
        first_offset=first,
        end_offset=end,
        letters=stop - first,
        reason=exc.reason,
        error=exc.detail[:300],
    )
    out = []
    for offset in range(first, stop):
        tracker.add(offset)
        out.append(
            Envelope(
                b"",
                {"topic": tp.topic, "partition": tp.partition, "offset": offset},
                None,
                _tracked(tracker.done, offset),
                _tracked(tracker.claim, offset) if claims else (lambda: True),
                invalid=(exc.reason, detail),
            )
        )
    return out


def _tracked(call: Any, offset: int) -> Any:
    return lambda: call(offset)


def stop_of(exc: UnreadableBatch, first: int, max_records: int, bound: int | None = None) -> int:
    """Where the letters of one poll end: the batch's end (the next offset when unknown), at
    most ``max_records`` on (the rest fails again at the next poll and is reached there), and
    not past ``bound``. No letter when the error came after the batch's last record (bytes
    left over after it): every record of it was read."""
    end = exc.end_from(first)
    stop = max(first, min(end, first + max(1, max_records)))
    return stop if bound is None else max(first, min(stop, bound))


def skip_unreadable(
    exc: UnreadableBatch,
    first: int,
    max_records: int,
    seek: Callable[[int], OffsetTracker | None],
    *,
    claims: bool,
    bound: int | None = None,
) -> list[Envelope]:
    """Dead letters for the offsets of a batch that cannot be read from ``first`` (at most
    ``max_records``, not past ``bound``: :func:`stop_of`), once ``seek`` has moved the partition
    past them (kafka-python cannot read on past a broken record). ``seek(stop)`` returns the
    partition's tracker, or None when the partition could not be moved (revoked meanwhile: no
    letter, its next owner reads the batch). ``claims`` as for :func:`letters`."""
    stop = stop_of(exc, first, max_records, bound)
    tracker = seek(stop)
    if tracker is None:
        return []
    return letters(exc, first, stop, tracker, claims=claims)

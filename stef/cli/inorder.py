"""``stef replay``'s messages about records in input order: workers finish records in any order,
so each message waits until every record read before its own has finished. A source that does not
say its order (a trace file's, whose records are traces assembled from its lines) has each
message said when its record finishes."""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable, Sequence

from stef.io import Envelope
from stef.io.jsonl import FileSource


class InOrder:
    """Messages released in the order the records were read (thread-safe).

    Args:
        emit: prints one message (called under the lock, so messages never interleave).
    """

    def __init__(self, emit: Callable[[str], None]) -> None:
        self._emit = emit
        self._lock = threading.Lock()
        self._read: deque[int] = deque()
        self._done: dict[int, str | None] = {}
        self._ordered = False

    def read(self, envelopes: Sequence[Envelope]) -> None:
        """Records handed out by the source, in its order."""
        with self._lock:
            self._ordered = True
            self._read.extend(id(e) for e in envelopes)

    def finished(self, envelope: Envelope, message: str | None) -> None:
        """A record is done, with its message or None; releases what is now in order."""
        with self._lock:
            if not self._ordered:
                # No order was said: nothing to wait for. Kept for a read that never came, the
                # message went unsaid, and an entry of every record of the file stayed in memory.
                if message is not None:
                    self._emit(message)
                return
            self._done[id(envelope)] = message
            while self._read and self._read[0] in self._done:
                said = self._done.pop(self._read.popleft())
                if said is not None:
                    self._emit(said)

    def close(self) -> None:
        """Release what is left (records that never finished hold nothing back at the end)."""
        with self._lock:
            for key in self._read:
                said = self._done.pop(key, None)
                if said is not None:
                    self._emit(said)
            self._read.clear()


class OrderedFileSource(FileSource):
    """A :class:`FileSource` that tells an :class:`InOrder` the order of the records it reads."""

    def __init__(self, path: str, order: InOrder, *, max_line_bytes: int) -> None:
        super().__init__(path, max_line_bytes=max_line_bytes)
        self.order = order

    def poll(self, max_records: int, timeout_s: float) -> list[Envelope]:
        envelopes = super().poll(max_records, timeout_s)
        self.order.read(envelopes)
        return envelopes

"""Per-partition commit bookkeeping: records finish out of order, commits advance in order."""

from __future__ import annotations

import threading
from collections import deque


class OffsetTracker:
    """Offsets of one partition handed out, and which of them are done.

    Only a contiguous run of done offsets from the oldest pending one may be committed: a record
    still in flight (or failed) holds the commit back, so a restart redelivers it.
    Thread-safe: workers call :meth:`done`, the main thread everything else.
    """

    def __init__(self) -> None:
        self._lock = threading.Condition()
        self._pending: deque[int] = deque()
        self._done: set[int] = set()
        self._committable: int | None = None
        self._committed: int | None = None
        # Records done in order (counted, not listed), and how many of them the last offered
        # commit covered: done-but-uncommitted counts records, not offsets (Kafka leaves gaps).
        self._settled = 0
        self._offered: tuple[int, int] | None = None
        self._settled_committed = 0
        # Offsets a worker has started judging and not finished; after revoke() no new one starts.
        self._started: set[int] = set()
        self.revoking = False
        self.closed = False

    def add(self, offset: int) -> None:
        with self._lock:
            if self._pending and offset <= self._pending[-1]:
                # A rewind (seek, reset): forget what was pending; it will be seen again.
                self._pending.clear()
                self._done.clear()
            self._pending.append(offset)

    def claim(self, offset: int) -> bool:
        """A worker is about to judge ``offset``: False once the partition is being revoked (the
        record is left to the partition's next owner, which reads it again from the commit)."""
        with self._lock:
            if self.revoking or self.closed:
                return False
            self._started.add(offset)
            return True

    def done(self, offset: int) -> None:
        with self._lock:
            self._started.discard(offset)
            if not self._started:
                self._lock.notify_all()
            if self.closed:
                return
            self._done.add(offset)
            while self._pending and self._pending[0] in self._done:
                head = self._pending.popleft()
                self._done.discard(head)
                self._committable = head + 1
                self._settled += 1
            if not self._pending:
                self._lock.notify_all()

    @property
    def in_flight(self) -> int:
        with self._lock:
            return len(self._pending)

    def committable(self) -> int | None:
        """The next offset to commit if it moved since :meth:`mark_committed`, else None."""
        with self._lock:
            if self._committable is None or self._committable == self._committed:
                return None
            self._offered = (self._committable, self._settled)
            return self._committable

    @property
    def position(self) -> int | None:
        """The offset after the last record done in order (what a commit now would store)."""
        with self._lock:
            return self._committable

    @property
    def low_water(self) -> int | None:
        """The oldest offset not yet done (in flight), else :attr:`position`."""
        with self._lock:
            return self._pending[0] if self._pending else self._committable

    def advance(self, offset: int) -> None:
        """The consumer's next record is at ``offset`` (its position): when every record handed
        out is done, the offsets before it that never came as records (transaction markers,
        aborted or compacted records) are done too, and the commit may move past them, as the
        Java consumer's position does. A position behind the committable offset moves nothing."""
        with self._lock:
            if self._pending or self.closed:
                return
            if self._committable is None or offset > self._committable:
                self._committable = offset

    def mark_committed(self, offset: int) -> None:
        with self._lock:
            self._committed = offset
            if self._offered is not None and self._offered[0] == offset:
                self._settled_committed = self._offered[1]

    @property
    def uncommitted(self) -> int:
        """Records done (in order or not) that no commit covers yet."""
        with self._lock:
            if self.closed:
                return 0
            return self._settled - self._settled_committed + len(self._done)

    def wait_idle(self, timeout_s: float) -> bool:
        """Wait until nothing is in flight; False when the timeout came first."""
        with self._lock:
            return self._lock.wait_for(lambda: not self._pending, timeout=timeout_s)

    def revoke(self) -> None:
        """The partition is being revoked: records not started yet will not be (see claim)."""
        with self._lock:
            self.revoking = True

    @property
    def started(self) -> int:
        """Records being judged now."""
        with self._lock:
            return len(self._started)

    def wait_started(self, timeout_s: float) -> bool:
        """Wait until no record is being judged; False when the timeout came first."""
        with self._lock:
            return self._lock.wait_for(lambda: not self._started, timeout=timeout_s)

    def close(self) -> int:
        """Abandon what is in flight: late completions no longer move the commit.

        Returns how many records were started or done without the commit covering them: their
        results are (or may yet be) written, and the partition's next owner judges them again
        from the commit. A record done after an older one still in flight is among them."""
        with self._lock:
            repeated = 0 if self.closed else len(self._started) + len(self._done)
            self.closed = True
            self._lock.notify_all()
            return repeated

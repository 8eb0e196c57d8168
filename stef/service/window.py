"""The in-flight window of the run loop: records fetched and not yet settled, bounded in records
and in bytes. A record takes a slot when it is fetched and gives it back once, whatever settles
it (an acknowledgement, a handler that raised, a skipped record)."""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence

from stef.io import Envelope


class InFlightWindow:
    """Slots for records between the fetch and their acknowledgement. Thread-safe.

    Args:
        max_records: the records bound; the loop stops fetching at it.
        max_bytes: the bound on their raw payloads and Kafka keys (soft: one record always
            fits).
    """

    def __init__(self, max_records: int, max_bytes: int) -> None:
        self.max_records = max_records
        self.max_bytes = max_bytes
        self._count = 0
        self._bytes = 0
        # Releasing is idempotent: a record holds a slot while it is in this set.
        self._holding: set[Envelope] = set()
        # The recent mean payload size: a fetch asks for no more records than fit the bytes
        # bound (None until the first fetch, which asks for one record).
        self._mean_bytes: float | None = None
        self._last_settled = time.monotonic()
        self._cv = threading.Condition()

    @property
    def count(self) -> int:
        with self._cv:
            return self._count

    def full(self) -> bool:
        with self._cv:
            return self._full()

    def _full(self) -> bool:
        return self._count >= self.max_records or self._bytes >= self.max_bytes

    def room(self) -> int:
        """How many records the next fetch may bring: within the records bound, and within the
        bytes bound at the recent mean size (one record at least: the bytes bound is soft)."""
        with self._cv:
            if self._mean_bytes is None:
                return 1
            by_bytes = int((self.max_bytes - self._bytes) / self._mean_bytes)
            return max(1, min(self.max_records - self._count, by_bytes))

    def admit(self, envelopes: Sequence[Envelope]) -> None:
        """The fetched records take their slots."""
        if not envelopes:
            return
        size = sum(_size(e) for e in envelopes)
        # A byte at least: empty messages (a tombstone, an empty value) would make the mean 0
        # and room() divide by it.
        mean = max(1.0, size / len(envelopes))
        with self._cv:
            if self._count == 0:
                # Waiting for an acknowledgement starts now, not at the last one of long ago.
                self._last_settled = time.monotonic()
            self._holding.update(envelopes)
            self._count += len(envelopes)
            self._bytes += size
            old = self._mean_bytes
            self._mean_bytes = mean if old is None else 0.8 * old + 0.2 * mean

    def release(self, envelope: Envelope) -> bool:
        """The record gives its slot back.

        Returns:
            False when it had already (nothing changes).
        """
        with self._cv:
            if envelope not in self._holding:
                return False
            self._holding.discard(envelope)
            self._count -= 1
            self._bytes -= _size(envelope)
            self._last_settled = time.monotonic()
            self._cv.notify_all()
        return True

    def wait_for_room(self, timeout_s: float) -> None:
        with self._cv:
            self._cv.wait_for(lambda: not self._full(), timeout=timeout_s)

    def wait_for_empty(self, timeout_s: float) -> bool:
        """Wait until no record holds a slot (or a release, or the timeout); True when empty."""
        with self._cv:
            if self._count:
                self._cv.wait(timeout=timeout_s)
            return self._count == 0

    def unsettled_for(self) -> float:
        """Seconds since a record last settled while records hold slots (0 when none does)."""
        with self._cv:
            if self._count == 0:
                return 0.0
            return time.monotonic() - self._last_settled

    @property
    def last_settled(self) -> float:
        with self._cv:
            return self._last_settled


def _size(envelope: Envelope) -> int:
    """The bytes a record holds while in flight: its payload and its key (a Kafka key of 1 MB
    beside a small payload was not counted: 256 such records held 256 MB in a 4 MiB window)."""
    return len(envelope.payload) + (len(envelope.key) if envelope.key is not None else 0)

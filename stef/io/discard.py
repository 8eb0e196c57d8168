"""A sink that keeps nothing: ``stef replay`` without ``--output`` still runs the whole record path
and counts every outcome, it just writes no file."""

from __future__ import annotations

from stef.io import AckCallback


class DiscardSink:
    """Acknowledges every write at once and keeps nothing."""

    def send(self, key: bytes | None, value: bytes, on_ack: AckCallback) -> None:
        on_ack(None)

    def flush(self, timeout_s: float) -> None:
        """Nothing is buffered."""

    def close(self) -> None:
        """Nothing is held."""

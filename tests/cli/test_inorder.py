"""``stef replay``'s messages in input order (:class:`stef.cli.inorder.InOrder`)."""

from __future__ import annotations

import errno
import io

from stef.cli.inorder import InOrder
from stef.cli.progress import Progress
from stef.io import Envelope


def _envelopes(n: int) -> list[Envelope]:
    return [Envelope(b"{}", {"line": i + 1}) for i in range(n)]


def test_a_message_waits_for_the_records_read_before_it() -> None:
    said: list[str] = []
    order = InOrder(said.append)
    first, second, third = _envelopes(3)
    order.read([first, second, third])
    order.finished(third, "third")
    order.finished(second, None)
    assert said == []
    order.finished(first, "first")
    assert said == ["first", "third"]


def test_without_an_order_each_message_is_said_when_its_record_finishes() -> None:
    """A trace file's source says no order: its messages were held for ever, never said, and
    every record's entry was kept."""
    said: list[str] = []
    order = InOrder(said.append)
    first, second = _envelopes(2)
    order.finished(second, "second")
    order.finished(first, None)
    assert said == ["second"]
    assert not order._done  # nothing kept


class _Full(io.StringIO):
    """A stderr like ``2>/dev/full``: every write fails."""

    def write(self, text: str) -> int:
        raise OSError(errno.ENOSPC, "No space left on device")


def test_a_failing_stderr_loses_the_messages_not_the_run() -> None:
    """Messages held for earlier records were said at close, after the run, where a full stderr
    raised out of ``stef replay``: exit 1 for a run that wrote every record."""
    order = InOrder(Progress(None, enabled=False, stream=_Full()).message)
    first, second, third = _envelopes(3)
    order.read([first, second, third])
    order.finished(third, "third")
    order.finished(second, "second")
    order.finished(first, "first")
    order.close()
    assert not order._done and not order._read

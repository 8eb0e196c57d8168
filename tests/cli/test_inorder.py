"""``stef replay``'s messages in input order (:class:`stef.cli.inorder.InOrder`)."""

from __future__ import annotations

from stef.cli.inorder import InOrder
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

"""The ack policy alone, without a run loop: whatever a callback raises, a record's in-flight
slot is released exactly once, and what cannot be settled stops the service."""

from __future__ import annotations

from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry
from structlog.testing import capture_logs

from stef.errors import SinkError
from stef.io import AckCallback, Envelope
from stef.io.jsonl import JsonlSink
from stef.metrics import Metrics
from stef.pipeline import Processed
from stef.service.acks import AckPolicy, send
from stef.service.window import InFlightWindow


class _Setup:
    def __init__(self, tmp_path: Path, observer: object = None) -> None:
        self.registry = CollectorRegistry()
        self.metrics = Metrics(self.registry)
        self.window = InFlightWindow(max_records=4, max_bytes=1 << 20)
        self.fatal: list[BaseException] = []
        self.letters = JsonlSink(str(tmp_path / "dead.jsonl"))
        self.acks = AckPolicy(
            self.window,
            self.letters,
            self.metrics,
            observer=observer,  # type: ignore[arg-type]
            on_fatal=self.fatal.append,
        )
        self.done: list[int] = []

    def envelope(self, line: int) -> Envelope:
        e = Envelope(b'{"q": 1}', {"file": "log", "line": line})
        e.on_done = lambda: self.done.append(line)
        self.window.admit([e])
        self.metrics.service.inflight.inc()
        return e

    def value(self, name: str, **labels: str) -> float:
        return self.registry.get_sample_value(name, labels) or 0.0


def _processed() -> Processed:
    return Processed(value=b"{}", key=None, reason="not_json")


def test_an_observer_that_raises_is_counted_and_the_slot_released(tmp_path: Path) -> None:
    def observer(envelope: Envelope, processed: Processed) -> None:
        raise OSError(28, "No space left on device")

    s = _Setup(tmp_path, observer)
    envelopes = [s.envelope(n) for n in range(4)]
    assert s.window.full()
    for e in envelopes:
        s.acks.callback(e, _processed())(None)
    assert s.window.count == 0 and not s.window.full()
    assert s.done == [0, 1, 2, 3]
    assert s.acks.counts["dead_letters"] == 4
    assert s.value("stef_callback_errors_total", callback="observer") == 4
    assert s.fatal == []
    s.letters.close()


def test_a_second_acknowledgement_changes_nothing(tmp_path: Path) -> None:
    s = _Setup(tmp_path)
    e = s.envelope(1)
    on_ack = s.acks.callback(e, _processed())
    on_ack(None)
    on_ack(SinkError("late"))
    assert s.done == [1] and s.fatal == [] and s.window.count == 0
    assert not s.acks.release(e)  # released once only
    s.letters.close()


def test_a_refused_message_is_replaced_and_an_outage_is_fatal(tmp_path: Path) -> None:
    s = _Setup(tmp_path)
    refused, lost = s.envelope(1), s.envelope(2)
    s.acks.callback(refused, _processed())(SinkError("too large", rejected=True))
    assert s.done == [1]  # its minimal dead letter was written in its place
    assert s.value("stef_dead_letters_total", reason="sink_rejected") == 1
    s.acks.callback(lost, _processed())(SinkError("disk full"))
    assert s.done == [1] and len(s.fatal) == 1 and s.window.count == 0
    s.letters.close()


def test_one_outage_is_one_error_line_however_many_records_were_in_flight(
    tmp_path: Path,
) -> None:
    # One closed pipe under `stef run --results - | head` wrote an error line for each of the
    # ~250 records in flight; each is still fatal, and still in the log at debug level.
    s = _Setup(tmp_path)
    envelopes = [s.envelope(n) for n in range(4)]
    with capture_logs() as logs:
        for e in envelopes:
            s.acks.callback(e, _processed())(SinkError("Broken pipe"))
    failed = [entry for entry in logs if entry["event"] == "sink_failed"]
    assert [entry["log_level"] for entry in failed] == ["error", "debug", "debug", "debug"]
    assert [entry["line"] for entry in failed] == [0, 1, 2, 3]
    assert len(s.fatal) == 4 and s.window.count == 0 and s.done == []
    s.letters.close()


def test_a_handler_that_raised_releases_the_slot_and_stops_the_service(tmp_path: Path) -> None:
    s = _Setup(tmp_path)
    e = s.envelope(1)
    s.acks.unhandled(e, RuntimeError("a bug between judging and writing"))
    assert s.window.count == 0 and s.done == []
    assert len(s.fatal) == 1
    assert s.value("stef_callback_errors_total", callback="worker") == 1
    s.letters.close()


def test_a_sink_that_raises_instead_of_calling_back_acks_once(tmp_path: Path) -> None:
    class Raising:
        def send(self, key: bytes | None, value: bytes, on_ack: AckCallback) -> None:
            raise ValueError("I/O operation on closed file")

    s = _Setup(tmp_path)
    e = s.envelope(1)
    send(Raising(), _processed(), s.acks.callback(e, _processed()))  # type: ignore[arg-type]
    assert s.window.count == 0 and len(s.fatal) == 1
    s.letters.close()


@pytest.mark.parametrize("payload_bytes", [100, 3000])
def test_the_window_bounds_records_and_bytes(payload_bytes: int) -> None:
    window = InFlightWindow(max_records=3, max_bytes=4096)
    envelopes = [Envelope(b"x" * payload_bytes, {"line": n}) for n in range(3)]
    window.admit(envelopes[:1])
    assert window.room() == (2 if payload_bytes == 100 else 1)
    window.admit(envelopes[1:])
    assert window.full()
    assert window.release(envelopes[0]) and not window.release(envelopes[0])
    assert window.count == 2


def test_a_kafka_key_counts_towards_the_bytes_bound() -> None:
    window = InFlightWindow(max_records=256, max_bytes=4096)
    keyed = Envelope(b"{}", {"offset": 0}, key=b"k" * 5000)
    window.admit([keyed])
    assert window.full()
    assert window.release(keyed) and not window.full()


def test_empty_messages_leave_room_for_a_fetch() -> None:
    """Before: a first fetch of one empty message (a tombstone, an empty value) made the mean
    size 0 and room() raised ZeroDivisionError in the main loop (stef run and backfill exited
    1 with a traceback); a long run of empty messages decayed it to an OverflowError."""
    window = InFlightWindow(max_records=256, max_bytes=4096)
    empty = Envelope(b"", {"offset": 0})
    window.admit([empty])
    assert window.room() == 255
    window.release(empty)
    for n in range(5000):
        e = Envelope(b"", {"offset": n})
        window.admit([e])
        window.release(e)
    assert window.room() == 256


def test_the_lifecycle_fails_once_and_stops_once() -> None:
    from stef.service.health import HealthState
    from stef.service.lifecycle import Lifecycle

    health = HealthState()
    life = Lifecycle(health, lambda: 3)
    assert not life.stopped.is_set() and life.stop_at is None
    life.fail(SinkError("disk full"))
    stop_at = life.stop_at
    life.fail(SinkError("a later one"))
    assert life.stopped.is_set() and life.stop_at == stop_at
    assert str(life.fatal) == "disk full"
    assert health.healthy() == (False, "failed: disk full")

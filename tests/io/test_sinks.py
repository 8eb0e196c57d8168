"""Sinks at their edges: the discard sink acknowledges at once; a JSONL sink on a full disk
acknowledges with a :class:`SinkError` and leaves no half-written line in its file."""

from __future__ import annotations

import errno
import io
import json
from pathlib import Path
from typing import Any

import pytest

from stef.errors import SinkError
from stef.io import Sink
from stef.io.discard import DiscardSink
from stef.io.jsonl import JsonlSink

Acks = list[BaseException | None]


# ---------------------------------------------------------------------------------- discard


def test_discard_acknowledges_every_write_before_send_returns() -> None:
    sink: Sink = DiscardSink()
    acks: Acks = []
    for i in range(3):
        sink.send(b"k", b'{"i": %d}' % i, acks.append)
        assert acks == [None] * (i + 1)  # acknowledged inside send, not later


def test_discard_acknowledges_without_a_key_and_with_any_bytes() -> None:
    sink = DiscardSink()
    acks: Acks = []
    sink.send(None, b"\xff\x00 not json", acks.append)
    sink.send(None, b"", acks.append)
    assert acks == [None, None]


def test_discard_flush_and_close_hold_nothing() -> None:
    sink = DiscardSink()
    acks: Acks = []
    sink.flush(0.0)
    sink.close()
    sink.close()
    # Nothing was held open, so nothing stops a late write from being acknowledged.
    sink.send(None, b"{}", acks.append)
    assert acks == [None]


# ------------------------------------------------------------------------------ a full disk


def test_jsonl_on_dev_full_acknowledges_with_a_sink_error() -> None:
    if not Path("/dev/full").exists():
        pytest.skip("no /dev/full on this system")
    sink = JsonlSink("/dev/full")
    acks: Acks = []
    sink.send(None, b'{"id": "a"}', acks.append)
    sink.send(None, b'{"id": "b"}', acks.append)
    sink.close()  # nothing of a refused line is held back to fail again here
    assert len(acks) == 2
    for ack in acks:
        assert isinstance(ack, SinkError)
        assert ack.rejected is False  # an outage, which stops the service: not one bad message
        assert "/dev/full" in str(ack) and "No space left" in str(ack)


class _PartialThenFull:
    """A file object whose write puts out the first half of the line, then fails as a full disk
    does; tell, truncate, flush and close reach the real file."""

    def __init__(self, stream: Any) -> None:
        self._stream = stream
        self.full = False

    def write(self, data: bytes) -> int:
        if not self.full:
            return int(self._stream.write(data))
        self._stream.write(data[: len(data) // 2])
        self._stream.flush()
        raise OSError(errno.ENOSPC, "No space left on device")

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


def _lines(path: Path) -> list[Any]:
    data = path.read_bytes()
    assert data == b"" or data.endswith(b"\n"), data
    return [json.loads(line) for line in data.splitlines()]


def test_a_write_cut_by_a_full_disk_leaves_no_half_line(tmp_path: Path) -> None:
    out = tmp_path / "results.jsonl"
    sink = JsonlSink(str(out))
    disk = _PartialThenFull(sink._writable())  # the file is opened at the first line
    sink._stream = disk  # type: ignore[assignment]  # the file object, as the sink holds it
    acks: Acks = []
    sink.send(None, b'{"id": "a"}', acks.append)
    disk.full = True
    sink.send(None, b'{"id": "b", "padding": "' + b"x" * 200 + b'"}', acks.append)
    assert acks[0] is None and isinstance(acks[1], SinkError)
    assert _lines(out) == [{"id": "a"}]
    # Space comes back and the record is redelivered: its line is written whole, once.
    disk.full = False
    sink.send(None, b'{"id": "b"}', acks.append)
    sink.close()
    assert acks[2] is None
    assert _lines(out) == [{"id": "a"}, {"id": "b"}]


class _FillingFile(io.FileIO):
    """A real file with room for ``room`` more bytes: a short write, then ENOSPC, as the system
    call behaves on a disk that fills up mid-line."""

    room = 1 << 30

    def write(self, data: Any) -> int:
        if self.room <= 0:
            raise OSError(errno.ENOSPC, "No space left on device")
        written = super().write(bytes(data)[: self.room])
        assert written is not None
        self.room -= written
        return written


def test_a_short_write_then_a_full_disk_leaves_no_half_line(tmp_path: Path) -> None:
    # The sink writes unbuffered, so nothing of a refused line waits in a buffer for later.
    out = tmp_path / "results.jsonl"
    sink = JsonlSink(str(out))
    sink._writable().close()  # the file is opened at the first line
    raw = _FillingFile(str(out), "ab")
    sink._stream = raw
    acks: Acks = []
    sink.send(None, b'{"id": "a"}', acks.append)
    raw.room = 5  # the disk fills five bytes into the next line
    sink.send(None, b'{"id": "b"}', acks.append)
    assert acks[0] is None and isinstance(acks[1], SinkError)
    half_line_left = out.read_bytes() != b'{"id": "a"}\n'
    raw.room = 1 << 30  # space comes back; the nacked record is redelivered
    sink.send(None, b'{"id": "b"}', acks.append)
    sink.close()
    assert not half_line_left
    assert _lines(out) == [{"id": "a"}, {"id": "b"}]


def test_a_file_sink_creates_nothing_before_its_first_line(tmp_path: Path) -> None:
    out = tmp_path / "new" / "dead_letters.jsonl"
    sink = JsonlSink(str(out))
    assert not (tmp_path / "new").exists()
    acks: Acks = []
    sink.send(None, b'{"id": "a"}', acks.append)
    sink.close()
    assert acks == [None] and _lines(out) == [{"id": "a"}]
    JsonlSink(str(tmp_path / "unused.jsonl")).close()
    assert not (tmp_path / "unused.jsonl").exists()


def test_a_second_cut_write_in_a_row_leaves_no_half_line(tmp_path: Path) -> None:
    """After a first cut, an append-mode file's position is past its end: the next cut must go
    back to the file's size, not to that position."""
    out = tmp_path / "results.jsonl"
    sink = JsonlSink(str(out))
    sink._writable().close()
    raw = _FillingFile(str(out), "ab")
    sink._stream = raw
    acks: Acks = []
    sink.send(None, b'{"id": "a"}', acks.append)
    for _ in range(2):
        raw.room = 5  # a little space comes back, then the disk is full again mid-line
        sink.send(None, b'{"id": "b"}', acks.append)
    assert acks[0] is None and all(isinstance(a, SinkError) for a in acks[1:])
    assert out.read_bytes() == b'{"id": "a"}\n'
    raw.room = 1 << 30
    sink.send(None, b'{"id": "b"}', acks.append)
    sink.close()
    assert _lines(out) == [{"id": "a"}, {"id": "b"}]


def test_a_torn_last_line_is_cut_before_appending(tmp_path: Path) -> None:
    """A line torn by a crash mid-write (no newline) is cut at open, counted and logged; its
    record was never acknowledged, so it is redelivered and written whole after the cut."""
    out = tmp_path / "results.jsonl"
    out.write_bytes(b'{"id": "a"}\n{"id": "b", "sc')
    sink = JsonlSink(str(out))
    sink.open(lambda: False)  # the service opens its sinks once the source is open
    assert sink.torn_lines_cut == 1
    acks: Acks = []
    sink.send(None, b'{"id": "b"}', acks.append)
    sink.close()
    assert acks == [None]
    assert _lines(out) == [{"id": "a"}, {"id": "b"}]
    again = JsonlSink(str(out))
    again.open(lambda: False)
    again.close()
    assert again.torn_lines_cut == 0  # a whole file is left alone


def test_a_file_of_one_torn_line_is_emptied(tmp_path: Path) -> None:
    out = tmp_path / "results.jsonl"
    out.write_bytes(b'{"id": "a", "sco' + b"x" * 100_000)  # longer than one read of the tail
    sink = JsonlSink(str(out))
    sink.open(lambda: False)
    sink.close()
    assert sink.torn_lines_cut == 1 and out.read_bytes() == b""


def test_a_file_sink_removed_with_its_directory_is_written_anew(tmp_path: Path) -> None:
    """Lines written after ``rm -rf`` of the results directory went on into the removed file,
    acknowledged, and the checkpoint moved past them: 1,400 records lost, exit 0. Each line
    after the removal now goes to a new file at the same path."""
    import shutil

    path = tmp_path / "out" / "results.jsonl"
    sink = JsonlSink(str(path))
    acks: list[Exception | None] = []
    sink.send(None, b'{"n": 1}', acks.append)
    shutil.rmtree(path.parent)
    sink.send(None, b'{"n": 2}', acks.append)
    sink.send(None, b'{"n": 3}', acks.append)
    sink.close()
    assert acks == [None, None, None]
    assert path.read_bytes() == b'{"n": 2}\n{"n": 3}\n'


def test_a_fifo_sink_says_it_waits_for_a_reader(tmp_path: Path) -> None:
    """Opening a FIFO blocks until someone reads it: the wait used to be silent (no
    ``service_started``, nothing in the log to say why)."""
    import os
    import threading
    import time

    from structlog.testing import capture_logs

    fifo = tmp_path / "results.fifo"
    os.mkfifo(fifo)
    got: list[bytes] = []

    def read() -> None:
        time.sleep(0.3)  # the sink is waiting by then
        with open(fifo, "rb") as f:
            got.append(f.read())

    reader = threading.Thread(target=read)
    sink = JsonlSink(str(fifo))
    with capture_logs() as logs:
        reader.start()
        sink.send(None, b'{"n": 1}', lambda error: None)
        sink.close()
    reader.join(10)
    assert got == [b'{"n": 1}\n']
    assert [e["event"] for e in logs] == ["sink_waiting_for_reader"]


def test_a_fifo_sink_without_a_reader_stops_waiting_when_asked(tmp_path: Path) -> None:
    """Opening a FIFO without a reader blocked start-up, a SIGTERM recorded but not acted on
    until a reader came: the wait now ends when ``stop()`` says so, and a line waiting for a
    reader fails (unacknowledged) once the sink is closed."""
    import os
    import threading
    import time

    fifo = tmp_path / "results.fifo"
    os.mkfifo(fifo)
    sink = JsonlSink(str(fifo))
    asked = time.monotonic() + 0.3
    sink.open(lambda: time.monotonic() > asked)
    acks: list[Exception | None] = []
    writer = threading.Thread(target=sink.send, args=(None, b'{"n": 1}', acks.append))
    writer.start()
    time.sleep(0.3)
    sink.close()
    writer.join(10)
    assert not writer.is_alive()
    assert len(acks) == 1 and isinstance(acks[0], SinkError)


def test_a_file_sink_reopened_after_a_rename_writes_to_the_path_again(tmp_path: Path) -> None:
    """SIGUSR1 after logrotate renamed the file: the lines went on into the renamed one."""
    path = tmp_path / "results.jsonl"
    sink = JsonlSink(str(path))
    acks: list[Exception | None] = []
    sink.send(None, b'{"n": 1}', acks.append)
    path.rename(tmp_path / "results.jsonl.1")
    sink.reopen()
    sink.send(None, b'{"n": 2}', acks.append)
    sink.close()
    assert acks == [None, None]
    assert (tmp_path / "results.jsonl.1").read_bytes() == b'{"n": 1}\n'
    assert path.read_bytes() == b'{"n": 2}\n'


def test_a_flush_does_not_wait_for_good_on_a_line_waiting_for_a_fifo_reader(
    tmp_path: Path,
) -> None:
    """SIGUSR1 closed a FIFO output, its reader saw the end and went, and the next line waits
    for a new one holding the sink: the shutdown's flush, which comes before the close that
    ends that wait, waited on it for good (``stef run`` alive after SIGTERM and its drain
    timeout). The flush now gives up after its timeout and the close fails the line."""
    import os
    import threading
    import time

    fifo = tmp_path / "results.fifo"
    os.mkfifo(fifo)
    got: list[bytes] = []

    def read_one() -> None:
        with open(fifo, "rb") as f:
            got.append(f.readline())

    reader = threading.Thread(target=read_one)
    reader.start()
    sink = JsonlSink(str(fifo))
    sink.open(lambda: False)
    acks: Acks = []
    sink.send(None, b'{"n": 1}', acks.append)
    sink.reopen()  # SIGUSR1: the reader sees the end of the FIFO and goes
    reader.join(10)
    assert got == [b'{"n": 1}\n']
    writer = threading.Thread(target=sink.send, args=(None, b'{"n": 2}', acks.append))
    writer.start()
    time.sleep(0.3)  # the line waits for a reader by then
    flusher = threading.Thread(target=sink.flush, args=(0.5,))
    asked = time.monotonic()
    flusher.start()
    flusher.join(10)
    flushed = not flusher.is_alive()
    sink.close()  # ends the wait (and the flush, had it waited)
    writer.join(10)
    flusher.join(10)
    assert flushed and time.monotonic() - asked < 10
    assert not writer.is_alive()
    assert acks[0] is None and len(acks) == 2 and isinstance(acks[1], SinkError)

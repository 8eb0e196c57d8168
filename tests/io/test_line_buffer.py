"""Long lines in the followed-file source cost linear time: each byte is searched for a newline
once, and the cost of a line grows with its length, not with its square."""

from __future__ import annotations

import time
from pathlib import Path

from stef.io.jsonl import FileSource, LineBuffer

_CHUNK = 1 << 16


def test_each_byte_is_searched_once_however_many_chunks_a_line_spans() -> None:
    buf = LineBuffer()
    line = b"x" * (8 << 20)  # 8 MiB, 128 chunks
    for i in range(0, len(line), _CHUNK):
        buf.feed(line[i : i + _CHUNK])
        assert buf.line() is None
    buf.feed(b"\nnext\n")
    assert buf.line() == line + b"\n"
    assert buf.line() == b"next\n"
    assert buf.line() is None
    assert buf.scanned == len(line) + len(b"\nnext\n")
    assert len(buf) == 0


def test_lines_split_across_chunks_come_out_whole_and_in_order() -> None:
    buf = LineBuffer()
    data = b"".join(b"%d:" % i + b"y" * (i * 997 % 70_000) + b"\n" for i in range(200))
    out = []
    for i in range(0, len(data), 4093):
        buf.feed(data[i : i + 4093])
        while (line := buf.line()) is not None:
            out.append(line)
    assert b"".join(out) == data and len(out) == 200
    assert buf.scanned == len(data)


def test_a_followed_file_reads_a_long_line_at_the_cost_of_reading_the_file(
    tmp_path: Path,
) -> None:
    """A 48 MiB line costs a small multiple of reading the file in chunks and joining them (a
    linear baseline; measured 1.6x). The old ``bytes +=`` buffer copied the line once per chunk:
    about 70x here, and 20 s for a 64 MB line."""
    size = 48 << 20
    log = tmp_path / "long.jsonl"
    log.write_bytes(b'{"q": "' + b"z" * size + b'"}\n{"q": "short"}\n')

    def baseline() -> float:
        started = time.process_time()
        with log.open("rb") as f:
            chunks = []
            while chunk := f.read(_CHUNK):
                chunks.append(chunk)
        data = b"".join(chunks)
        assert data.find(b"\n") == size + 9
        return time.process_time() - started

    def source() -> float:
        fs = FileSource(str(log), follow=True, poll_interval_s=0.01)
        fs.start()
        started = time.process_time()
        got = fs.poll(2, 5.0)
        spent = time.process_time() - started
        assert [len(e.payload) for e in got] == [size + 9, 14]
        assert fs._buffer.scanned == size + 10 + 15  # each byte searched once
        fs.close()
        return spent

    base = min(baseline() for _ in range(3))
    cost = min(source() for _ in range(3))
    assert cost < 8 * base + 0.05, (cost, base)

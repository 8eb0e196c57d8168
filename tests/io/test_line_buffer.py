"""Long lines in the followed-file source cost linear time: each byte is searched for a newline
once, and the cost of a line grows with its length, not with its square; past the record limit a
line is cut as it streams by (never held whole) and dead-lettered with its length and sha256."""

from __future__ import annotations

import hashlib
import json
import time
from pathlib import Path

from stef.io import Oversized
from stef.io.deadletter import original_payload
from stef.io.jsonl import CutLine, FileSource, LineBuffer
from stef.judges.heuristic.judge import HeuristicJudge
from stef.pipeline import Pipeline
from stef.rules import load_rules

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


def test_a_line_past_the_limit_is_cut_not_held() -> None:
    """Past ``limit`` bytes a line is no longer buffered: its prefix, length and sha256 come
    out (with the bytes it took, so a checkpoint offset stays exact), then the next line."""
    buf = LineBuffer(limit=1000)
    line = b"x" * (5 << 20) + b"\r"  # 5 MiB, ended by CRLF split across two chunks
    held = 0
    for i in range(0, len(line), _CHUNK):
        buf.feed(line[i : i + _CHUNK])
        assert buf.line() is None
        held = max(held, len(buf._buf))
    buf.feed(b"\nnext\n")
    cut = buf.line()
    assert isinstance(cut, CutLine)
    assert cut.prefix == b"x" * 1000
    assert cut.size == 5 << 20  # without its line ending, as the record it stands for
    assert cut.sha256 == hashlib.sha256(b"x" * (5 << 20)).hexdigest()
    assert cut.raw_len == len(line) + 1
    assert buf.line() == b"next\n"
    assert held <= 1000 + _CHUNK  # never more than the limit and one chunk


def test_a_cut_line_at_the_end_of_a_file_and_a_line_just_at_the_limit() -> None:
    buf = LineBuffer(limit=10)
    buf.feed(b"y" * 10 + b"\r")  # 11 bytes with no newline yet: looks too long
    assert buf.line() is None
    buf.feed(b"\nz" * 1 + b"z" * 20)
    assert buf.line() == b"y" * 10 + b"\r\n"  # it was not: the whole line comes out
    assert buf.line() is None
    rest = buf.rest()  # the file ends without a newline
    assert isinstance(rest, CutLine) and (rest.size, rest.raw_len) == (21, 21)


def test_a_file_source_dead_letters_a_cut_line_with_its_length_and_sha256(
    tmp_path: Path,
) -> None:
    log = tmp_path / "big.jsonl"
    big = b'{"id": "big", "q": "' + b"w" * 300_000 + b'"}'
    log.write_bytes(big + b'\n{"id": "small"}\n')
    fs = FileSource(str(log), max_line_bytes=1000)
    fs.start()
    first, second = fs.poll(10, 1.0)
    fs.close()
    assert first.oversized == Oversized(len(big), hashlib.sha256(big).hexdigest(), 1000)
    assert first.payload == big[:1000] and first.position["line"] == 1
    assert second.oversized is None and second.payload == b'{"id": "small"}'
    pipeline = Pipeline(load_rules(None), HeuristicJudge())
    processed = pipeline.process(first.payload, first.position, oversized=first.oversized)
    letter = json.loads(processed.value)
    assert letter["reason"] == "too_large"
    assert letter["payload_bytes"] == len(big)
    assert letter["payload_sha256"] == hashlib.sha256(big).hexdigest()
    assert letter["payload_truncated"] is True
    assert letter["error"].endswith("the limit is 1000")  # the source's, what cut the line
    assert big.startswith(original_payload(letter))


def test_a_poll_returns_by_its_deadline_inside_a_line_of_gigabytes(tmp_path: Path) -> None:
    """A sparse file's run of zero bytes (a copytruncate rotation under a writer that does not
    append) was read to its end inside one poll: SIGTERM waited a minute for a 50 GiB line.
    Now a poll looks at its deadline every few MiB, and the rest of the line is read later."""
    log = tmp_path / "sparse.jsonl"
    with log.open("wb") as f:
        f.write(b'{"id": "a"}\n')
        f.seek(1 << 30)  # 1 GiB of zero bytes, no newline
        f.write(b'\n{"id": "b"}\n')
    fs = FileSource(str(log), max_line_bytes=1000)
    fs.start()
    try:
        assert [e.payload for e in fs.poll(10, 5.0)] == [b'{"id": "a"}']
        assert fs.poll(10, 0.0) == []  # read into the line, and returned
        assert fs._buffer.scanned < 64 << 20
        out = []
        while not fs.exhausted:
            out += fs.poll(10, 0.2)
        assert [e.oversized.size if e.oversized else e.payload for e in out] == [
            (1 << 30) - len(b'{"id": "a"}\n'),
            b'{"id": "b"}',
        ]
    finally:
        fs.close()

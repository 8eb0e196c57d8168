"""The JSONL file source: whole lines only, appended lines, rotation and truncation."""

from __future__ import annotations

import os
import threading
from pathlib import Path

from stef.io.jsonl import FileSource, JsonlSink
from tests.io.conftest import SHORT_WAIT_S


def _lines(source: FileSource, n: int = 100, timeout_s: float = 0.5) -> list[tuple[int, bytes]]:
    return [(e.position["line"], e.payload) for e in source.poll(n, timeout_s)]


def _followed(path: Path) -> FileSource:
    """A started source following ``path``, polling every 10 ms."""
    source = FileSource(str(path), follow=True, poll_interval_s=0.01, rotate_wait_s=SHORT_WAIT_S)
    source.start()
    return source


def test_reads_to_the_end_and_is_exhausted(tmp_path: Path) -> None:
    p = tmp_path / "log.jsonl"
    p.write_bytes(b'{"a": 1}\n\n{"a": 2}\r\n{"a": 3}')  # blank line skipped, last line unterminated
    s = FileSource(str(p))
    s.start()
    assert _lines(s) == [(1, b'{"a": 1}'), (3, b'{"a": 2}'), (4, b'{"a": 3}')]
    assert _lines(s) == []
    assert s.exhausted
    s.close()


def test_a_bom_before_the_first_line_is_passed_over(tmp_path: Path) -> None:
    """Before: replay and run dead-lettered the first record of a log saved with a UTF-8 BOM
    (not_json, "Unexpected UTF-8 BOM"), where stef judge, the references, labels and OTLP
    readers pass it over. A BOM later in the file is the line's own."""
    p = tmp_path / "log.jsonl"
    p.write_bytes(b'\xef\xbb\xbf{"a": 1}\n\xef\xbb\xbf{"a": 2}\n')
    s = FileSource(str(p))
    s.start()
    assert _lines(s) == [(1, b'{"a": 1}'), (2, b'\xef\xbb\xbf{"a": 2}')]
    s.close()


def test_follow_waits_for_the_newline(tmp_path: Path) -> None:
    p = tmp_path / "log.jsonl"
    p.write_bytes(b'{"a": 1}\n{"a": ')
    s = _followed(p)
    assert _lines(s, timeout_s=0.05) == [(1, b'{"a": 1}')]
    assert _lines(s, timeout_s=0.05) == []  # half a line is not a record yet
    assert not s.exhausted
    with p.open("ab") as f:
        f.write(b'2}\n{"a": 3}\n')
    assert _lines(s) == [(2, b'{"a": 2}'), (3, b'{"a": 3}')]
    s.close()


def test_follow_survives_rename_rotation(tmp_path: Path) -> None:
    p = tmp_path / "log.jsonl"
    p.write_bytes(b'{"n": 1}\n')
    s = _followed(p)
    assert _lines(s) == [(1, b'{"n": 1}')]
    with p.open("ab") as f:
        f.write(b'{"n": 2}\n')  # written just before the rotation, not yet read
    os.rename(p, tmp_path / "log.jsonl.1")
    assert _lines(s, timeout_s=0.05) == [(2, b'{"n": 2}')]  # the old file is still read
    p.write_bytes(b'{"n": 3}\n{"n": 4}\n')
    assert _lines(s) == [(1, b'{"n": 3}'), (2, b'{"n": 4}')]
    s.close()


def test_follow_restarts_after_truncation(tmp_path: Path) -> None:
    p = tmp_path / "log.jsonl"
    p.write_bytes(b'{"n": 1}\n{"n": 2}\n')
    s = _followed(p)
    assert len(_lines(s)) == 2
    p.write_bytes(b'{"n": 9}\n')  # copytruncate: same inode, smaller
    assert _lines(s) == [(1, b'{"n": 9}')]
    s.close()


def test_follow_picks_up_a_file_created_later(tmp_path: Path) -> None:
    p = tmp_path / "later.jsonl"
    s = _followed(p)
    assert _lines(s, timeout_s=0.05) == []
    p.write_bytes(b'{"n": 1}\n')
    assert _lines(s) == [(1, b'{"n": 1}')]
    s.close()


def test_sink_acknowledges_after_the_write(tmp_path: Path) -> None:
    out = tmp_path / "sub" / "results.jsonl"
    sink = JsonlSink(str(out))
    acks: list[BaseException | None] = []
    threads = [
        threading.Thread(target=sink.send, args=(None, b'{"i": %d}' % i, acks.append))
        for i in range(50)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert acks == [None] * 50
    lines = out.read_bytes().splitlines()
    assert sorted(lines) == sorted(b'{"i": %d}' % i for i in range(50))
    sink.close()

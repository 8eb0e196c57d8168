"""A followed file loses no line however many generations logrotate makes while the source lags
or is stopped: rename rotation (with ``delaycompress``'s ``.gz``) and copytruncate, several
generations deep, and a file truncated and regrown past the read offset between two polls."""

from __future__ import annotations

import gzip
import os
import shutil
from pathlib import Path

import pytest

from stef.io import Envelope
from stef.io.checkpoint import Checkpoint
from stef.io.jsonl import FileSource
from tests.io.conftest import SHORT_WAIT_S, append_lines, generation


def _rotate(log: Path, keep: int = 5, *, delaycompress: bool = True) -> None:
    """logrotate's rename rotation: shift app.log.N up, app.log becomes app.log.1, and with
    ``compress`` + ``delaycompress`` the generation that became .2 is compressed."""
    for n in range(keep, 0, -1):
        for suffix in ("", ".gz"):
            old = log.with_name(f"{log.name}.{n}{suffix}")
            if old.exists():
                os.rename(old, log.with_name(f"{log.name}.{n + 1}{suffix}"))
    os.rename(log, log.with_name(f"{log.name}.1"))
    second = log.with_name(f"{log.name}.2")
    if delaycompress and second.exists():
        with second.open("rb") as src, gzip.open(f"{second}.gz", "wb") as dst:
            shutil.copyfileobj(src, dst)
        second.unlink()


def _copytruncate(log: Path, keep: int = 5) -> None:
    """logrotate's copytruncate: shift the copies up, copy app.log to app.log.1, truncate it."""
    for n in range(keep, 0, -1):
        old = log.with_name(f"{log.name}.{n}")
        if old.exists():
            os.rename(old, log.with_name(f"{log.name}.{n + 1}"))
    shutil.copyfile(log, log.with_name(f"{log.name}.1"))
    with log.open("r+b") as f:
        f.truncate(0)


def _source(log: Path, state: Path | None = None) -> FileSource:
    checkpoint = Checkpoint(state) if state is not None else None
    s = FileSource(
        str(log),
        follow=True,
        poll_interval_s=0.01,
        checkpoint=checkpoint,
        rotate_wait_s=SHORT_WAIT_S,
    )
    s.start()
    return s


def _drain(s: FileSource, *, ack: bool = True) -> list[bytes]:
    """Everything there is to read now (polled until two polls in a row bring nothing)."""
    got: list[Envelope] = []
    empty = 0
    while empty < 2:
        batch = s.poll(1000, 0.05)
        empty = 0 if batch else empty + 1
        got += batch
    if ack:
        for e in got:
            e.on_done()
    return [e.payload for e in got]


def test_rename_rotation_several_generations_while_lagging(tmp_path: Path) -> None:
    log = tmp_path / "app.log"
    a, b, c = generation("a", 150), generation("b", 150), generation("c", 150)
    d = generation("d", 20)
    append_lines(log, a)
    s = _source(log)
    assert [e.payload for e in s.poll(10, 0.5)] == a[:10]  # the source lags behind
    _rotate(log)
    append_lines(log, b)
    _rotate(log)  # a is now app.log.2.gz (delaycompress), b app.log.1
    append_lines(log, c)
    _rotate(log)
    append_lines(log, d)
    assert _drain(s) == a[10:] + b + c + d
    s.close()


def test_rename_rotation_several_generations_while_stopped(tmp_path: Path) -> None:
    log, state = tmp_path / "app.log", tmp_path / "state"
    a, b, c, d = generation("a", 30), generation("b", 30), generation("c", 30), generation("d", 5)
    append_lines(log, a[:20])
    s = _source(log, state)
    assert _drain(s) == a[:20]
    s.close()
    append_lines(log, a[20:])  # written while the sidecar was down, before the first rotation
    _rotate(log)
    append_lines(log, b)
    _rotate(log)
    append_lines(log, c)
    _rotate(log)  # a is app.log.3.gz, b app.log.2.gz, c app.log.1
    append_lines(log, d)
    s = _source(log, state)
    got = s.poll(1000, 0.5)
    assert got[0].position["line"] == 21  # a's numbering goes on where it stopped
    for e in got:
        e.on_done()
    assert [e.payload for e in got] + _drain(s) == a[20:] + b + c + d
    s.close()
    append_lines(log, [b'{"after": 1}'])
    s = _source(log, state)
    assert _drain(s) == [b'{"after": 1}']  # the checkpoint moved to the live file
    s.close()


def test_copytruncate_several_generations_while_lagging(tmp_path: Path) -> None:
    log = tmp_path / "app.log"
    a, b, c = generation("a", 150), generation("b", 150), generation("c", 400)
    append_lines(log, a)
    s = _source(log)
    assert [e.payload for e in s.poll(10, 0.5)] == a[:10]
    _copytruncate(log)
    append_lines(log, b)
    _copytruncate(log)  # a is app.log.2, b app.log.1
    append_lines(log, c)  # longer than a: the live file is past the offset read in a
    assert _drain(s) == a[10:] + b + c
    s.close()


def test_copytruncate_several_generations_while_stopped(tmp_path: Path) -> None:
    log, state = tmp_path / "app.log", tmp_path / "state"
    a, b, c = generation("a", 30), generation("b", 30), generation("c", 60)
    append_lines(log, a[:20])
    s = _source(log, state)
    assert _drain(s) == a[:20]
    s.close()
    append_lines(log, a[20:])
    _copytruncate(log)
    append_lines(log, b)
    _copytruncate(log)
    append_lines(log, c)
    s = _source(log, state)
    assert _drain(s) == a[20:] + b + c
    s.close()


def test_a_truncated_file_that_regrew_past_the_offset_is_read_from_its_start(
    tmp_path: Path,
) -> None:
    """Truncation is told by the file's first bytes, not its size: it may be longer again
    before the next poll."""
    log = tmp_path / "app.log"
    a, c = generation("a", 5), generation("c", 50)
    append_lines(log, a)
    s = _source(log)
    assert _drain(s) == a
    with log.open("r+b") as f:
        f.truncate(0)
    append_lines(log, c)  # 50 lines: far past the 5 lines' offset
    got = s.poll(1000, 0.5)
    assert [(e.position["line"], e.payload) for e in got] == list(enumerate(c, start=1))
    s.close()


def test_copytruncate_regrown_past_the_offset_reads_the_unread_rest_from_the_copy(
    tmp_path: Path,
) -> None:
    log = tmp_path / "app.log"
    a, c = generation("a", 10), generation("c", 50)
    append_lines(log, a[:5])
    s = _source(log)
    assert _drain(s) == a[:5]
    append_lines(log, a[5:])  # not read yet when the rotator copies and truncates
    _copytruncate(log)
    append_lines(log, c)
    assert _drain(s) == a[5:] + c
    s.close()


def test_restarts_inside_a_compressed_generation_resume_there(tmp_path: Path) -> None:
    log, state = tmp_path / "app.log", tmp_path / "state"
    a, b, c = generation("a", 30), generation("b", 10), generation("c", 10)
    append_lines(log, a)
    s = _source(log, state)
    first = s.poll(5, 0.5)
    assert _drain_acked(first) == a[:5]
    s.close()
    _rotate(log)
    append_lines(log, b)
    _rotate(log)  # a is app.log.2.gz
    append_lines(log, c)
    s = _source(log, state)
    assert _drain_acked(s.poll(5, 0.5)) == a[5:10]  # read out of the .gz
    s.close()
    s = _source(log, state)  # the checkpoint names the .gz generation now
    assert _drain(s) == a[10:] + b + c
    s.close()


def _drain_acked(envelopes: list[Envelope]) -> list[bytes]:
    for e in envelopes:
        e.on_done()
    return [e.payload for e in envelopes]


def _rotated_while_stopped(tmp_path: Path, log: Path, state: Path, edit: str) -> list[bytes]:
    """``a`` judged and checkpointed; then, the source stopped, three rotations (``b``, ``c``,
    ``d`` live), ``a`` edited as ``edit`` says right after its own rotation, hours ago, the
    checkpoint saved hours before that: the lines of ``a`` left after the edit."""
    a = generation("a", 300)  # past the 4096 bytes that identify it
    append_lines(log, a)
    s = _source(log, state)
    assert _drain(s) == a
    s.close()
    _rotate(log)
    rotated = log.with_name(f"{log.name}.1")
    kept = {"cut_after_its_first_bytes": a[:250], "lines_removed": a[:5] + a[100:], "deleted": []}
    if edit == "deleted":
        rotated.unlink()  # rotate N removed it
    else:
        rotated.write_bytes(b"".join(line + b"\n" for line in kept[edit]))
    for tag in ("b", "c"):
        append_lines(log, generation(tag, 20))
        _rotate(log)
    append_lines(log, generation("d", 5))
    hour_ago = os.stat(state).st_mtime - 3600
    for gen in tmp_path.glob("app.log*"):  # rotated before this start, not while it ran
        os.utime(gen, (hour_ago, hour_ago))
    os.utime(state, (hour_ago - 3600, hour_ago - 3600))
    return kept[edit]


@pytest.mark.parametrize("edit", ["cut_after_its_first_bytes", "lines_removed", "deleted"])
def test_a_generation_edited_shorter_while_stopped_loses_no_generation_after_it(
    tmp_path: Path, edit: str
) -> None:
    """The checkpoint names a generation cut shorter than its saved offset (or rewritten
    shorter, or removed) while the source was stopped, with rotations after it. It was taken
    for a replaced file, and reading began at the generations written since the process
    started: none, so b and c, rotated while stopped, were skipped. It begins at the oldest
    written since the checkpoint was saved: the edited generation's lines are judged again
    (where the offset was in it is lost with the edit), none after it is skipped."""
    log, state = tmp_path / "app.log", tmp_path / "state"
    kept = _rotated_while_stopped(tmp_path, log, state, edit)
    s = _source(log, state)
    b, c, d = generation("b", 20), generation("c", 20), generation("d", 5)
    assert _drain(s) == kept + b + c + d
    s.close()

"""The followed file source's checkpoint: resume past acknowledged lines, survive rotation by
rename and by copytruncate (while running and while stopped), refuse another source's state."""

from __future__ import annotations

import gzip
import json
import os
import shutil
from pathlib import Path

import pytest

from stef.errors import CommitError, ConfigError
from stef.io import Envelope
from stef.io.checkpoint import Checkpoint
from stef.io.jsonl import FileSource
from tests.disks import small_tmpfs
from tests.io.conftest import SHORT_WAIT_S


def _source(log: Path, state: Path) -> FileSource:
    s = FileSource(
        str(log),
        follow=True,
        poll_interval_s=0.01,
        checkpoint=Checkpoint(state),
        rotate_wait_s=SHORT_WAIT_S,
    )
    s.start()
    return s


def _poll(s: FileSource, timeout_s: float = 0.3) -> list[Envelope]:
    return s.poll(100, timeout_s)


def _ack(envelopes: list[Envelope]) -> list[bytes]:
    for e in envelopes:
        e.on_done()
    return [e.payload for e in envelopes]


def _write(path: Path, *lines: bytes, mode: str = "ab") -> None:
    with path.open(mode) as f:
        for line in lines:
            f.write(line + b"\n")


def test_restart_resumes_past_the_acknowledged_lines(tmp_path: Path) -> None:
    log, state = tmp_path / "app.log", tmp_path / "state"
    _write(log, b"a1", b"a2", b"a3")
    s = _source(log, state)
    assert _ack(_poll(s)) == [b"a1", b"a2", b"a3"]
    s.close()
    saved = json.loads(state.read_text())
    assert saved["offset"] == 9 and saved["line"] == 3
    st = os.stat(log)
    assert (saved["file"]["dev"], saved["file"]["ino"]) == (st.st_dev, st.st_ino)

    _write(log, b"a4")
    s = _source(log, state)
    got = _poll(s)
    assert [(e.payload, e.position["line"]) for e in got] == [(b"a4", 4)]
    s.close()


def test_only_a_contiguous_run_of_acknowledged_lines_is_saved(tmp_path: Path) -> None:
    log, state = tmp_path / "app.log", tmp_path / "state"
    _write(log, b"a1", b"a2", b"a3")
    s = _source(log, state)
    first, _second, third = _poll(s)
    first.on_done()
    third.on_done()  # the second is still in flight: it holds the position back
    s.close()
    s = _source(log, state)
    assert [e.payload for e in _poll(s)] == [b"a2", b"a3"]  # at-least-once: a3 again
    s.close()


def test_nothing_acknowledged_writes_no_checkpoint(tmp_path: Path) -> None:
    log, state = tmp_path / "app.log", tmp_path / "state"
    _write(log, b"a1")
    s = _source(log, state)
    assert len(_poll(s)) == 1
    s.close()
    assert not state.exists()


def test_rename_rotation_while_running_is_followed_and_checkpointed(tmp_path: Path) -> None:
    log, state = tmp_path / "app.log", tmp_path / "state"
    _write(log, b"a1")
    s = _source(log, state)
    assert _ack(_poll(s)) == [b"a1"]
    _write(log, b"a2")
    os.rename(log, tmp_path / "app.log.1")
    _write(log, b"b1", b"b2")
    assert _ack(_poll(s)) + _ack(_poll(s)) == [b"a2", b"b1", b"b2"]
    s.close()
    saved = json.loads(state.read_text())
    assert saved["file"]["ino"] == os.stat(log).st_ino and saved["line"] == 2
    _write(log, b"b3")
    s = _source(log, state)
    assert _ack(_poll(s)) == [b"b3"]
    s.close()


def test_rename_rotation_while_stopped_drains_the_old_file_first(tmp_path: Path) -> None:
    log, state = tmp_path / "app.log", tmp_path / "state"
    _write(log, b"a1", b"a2")
    s = _source(log, state)
    assert _ack(_poll(s)) == [b"a1", b"a2"]
    s.close()
    _write(log, b"a3")  # written after the stop, before the rotation
    os.rename(log, tmp_path / "app.log.1")
    _write(log, b"b1")
    s = _source(log, state)
    got = _poll(s) + _poll(s)
    assert [(e.payload, e.position["line"]) for e in got] == [(b"a3", 3), (b"b1", 1)]
    _ack(got)
    s.close()
    assert json.loads(state.read_text())["file"]["ino"] == os.stat(log).st_ino


def test_copytruncate_while_running_restarts_at_zero(tmp_path: Path) -> None:
    log, state = tmp_path / "app.log", tmp_path / "state"
    _write(log, b"a1", b"a2")
    s = _source(log, state)
    assert _ack(_poll(s)) == [b"a1", b"a2"]
    s.commit()
    _write(log, b"c1", mode="wb")  # copytruncate: same inode, shorter
    assert _ack(_poll(s)) == [b"c1"]
    s.close()
    saved = json.loads(state.read_text())
    assert saved["offset"] == 3 and saved["line"] == 1
    _write(log, b"c2")
    s = _source(log, state)
    assert _ack(_poll(s)) == [b"c2"]
    s.close()


def test_copytruncate_while_stopped_restarts_at_zero(tmp_path: Path) -> None:
    log, state = tmp_path / "app.log", tmp_path / "state"
    _write(log, b"aaaa1", b"aaaa2")
    s = _source(log, state)
    _ack(_poll(s))
    s.close()
    with log.open("r+b") as f:
        f.truncate(0)
    _write(log, b"c1")
    s = _source(log, state)
    assert _ack(_poll(s)) == [b"c1"]
    s.close()


def test_a_file_rewritten_in_place_is_a_new_file(tmp_path: Path) -> None:
    """Same inode, at least as long, other first bytes: not the file the checkpoint names."""
    log, state = tmp_path / "app.log", tmp_path / "state"
    _write(log, b"a1")
    s = _source(log, state)
    _ack(_poll(s))
    s.close()
    with log.open("r+b") as f:
        f.write(b"x1\nx2\n")
    s = _source(log, state)
    assert _ack(_poll(s)) == [b"x1", b"x2"]
    s.close()


def test_a_checkpoint_of_another_source_is_refused(tmp_path: Path) -> None:
    log, other, state = tmp_path / "app.log", tmp_path / "other.log", tmp_path / "state"
    _write(log, b"a1")
    _write(other, b"o1")
    s = _source(log, state)
    _ack(_poll(s))
    s.close()
    with pytest.raises(ConfigError, match="belongs to source"):
        _source(other, state)
    state.write_text("{not json")
    with pytest.raises(ConfigError, match="not a file source checkpoint"):
        _source(log, state)


def test_the_state_file_is_replaced_not_rewritten(tmp_path: Path) -> None:
    """Atomic: each save is another inode renamed over the old one; the only other files are
    the spare the next save writes into (kept, so a save needs no new space on a full disk) and
    the lock one process holds."""
    log, state = tmp_path / "app.log", tmp_path / "state"
    _write(log, b"a1")
    s = _source(log, state)
    _ack(_poll(s))
    s.commit()
    before = os.stat(state).st_ino
    _write(log, b"a2")
    _ack(_poll(s))
    s.commit()
    assert os.stat(state).st_ino != before
    names = sorted(p.name for p in tmp_path.iterdir())
    assert names == [".state.lock", ".state.spare", "app.log", "state"]
    s.close()


def test_a_failed_save_is_retried_at_the_next_commit(tmp_path: Path) -> None:
    log, state_dir = tmp_path / "app.log", tmp_path / "state"
    _write(log, b"a1")
    s = _source(log, state_dir / "cp")
    _ack(_poll(s))
    shutil.rmtree(state_dir)  # made at start, for the spare
    state_dir.write_text("a file where the checkpoint's directory should be")
    with pytest.raises(CommitError) as failed:  # cannot create the directory: the caller counts it
        s.commit()
    assert failed.value.source == "file"
    assert s.uncommitted() == 1
    state_dir.unlink()
    s.commit()
    assert json.loads((state_dir / "cp").read_text())["line"] == 1
    assert s.uncommitted() == 0
    s.close()


def test_a_checkpoint_is_saved_on_a_full_disk(tmp_path: Path) -> None:
    """The results fill the disk the checkpoint shares: the save still lands, in the spare slot
    reserved at start (the state file is still replaced whole, by a rename)."""
    with small_tmpfs(tmp_path / "disk", 64) as disk:
        log, state = tmp_path / "app.log", disk / "state"
        _write(log, b"a1", b"a2")
        s = _source(log, state)
        _ack(_poll(s))
        fill = os.open(disk / "results", os.O_WRONLY | os.O_CREAT)
        with pytest.raises(OSError):
            while True:
                os.write(fill, b"x" * 512)
        os.close(fill)
        s.close()
        saved = json.loads(state.read_text())
        assert (saved["line"], saved["offset"]) == (2, 6)


def test_one_process_at_a_time_holds_a_checkpoint(tmp_path: Path) -> None:
    """Two replicas on one file and checkpoint judged every line twice, and the slower one's
    saves moved the checkpoint back. The second is refused at start, naming the holder."""
    log, state = tmp_path / "app.log", tmp_path / "state"
    _write(log, b"a1")
    first = _source(log, state)
    with pytest.raises(
        ConfigError, match=f"in use by another stef process \\(pid {os.getpid()}\\)"
    ):
        _source(log, state)
    first.close()
    second = _source(log, state)  # released at close
    second.close()


def test_a_fifo_in_the_spare_s_place_fails_the_save_instead_of_blocking(tmp_path: Path) -> None:
    """The save opened the spare for writing and waited for a reader for ever: the run loop
    stopped at its first commit, SIGTERM unheard. It is a failed commit now (retried later)."""
    log, state = tmp_path / "app.log", tmp_path / "state"
    _write(log, b"a1")
    s = _source(log, state)
    spare = tmp_path / ".state.spare"
    spare.unlink()
    os.mkfifo(spare)
    _ack(_poll(s))
    with pytest.raises(CommitError):
        s.commit()
    spare.unlink()
    s.commit()  # the next commit makes its own spare
    assert json.loads(state.read_text())["line"] == 1
    s.close()


def _judged_past_the_first_bytes(tmp_path: Path) -> tuple[Path, Path, bytes]:
    """A run that judged ``app.log``'s two lines, the first longer than the bytes that identify
    the file, and stopped: the log, the checkpoint and the first line."""
    log, state = tmp_path / "app.log", tmp_path / "state"
    first = b'{"q": "' + "é".encode() * 2500 + b'"}'
    _write(log, first, b'{"n": 1}')
    s = _source(log, state)
    assert len(_ack(_poll(s))) == 2
    s.close()
    return log, state, first


def test_a_file_changed_in_place_past_its_first_bytes_is_read_from_a_line_start(
    tmp_path: Path,
) -> None:
    """Same inode, same first 4096 bytes, a line made longer after them: the saved offset fell
    inside a line, whose tail was a not_json dead letter and whose head was never judged."""
    log, state, first = _judged_past_the_first_bytes(tmp_path)
    assert json.loads(state.read_text())["offset"] == len(first) + 10
    with log.open("r+b") as f:  # the second line edited in place, one more line after it
        f.seek(len(first) + 1)
        f.write(b'{"n": 100}\n{"n": 2}\n')
    s = _source(log, state)
    assert _ack(_poll(s)) == [b'{"n": 100}', b'{"n": 2}']
    s.close()


@pytest.mark.parametrize("rotated_to", ["app.log.1", "app.log.1.gz", "app.log.old"])
def test_a_rotated_generation_changed_past_its_first_bytes_is_read_from_a_line_start(
    tmp_path: Path, rotated_to: str
) -> None:
    """The same edit as above, made to the generation the log was rotated to while STEF was
    stopped (in the numbered chain, compressed in it, or renamed outside it): only the live
    file was read from a line start, so the line's tail was a not_json dead letter and its
    head never judged."""
    log, state, first = _judged_past_the_first_bytes(tmp_path)
    plain = tmp_path / rotated_to.removesuffix(".gz")
    os.rename(log, plain)
    _write(log, b'{"n": 3}')
    with plain.open("r+b") as f:
        f.seek(len(first) + 1)
        f.write(b'{"n": 100}\n{"n": 2}\n')
    if rotated_to.endswith(".gz"):
        with plain.open("rb") as src, gzip.open(tmp_path / rotated_to, "wb") as dst:
            shutil.copyfileobj(src, dst)
        plain.unlink()
    s = _source(log, state)
    got = _poll(s) + _poll(s)
    assert [e.payload for e in got] == [b'{"n": 100}', b'{"n": 2}', b'{"n": 3}']
    _ack(got)
    s.close()
    assert json.loads(state.read_text())["file"]["ino"] == os.stat(log).st_ino


def _ended_without_newline(tmp_path: Path) -> tuple[Path, Path]:
    """A run that judged ``app.log`` (``a1``, then ``a2`` without its newline), saw it rotated
    to ``app.log.1`` beside a new empty ``app.log``, judged ``a2`` and stopped: the log and the
    checkpoint."""
    log, state = tmp_path / "app.log", tmp_path / "state"
    log.write_bytes(b"a1\na2")
    s = _source(log, state)
    assert _ack(_poll(s)) == [b"a1"]
    os.rename(log, tmp_path / "app.log.1")
    log.write_bytes(b"")
    assert _ack(_poll(s)) == [b"a2"]
    s.close()
    return log, state


@pytest.mark.parametrize("compressed", [False, True])
def test_a_generation_finished_on_a_line_without_its_newline_resumes_at_its_end(
    tmp_path: Path, compressed: bool
) -> None:
    """The rotated-away file's last line had no newline and was judged whole; stopped before a
    line of the next file was, the checkpoint pointed one byte past that generation's end (the
    newline STEF supplied). At the restart no generation was that long: the checkpoint was
    taken as a file replaced, and after two rotations meanwhile the one between was skipped
    (its lines never judged)."""
    log, state = _ended_without_newline(tmp_path)
    assert json.loads(state.read_text())["offset"] == 5
    _write(log, b"b1")  # then two rotations while stopped
    os.rename(tmp_path / "app.log.1", tmp_path / "app.log.2")
    os.rename(log, tmp_path / "app.log.1")
    _write(log, b"c1")
    if compressed:
        with (tmp_path / "app.log.2").open("rb") as src, gzip.open(f"{src.name}.gz", "wb") as dst:
            shutil.copyfileobj(src, dst)
        (tmp_path / "app.log.2").unlink()
    for gen in tmp_path.glob("app.log*"):  # rotated before this start, not while it ran
        os.utime(gen, (os.stat(gen).st_atime, os.stat(gen).st_mtime - 3600))
    s = _source(log, state)
    assert _ack(_poll(s) + _poll(s) + _poll(s)) == [b"b1", b"c1"]
    s.close()


def test_a_gz_generation_cut_after_a_line_without_its_newline_resumes_at_its_end(
    tmp_path: Path,
) -> None:
    """The checkpoint points at the end of a compressed generation whose last line had no
    newline, and the .gz lost its trailer (its compression cut short): every line of it can be
    read, but a byte past them cannot. The line-start check's look past the offset raised, the
    generation was taken as unreadable and the checkpoint as a file replaced: the run started
    at the live file, and the generation between was never judged."""
    log, state = _ended_without_newline(tmp_path)
    _write(log, b"b1")  # then two rotations while stopped, the older one compressed
    (tmp_path / "app.log.2.gz").write_bytes(gzip.compress(b"a1\na2")[:-8])  # no trailer
    (tmp_path / "app.log.1").unlink()
    os.rename(log, tmp_path / "app.log.1")
    _write(log, b"c1")
    for gen in tmp_path.glob("app.log*"):  # rotated before this start, not while it ran
        os.utime(gen, (os.stat(gen).st_atime, os.stat(gen).st_mtime - 3600))
    s = _source(log, state)
    assert _ack(_poll(s) + _poll(s) + _poll(s)) == [b"b1", b"c1"]
    s.close()


@pytest.mark.parametrize("where", ["app.log", "app.log.1", "app.log.1.gz"])
def test_lines_read_from_a_line_start_keep_their_own_numbers(tmp_path: Path, where: str) -> None:
    """The file (or the generation it was rotated to) was rewritten while STEF was stopped,
    its first bytes kept: two more lines before the saved offset, which now falls inside a
    line. That line and the next were numbered on from the saved count (2), not by where
    they are (4 and 5): results and dead letters named the wrong lines."""
    log, state, first = _judged_past_the_first_bytes(tmp_path)
    edited = tmp_path / where.removesuffix(".gz")
    if edited != log:
        os.rename(log, edited)
        _write(log, b'{"n": 3}')
    long_line = b'{"n": 100, "pad": "' + b"x" * 600 + b'"}'
    assert len(first) + 10 < 4500 + 3 + 2 * 9 + len(long_line)  # the offset falls inside it
    with edited.open("r+b") as f:  # the same inode, the same first 4096 bytes
        f.write(first[:4500] + b'"}\n{"m": 1}\n{"m": 2}\n' + long_line + b'\n{"n": 2}\n')
    if where.endswith(".gz"):
        with edited.open("rb") as src, gzip.open(tmp_path / where, "wb") as dst:
            shutil.copyfileobj(src, dst)
        edited.unlink()
    s = _source(log, state)
    got = _poll(s) + _poll(s)
    lines = [(e.position["line"], e.payload) for e in got]
    assert lines[:2] == [(4, long_line), (5, b'{"n": 2}')]
    assert lines[2:] == ([] if edited == log else [(1, b'{"n": 3}')])
    _ack(got)
    s.close()

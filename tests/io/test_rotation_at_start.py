"""Generations logged and rotated away before a followed file source first reads (while its
process starts: imports, settings, the LLM endpoint check) are read, oldest first, before the
live file; generations older than the start stay history (issue 32, item 1)."""

from __future__ import annotations

import os
import shutil
import time
from contextlib import closing
from pathlib import Path

from stef.io import Envelope
from stef.io.jsonl import FileSource
from stef.io.rotation import process_started
from tests.io.conftest import append_lines, generation

_IMPORTED = time.time()


def _rename_rotation(log: Path) -> None:
    """``mv app.log.N app.log.N+1`` for each N from the highest, ``mv app.log app.log.1``,
    ``: > app.log``: the shell's (and logrotate's ``create``) rename rotation."""
    numbered = sorted(
        (int(p.name.rsplit(".", 1)[1]) for p in log.parent.glob(f"{log.name}.*")), reverse=True
    )
    for n in numbered:
        os.rename(log.with_name(f"{log.name}.{n}"), log.with_name(f"{log.name}.{n + 1}"))
    os.rename(log, log.with_name(f"{log.name}.1"))
    log.write_bytes(b"")


def _copytruncate(log: Path) -> None:
    shutil.copyfile(log, log.with_name(f"{log.name}.1"))
    with log.open("r+b") as f:
        f.truncate(0)


def _drain(s: FileSource, expect: int) -> list[bytes]:
    """Poll until ``expect`` records came (a loaded machine may answer a poll empty before the
    rest arrives), then once more: a record beyond them would show."""
    got: list[Envelope] = []
    deadline = time.monotonic() + 60
    while len(got) < expect and time.monotonic() < deadline:
        got += s.poll(1000, 0.05)
    got += s.poll(1000, 0.2)
    for e in got:
        e.on_done()
    return [e.payload for e in got]


def _burst(log: Path, *, first: str = "rename") -> list[list[bytes]]:
    """The burst of issue 32: 150 lines, a rotation, three times, then 150 lines."""
    gens = [generation(tag, 150) for tag in "abcd"]
    for i, lines in enumerate(gens):
        append_lines(log, lines)
        if i == 0 and first == "copytruncate":
            _copytruncate(log)
        elif i < 3:
            _rename_rotation(log)
    return gens


def test_three_rename_rotations_before_the_first_read_lose_nothing(tmp_path: Path) -> None:
    log = tmp_path / "app.log"
    log.write_bytes(b"")
    since = time.time()
    a, b, c, d = _burst(log)  # a is app.log.3, b app.log.2, c app.log.1
    with closing(FileSource(str(log), follow=True, poll_interval_s=0.01, since=since)) as s:
        s.start()
        assert _drain(s, 600) == a + b + c + d


def test_copytruncate_then_renames_before_the_first_read_lose_nothing(tmp_path: Path) -> None:
    log = tmp_path / "app.log"
    log.write_bytes(b"")
    since = time.time()
    a, b, c, d = _burst(log, first="copytruncate")  # a's copy is app.log.3
    with closing(FileSource(str(log), follow=True, poll_interval_s=0.01, since=since)) as s:
        s.start()
        assert _drain(s, 600) == a + b + c + d


def test_a_log_that_appears_and_rotates_between_two_polls_loses_nothing(tmp_path: Path) -> None:
    log = tmp_path / "app.log"
    with closing(FileSource(str(log), follow=True, poll_interval_s=0.01)) as s:
        s.start()  # no file yet
        assert s.poll(10, 0.05) == []
        a, b, c, d = _burst(log)
        assert _drain(s, 600) == a + b + c + d


def test_generations_rotated_before_following_began_stay_history(tmp_path: Path) -> None:
    log = tmp_path / "app.log"
    old = generation("old", 5)
    append_lines(log, old)
    _rename_rotation(log)
    past = time.time() - 3600  # well before the start, beyond MTIME_SLACK_S
    os.utime(log.with_name("app.log.1"), (past, past))
    new = generation("new", 5)
    append_lines(log, new)
    with closing(FileSource(str(log), follow=True, poll_interval_s=0.01)) as s:
        s.start()
        assert _drain(s, len(new)) == new


def test_process_started_is_before_this_module_was_imported() -> None:
    started = process_started()
    assert started is not None  # Linux: /proc is there
    assert _IMPORTED - 6 * 3600 < started <= _IMPORTED


def test_a_generation_stamped_a_tick_before_the_start_is_read(tmp_path: Path) -> None:
    # The kernel stamps a file from its coarse clock, which can be a tick behind the time read
    # just before the write: such a generation is still written since the start.
    log = tmp_path / "app.log"
    since = time.time()
    a = generation("a", 3)
    append_lines(log, a)
    _rename_rotation(log)
    os.utime(log.with_name("app.log.1"), (since - 0.004, since - 0.004))
    b = generation("b", 3)
    append_lines(log, b)
    with closing(FileSource(str(log), follow=True, poll_interval_s=0.01, since=since)) as s:
        s.start()
        assert _drain(s, 6) == a + b

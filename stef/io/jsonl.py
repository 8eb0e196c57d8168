"""JSONL sources and sinks: a log file (optionally followed as it grows and rotates), stdin, stdout.

A followed file behaves like ``tail -F``: appended lines are picked up; when the path is renamed
away and a new file appears (rotation), the rest of the old file is read first, until it has gone
``rotate_wait_s`` unwritten (its writer may finish its line there), then the new file from its
start; when the file shrinks in place (copytruncate), reading restarts at its beginning.
A line is only handed out once its newline has arrived, so a half-written line is never judged.
With a :class:`~stef.io.checkpoint.Checkpoint`, a followed file resumes after a restart just past
the last acknowledged line (at-least-once, like a Kafka commit).
"""

from __future__ import annotations

import contextlib
import errno
import gzip
import hashlib
import os
import select
import stat
import sys
import threading
import time
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import IO, BinaryIO

import structlog

from stef.errors import CommitError, ConfigError, SinkError
from stef.io import AckCallback, Envelope, Oversized
from stef.io.checkpoint import (
    HEAD_BYTES,
    Checkpoint,
    FileIdentity,
    FilePosition,
    find_rotated,
    line_start,
    lines_before,
)
from stef.io.offsets import OffsetTracker
from stef.io.rotation import (
    MTIME_SLACK_S,
    Generation,
    first_written_since,
    generations,
    locate,
    open_generation,
    read_head,
)

log = structlog.get_logger(__name__)

_CHUNK = 1 << 16
# Bytes read into a line without its end before the poll's deadline is looked at again, so a
# poll returns by it (and its caller sees a stop): a run of zero bytes as long as the old file
# (a copytruncate rotation of a writer that does not append) was read on for a minute after
# SIGTERM. About 10 ms of reading.
_LONG_LINE_STEP = 8 << 20

# A file renamed away is read until it has gone this long unwritten. Fluent Bit's and Fluentd's
# tail wait 5 s (``rotate_wait``). A writer holding the renamed file finishes its line at once
# (a buffered logger flushes a whole record) and reopens the path at its next record (Python's
# WatchedFileHandler) or on logrotate's postrotate signal, which follows the rename within
# milliseconds; 5 s also covers a writer busy for seconds. The cost: once per rotation the new
# generation's lines wait up to this long (order is kept), and a generation reached more than
# this long after its last write (a reader lagging behind) is not waited for at all.
ROTATE_WAIT_S = 5.0
# A renamed file still written this many waits after the rename (a minute by default) has a
# writer that never reopens the path: said once (rotated_file_still_written); STEF follows it on.
STILL_WRITTEN_WAITS = 12


@dataclass(frozen=True)
class CutLine:
    """A line longer than a :class:`LineBuffer`'s limit, never held whole in memory.

    Attributes:
        prefix: its first ``limit`` bytes.
        size: its length without its line ending.
        sha256: hex sha256 of those ``size`` bytes.
        raw_len: the bytes it took in the file, line ending included.
    """

    prefix: bytes
    size: int
    sha256: str
    raw_len: int


class _Cutting:
    """The line being cut: its prefix, and the length and running sha256 of what followed."""

    def __init__(self, prefix: bytes) -> None:
        self.prefix = prefix
        self.hasher = hashlib.sha256()
        self.size = 0
        self.raw = 0
        # Carriage returns at the end so far: part of the line unless the newline comes next.
        self.pending_cr = 0

    def absorb(self, data: bytes | bytearray | memoryview) -> None:
        """More of the line (no newline in it)."""
        self.raw += len(data)
        body = bytes(data).rstrip(b"\r")
        if not body:
            self.pending_cr += len(data)
            return
        while self.pending_cr:
            n = min(self.pending_cr, _CHUNK)
            self.hasher.update(b"\r" * n)
            self.size += n
            self.pending_cr -= n
        self.hasher.update(body)
        self.size += len(body)
        self.pending_cr = len(data) - len(body)

    def finish(self, ending: int, limit: int) -> bytes | CutLine:
        raw = self.raw + ending
        if self.size <= limit:
            # Carriage returns made it look long: the prefix holds the whole line.
            return self.prefix[: self.size] + b"\r" * self.pending_cr + b"\n" * ending
        return CutLine(self.prefix, self.size, self.hasher.hexdigest(), raw)


class LineBuffer:
    """Bytes read but not yet handed out as lines, in linear time however long a line grows.

    Appending to a ``bytes`` and searching it whole after every chunk copies and rescans the
    line once per chunk (quadratic: a 64 MB line took 20 s). Here chunks extend a bytearray in
    place, the newline search resumes where the last one stopped, and consumed lines are cut
    off the front only once they are at least half the buffer (amortised linear).

    With a ``limit``, a line that grows past it without a newline is no longer kept: its first
    ``limit`` bytes are, with its length and sha256 counted as it streams by, and it comes out
    as a :class:`CutLine` (a 200 MB line costs ``limit`` bytes of memory, not 200 MB).

    Attributes:
        scanned: bytes searched for a newline so far (each byte once: the cost is linear).
    """

    def __init__(self, limit: int | None = None) -> None:
        self.limit = limit
        self._buf = bytearray()
        self._start = 0  # the first byte not yet handed out
        self._scan = 0  # no newline in [_start, _scan)
        self._cut: _Cutting | None = None
        self._cut_done: bytes | CutLine | None = None
        self.scanned = 0

    def __len__(self) -> int:
        cut = self._cut.raw + 1 if self._cut is not None else 0
        return len(self._buf) - self._start + cut

    def feed(self, chunk: bytes) -> None:
        if self._cut is not None:
            newline = chunk.find(b"\n")
            self.scanned += len(chunk) if newline < 0 else newline + 1
            if newline < 0:
                self._cut.absorb(chunk)
                return
            self._cut.absorb(memoryview(chunk)[:newline])
            self._cut_done = self._cut.finish(1, self.limit or 0)
            self._cut = None
            chunk = chunk[newline + 1 :]
        self._buf += chunk

    def line(self) -> bytes | CutLine | None:
        """The next complete line (with its newline), or None until one has arrived."""
        if self._cut_done is not None:
            done, self._cut_done = self._cut_done, None
            return done
        if self._cut is not None:
            return None
        newline = self._buf.find(b"\n", self._scan)
        if newline < 0:
            self.scanned += len(self._buf) - self._scan
            self._scan = len(self._buf)
            if self.limit is not None and len(self._buf) - self._start > self.limit:
                self._start_cut()
            return None
        self.scanned += newline + 1 - self._scan
        line = bytes(self._buf[self._start : newline + 1])
        self._start = self._scan = newline + 1
        if self._start >= _CHUNK and 2 * self._start >= len(self._buf):
            del self._buf[: self._start]
            self._scan -= self._start
            self._start = 0
        return line

    def _start_cut(self) -> None:
        limit = self.limit or 0
        pending = memoryview(self._buf)[self._start :]
        self._cut = _Cutting(bytes(pending[:limit]))
        self._cut.absorb(pending)
        pending.release()
        self._buf = bytearray()
        self._start = self._scan = 0

    def rest(self) -> bytes | CutLine:
        """Whatever is left (a last line without its newline), emptying the buffer."""
        if self._cut is not None:
            self._cut.absorb(self._buf)
            done = self._cut.finish(0, self.limit or 0)
            self.clear()
            return done
        rest = bytes(self._buf[self._start :])
        self.clear()
        return rest

    def clear(self) -> None:
        self._buf = bytearray()
        self._start = self._scan = 0
        self._cut = None
        self._cut_done = None


class _File:
    """One file as read: its stream and identity, the first bytes read (they identify it in a
    checkpoint), how many bytes were handed out as lines, and how many lines.

    ``compressed``: a ``.gz`` generation (never written again, no inode of its original).
    ``copy``: copytruncate's copy (never written: the writer kept the truncated file).
    """

    def __init__(
        self,
        stream: BinaryIO,
        dev: int = 0,
        ino: int = 0,
        *,
        compressed: bool = False,
        copy: bool = False,
    ) -> None:
        self.stream = stream
        self.dev = dev
        self.ino = ino
        self.compressed = compressed
        self.copy = copy
        self.head = bytearray()
        self.consumed = 0
        self.line = 0
        # Renamed away and read to its end: when it counts as quiet (monotonic seconds).
        self.quiet_at: float | None = None
        # When it was first found renamed away (epoch seconds): the generations written since
        # follow it, should it be gone from the chain by the time it is finished.
        self.left_at: float | None = None
        # rotated_file_still_written logged for it.
        self.warned = False

    def identity(self, upto: int) -> FileIdentity:
        return FileIdentity.of(self.dev, self.ino, bytes(self.head[: min(HEAD_BYTES, upto)]))


def open_source_file(path: str) -> BinaryIO:
    """Open a source path for reading, refusing what is not a regular file.

    Opened without blocking, then checked: a FIFO would otherwise wait for a writer for ever,
    and a directory, a socket or a device is no log.

    Raises:
        FileNotFoundError: there is no file (yet) at ``path``.
        ConfigError: it is not a regular file, a symlink loop, or unreadable.
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    except FileNotFoundError:
        raise
    except IsADirectoryError as exc:
        raise ConfigError(f"source file:{path}: is a directory, not a file") from exc
    except OSError as exc:
        raise ConfigError(f"source file:{path}: {exc.strerror or exc}") from exc
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise ConfigError(f"source file:{path}: is {_kind(mode)}, not a regular file")
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def check_source_file(path: str) -> None:
    """Raise :class:`ConfigError` unless ``path`` is a readable regular file (or missing:
    :class:`FileNotFoundError`)."""
    open_source_file(path).close()


def _kind(mode: int) -> str:
    for test, name in (
        (stat.S_ISDIR, "a directory"),
        (stat.S_ISFIFO, "a FIFO"),
        (stat.S_ISSOCK, "a socket"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
    ):
        if test(mode):
            return name
    return "not a file"


class FileSource:
    """Lines of a JSONL file (or stdin) as records; positions are ``{"file", "line"}``.

    Args:
        path: the file, or ``-`` for stdin.
        follow: keep reading as the file grows; survive rotation and truncation.
        poll_interval_s: how often a followed file is checked for growth.
        checkpoint: where the position of the last acknowledged line is kept; a restart resumes
            there. None: every start reads the file from its beginning.
        max_line_bytes: a longer line is not held in memory: its record carries its first
            bytes with its length and sha256 (:class:`~stef.io.Oversized`), to be dead-lettered
            as too large. None holds every line whole.
        since: when following began (epoch seconds; None: now). A followed file opened
            without a saved position starts at the oldest rotated generation written since
            then, if any, so lines logged and rotated away before the first read are not lost.
        rotate_wait_s: how long a file renamed away (rename rotation) must have gone unwritten
            before it is left for the next generation: a writer that still holds it finishes
            its line there, and may write more, before it reopens the path. A copytruncate
            copy or a ``.gz`` generation is never written again and is not waited for.
    """

    def __init__(
        self,
        path: str,
        *,
        follow: bool = False,
        poll_interval_s: float = 0.2,
        checkpoint: Checkpoint | None = None,
        max_line_bytes: int | None = None,
        since: float | None = None,
        rotate_wait_s: float = ROTATE_WAIT_S,
    ) -> None:
        self.path = path
        self.since = time.time() if since is None else since
        self.follow = follow and path != "-"
        self.poll_interval_s = poll_interval_s
        self.rotate_wait_s = rotate_wait_s
        self.checkpoint = checkpoint if path != "-" else None
        self._file: _File | None = None
        self._buffer = LineBuffer(max_line_bytes)
        self._eof = False
        self._waiting = False
        self._mid_line = False  # the last read stopped inside a long line: no sleep
        # Lines handed out, numbered in order across files; a commit saves the end of the
        # last one done with every one before it done too.
        self._tracker = OffsetTracker()
        self._seq = 0
        self._marks: dict[int, tuple[_File, int, int]] = {}

    # ------------------------------------------------------------------------------ protocol

    def start(self) -> None:
        if self.path == "-":
            self._file = _File(sys.stdin.buffer)
            return
        try:
            # Before anything reads it: a FIFO would block the first open for ever.
            check_source_file(self.path)
        except FileNotFoundError as exc:
            if not self.follow:
                raise ConfigError(f"source file:{self.path}: no such file") from exc
        if self.checkpoint is not None:
            self.checkpoint.lock()
            try:
                self.checkpoint.reserve()
                if self._resume(self.checkpoint):
                    return
            except BaseException:  # a checkpoint refused: the source never starts
                self.checkpoint.unlock()
                raise
        if self.follow and self._open_rotated_since():
            return
        try:
            self._open(self.path)
        except FileNotFoundError as exc:
            if not self.follow:
                raise ConfigError(f"source file:{self.path}: no such file") from exc
            # A followed log may not exist yet; it is picked up when it appears.

    def poll(self, max_records: int, timeout_s: float) -> list[Envelope]:
        deadline = time.monotonic() + timeout_s
        out: list[Envelope] = []
        while len(out) < max_records:
            got = self._next_line()
            if got is not None:
                line, file = got
                if isinstance(line, CutLine) or line.strip():
                    out.append(self._envelope(line, file))
                continue
            if out or self.exhausted or time.monotonic() >= deadline:
                break
            if self._waiting or self._mid_line:  # no sleep: more is there, or waited for
                continue
            time.sleep(min(self.poll_interval_s, max(0.0, deadline - time.monotonic())))
        return out

    def unreachable(self) -> str | None:
        """A file (or stdin) is always reachable; a followed file may simply not exist yet."""
        return None

    def pause(self) -> None:
        """Nothing to do: a file is only read when polled."""

    def resume(self) -> None:
        """Nothing to do: a file is only read when polled."""

    @property
    def exhausted(self) -> bool:
        return self._eof and not self.follow

    def commit(self) -> None:
        """Save the position past the last line acknowledged in order (with a checkpoint)."""
        if self.checkpoint is None:
            return
        upto = self._tracker.committable()
        if upto is None:
            return
        file, end, line = self._marks[upto - 1]
        try:
            self.checkpoint.save(
                FilePosition(source=self.path, file=file.identity(end), offset=end, line=line)
            )
        except OSError as exc:
            # Like a failed Kafka commit: the next commit retries; a restart before it
            # redelivers from the last saved position (duplicates, never losses).
            raise CommitError(
                f"cannot save the checkpoint {self.checkpoint.path}: {exc}", source="file"
            ) from exc
        for seq in [s for s in self._marks if s < upto]:
            del self._marks[seq]
        self._tracker.mark_committed(upto)

    def lag(self) -> dict[tuple[str, int], int]:
        return {}

    def uncommitted(self) -> int:
        return self._tracker.uncommitted if self.checkpoint is not None else 0

    def close(self) -> None:
        try:
            self.commit()
        finally:
            if self._file is not None and self._file.stream is not sys.stdin.buffer:
                self._file.stream.close()
            self._file = None
            if self.checkpoint is not None:
                self.checkpoint.unlock()

    # ------------------------------------------------------------------------------- reading

    def _envelope(self, line: bytes | CutLine, file: _File) -> Envelope:
        position = {"file": self.path, "line": file.line}
        if isinstance(line, CutLine):
            envelope = Envelope(
                payload=line.prefix,
                position=position,
                oversized=Oversized(line.size, line.sha256, self._buffer.limit),
            )
        else:
            payload = line.rstrip(b"\r\n")
            if file.line == 1:  # a UTF-8 BOM (Notepad's) before the first line is passed over
                payload = payload.removeprefix(b"\xef\xbb\xbf")
            envelope = Envelope(payload=payload, position=position)
        if self.checkpoint is not None:
            seq, self._seq = self._seq, self._seq + 1
            self._marks[seq] = (file, file.consumed, file.line)
            self._tracker.add(seq)
            envelope.on_done = _done(self._tracker, seq)
        return envelope

    def _open(self, path: str, offset: int = 0, line: int = 0, *, ended: bool = False) -> None:
        self._use(_File(open_source_file(path)), offset, line, ended=ended)

    def _use(self, file: _File, offset: int = 0, line: int = 0, *, ended: bool = False) -> None:
        """Read ``file`` from now on, from ``offset`` (its ``line``-th line ends there).
        ``ended``: a rotated-away file, written no more: its end ends its last line."""
        stream = file.stream
        if not file.dev:
            st = os.fstat(stream.fileno())
            file.dev, file.ino = st.st_dev, st.st_ino
        if offset:
            # The first bytes identify the file in later checkpoints.
            file.head += stream.read(min(HEAD_BYTES, offset))
            # A saved offset inside a line (the file changed while STEF was stopped): from
            # that line's start (the caller says so), the head cut to what is read. The lines
            # before it were changed too, maybe: counted again, or the lines read from there
            # were numbered from the saved count, one past their own number or more.
            start = line_start(stream, offset, ended=ended)
            if start != offset:
                line = lines_before(stream, start)
            del file.head[start:]
            file.consumed, file.line = start, line
        if self._file is not None and self._file.stream is not stream:
            self._file.stream.close()
        self._file = file
        self._buffer.clear()

    def _open_generation(
        self, gen: Generation, offset: int = 0, line: int = 0, *, copy: bool = False
    ) -> None:
        """Read ``gen`` from ``offset`` (its ``line``-th line ends there); ``copy``: it is
        copytruncate's copy of the file read so far."""
        if gen.live:
            self._open(gen.path, offset, line)
            return
        st = os.stat(gen.path)
        self._use(
            _File(open_generation(gen), st.st_dev, st.st_ino, compressed=gen.compressed, copy=copy),
            offset,
            line,
            ended=True,
        )

    def _resume(self, checkpoint: Checkpoint) -> bool:
        """Open where the checkpoint says; False when it says nothing (start as without one)."""
        saved = checkpoint.load(self.path)
        if saved is None:
            return False
        if saved.file.matches(self.path):
            if os.stat(self.path).st_size < saved.offset:
                log.warning("checkpoint_file_truncated", source=self.path, offset=saved.offset)
                return False  # copytruncate while down: the file starts over
            self._open(self.path, saved.offset, saved.line)
            return self._resumed(self.path, saved)
        # Rotated while down, maybe several times, maybe compressed since: finish that
        # generation, then every newer one in order, then the live file.
        chain = [g for g in generations(self.path) if not g.live]
        at = locate(chain, saved.file, saved.offset)
        if at is not None:
            try:
                self._open_generation(chain[at], saved.offset, saved.line)
            except (OSError, EOFError, zlib.error) as exc:
                log.warning("checkpoint_generation_unreadable", path=chain[at].path, error=str(exc))
            else:
                return self._resumed(chain[at].path, saved)
        rotated = find_rotated(self.path, saved.file)
        if rotated is not None and os.stat(rotated).st_size >= saved.offset:
            # Rotated under a name outside the chain: finish it, then the live file from 0.
            self._open(rotated, saved.offset, saved.line, ended=True)
            return self._resumed(rotated, saved)
        # Its file edited shorter than the offset, or rewritten, or removed: the generations
        # written since the last save hold lines not judged yet, older ones none. From the
        # oldest of them (the edited one included: judged again, its position lost with the
        # edit); else the live file from its start.
        saved_at = checkpoint.saved_at()
        log.warning(
            "checkpoint_file_replaced", source=self.path, offset=saved.offset, saved_at=saved_at
        )
        return saved_at is not None and self._open_rotated_since(saved_at)

    def _resumed(self, path: str, saved: FilePosition) -> bool:
        """Say where reading resumes: ``path`` opened at ``saved``, or at the start of the line
        its offset falls inside (the file was changed while STEF was stopped)."""
        file = self._file
        offset, line = (
            (file.consumed, file.line) if file is not None else (saved.offset, saved.line)
        )
        if offset != saved.offset:
            log.warning(
                "checkpoint_not_at_line_end",
                source=path,
                offset=saved.offset,
                line_start=offset,
                hint="the file was changed while stopped: its line is read again from its start",
            )
        log.info("checkpoint_resumed", source=path, offset=offset, line=line)
        return True

    def _next_line(self) -> tuple[bytes | CutLine, _File] | None:
        """The next complete line and its file, or None when there is none yet (or ever), or
        when :data:`_LONG_LINE_STEP` bytes were read without one (``_mid_line``: the rest of
        the line is read at the next call)."""
        self._mid_line = False
        read = 0
        while True:
            file = self._current()
            if file is None:
                return None
            line = self._buffer.line()
            if line is not None:
                return self._take(file, line)
            if read >= _LONG_LINE_STEP:
                self._mid_line = True
                return None
            chunk = self._read(file)
            if chunk:
                read += len(chunk)
                self._buffer.feed(chunk)
                continue
            if self._waiting:
                return None  # stdin has nothing yet, but has not ended
            if not self.follow:
                self._eof = True
                if len(self._buffer):
                    return self._take(file, self._buffer.rest())
                return None
            if self._advance():
                continue
            return None

    def _current(self) -> _File | None:
        """The file being read; when it is gone (rotated away), the next one a followed source
        has (None: none yet, or not following)."""
        while self._file is None:
            if not (self.follow and self._advance()):
                return None
        return self._file

    def _take(self, file: _File, line: bytes | CutLine) -> tuple[bytes | CutLine, _File]:
        file.consumed += line.raw_len if isinstance(line, CutLine) else len(line)
        file.line += 1
        return line, file

    def _read(self, file: _File) -> bytes:
        stream = file.stream
        if stream is sys.stdin.buffer:
            # Wait briefly for input instead of blocking in read: a signal must stop the loop.
            ready, _, _ = select.select([stream], [], [], self.poll_interval_s)
            if not ready:
                self._waiting = True
                return b""
            self._waiting = False
            # read1 returns what is available instead of blocking for a full chunk.
            return stream.read1(_CHUNK)  # type: ignore[attr-defined,no-any-return]
        if self.follow and self._truncated(file):
            return b""  # the bytes at our offset are another file's now: see _advance
        try:
            chunk = stream.read(_CHUNK)
        except (EOFError, zlib.error, gzip.BadGzipFile) as exc:
            # A damaged or unfinished .gz generation: what it held up to here was read.
            log.warning("rotated_generation_unreadable", source=self.path, error=str(exc))
            chunk = b""
        if chunk:
            file.quiet_at = None  # written since: a rotated-away file's grace starts again
        if len(file.head) < HEAD_BYTES:
            file.head += chunk[: HEAD_BYTES - len(file.head)]
        return chunk

    def _truncated(self, file: _File) -> bool:
        """True when a plain file no longer starts with the bytes it started with, or is
        shorter than what was read: truncated in place (copytruncate), whatever its size now;
        a file that grew back past our offset before we looked again is caught too."""
        if file.compressed or not file.head:
            return False
        fd = file.stream.fileno()
        if os.fstat(fd).st_size < file.stream.tell():
            return True
        return os.pread(fd, len(file.head), 0) != bytes(file.head)

    def _advance(self) -> bool:
        """At the end of a followed file: move on when it was rotated away or truncated, else
        wait. True when there is something new to read (or a line to hand out)."""
        file = self._file
        try:
            st: os.stat_result | None = os.stat(self.path)
        except OSError:
            st = None  # rotated away, the new file is not there yet
        if file is None:
            return self._reopen(live_exists=st is not None)
        same = (
            st is not None
            and not file.compressed
            and (st.st_dev, st.st_ino) == (file.dev, file.ino)
        )
        if same:
            return self._after_truncation(file) if self._truncated(file) else False
        if file.left_at is None:
            file.left_at = time.time()
        if self._read_rest(file):
            return True
        if not self._quiet(file):
            self._warn_still_written(file)
            return False  # its writer may still finish its line there, or write more
        if self._end_last_line(file):
            return True
        return self._next_generation(file, st is not None)

    def _reopen(self, live_exists: bool) -> bool:
        """With no file open: a generation rotated since, else the live file when there is one."""
        if self._open_rotated_since():
            return True
        if not live_exists:
            return False
        return self._open_live()

    def _read_rest(self, file: _File) -> bool:
        """The rotated-away ``file``'s last bytes into the buffer; True when there were some."""
        if file.compressed:
            return False
        # Finish the old file first: lines may have landed between our read and the rename.
        rest = file.stream.read(_CHUNK)
        if len(file.head) < HEAD_BYTES:
            file.head += rest[: HEAD_BYTES - len(file.head)]
        if rest:
            file.quiet_at = None
            self._buffer.feed(rest)
            return True
        return False

    def _quiet(self, file: _File) -> bool:
        """Whether the rotated-away ``file``, read to its end, has gone ``rotate_wait_s``
        unwritten (by its mtime, then by this clock): a writer that held it when it was
        renamed may finish its line there, and write more, before it reopens the path. Handed
        out at once, that half line was a ``not_json`` dead letter and its other half lost
        (or a second broken line). A copy or a ``.gz`` is never written again: not waited for."""
        if file.compressed or file.copy or self.rotate_wait_s <= 0:
            return True
        now = time.monotonic()
        if file.quiet_at is None:
            try:
                age = time.time() - os.fstat(file.stream.fileno()).st_mtime
            except OSError:
                return True
            # An mtime in the future (a clock set back, a touch) waits the whole grace, no more.
            file.quiet_at = now + min(self.rotate_wait_s, max(0.0, self.rotate_wait_s - age))
        return now >= file.quiet_at

    def _warn_still_written(self, file: _File) -> None:
        """Once per file: a renamed file still written :data:`STILL_WRITTEN_WAITS` times
        ``rotate_wait_s`` after the rename has a writer that never reopens the path. STEF keeps
        following it (its lines are there), so the new file's lines wait, for as long as that
        writer lives; the operator's fix is the writer's (``copytruncate``, or a ``postrotate``
        signal that makes it reopen)."""
        if file.warned or file.left_at is None:
            return
        since = time.time() - file.left_at
        if since >= STILL_WRITTEN_WAITS * self.rotate_wait_s:
            file.warned = True
            log.warning("rotated_file_still_written", source=self.path, seconds=round(since, 1))

    def _end_last_line(self, file: _File) -> bool:
        """The quiet rotated-away ``file``'s last line without its newline, ended so it is
        handed out; False when there is none."""
        if len(self._buffer):
            # A last line without its newline: hand it out, the writer is gone. The newline is
            # not the file's: a checkpoint past it pointed beyond the generation's end, which
            # no generation is long enough for at a restart (taken for a replaced file).
            self._buffer.feed(b"\n")
            file.consumed -= 1
            return True
        return False

    def _next_generation(self, file: _File, live_exists: bool) -> bool:
        """Switch from the finished ``file`` to the generation after it (the live file last)."""
        chain = generations(self.path)
        at = locate(chain, file.identity(HEAD_BYTES))
        if at is None:
            # Not found in the chain (deleted, or renamed outside it): the oldest generation
            # written since it was found renamed away is next, else the live file. Rotated
            # again during the wait with one generation kept (RotatingFileHandler's
            # backupCount=1), it was deleted and the generation after it renamed into its
            # place: the live file next skipped that whole generation.
            if file.left_at is not None and self._open_written_since(file, chain):
                return True
            if not live_exists:
                return False
            log.info("rotation_followed", source=self.path, previous_generation="gone")
            return self._open_live()
        if at + 1 >= len(chain):
            return False  # it is the newest generation; the live file is not there yet
        gen = chain[at + 1]
        try:
            self._open_generation(gen)
        except ConfigError as exc:
            log.warning("source_not_readable", error=str(exc))
            return False
        except (OSError, EOFError, zlib.error) as exc:
            log.info("rotation_retry", path=gen.path, error=str(exc))
            return False  # rotated again meanwhile: the next poll lists the chain again
        log.info("rotation_followed", source=self.path, generation=gen.path)
        return True

    def _open_written_since(self, file: _File, chain: list[Generation]) -> bool:
        """Open the oldest generation of ``chain`` written since the gone ``file`` was found
        renamed away that is not ``file`` itself (a ``.gz`` made of it before its writer
        finished its line there: its first bytes are ``file``'s); False when there is none."""
        since = (file.left_at or 0.0) - MTIME_SLACK_S
        for gen in chain:
            if gen.live:
                return False
            try:
                if os.stat(gen.path).st_mtime < since:
                    continue
            except OSError:
                continue
            head = read_head(gen, len(file.head))
            if head is None or (head and bytes(file.head).startswith(head)):
                continue
            try:
                self._open_generation(gen)
            except (OSError, EOFError, zlib.error, ConfigError) as exc:
                log.info("rotation_retry", path=gen.path, error=str(exc))
                return False
            log.info("rotation_followed", source=self.path, generation=gen.path, previous="gone")
            return True
        return False

    def _after_truncation(self, file: _File) -> bool:
        """The live file was truncated in place: what we had not read of it is in a copy
        (copytruncate) when one is found by its first bytes; read the rest there, then the
        newer generations, then the live file from its start."""
        copies = [g for g in generations(self.path) if not g.live]
        at = locate(copies, file.identity(HEAD_BYTES), file.consumed)
        if at is not None:
            try:
                self._open_generation(copies[at], file.consumed, file.line, copy=True)
            except (OSError, EOFError, zlib.error) as exc:
                log.warning("rotated_generation_unreadable", path=copies[at].path, error=str(exc))
            else:
                log.info("copytruncate_followed", source=self.path, copy=copies[at].path)
                return True
        log.info("file_truncated", source=self.path, lost_unread_bytes_possible=True)
        file.stream.seek(0)
        self._use(_File(file.stream, file.dev, file.ino))
        return True

    def _open_rotated_since(self, since: float | None = None) -> bool:
        """Open the oldest generation rotated away since ``since`` (None: since following
        began), if there is one (the first file opened without a saved position): the newer
        ones and the live file follow."""
        gen = first_written_since(generations(self.path), self.since if since is None else since)
        if gen is None:
            return False
        try:
            self._open_generation(gen)
        except (OSError, EOFError, zlib.error, ConfigError) as exc:
            log.info("rotation_retry", path=gen.path, error=str(exc))
            return False
        log.info("rotated_since_start_followed", source=self.path, generation=gen.path)
        return True

    def _open_live(self) -> bool:
        try:
            self._open(self.path)
        except FileNotFoundError:
            return False
        except ConfigError as exc:
            # A FIFO or a directory appeared at the path: say so, keep waiting for a file.
            log.warning("source_not_readable", error=str(exc))
            return False
        return True


def _done(tracker: OffsetTracker, seq: int) -> Callable[[], None]:
    return lambda: tracker.done(seq)


class JsonlSink:
    """One JSON object per line to a file (appended) or stdout; a write is acknowledged once
    flushed to the operating system, which survives the death of the process."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._stream: IO[bytes] | None = None
        self._closing = threading.Event()
        # A last line without its newline found at open (a write cut by a crash or a full disk)
        # and cut off, so the lines appended after it stay JSONL; its record was not
        # acknowledged, so it is redelivered and written whole.
        self.torn_lines_cut = 0
        if path == "-":
            self._stream = sys.stdout.buffer
        else:
            # Nothing is created before the first line or open() (the service calls it once the
            # source is open): a service that cannot reach its source leaves no empty file
            # behind. What would fail then fails now, at start.
            _check_writable(path)

    def send(self, key: bytes | None, value: bytes, on_ack: AckCallback) -> None:
        try:
            with self._lock:
                self._write(value + b"\n")
        except (OSError, ValueError) as exc:
            on_ack(SinkError(f"cannot write to {self.path}: {exc}"))
            return
        on_ack(None)

    def open(self, stop: Callable[[], bool]) -> None:
        """Create the file now (empty) if no line has: called once the source is open, so a run
        leaves its output files, empty or not, and a run that never started leaves none. A
        FIFO is waited for until it has a reader or ``stop()`` is true (then left unopened)."""
        with self._lock:
            try:
                self._opened(stop)
            except OSError as exc:  # named as the output, not as a temporary file of it
                raise OSError(exc.errno, exc.strerror, self.output) from exc

    @property
    def output(self) -> str:
        """The file the user named (what errors say)."""
        return self.path

    def _opened(self, stop: Callable[[], bool]) -> IO[bytes] | None:
        if self._stream is None:
            directory = os.path.dirname(self.path)
            if directory:
                os.makedirs(directory, exist_ok=True)
            self._stream = _open_appending(self.path, stop)
            if self._stream is not None:
                self._cut_torn_line(self._stream)
        return self._stream

    def _writable(self) -> IO[bytes]:
        stream = self._opened(self._closing.is_set)
        if stream is None:
            raise OSError(errno.ENXIO, "closed while waiting for a reader of the FIFO")
        return stream

    def _cut_torn_line(self, stream: IO[bytes]) -> None:
        # The sink's own descriptor is append-only: look with a reading one.
        with open(self.path, "rb") as reader:
            fd = reader.fileno()
            size = os.fstat(fd).st_size
            if size == 0 or os.pread(fd, 1, size - 1) == b"\n":
                return
            end = size
            while end > 0:
                start = max(0, end - _CHUNK)
                newline = os.pread(fd, end - start, start).rfind(b"\n")
                if newline >= 0:
                    end = start + newline + 1
                    break
                end = start
        os.ftruncate(stream.fileno(), end)
        self.torn_lines_cut += 1
        log.warning("sink_torn_line_cut", path=self.path, bytes=size - end, kept_bytes=end)

    def _write(self, line: bytes) -> None:
        stream = self._writable()
        if stream is sys.stdout.buffer:
            stream.write(line)
            stream.flush()
            return
        # The file's size, not tell(): in append mode the position is not moved back by a
        # truncation, so after a first cut tell() is past the end, and cutting back to it
        # would leave the next torn line in place (padded with zeros).
        status = os.fstat(stream.fileno())
        if status.st_nlink == 0:
            # Removed while open (its directory too, maybe): what went on being written to it
            # was lost with it, though acknowledged. A new file takes the lines from now on.
            log.warning("sink_file_removed", path=self.path)
            stream.close()
            self._stream = None
            stream = self._writable()
            status = os.fstat(stream.fileno())
        start = status.st_size
        try:
            view = memoryview(line)
            while view:
                written = stream.write(view)
                view = view[written or 0 :]
        except OSError:
            # A full disk may have taken part of the line: cut it off, so the file stays JSONL
            # and the line is written whole when the record is redelivered.
            with contextlib.suppress(OSError, ValueError):
                stream.truncate(start)
                stream.seek(start)
            raise

    def reopen(self) -> None:
        """Close the file; the next line opens the path again (SIGUSR1: logrotate renamed the
        file, and lines would otherwise go on into the renamed one)."""
        with self._lock:
            if self._stream is not None and self._stream is not sys.stdout.buffer:
                self._stream.close()
                self._stream = None

    def flush(self, timeout_s: float) -> None:
        """Flush what is written, waiting at most ``timeout_s`` for a line being written: one
        waiting for a FIFO's reader (after SIGUSR1, its reader gone) holds the lock until
        :meth:`close`, and a shutdown flushes before it closes; waiting on the lock for good
        kept ``stef run`` alive after SIGTERM and its drain timeout."""
        if not self._lock.acquire(timeout=timeout_s):
            return
        try:
            if self._stream is not None:
                self._stream.flush()
        finally:
            self._lock.release()

    def close(self) -> None:
        self._closing.set()  # before the lock: a line waiting for a FIFO's reader holds it
        with self._lock:
            if self._stream is sys.stdout.buffer:
                self._stream.flush()
            elif self._stream is not None:
                self._stream.close()


def _open_appending(path: str, stop: Callable[[], bool]) -> IO[bytes] | None:
    """``path`` opened for appending, unbuffered: a line is with the OS once write returns, and
    a failed write leaves no tail in a buffer to reach the disk later. A FIFO without a reader
    is waited for by a non-blocking open tried again every 0.1 s, not by a blocking open: that
    held start-up until a reader came, a SIGTERM recorded but never acted on. None once
    ``stop()`` is true."""
    flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NONBLOCK
    waiting = False
    while True:
        try:
            fd = os.open(path, flags, 0o666)
            break
        except OSError as exc:  # ENXIO: a FIFO with no reader (a socket's is final)
            if exc.errno != errno.ENXIO or not stat.S_ISFIFO(os.stat(path).st_mode):
                raise
        if not waiting:
            log.warning("sink_waiting_for_reader", path=path)
            waiting = True
        if stop():
            return None
        time.sleep(0.1)
    os.set_blocking(fd, True)  # a full pipe holds a write back, as before
    return open(fd, "ab", buffering=0)


def _check_writable(path: str) -> None:
    """Raise the ``PermissionError`` that opening ``path`` for appending would raise later: the
    file, else its nearest existing ancestor directory, must be writable by this process.

    Raises:
        PermissionError: it is not (the error names the path).
    """
    # The effective ids (and capabilities) decide an open(), not the real ones access() uses.
    effective = os.access in os.supports_effective_ids
    target = os.path.abspath(path)
    if os.path.exists(target):
        if not os.access(target, os.W_OK, effective_ids=effective):
            raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), path)
        return
    directory = os.path.dirname(target)
    while not os.path.exists(directory):
        directory = os.path.dirname(directory)
    if not os.access(directory, os.W_OK | os.X_OK, effective_ids=effective):
        raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), path)

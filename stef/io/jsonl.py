"""JSONL sources and sinks: a log file (optionally followed as it grows and rotates), stdin, stdout.

A followed file behaves like ``tail -F``: appended lines are picked up; when the path is renamed
away and a new file appears (rotation), the rest of the old file is read first, then the new file
from its start; when the file shrinks in place (copytruncate), reading restarts at its beginning.
A line is only handed out once its newline has arrived, so a half-written line is never judged.
With a :class:`~stef.io.checkpoint.Checkpoint`, a followed file resumes after a restart just past
the last acknowledged line (at-least-once, like a Kafka commit).
"""

from __future__ import annotations

import contextlib
import os
import select
import sys
import threading
import time
from collections.abc import Callable
from typing import IO, BinaryIO

import structlog

from stef.errors import CommitError, ConfigError, SinkError
from stef.io import AckCallback, Envelope
from stef.io.checkpoint import HEAD_BYTES, Checkpoint, FileIdentity, FilePosition, find_rotated
from stef.io.offsets import OffsetTracker

log = structlog.get_logger(__name__)

_CHUNK = 1 << 16


class LineBuffer:
    """Bytes read but not yet handed out as lines, in linear time however long a line grows.

    Appending to a ``bytes`` and searching it whole after every chunk copies and rescans the
    line once per chunk (quadratic: a 64 MB line took 20 s). Here chunks extend a bytearray in
    place, the newline search resumes where the last one stopped, and consumed lines are cut
    off the front only once they are at least half the buffer (amortised linear).

    Attributes:
        scanned: bytes searched for a newline so far (each byte once: the cost is linear).
    """

    def __init__(self) -> None:
        self._buf = bytearray()
        self._start = 0  # the first byte not yet handed out
        self._scan = 0  # no newline in [_start, _scan)
        self.scanned = 0

    def __len__(self) -> int:
        return len(self._buf) - self._start

    def feed(self, chunk: bytes) -> None:
        self._buf += chunk

    def line(self) -> bytes | None:
        """The next complete line (with its newline), or None until one has arrived."""
        newline = self._buf.find(b"\n", self._scan)
        if newline < 0:
            self.scanned += len(self._buf) - self._scan
            self._scan = len(self._buf)
            return None
        self.scanned += newline + 1 - self._scan
        line = bytes(self._buf[self._start : newline + 1])
        self._start = self._scan = newline + 1
        if self._start >= _CHUNK and 2 * self._start >= len(self._buf):
            del self._buf[: self._start]
            self._scan -= self._start
            self._start = 0
        return line

    def rest(self) -> bytes:
        """Whatever is left (a last line without its newline), emptying the buffer."""
        rest = bytes(self._buf[self._start :])
        self.clear()
        return rest

    def clear(self) -> None:
        self._buf = bytearray()
        self._start = self._scan = 0


class _File:
    """One file as read: its stream and identity, the first bytes read (they identify it in a
    checkpoint), how many bytes were handed out as lines, and how many lines."""

    def __init__(self, stream: BinaryIO, dev: int = 0, ino: int = 0) -> None:
        self.stream = stream
        self.dev = dev
        self.ino = ino
        self.head = bytearray()
        self.consumed = 0
        self.line = 0

    def identity(self, upto: int) -> FileIdentity:
        return FileIdentity.of(self.dev, self.ino, bytes(self.head[: min(HEAD_BYTES, upto)]))


class FileSource:
    """Lines of a JSONL file (or stdin) as records; positions are ``{"file", "line"}``.

    Args:
        path: the file, or ``-`` for stdin.
        follow: keep reading as the file grows; survive rotation and truncation.
        poll_interval_s: how often a followed file is checked for growth.
        checkpoint: where the position of the last acknowledged line is kept; a restart resumes
            there. None: every start reads the file from its beginning.
    """

    def __init__(
        self,
        path: str,
        *,
        follow: bool = False,
        poll_interval_s: float = 0.2,
        checkpoint: Checkpoint | None = None,
    ) -> None:
        self.path = path
        self.follow = follow and path != "-"
        self.poll_interval_s = poll_interval_s
        self.checkpoint = checkpoint if path != "-" else None
        self._file: _File | None = None
        self._buffer = LineBuffer()
        self._eof = False
        self._waiting = False
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
        if self.checkpoint is not None and self._resume(self.checkpoint):
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
                if line.strip():
                    out.append(self._envelope(line, file))
                continue
            if out or self.exhausted or time.monotonic() >= deadline:
                break
            if self._waiting:
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

    # ------------------------------------------------------------------------------- reading

    def _envelope(self, line: bytes, file: _File) -> Envelope:
        envelope = Envelope(
            payload=line.rstrip(b"\r\n"), position={"file": self.path, "line": file.line}
        )
        if self.checkpoint is not None:
            seq, self._seq = self._seq, self._seq + 1
            self._marks[seq] = (file, file.consumed, file.line)
            self._tracker.add(seq)
            envelope.on_done = _done(self._tracker, seq)
        return envelope

    def _open(self, path: str, offset: int = 0, line: int = 0) -> None:
        stream = open(path, "rb")  # noqa: SIM115 (held open across polls)
        st = os.fstat(stream.fileno())
        file = _File(stream, st.st_dev, st.st_ino)
        if offset:
            # The first bytes identify the file in later checkpoints.
            file.head += stream.read(min(HEAD_BYTES, offset))
            stream.seek(offset)
            file.consumed, file.line = offset, line
        if self._file is not None and self._file.stream is not stream:
            self._file.stream.close()
        self._file = file
        self._buffer.clear()

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
            log.info("checkpoint_resumed", source=self.path, offset=saved.offset, line=saved.line)
            return True
        rotated = find_rotated(self.path, saved.file)
        if rotated is not None and os.stat(rotated).st_size >= saved.offset:
            # Rotated while down: finish the old file, then the new one is followed from 0.
            self._open(rotated, saved.offset, saved.line)
            log.info("checkpoint_resumed", source=rotated, offset=saved.offset, line=saved.line)
            return True
        log.warning("checkpoint_file_replaced", source=self.path, offset=saved.offset)
        return False

    def _next_line(self) -> tuple[bytes, _File] | None:
        """The next complete line and its file, or None when there is none yet (or ever)."""
        while True:
            file = self._file
            if file is None:
                if self.follow and self._reopen_if_rotated():
                    continue
                return None
            line = self._buffer.line()
            if line is not None:
                return self._take(file, line)
            chunk = self._read(file)
            if chunk:
                self._buffer.feed(chunk)
                continue
            if self._waiting:
                return None  # stdin has nothing yet, but has not ended
            if not self.follow:
                self._eof = True
                if len(self._buffer):
                    return self._take(file, self._buffer.rest())
                return None
            if self._reopen_if_rotated():
                continue
            return None

    def _take(self, file: _File, line: bytes) -> tuple[bytes, _File]:
        file.consumed += len(line)
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
        chunk = stream.read(_CHUNK)
        if len(file.head) < HEAD_BYTES:
            file.head += chunk[: HEAD_BYTES - len(file.head)]
        return chunk

    def _reopen_if_rotated(self) -> bool:
        """At the end of a followed file: switch to a new file at the path, or rewind after a
        truncation. True when there is something new to read (or a line to hand out)."""
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            return False  # rotated away, the new file is not there yet: keep the old one
        file = self._file
        if file is None:
            self._open(self.path)
            return True
        if (st.st_dev, st.st_ino) != (file.dev, file.ino):
            # Finish the old file first: lines may have landed between our read and the rename.
            rest = file.stream.read()
            if len(file.head) < HEAD_BYTES:
                file.head += rest[: HEAD_BYTES - len(file.head)]
            if rest:
                self._buffer.feed(rest)
                return True
            if len(self._buffer):
                # A last line without its newline: hand it out, the writer is gone.
                self._buffer.feed(b"\n")
                return True
            self._open(self.path)
            return True
        if st.st_size < file.stream.tell():
            # Copytruncate: the same file starts over (a new identity: its first bytes differ).
            file.stream.seek(0)
            self._file = _File(file.stream, file.dev, file.ino)
            self._buffer.clear()
            return True
        return False


def _done(tracker: OffsetTracker, seq: int) -> Callable[[], None]:
    return lambda: tracker.done(seq)


class JsonlSink:
    """One JSON object per line to a file (appended) or stdout; a write is acknowledged once
    flushed to the operating system, which survives the death of the process."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._lock = threading.Lock()
        if path == "-":
            self._stream: IO[bytes] = sys.stdout.buffer
        else:
            directory = os.path.dirname(path)
            if directory:
                os.makedirs(directory, exist_ok=True)
            # Unbuffered: a line is with the OS once write returns, and a failed write leaves no
            # tail in a buffer to reach the disk later.
            self._stream = open(path, "ab", buffering=0)  # noqa: SIM115 (held open for the run)

    def send(self, key: bytes | None, value: bytes, on_ack: AckCallback) -> None:
        try:
            with self._lock:
                self._write(value + b"\n")
        except (OSError, ValueError) as exc:
            on_ack(SinkError(f"cannot write to {self.path}: {exc}"))
            return
        on_ack(None)

    def _write(self, line: bytes) -> None:
        if self._stream is sys.stdout.buffer:
            self._stream.write(line)
            self._stream.flush()
            return
        start = self._stream.tell()
        try:
            view = memoryview(line)
            while view:
                written = self._stream.write(view)
                view = view[written or 0 :]
        except OSError:
            # A full disk may have taken part of the line: cut it off, so the file stays JSONL
            # and the line is written whole when the record is redelivered.
            with contextlib.suppress(OSError, ValueError):
                self._stream.truncate(start)
            raise

    def flush(self, timeout_s: float) -> None:
        with self._lock:
            self._stream.flush()

    def close(self) -> None:
        with self._lock:
            if self._stream is sys.stdout.buffer:
                self._stream.flush()
            else:
                self._stream.close()

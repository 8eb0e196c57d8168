"""JSONL sources and sinks: a log file (optionally followed as it grows and rotates), stdin, stdout.

A followed file behaves like ``tail -F``: appended lines are picked up; when the path is renamed
away and a new file appears (rotation), the rest of the old file is read first, then the new file
from its start; when the file shrinks in place (copytruncate), reading restarts at its beginning.
A line is only handed out once its newline has arrived, so a half-written line is never judged.
"""

from __future__ import annotations

import contextlib
import os
import select
import sys
import threading
import time
from typing import IO, BinaryIO

from stef.errors import ConfigError, SinkError
from stef.io import AckCallback, Envelope

_CHUNK = 1 << 16


class FileSource:
    """Lines of a JSONL file (or stdin) as records; positions are ``{"file", "line"}``.

    Args:
        path: the file, or ``-`` for stdin.
        follow: keep reading as the file grows; survive rotation and truncation.
        poll_interval_s: how often a followed file is checked for growth.
    """

    def __init__(self, path: str, *, follow: bool = False, poll_interval_s: float = 0.2) -> None:
        self.path = path
        self.follow = follow and path != "-"
        self.poll_interval_s = poll_interval_s
        self._stream: BinaryIO | None = None
        self._ino: int | None = None
        self._buffer = b""
        self._line = 0
        self._eof = False
        self._waiting = False

    # ------------------------------------------------------------------------------ protocol

    def start(self) -> None:
        if self.path == "-":
            self._stream = sys.stdin.buffer
            return
        try:
            self._open()
        except FileNotFoundError as exc:
            if not self.follow:
                raise ConfigError(f"source file:{self.path}: no such file") from exc
            # A followed log may not exist yet; it is picked up when it appears.

    def poll(self, max_records: int, timeout_s: float) -> list[Envelope]:
        deadline = time.monotonic() + timeout_s
        out: list[Envelope] = []
        while len(out) < max_records:
            line = self._next_line()
            if line is not None:
                self._line += 1
                if line.strip():
                    out.append(
                        Envelope(
                            payload=line.rstrip(b"\r\n"),
                            position={"file": self.path, "line": self._line},
                        )
                    )
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
        """Files keep no committed position (the service acknowledges before it exits)."""

    def lag(self) -> dict[tuple[str, int], int]:
        return {}

    def close(self) -> None:
        if self._stream is not None and self._stream is not sys.stdin.buffer:
            self._stream.close()
        self._stream = None

    # ------------------------------------------------------------------------------- reading

    def _open(self) -> None:
        stream = open(self.path, "rb")  # noqa: SIM115 (held open across polls)
        self._stream = stream
        self._ino = os.fstat(stream.fileno()).st_ino
        self._buffer = b""
        self._line = 0

    def _next_line(self) -> bytes | None:
        """The next complete line, or None when there is none yet (or ever)."""
        while True:
            newline = self._buffer.find(b"\n")
            if newline >= 0:
                line, self._buffer = self._buffer[: newline + 1], self._buffer[newline + 1 :]
                return line
            chunk = self._read()
            if chunk:
                self._buffer += chunk
                continue
            if self._waiting:
                return None  # stdin has nothing yet, but has not ended
            if not self.follow:
                self._eof = True
                if self._buffer:
                    line, self._buffer = self._buffer, b""
                    return line
                return None
            if self._reopen_if_rotated():
                continue
            return None

    def _read(self) -> bytes:
        if self._stream is None:
            return b""
        if self._stream is sys.stdin.buffer:
            # Wait briefly for input instead of blocking in read: a signal must stop the loop.
            ready, _, _ = select.select([self._stream], [], [], self.poll_interval_s)
            if not ready:
                self._waiting = True
                return b""
            self._waiting = False
            # read1 returns what is available instead of blocking for a full chunk.
            return self._stream.read1(_CHUNK)  # type: ignore[attr-defined,no-any-return]
        return self._stream.read(_CHUNK)

    def _reopen_if_rotated(self) -> bool:
        """At the end of a followed file: switch to a new file at the path, or rewind after a
        truncation. True when there is something new to read."""
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            return False  # rotated away, the new file is not there yet: keep the old one
        if self._stream is None:
            self._open()
            return True
        if st.st_ino != self._ino:
            # Finish the old file first: lines may have landed between our read and the rename.
            rest = self._stream.read()
            if rest:
                self._buffer += rest
                return True
            if self._buffer:
                # A last line without its newline: hand it out, the writer is gone.
                self._buffer += b"\n"
            self._stream.close()
            pending = self._buffer
            self._open()
            self._buffer = pending
            return True
        if st.st_size < self._stream.tell():
            self._stream.seek(0)
            self._buffer = b""
            self._line = 0
            return True
        return False


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

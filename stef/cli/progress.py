"""The one progress bar of the commands that judge many records (``stef replay``, ``backfill``,
``calibrate``): tqdm's, on stderr when it is a terminal, with messages and log lines above it."""

from __future__ import annotations

import contextlib
import sys
import threading
from collections.abc import Iterator
from typing import TextIO

from tqdm import tqdm  # type: ignore[import-untyped]  # tqdm ships no stubs (types-tqdm would)


class Progress:
    """A tqdm progress bar on a terminal, nothing otherwise. Messages go above the bar: tqdm clears
    it, prints the line, and draws it again, so a warning never runs into it."""

    def __init__(self, total: int | None, enabled: bool, stream: TextIO | None = None) -> None:
        self.enabled = enabled
        self.stream = stream if stream is not None else sys.stderr
        self._bar = tqdm(
            total=total,
            disable=not enabled,
            file=self.stream,
            unit="rec",
            dynamic_ncols=True,
            mininterval=0.1,
            leave=True,
        )
        self._lock = threading.Lock()  # the service's workers step it from their threads

    @property
    def done(self) -> int:
        return int(self._bar.n)

    @property
    def total(self) -> int | None:
        return None if self._bar.total is None else int(self._bar.total)

    @total.setter
    def total(self, total: int | None) -> None:
        """Known only later (a backfill resolves its range after the bar is made)."""
        self._bar.total = total
        self._bar.refresh()

    def step(self) -> None:
        with self._lock:
            self._bar.update(1)

    def update_to(self, done: int) -> None:
        """Move the bar to ``done`` records (a caller that counts for itself)."""
        with self._lock:
            self._bar.update(done - self._bar.n)

    def message(self, text: str) -> None:
        """One line above the bar. A stream that fails (full, closed) loses the line, never the
        run: ``stef replay 2>/dev/full`` exited 1 when a dead letter's message, held for the
        records read before it, was said at the end."""
        with contextlib.suppress(OSError, ValueError):
            if self.enabled:
                self._bar.write(text, file=self.stream)
            else:
                print(text, file=self.stream)

    def close(self) -> None:
        self._bar.close()

    @contextlib.contextmanager
    def above(self) -> Iterator[None]:
        """While the bar is drawn, whatever else writes to ``sys.stderr`` (the service's log
        lines) goes above it too, a whole line at a time."""
        if not self.enabled:
            yield
            return
        with contextlib.redirect_stderr(_AboveBar(self)):
            yield


class _AboveBar:
    """A stderr stand-in that hands each complete line to :meth:`Progress.message`."""

    def __init__(self, progress: Progress) -> None:
        self.progress = progress
        self._pending = ""
        self._lock = threading.Lock()  # workers log from their own threads

    def write(self, text: str) -> int:
        with self._lock:
            self._pending += text
            *lines, self._pending = self._pending.split("\n")
            for line in lines:
                self.progress.message(line)
        return len(text)

    def flush(self) -> None:
        with self._lock:
            if self._pending:
                self.progress.message(self._pending)
                self._pending = ""

    def isatty(self) -> bool:
        return True

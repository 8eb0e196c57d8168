"""Helpers of the followed-file tests: generations of log lines, each line saying which
generation it is and where in it, so that a lost, repeated or reordered line shows."""

from __future__ import annotations

from pathlib import Path


def generation(tag: str, n: int) -> list[bytes]:
    """``n`` JSON lines of the generation ``tag``: ``{"gen": tag, "n": 1}`` to ``n``."""
    return [f'{{"gen": "{tag}", "n": {i}}}'.encode() for i in range(1, n + 1)]


def append_lines(path: Path, lines: list[bytes]) -> None:
    """``lines`` appended to ``path``, each ended by a newline."""
    with path.open("ab") as f:
        for line in lines:
            f.write(line + b"\n")


# The grace a renamed file gets before the next generation is read (``rotate_wait_s``), for
# tests whose writers do not hold the renamed file: short, so they stay fast.
SHORT_WAIT_S = 0.02

"""The labels file: one JSON object per line, appended as each label is given.

A line: ``id``, ``app``, ``label`` (true correct, false incorrect, null skipped), ``note``,
``reviewer``, ``time`` (UTC, ISO 8601), ``queue`` (the order the reviewer walked: ``teaching``
or ``random``), ``judge`` (backend, model, prompt and rules version of the result seen) and
``p_correct`` (the judge's probability shown, null when it gave none).

Two reviewers may label into one file at once: each line is written with one ``write`` under an
exclusive ``fcntl`` lock, then flushed and fsynced before the page hears it was kept, so no line
is lost or interleaved and none is acknowledged before it is on disk.
"""

from __future__ import annotations

import fcntl
import json
import os
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from stef.errors import FileError
from stef.files import iter_jsonl
from stef.review.records import unicode_text

JUDGE_FIELDS = ("backend", "model", "prompt_version", "rules_version")


def label_line(
    rec: dict[str, Any],
    label: bool | None,
    *,
    note: str,
    reviewer: str,
    queue: str,
    p_correct: float | None,
    now: datetime | None = None,
) -> dict[str, Any]:
    """The line recording ``label`` for the result ``rec``."""
    judge = rec.get("judge")
    seen = {k: judge.get(k) for k in JUDGE_FIELDS} if isinstance(judge, dict) else {}
    return {
        "id": rec.get("id"),
        "app": rec.get("app"),
        "label": label,
        "note": note,
        "reviewer": reviewer,
        "time": (now or datetime.now(UTC)).isoformat(timespec="seconds").replace("+00:00", "Z"),
        "queue": queue,
        "judge": seen,
        "p_correct": p_correct,
    }


def append_label(path: Path, line: dict[str, Any]) -> None:
    """Append one line, whole, under an exclusive lock; on disk when this returns.

    Raises:
        OSError: the file cannot be opened, locked or written.
    """
    # A lone surrogate (a browser's JSON may send "\ud800" in a note) becomes U+FFFD: the file
    # stays UTF-8 that every reader of labels opens.
    data = unicode_text(json.dumps(line, ensure_ascii=False) + "\n").encode("utf-8")
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        try:
            written = 0
            while written < len(data):
                written += os.write(fd, data[written:])
            os.fsync(fd)
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


def read_label_lines(path: Path) -> list[dict[str, Any]]:
    """Every line of a labels file (none when it does not exist yet).

    Raises:
        FileError: the file cannot be read, or a line is not a JSON object with a string
            ``id`` and a boolean or null ``label``.
    """
    if not path.exists():
        return []
    out: list[dict[str, Any]] = []
    for n, obj in iter_jsonl(path, replace_surrogates=True):
        if not isinstance(obj.get("id"), str) or not (
            obj.get("label") is None or isinstance(obj.get("label"), bool)
        ):
            raise FileError(path, "not a label (a string 'id', 'label' true/false/null)", n)
        out.append(obj)
    return out


def latest_labels(path: Path) -> dict[str, dict[str, Any]]:
    """``id -> its last line`` (a later label of the same record replaces an earlier one)."""
    return {line["id"]: line for line in read_label_lines(path)}


def truth(path: Path, *, random_only: bool = False) -> dict[str, bool]:
    """``id -> label`` of the records labelled correct or incorrect (skips left out); with
    ``random_only``, only the labels given walking the random order (or in a file that does not
    say: a labels file written by hand is taken as a sample)."""
    out: dict[str, bool] = {}
    for rid, line in latest_labels(path).items():
        if not isinstance(line.get("label"), bool):
            continue
        if random_only and line.get("queue", "random") != "random":
            continue
        out[rid] = line["label"]
    return out

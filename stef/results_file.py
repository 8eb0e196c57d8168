"""Results files read as :class:`~stef.models.Result` models (``stef summary`` and
:func:`stef.load_results`): fields a newer STEF version added are passed over, at any depth, as
``stef report``, ``review`` and ``estimate`` pass them over (they read plain JSON objects,
:mod:`stef.review.records`); a line that is not a result is an error naming the file and the
line."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from stef.errors import StefError
from stef.models import Result


class ResultsFileError(StefError):
    """A line of a results file that is not a result (the message names the file and line)."""


def iter_results(path: str | Path) -> Iterator[tuple[int, Result]]:
    """``(line number, result)`` of every non-blank line of ``path``, in file order.

    Raises:
        ResultsFileError: a line is not a result.
        OSError: the file cannot be read; UnicodeDecodeError: it is not UTF-8 (each command
            says so in its own words).
    """
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, start=1):
            if not line.strip():
                continue
            try:
                result = Result.model_validate_json(line, extra="ignore")
            except ValueError as exc:
                first = str(exc).splitlines()[0]
                raise ResultsFileError(f"{path}:{n}: not a result: {first}") from None
            yield n, result

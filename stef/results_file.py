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
    """A results file that cannot be read, or a line of it that is not a result."""


def result_of(value: object) -> Result:
    """``value`` (a JSON text, or the object it holds) as a result, its unknown fields (at any
    depth) passed over.

    Raises:
        ValueError: not a result (pydantic's ValidationError, which is one).
    """
    if isinstance(value, str | bytes):
        return Result.model_validate_json(value, extra="ignore")
    return Result.model_validate(value, extra="ignore")


def not_a_result(path: str | Path, line: int, exc: ValueError) -> str:
    """The message for line ``line`` of ``path``: the first line of the validation error."""
    return f"{path}:{line}: not a result: {str(exc).splitlines()[0]}"


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
                result = result_of(line)
            except ValueError as exc:
                raise ResultsFileError(not_a_result(path, n, exc)) from None
            yield n, result

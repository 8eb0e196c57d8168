"""Results files (``stef replay -o``, ``stef run``): the one reader of every command that opens
them, with two views of a line.

- :func:`iter_results` reads each line as a :class:`~stef.models.Result` (``stef summary`` and
  :func:`stef.load_results`).
- :func:`read_results` reads each as a plain JSON object with a string ``id`` and ``outcome``
  (``stef report``, ``review``, ``estimate``, ``calibrate --results``, ``canary add``), every
  other field read with a default where it is shown.

Both are lenient the same way: fields a newer STEF version added are passed over, at any depth,
so a results file written by another version opens in every command. A line that is not a
result is a :class:`~stef.errors.FileError` naming the file and the line; so is a file that
cannot be read.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from stef.errors import FileError
from stef.files import iter_jsonl, iter_lines
from stef.models import Result

Record = dict[str, Any]


def iter_results(path: str | Path) -> Iterator[tuple[int, Result]]:
    """``(line number, result)`` of every non-blank line of ``path``, in file order.

    Raises:
        FileError: the file cannot be read, or a line is not a result.
    """
    for n, line in iter_lines(path):
        try:
            result = Result.model_validate_json(line, extra="ignore")
        except ValidationError as exc:
            raise FileError(path, f"not a result: {_first(exc)}", n) from None
        yield n, result


def _first(exc: ValidationError) -> str:
    """The first thing wrong with a line, where in it (``judge.backend: Field required``)."""
    error = exc.errors()[0]
    where = ".".join(str(part) for part in error["loc"])
    return f"{where}: {error['msg']}" if where else error["msg"]


def read_results(path: Path, input_log: Path | None = None) -> list[Record]:
    """The results of ``path`` (each with an ``id`` and an ``outcome``), in file order; with
    ``input_log``, each result without ``input`` gets its record's question, enriched question
    and SQL from the log, joined by ``id``.

    Raises:
        FileError: either file cannot be read, or a line of ``path`` is not a result.
    """
    out: list[Record] = []
    for n, obj in iter_jsonl(path, replace_surrogates=True):
        if not isinstance(obj.get("id"), str) or not isinstance(obj.get("outcome"), str):
            raise FileError(path, "not a result (no string 'id' and 'outcome')", n)
        out.append(obj)
    if input_log is not None:
        inputs = read_inputs(input_log)
        for rec in out:
            if not isinstance(rec.get("input"), dict) and rec["id"] in inputs:
                rec["input"] = inputs[rec["id"]]
    return out


def read_inputs(path: Path) -> dict[str, dict[str, Any]]:
    """``id -> {question, enriched_question, sql}`` of an agent log in STEF's field names
    (lines that are not JSON objects, and objects without an id, are passed over: the log's
    dead letters were made of them).

    Raises:
        FileError: the file cannot be read.
    """
    out: dict[str, dict[str, Any]] = {}
    for _, obj in iter_jsonl(path, lenient=True, replace_surrogates=True):
        rid = obj.get("id")
        if isinstance(rid, str):
            enriched = obj.get("enriched_question")
            out[rid] = {
                "question": _text(obj.get("question")),
                "enriched_question": enriched if isinstance(enriched, str) else None,
                "sql": _text(obj.get("sql")),
            }
    return out


def _text(value: object) -> str:
    return value if isinstance(value, str) else ""

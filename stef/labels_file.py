"""Labelled records: the format ``stef calibrate``, the canary, ``bench/eval.py`` and the few-shot
examples file read (``stef canary add`` writes it from ``stef review``'s labels). One JSON object
a line: the judge's input (in STEF's field names, or the agent's own with a field mapping) with
a boolean ``label``, and optionally ``source``, ``error_types`` (strings) and ``gold_sql``::

    {"question": "...", "sql": "SELECT ...", "label": false, "error_types": ["wrong_filter"]}

A line that is not such an object is an error naming the file and the line.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from stef.errors import FileError
from stef.files import iter_jsonl
from stef.stages.validate import FIELDS, FieldMapping, path_parts


@dataclass(frozen=True)
class LabelledRecord:
    """One line of a labels file: the judge's input (never ``gold_sql``) and the annotations."""

    line: int
    payload: dict[str, Any]
    label: bool
    source: str | None
    error_types: tuple[str, ...]
    gold_sql: str | None = None


def checked_label(obj: dict[str, Any], path: str | Path, line: int) -> bool:
    """The line's label, its annotations checked.

    Raises:
        FileError: ``label`` is not true or false, or ``error_types`` not a list of strings.
    """
    label = obj.get("label")
    if not isinstance(label, bool):
        raise FileError(path, "'label' must be true or false (a skipped record is none)", line)
    types = obj.get("error_types") or []
    if not isinstance(types, list) or not all(isinstance(t, str) for t in types):
        raise FileError(path, "'error_types' must be a list of strings", line)
    return label


def read_labels(
    path: Path, limit: int | None = None, *, mapped: FieldMapping | None = None
) -> list[LabelledRecord]:
    """The labelled records of ``path``, in file order.

    Args:
        path: the JSONL labels file.
        limit: read at most this many records.
        mapped: the field mapping the judge applies, when the file is in the agent's own field
            names: each record then goes to the judge whole (less its label and reference,
            which the judge never sees), for the mapping to find its fields. None: the file
            uses STEF's field names and only those reach the judge.

    Raises:
        FileError: the file cannot be read, or a line is not a JSON object with a boolean
            ``label`` (with its number).
    """
    out: list[LabelledRecord] = []
    if limit is not None and limit <= 0:
        return out
    for n, obj in iter_jsonl(path):
        label = checked_label(obj, path, n)
        source, gold = obj.get("source"), obj.get("gold_sql")
        out.append(
            LabelledRecord(
                line=n,
                # Only the judge's own input fields: gold_sql, label and the annotations
                # never reach the judge (the reference is measured apart).
                payload=_judged_fields(obj, mapped),
                label=label,
                source=source if isinstance(source, str) else None,
                error_types=tuple(dict.fromkeys(obj.get("error_types") or [])),
                gold_sql=gold if isinstance(gold, str) else None,
            )
        )
        if limit is not None and len(out) >= limit:
            break  # the lines after it are not read
    return out


def _judged_fields(obj: dict[str, Any], mapped: FieldMapping | None) -> dict[str, Any]:
    """What of a labelled record reaches the judge: never its label or its reference."""
    if mapped is None or not mapped.fields:
        return {k: v for k, v in obj.items() if k in FIELDS and k != "gold_sql"}
    hidden = {"label", "gold_sql", str(path_parts(mapped.source_of("gold_sql"))[0])}
    return {k: v for k, v in obj.items() if k not in hidden}

"""Results JSONL read as plain objects for people: what ``stef review``, ``stef report`` and
``stef estimate`` show.

Results are read as JSON objects, not :class:`~stef.models.Result`: a results file written by
another STEF version (fields added since, like ``judge.p_correct`` or ``needs_review``) must
still open; every field is read with a default.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

Record = dict[str, Any]

ORDERS = ("teaching", "random")


class RecordsError(ValueError):
    """A results, input or labels file that cannot be read (the message names file and line)."""


def unicode_text(text: str) -> str:
    """``text`` with any lone surrogate replaced by U+FFFD, so that it encodes as UTF-8."""
    return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")


def read_jsonl(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """``(line number, object)`` of every non-blank line.

    Raises:
        RecordsError: a line that is not a JSON object, or the file cannot be read.
    """
    try:
        with path.open(encoding="utf-8") as f:
            for n, line in enumerate(f, start=1):
                if not line.strip():
                    continue
                try:
                    obj = json.loads(line)
                except ValueError as exc:
                    raise RecordsError(f"{path}:{n}: not JSON: {exc}") from exc
                if not isinstance(obj, dict):
                    raise RecordsError(f"{path}:{n}: not a JSON object")
                yield n, obj
    except OSError as exc:
        raise RecordsError(f"{path}: {exc.strerror or exc}") from exc
    except UnicodeDecodeError as exc:
        raise RecordsError(f"{path}: not UTF-8: {exc}") from exc


def read_results(path: Path, input_log: Path | None = None) -> list[Record]:
    """The results of ``path`` (each with an ``id`` and an ``outcome``), in file order; with
    ``input_log``, each result without ``input`` gets its record's question, enriched question
    and SQL from the log, joined by ``id``.

    Raises:
        RecordsError: a line that is not a result.
    """
    out: list[Record] = []
    for n, obj in read_jsonl(path):
        if not isinstance(obj.get("id"), str) or not isinstance(obj.get("outcome"), str):
            raise RecordsError(f"{path}:{n}: not a result (no string 'id' and 'outcome')")
        out.append(obj)
    if input_log is not None:
        inputs = read_inputs(input_log)
        for rec in out:
            if not isinstance(rec.get("input"), dict) and rec["id"] in inputs:
                rec["input"] = inputs[rec["id"]]
    return out


def read_inputs(path: Path) -> dict[str, dict[str, Any]]:
    """``id -> {question, enriched_question, sql}`` of an agent log in STEF's field names
    (lines without an id are passed over: the log's dead letters have none)."""
    out: dict[str, dict[str, Any]] = {}
    for _, obj in read_jsonl_lenient(path):
        rid = obj.get("id")
        if isinstance(rid, str):
            out[rid] = {
                "question": _text(obj.get("question")),
                "enriched_question": obj.get("enriched_question")
                if isinstance(obj.get("enriched_question"), str)
                else None,
                "sql": _text(obj.get("sql")),
            }
    return out


def read_jsonl_lenient(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """Like :func:`read_jsonl`, passing over lines that are not JSON objects (an agent log
    holds the bad lines its dead letters were made of).

    Raises:
        RecordsError: the file cannot be read.
    """
    try:
        with path.open(encoding="utf-8", errors="replace") as f:
            for n, line in enumerate(f, start=1):
                try:
                    obj = json.loads(line)
                except ValueError:
                    continue
                if isinstance(obj, dict):
                    yield n, obj
    except OSError as exc:
        raise RecordsError(f"{path}: {exc.strerror or exc}") from exc


def _text(value: object) -> str:
    return value if isinstance(value, str) else ""


def p_correct(rec: Mapping[str, Any]) -> float | None:
    """The calibrated probability that the record is correct, when the judge gave one."""
    judge = rec.get("judge")
    value = judge.get("p_correct") if isinstance(judge, dict) else None
    if isinstance(value, int | float) and not isinstance(value, bool) and 0 <= value <= 1:
        return float(value)
    return None


def examples(rec: Mapping[str, Any]) -> list[str]:
    """The ids of the labelled examples the judge was shown with this record (llm.few_shot)."""
    judge = rec.get("judge")
    shown = judge.get("examples") if isinstance(judge, dict) else None
    return [x for x in shown if isinstance(x, str)] if isinstance(shown, list) else []


def second_opinion_disagrees(rec: Mapping[str, Any]) -> bool:
    judge = rec.get("judge")
    second = judge.get("second_opinion") if isinstance(judge, dict) else None
    return isinstance(second, dict) and second.get("agrees") is False


def unsafe(rec: Mapping[str, Any]) -> bool:
    safety = rec.get("safety")
    return isinstance(safety, dict) and bool(
        safety.get("mutating") or safety.get("multiple_statements")
    )


def judge_error(rec: Mapping[str, Any]) -> bool:
    return rec.get("outcome") == "judge_error"


def issues(rec: Mapping[str, Any]) -> list[str]:
    value = rec.get("issues")
    return [i for i in value if isinstance(i, str)] if isinstance(value, list) else []


def score(rec: Mapping[str, Any]) -> float | None:
    value = rec.get("score")
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    return None


def teaching_key(index: int, rec: Mapping[str, Any]) -> tuple[bool, float, bool, bool, bool, int]:
    """Sort key of the teaching order: flagged ``needs_review`` first, then p_correct nearest
    0.5 (a record without p_correct counts as far from it), then second-opinion disagreements,
    unsafe SQL, judge errors; file order last."""
    p = p_correct(rec)
    return (
        rec.get("needs_review") is not True,
        abs(p - 0.5) if p is not None else 0.5,
        not second_opinion_disagrees(rec),
        not unsafe(rec),
        not judge_error(rec),
        index,
    )


def random_key(rec: Mapping[str, Any]) -> str:
    """A fixed pseudo-random order (sha256 of the id): every reviewer walks the same uniform
    sample, so labels taken in this order can feed ``stef estimate``."""
    return hashlib.sha256(str(rec.get("id")).encode("utf-8", "surrogatepass")).hexdigest()


def queue(
    records: Iterable[Record],
    *,
    order: str = "teaching",
    app: str | None = None,
    tier: str | None = None,
    issue: str | None = None,
) -> list[Record]:
    """The records a reviewer walks, in ``order``, filtered by app, tier and issue. Records
    skipped by sampling were never judged: there is nothing to review."""
    kept = [
        r
        for r in records
        if r.get("outcome") != "skipped_sampling"
        and (app is None or r.get("app") == app)
        and (tier is None or r.get("tier") == tier)
        and (issue is None or issue in issues(r))
    ]
    if order == "random":
        return sorted(kept, key=random_key)
    indexed = list(enumerate(kept))
    indexed.sort(key=lambda pair: teaching_key(*pair))
    return [r for _, r in indexed]

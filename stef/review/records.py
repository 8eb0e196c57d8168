"""Results as people see them: what ``stef review``, ``stef report`` and ``stef estimate`` show
of the plain JSON objects :func:`stef.results_file.read_results` reads (every field read with a
default: a results file written by another STEF version opens), and the orders a reviewer walks.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from typing import Any

from stef.results_file import Record

ORDERS = ("teaching", "random")


def unicode_text(text: str) -> str:
    """``text`` with any lone surrogate replaced by U+FFFD, so that it encodes as UTF-8."""
    return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")


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
    """The record's score, when it is one (a number in 0-100: NaN, an infinity or -5 is none,
    as a ``p_correct`` outside 0-1 is; a NaN stopped ``stef report`` with a traceback)."""
    value = rec.get("score")
    if isinstance(value, int | float) and not isinstance(value, bool) and 0 <= value <= 100:
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

"""Scripted judge replies for the tests, as wire dicts (each question filter carries its match)."""

from __future__ import annotations

from typing import Any


def filt(
    text: str,
    rhs: str,
    status: str = "matched",
    predicates: list[int] | None = None,
    *,
    lhs: str | None = None,
    op: str = "=",
) -> dict[str, Any]:
    """One wire filter with its match; ``predicates`` default to none."""
    return {
        "text": text,
        "lhs": lhs,
        "op": op,
        "rhs": rhs,
        "status": status,
        "predicates": predicates if predicates is not None else [],
    }


def reply(
    *,
    filters: list[dict[str, Any]] | None = None,
    verdict: str = "Correct",
    confidence: float = 0.95,
    enrichment: str = "faithful",
    issues: list[str] | None = None,
    rationale: str = "scripted",
) -> dict[str, Any]:
    """A wire reply; by default no question filter (STEF matches the typical record's own)."""
    return {
        "question_spec": {
            "outputs": ["total spend"],
            "aggregations": [{"func": "SUM", "column": "spend", "distinct": False}],
            "filters": filters if filters is not None else [],
            "group_by": [],
            "ordering_requested": False,
            "top_k": None,
        },
        "enrichment": {"status": enrichment, "dropped": [], "added": []},
        "issues": issues if issues is not None else ["none"],
        "rationale": rationale,
        "verdict": verdict,
        "confidence": confidence,
    }

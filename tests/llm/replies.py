"""Scripted judge replies for the tests, as wire dicts."""

from __future__ import annotations

from typing import Any


def reply(
    *,
    filters: list[dict[str, Any]] | None = None,
    matches: list[dict[str, Any]] | None = None,
    verdict: str = "Correct",
    confidence: float = 0.95,
    enrichment: str = "faithful",
    issues: list[str] | None = None,
    rationale: str = "scripted",
) -> dict[str, Any]:
    """A wire reply; by default the two filters of the typical record, both matched."""
    if filters is None:
        filters = [
            {"lhs": "region", "op": "=", "rhs": "APAC", "text": "in the APAC region"},
            {"lhs": "year", "op": "=", "rhs": "2023", "text": "for 2023"},
        ]
    if matches is None:
        matches = [
            {"filter": i, "status": "matched", "predicates": [i + 1]} for i in range(len(filters))
        ]
    return {
        "question_spec": {
            "outputs": ["total spend"],
            "aggregations": [{"func": "SUM", "column": "spend", "distinct": False}],
            "filters": filters,
            "group_by": [],
            "ordering_requested": False,
            "top_k": None,
        },
        "filter_matches": matches,
        "enrichment": {"status": enrichment, "dropped": [], "added": []},
        "issues": issues if issues is not None else ["none"],
        "rationale": rationale,
        "verdict": verdict,
        "confidence": confidence,
    }

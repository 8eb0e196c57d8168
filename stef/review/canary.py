"""Grow the canary file from reviewed records (``stef canary add``): each labelled result whose
question and SQL are known becomes a canary line in the ``stef calibrate`` format, so judge
drift is measured on the app's own traffic."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from stef.review import records as R

SOURCE = "review"
# The result fields a canary line keeps beside the input text (STEF's input field names).
_KEPT = ("app", "agent", "agent_version", "timestamp")


def canary_lines(
    results: Sequence[R.Record],
    labels: Mapping[str, Mapping[str, Any]],
    *,
    existing: set[str],
    app: str | None = None,
) -> tuple[list[dict[str, Any]], int]:
    """The new canary lines (results labelled true or false, not yet in the canary, of ``app``
    when given) and how many labelled results were passed over for want of question and SQL."""
    out: list[dict[str, Any]] = []
    no_text = 0
    for rec in results:
        rid = str(rec["id"])
        line = labels.get(rid)
        if line is None or not isinstance(line.get("label"), bool) or rid in existing:
            continue
        if app is not None and rec.get("app") != app:
            continue
        given = rec.get("input")
        if not isinstance(given, dict) or not given.get("question") or not given.get("sql"):
            no_text += 1
            continue
        canary: dict[str, Any] = {"id": rid}
        canary.update({k: rec[k] for k in _KEPT if isinstance(rec.get(k), str)})
        canary["question"] = given["question"]
        if isinstance(given.get("enriched_question"), str):
            canary["enriched_question"] = given["enriched_question"]
        canary["sql"] = given["sql"]
        canary["label"] = line["label"]
        canary["source"] = SOURCE
        canary["error_types"] = []
        out.append(canary)
        existing.add(rid)
    return out, no_text

"""Grow the canary file from reviewed records (``stef canary add``): each labelled result whose
question and SQL are known becomes a canary line in the ``stef calibrate`` format, so judge
drift is measured on the app's own traffic. A line also keeps the reviewer's note and what the
judge had said (``judge_verdict``, ``judge_p_correct``): the same file serves as the few-shot
examples of ``llm.few_shot`` (:mod:`stef.judges.llm.examples`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from stef.models import Verdict
from stef.results_file import Record
from stef.review import records as R

SOURCE = "review"
# The result fields a canary line keeps beside the input text (STEF's input field names).
_KEPT = ("app", "agent", "agent_version", "timestamp")
_VERDICTS = frozenset(v.value for v in Verdict)


def canary_lines(
    results: Sequence[Record],
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
        if not isinstance(given, dict) or not (
            _text(given.get("question")) and _text(given.get("sql"))
        ):
            no_text += 1
            continue
        canary: dict[str, Any] = {"id": rid}
        canary.update({k: rec[k] for k in _KEPT if isinstance(rec.get(k), str)})
        canary["question"] = given["question"]
        if isinstance(given.get("enriched_question"), str):
            canary["enriched_question"] = R.unicode_text(given["enriched_question"])
        canary["sql"] = given["sql"]
        canary["label"] = line["label"]
        canary["source"] = SOURCE
        canary["error_types"] = []
        # What the reviewer said and what the judge had said: the few-shot examples
        # (llm.few_shot_file) show the note, and put the judge's mistakes first.
        if isinstance(line.get("note"), str) and line["note"].strip():
            canary["note"] = R.unicode_text(line["note"].strip())
        verdict = _verdict(rec)
        if verdict is not None:
            canary["judge_verdict"] = verdict
        p = line.get("p_correct")
        if isinstance(p, int | float) and not isinstance(p, bool) and 0 <= p <= 1:
            canary["judge_p_correct"] = p
        out.append(canary)
        existing.add(rid)
    return out, no_text


def _text(value: object) -> bool:
    """A non-blank string of Unicode text (no lone surrogate)."""
    return isinstance(value, str) and bool(value.strip()) and R.unicode_text(value) == value


def _verdict(rec: Record) -> str | None:
    """The verdict of an evaluated result, as it names it."""
    components = rec.get("components")
    if rec.get("outcome") != "evaluated" or not isinstance(components, dict):
        return None
    verdict = components.get("verdict")
    return verdict if isinstance(verdict, str) and verdict in _VERDICTS else None

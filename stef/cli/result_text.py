"""``stef judge --format text``: one result in a few lines a person reads (at most 25): the score
and tier, the verdict and who decided it, the alignment in words, the issues and the rationale."""

from __future__ import annotations

import textwrap

from stef.models import Alignment, Result

MAX_LINES = 25
_WIDTH = 96


def as_text(result: Result) -> str:
    """The result in at most :data:`MAX_LINES` lines."""
    lines = [_headline(result)]
    if result.outcome == "judge_error":
        lines.append(f"judge error: {result.error or 'unknown'}")
    if result.components is not None:
        c = result.components
        lines.append(
            f"verdict: {c.verdict.value} (confidence {c.confidence:.2f}; "
            f"decided by {result.judge.backend})"
        )
    if result.alignment is not None:
        lines.extend(alignment_words(result.alignment))
    issues = [i for i in result.issues if i != "none"]
    lines.append("issues: " + (", ".join(issues) if issues else "none found"))
    if result.rationale:
        wrapped = textwrap.wrap("why: " + result.rationale, _WIDTH)
        room = MAX_LINES - len(lines)
        if len(wrapped) > room:
            wrapped = [*wrapped[: room - 1], wrapped[room - 1][: _WIDTH - 1] + "\u2026"]
        lines.extend(wrapped)
    return "\n".join(lines[:MAX_LINES])


def _headline(result: Result) -> str:
    if result.score is None:
        return f"{result.id}: {result.outcome.replace('_', ' ')} (no score)"
    return f"{result.id}: score {result.score:.0f}/100, tier {result.tier}"


def alignment_words(alignment: Alignment) -> list[str]:
    """The question's filters against the SQL's, a line per kind that is not empty."""
    a = alignment
    asked = len(a.matched) + len(a.missing) + len(a.mismatched)
    lines = [
        f"filters: {len(a.matched)} of {asked} the question asks for are in the SQL"
        if asked
        else "filters: the question asks for none"
    ]
    for label, items in (
        ("missing from the SQL", a.missing),
        ("in the SQL but different", a.mismatched),
        ("in the SQL but not asked for", a.extras),
        ("accepted defaults (benign)", a.benign_extras),
    ):
        if items:
            lines.append(f"  {label}: {_cut('; '.join(items))}")
    wrong = [
        name
        for name, ok in (
            ("the selected columns", a.projections_match),
            ("the aggregations", a.aggregations_match),
            ("the grouping", a.group_by_match),
        )
        if not ok
    ]
    if wrong:
        lines.append("does not match the question: " + ", ".join(wrong))
    return lines


def _cut(text: str) -> str:
    return text if len(text) <= _WIDTH else text[: _WIDTH - 1] + "\u2026"

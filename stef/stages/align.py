"""Alignment stage: per-filter matching -> filter status, extras, leniency (SPEC §2).

Deterministic: the judge says which numbered SQL predicates satisfy which question filter; this
stage decides what is extra, benign or ignored under the app rules, and the filter status.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

from stef.models import Alignment, FilterStatus, JudgeOutput, SqlSpec
from stef.rules import AppRules, fold_key
from stef.sql.canonical import norm_ident
from stef.stages.normalize import Normalized


def mapped_columns(rules: AppRules) -> dict[str, str]:
    """Question term -> physical column, both case-folded."""
    return {norm_ident(k): norm_ident(v) for k, v in rules.column_mappings.items()}


class PredicateLike(Protocol):
    """What the rule tests read of a predicate: a spec's :class:`Predicate`, or a
    :class:`stef.sql.predicates.Pred` read straight from a condition."""

    @property
    def lhs(self) -> str: ...
    @property
    def op(self) -> str: ...
    @property
    def rhs(self) -> str: ...
    @property
    def columns(self) -> Sequence[str]: ...


def is_ignored(pred: PredicateLike, rules: AppRules) -> bool:
    ignored = {norm_ident(c) for c in rules.ignore_filters}
    return bool(ignored) and (pred.lhs in ignored or any(c in ignored for c in pred.columns))


def is_benign(pred: PredicateLike, rules: AppRules, dialect: str | None) -> bool:
    """Whether ``pred`` is one of the app's benign filters, compared structurally.

    The filters were parsed when the rules were loaded (:meth:`AppRules.benign_keys`).
    """
    return fold_key((pred.lhs, pred.op, pred.rhs)) in rules.benign_keys(dialect)


def _describe_filter(out: JudgeOutput, idx: int) -> str:
    f = out.question_spec.filters[idx]
    if f.text:
        return f.text
    return f"{f.lhs} {f.op} {f.rhs}" if f.lhs else f.rhs


def align(
    out: JudgeOutput, spec: SqlSpec, norm: Normalized, rules: AppRules
) -> tuple[Alignment, FilterStatus, int]:
    """Filter status, leniency δ and the alignment lists of one judged record."""
    question = _question_side(out, spec)
    extras, benign, ignored = _sql_side(spec, question.used, rules)
    status = _status(len(out.question_spec.filters), question.n_matched, bool(extras))
    leniency = int(status is FilterStatus.FULLY_APPLIED_WITH_EXTRAS and len(benign) == len(extras))
    alignment = Alignment(
        matched=question.matched,
        missing=question.missing,
        mismatched=question.mismatched,
        extras=extras,
        benign_extras=benign,
        ignored=ignored,
        projections_match=_projections_match(out, spec, rules),
        aggregations_match=_aggregations_match(out, spec),
        group_by_match=_group_by_match(out, spec, norm, rules),
    )
    return alignment, status, leniency


@dataclass
class _QuestionSide:
    """How each question filter fared, and which SQL predicates the matches used."""

    matched: list[str] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)
    mismatched: list[str] = field(default_factory=list)
    used: set[int] = field(default_factory=set)
    n_matched: int = 0


def _question_side(out: JudgeOutput, spec: SqlSpec) -> _QuestionSide:
    by_id = {p.id: p for p in spec.filters}
    side = _QuestionSide()
    seen_filters: set[int] = set()
    for m in out.filter_matches:
        if m.filter in seen_filters or m.filter >= len(out.question_spec.filters):
            continue
        seen_filters.add(m.filter)
        side.used.update(m.predicates)
        label = _describe_filter(out, m.filter)
        preds = [by_id[i].text for i in m.predicates if i in by_id]
        shown = f"{label} -> {'; '.join(preds)}" if preds else label
        if m.status == "matched":
            side.n_matched += 1
            side.matched.append(shown)
        elif m.status == "mismatched":
            side.mismatched.append(shown)
        else:
            side.missing.append(label)
    # Question filters the judge did not mention at all count as missing.
    for i in range(len(out.question_spec.filters)):
        if i not in seen_filters:
            side.missing.append(_describe_filter(out, i))
    return side


def _sql_side(
    spec: SqlSpec, used: set[int], rules: AppRules
) -> tuple[list[str], list[str], list[str]]:
    """SQL predicates no question filter used: (extras, the benign ones among them, ignored)."""
    extras: list[str] = []
    benign: list[str] = []
    ignored: list[str] = []
    for p in spec.filters:
        if is_ignored(p, rules):
            ignored.append(p.text)
            continue
        if p.id in used:
            continue
        # QUALIFY keeps one row per group (deduplication), it does not restrict the population.
        if p.clause == "qualify":
            continue
        extras.append(p.text)
        if is_benign(p, rules, spec.dialect):
            benign.append(p.text)
    return extras, benign, ignored


def _status(n_filters: int, n_matched: int, has_extras: bool) -> FilterStatus:
    if n_filters == 0 or n_matched == n_filters:
        return FilterStatus.FULLY_APPLIED_WITH_EXTRAS if has_extras else FilterStatus.FULLY_APPLIED
    if n_matched == 0:
        return FilterStatus.NOT_APPLIED
    return FilterStatus.PARTIALLY_APPLIED


def _term_in(term: str, texts: list[str], mapping: dict[str, str]) -> bool:
    t = norm_ident(term)
    candidates = {t, mapping.get(t, t)}
    candidates |= {mapping[w] for w in t.split() if w in mapping}
    words = set(t.replace("_", " ").split())
    for text in texts:
        folded = text.replace("_", " ")
        if any(c and c in text for c in candidates):
            return True
        if words and all(w in folded for w in words):
            return True
    return False


def _projections_match(out: JudgeOutput, spec: SqlSpec, rules: AppRules) -> bool:
    if not spec.parsed or not out.question_spec.outputs:
        return True
    mapping = mapped_columns(rules)
    if any(p == "*" or p.endswith(".*") for p in spec.projections):
        return True
    return all(_term_in(o, spec.projections, mapping) for o in out.question_spec.outputs)


def _aggregations_match(out: JudgeOutput, spec: SqlSpec) -> bool:
    if not spec.parsed:
        return True
    have = {(a.func, a.distinct) for a in spec.aggregations}
    funcs = {a.func for a in spec.aggregations}
    for a in out.question_spec.aggregations:
        if a.distinct and (a.func, True) not in have and not spec.distinct:
            return False
        if a.func not in funcs:
            return False
    return True


def _group_by_match(out: JudgeOutput, spec: SqlSpec, norm: Normalized, rules: AppRules) -> bool:
    if not spec.parsed:
        return True
    mapping = mapped_columns(rules)
    asked = out.question_spec.group_by
    grouping = [g for g in spec.group_by if g not in norm.benign_group_by]
    if not all(_term_in(g, spec.group_by, mapping) for g in asked):
        return False
    return not (not asked and grouping and not norm.required_group_by)

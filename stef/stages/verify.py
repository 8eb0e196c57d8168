"""Verify stage: check what a judge claims about the question's filters against Qu, Qe and the SQL.

Runs after every backend, before alignment. A question filter must be grounded in the words of Qu
or Qe (its value or its text found there, after folding case, whitespace and quotes); an ungrounded
one is dropped. A ``matched`` claim whose predicates' literal values contradict the filter's value
is pointed at the predicates that do carry that value (a model that crossed the ids), or, when none
does, becomes ``mismatched``. A year, date or quoted value of Qu -- or of Qe, the definitions the
agent's enrichment spells out, unless the judge found that Qe drifts far from Qu -- that no filter
covers is added with the status STEF reads from the SQL. Each change is a repair string
``"<kind>: <detail>"``.

The judge may still be right where this stage cannot tell (a coded value such as ``'F'`` for
"female", a quarter written as a date range): only comparable values (numbers, years, dates,
values quoted in the question) are checked, so a deterministic backend that read its filters from
the question passes unchanged.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from functools import lru_cache

from stef.models import (
    REPAIR_KINDS,
    EnrichmentStatus,
    FilterMatch,
    JudgeOutput,
    Predicate,
    QuestionFilter,
)
from stef.question import Found, as_word, glossary_entry, in_words, question_literals
from stef.request import JudgeRequest
from stef.sql.canonical import norm_value

# Question values STEF compares itself: unambiguous in the question and in SQL literals.
STRONG_KINDS = ("value", "date", "year")

_QUOTES = str.maketrans({c: " " for c in "'\"`\u2018\u2019\u201c\u201d"})
_NUMBER = re.compile(r"-?\d+(?:[.,]\d+)*")
_THOUSANDS = re.compile(r"-?\d{1,3}(?:,\d{3})+")
_DATE_LIKE = re.compile(r"(?:19|20)\d\d(?:-\d\d){0,2}")
_QUARTER = re.compile(r"q[1-4]")
# "element = 'c'": the column a question (or its enrichment) compares a quoted value with.
_COLUMN_BEFORE = re.compile(r"([A-Za-z_][\w.]*)\s*(?:=|==|!=|<>|\bin\b|\blike\b)\s*\(?\s*$", re.I)
_COLUMN_REACH = 64  # the operator, and the blanks around it, fit in this many characters
_NAME_CHAR = re.compile(r"[\w.]")
_NAME_RUN = re.compile(r"[\w.]+")
_NAME_START = re.compile(r"[A-Za-z_]")
# Operators whose literal values say what the predicate selects.
_VALUE_OPS = {"=", "!=", "<", "<=", ">", ">=", "like", "in", "between", "or"}


def repair_kind(repair: str) -> str:
    """The metric label of a repair string: its kind, or ``other`` for an unknown prefix."""
    kind = repair.split(":", 1)[0]
    return kind if kind in REPAIR_KINDS else "other"


# --------------------------------------------------------------------------------- value folding


def fold_text(text: str) -> str:
    """Case-folded text with quotes removed and whitespace collapsed."""
    return " ".join(text.translate(_QUOTES).casefold().split())


def fold_value(value: str) -> str:
    """A question or predicate value as compared: outer quotes, LIKE wildcards, case and
    whitespace folded away (an apostrophe inside the value stays)."""
    # A record folds its few values many times over; a long one (up to the SQL's length) is
    # folded each time rather than kept.
    return _fold_short(value) if len(value) <= _CACHED_VALUE_CHARS else _fold(value)


_CACHED_VALUE_CHARS = 200


@lru_cache(maxsize=8192)
def _fold_short(value: str) -> str:
    return _fold(value)


def _fold(value: str) -> str:
    v = " ".join(value.casefold().split()).strip("'\"`\u2018\u2019\u201c\u201d%").strip()
    if _THOUSANDS.fullmatch(v):
        v = v.replace(",", "")
    return norm_value(v)


@lru_cache(maxsize=4096)
def _numbers(text: str) -> frozenset[str]:
    out = set()
    for m in _NUMBER.finditer(text):
        raw = m.group(0)
        out.add(norm_value(raw.replace(",", "") if _THOUSANDS.fullmatch(raw) else raw))
    return frozenset(out)


def stated_in(value: str, texts: Iterable[str]) -> bool:
    """Whether a folded value is stated in one of the folded texts (numbers and years as tokens,
    other values as whole words)."""
    if not value:
        return False
    if _is_number(value):
        return any(value in _numbers(t) for t in texts)
    return any(as_word(value, t) for t in texts)


def _is_number(value: str) -> bool:
    try:
        float(value)
    except ValueError:
        return False
    return value not in ("nan", "inf", "-inf", "infinity")


def _comparable(value: str) -> bool:
    return _is_number(value) or bool(_DATE_LIKE.fullmatch(value))


@dataclass(frozen=True)
class _Literals:
    """A predicate's literal values indexed once, so that holding many question values against
    one long OR chain or IN list costs a lookup each, not a scan (it was values x literals)."""

    values: tuple[str, ...]
    exact: frozenset[str]
    ordered: tuple[str, ...]  # sorted, for the values that start with a question value


# Keyed by the identity of a predicate's values tuple, which the entry keeps alive (so the id is
# not reused): hashing a tuple of 1,900 literals on every lookup would cost what the index saves.
_LITERALS: dict[tuple[int, bool], tuple[tuple[str, ...], _Literals]] = {}
_LITERALS_MAX = 1024


def _literals(values: tuple[str, ...], comparable_only: bool) -> _Literals:
    key = (id(values), comparable_only)
    entry = _LITERALS.get(key)
    if entry is not None and entry[0] is values:
        return entry[1]
    kept = tuple(
        v for v in values if v and (not comparable_only or _comparable(v) or _DATE_LIKE.match(v))
    )
    lits = _Literals(kept, frozenset(kept), tuple(sorted(kept)))
    if len(_LITERALS) >= _LITERALS_MAX:
        _LITERALS.clear()  # records come and go; a full table is simply started again
    _LITERALS[key] = (values, lits)
    return lits


def _dated_prefix(value: str, lits: _Literals) -> bool:
    """A year or date against a finer or coarser one: 2023 ~ '2023-05-01' ~ 202305 (either side
    date-like, the shorter one at least 4 characters, one a prefix of the other)."""
    value_dated = bool(_DATE_LIKE.match(value))
    if len(value) >= 4:
        # Literals that start with the value: a contiguous run of the sorted literals.
        at = bisect.bisect_left(lits.ordered, value)
        while at < len(lits.ordered) and lits.ordered[at].startswith(value):
            if value_dated or _DATE_LIKE.match(lits.ordered[at]):
                return True
            at += 1
    # Literals the value starts with: its prefixes of 4 characters or more.
    return any(
        value[:k] in lits.exact and (value_dated or bool(_DATE_LIKE.match(value[:k])))
        for k in range(4, len(value))
    )


def agrees(value: str, pred: Predicate) -> bool | None:
    """Whether a predicate's literal values agree with a folded question value.

    None when they cannot be compared (no literal, an expression, a quarter).
    """
    comparable = _comparable(value)
    # A number or date is held only against numbers and dates: 'FY23' is another spelling.
    lits = _literals(pred.values, comparable)
    values = lits.values
    if not values or pred.op not in _VALUE_OPS or _QUARTER.fullmatch(value):
        return None
    if pred.op == "between" and len(values) == 2 and all(_is_number(v) for v in values):
        low, high = sorted(float(v) for v in values)
        if _is_number(value) and low <= float(value) <= high:
            return True
    if value in lits.exact or _dated_prefix(value, lits):
        return True
    # A name inside a longer one (LIKE '%China%', 'Acme' ~ 'Acme Corp').
    if not comparable and len(value) >= 3:
        return any(len(v) >= 3 and (value in v or v in value) for v in values)
    return False


# ----------------------------------------------------------------------------------- the stage


@dataclass(frozen=True)
class _Sources:
    """What the question says: folded Qu and Qe, the strong literals of Qu, and those of Qe that
    Qu does not state (the enrichment's definitions)."""

    texts: tuple[str, ...]
    quoted: frozenset[str]
    literals: tuple[Found, ...]
    enriched: tuple[Found, ...] = ()
    # The column each value of Qu or Qe is compared with in the text, where it says so.
    columns: dict[tuple[str, tuple[int, int]], str] = field(default_factory=dict)


def _sources(request: JudgeRequest) -> _Sources:
    record = request.record
    raw = [record.question, *([record.enriched_question] if record.enriched_question else [])]
    quoted = {
        fold_value(f.value) for text in raw for f in question_literals(text) if f.kind == "value"
    }
    literals = tuple(f for f in question_literals(record.question) if f.kind in STRONG_KINDS)
    asked = record.question.casefold()
    # A word test: the enrichment's 'F' is not stated by the "f" of "female".
    enriched = tuple(
        f
        for f in question_literals(record.enriched_question or "")
        if f.kind in STRONG_KINDS
        and not in_words(f.value, asked)
        and not glossary_entry(record.enriched_question or "", f.span, record.question)
    )
    columns = {
        (f.text, f.span): column
        for text, found in ((record.question, literals), (record.enriched_question, enriched))
        for f in found
        if text and (column := _column_before(text, f)) is not None
    }
    return _Sources(
        tuple(fold_text(t) for t in raw), frozenset(quoted), literals, enriched, columns
    )


def _column_before(text: str, found: Found) -> str | None:
    """The column the text compares a quoted value with ("refers to T1.element = 'c'" ->
    ``element``), lower-case and without its qualifier; None when no comparison precedes it."""
    if found.kind != "value":
        return None
    # Read from a little before the value, widened to the start of the name cut there: from the
    # text's start, a long enrichment costs a failed try at every letter before it.
    end = found.span[0]
    start = max(0, end - _COLUMN_REACH)
    while start > 0 and _NAME_CHAR.match(text, start - 1):
        start -= 1
    # Tried from the first letter of each name only: from a later letter of a name the match
    # fails where the first letter's does (the part after the name is the same), after reading
    # the rest of the name again, which made a long name quadratic.
    m = None
    for run in _NAME_RUN.finditer(text, start, end):
        first = _NAME_START.search(text, run.start(), run.end())
        if first is not None and (m := _COLUMN_BEFORE.match(text, first.start(), end)):
            break
    return m.group(1).casefold().rsplit(".", 1)[-1] if m else None


def _claimed_values(f: QuestionFilter, src: _Sources) -> list[str]:
    """The values a filter stands for: the literals of its text when the text is the question's
    own words, else its ``rhs``."""
    rhs = fold_value(f.rhs)
    if stated_in(rhs, src.texts):
        return [rhs]
    text = fold_text(f.text)
    if text and any(text in t for t in src.texts):
        # The value is not the user's but the words are: hold the words' own values.
        found = [fold_value(x.value) for x in question_literals(f.text) if x.kind in STRONG_KINDS]
        if found:
            return found
    return [rhs] if rhs else []


def _grounded(f: QuestionFilter, src: _Sources) -> bool:
    text = fold_text(f.text.removesuffix(" (enrichment)"))
    if text and any(text in t for t in src.texts):
        return True
    rhs = fold_value(f.rhs)
    return stated_in(rhs, src.texts)


def _checkable(value: str, src: _Sources) -> bool:
    """Values STEF may hold against the SQL: numbers, years, dates and quoted values."""
    return _comparable(value) or value in src.quoted


def _agreeing(values: Sequence[str], preds: Sequence[Predicate]) -> list[int]:
    """The ids of the predicates whose literal values agree with one of the filter's values."""
    return [p.id for p in preds if any(agrees(v, p) for v in values)]


def _contradicted(values: Sequence[str], m: FilterMatch, spec_preds: dict[int, Predicate]) -> bool:
    """A matched claim none of whose predicates agrees with the filter's comparable values."""
    verdicts = [agrees(v, spec_preds[i]) for v in values for i in m.predicates if i in spec_preds]
    known = [a for a in verdicts if a is not None]
    return bool(known) and not any(known)


def verify(output: JudgeOutput, request: JudgeRequest) -> tuple[JudgeOutput, list[str]]:
    """Check the judge's filters and matches; return the verified output and the repairs made.

    Args:
        output: what the backend answered (not modified).
        request: the record, its SQL spec and rules.

    Returns:
        The output with ungrounded filters dropped, contradicted matches re-pointed at the
        predicates that carry the value (else made ``mismatched``), uncovered values of the
        question and of a faithful enrichment added, and one repair string per change.
    """
    src = _sources(request)
    repairs: list[str] = []
    filters, matches = _checked_claims(output, request, src, repairs)
    _add_uncovered(output, request, src, (filters, matches), repairs)
    if not repairs:
        return output, []
    qs = output.question_spec.model_copy(update={"filters": filters})
    return output.model_copy(update={"question_spec": qs, "filter_matches": matches}), repairs


def _checked_claims(
    output: JudgeOutput, request: JudgeRequest, src: _Sources, repairs: list[str]
) -> tuple[list[QuestionFilter], list[FilterMatch]]:
    """The judge's filters, the ungrounded dropped, each contradicted match overruled."""
    preds = {p.id: p for p in request.sql_spec.filters}
    by_filter = {m.filter: m for m in output.filter_matches}
    filters: list[QuestionFilter] = []
    matches: list[FilterMatch] = []
    for i, f in enumerate(output.question_spec.filters):
        m = by_filter.get(i, FilterMatch(filter=i, status="missing"))
        if m.decided_by == "judge" and not _grounded(f, src):
            repairs.append(f"ungrounded_filter: {_label(f)!r} is not in the question; dropped")
            continue
        values = [v for v in _claimed_values(f, src) if _checkable(v, src)]
        # A match STEF decided itself (an interval, a direction) stands: its values may differ
        # from the question's on purpose ("2024-03-31" ends where ``< '2024-04-01'`` does).
        if m.status == "matched" and m.decided_by == "judge" and _contradicted(values, m, preds):
            m = _overruled(f, m, values, request, repairs)
        filters.append(f)
        if m.filter != len(filters) - 1:  # renumbered after a dropped filter (frozen: shared)
            m = m.model_copy(update={"filter": len(filters) - 1})
        matches.append(m)
    return filters, matches


def _overruled(
    f: QuestionFilter,
    m: FilterMatch,
    values: Sequence[str],
    request: JudgeRequest,
    repairs: list[str],
) -> FilterMatch:
    """A claimed match on predicates comparing another value: re-pointed at the predicates
    that carry the value, else mismatched."""
    preds = {p.id: p for p in request.sql_spec.filters}
    shown = "; ".join(preds[p].text for p in m.predicates if p in preds)
    own = _agreeing(values, request.sql_spec.filters)
    if own:
        # Crossed ids (filter 0 -> predicate 1): STEF's own match stands, not a mismatch.
        carried = "; ".join(preds[p].text for p in own)
        repairs.append(
            f"repointed_match: {_label(f)!r} -> {shown} compares another value; "
            f"matched by {carried}"
        )
        return m.model_copy(update={"predicates": own, "decided_by": "stef"})
    repairs.append(
        f"contradicted_match: {_label(f)!r} -> {shown} compares another value; mismatched"
    )
    return m.model_copy(update={"status": "mismatched", "decided_by": "stef"})


def _add_uncovered(
    output: JudgeOutput,
    request: JudgeRequest,
    src: _Sources,
    judged: tuple[list[QuestionFilter], list[FilterMatch]],
    repairs: list[str],
) -> None:
    """The question's values (and a faithful enrichment's) no filter covers, matched by STEF
    and added (in place)."""
    filters, matches = judged
    # Unparsed SQL has no predicates to read a value in: what the judge did not list stays unknown.
    coverage = _Coverage()
    for f in filters:
        coverage.add(_Claim.of(f, src))
    # Qe's definitions count unless the judge found that Qe changed the question: then S is
    # judged against Qu alone.
    drifted = output.enrichment.status is EnrichmentStatus.MAJOR_DRIFT
    uncovered: list[tuple[Found, str]] = [(f, "") for f in src.literals]
    if not drifted:
        uncovered += [(f, " (enrichment)") for f in src.enriched]
    for found, where in uncovered if request.sql_spec.parsed else ():
        value = fold_value(found.value)
        if coverage.covers(value):
            continue
        column = src.columns.get((found.text, found.span))
        match = _stef_match(value, request.sql_spec.filters, len(filters), column)
        text = found.text + where
        filters.append(QuestionFilter(op=found.op, rhs=found.value, text=text, kind="stef"))
        coverage.add(_Claim.of(filters[-1], src))
        matches.append(match)
        repairs.append(f"uncovered_value: {text!r} was not judged; {match.status} by STEF")
        if column is not None and match.status == "mismatched":
            _contradict_claims_on(match, text, filters, matches, repairs)


def _contradict_claims_on(
    found: FilterMatch,
    text: str,
    filters: Sequence[QuestionFilter],
    matches: list[FilterMatch],
    repairs: list[str],
) -> None:
    """The judge's ``matched`` claims that stand only on predicates STEF just found comparing
    the question's column with another value ("carbon" -> ``element = 'si'`` where Qe says
    ``element = 'c'``): such a predicate does not apply the question, whatever the claim's words.
    They become ``mismatched`` (in place)."""
    wrong = set(found.predicates)
    for i, m in enumerate(matches):
        if m.decided_by != "judge" or m.status != "matched" or not m.predicates:
            continue
        if set(m.predicates) <= wrong:
            repairs.append(
                f"contradicted_match: {_label(filters[m.filter])!r} stands on the predicates "
                f"that {text!r} finds comparing another value; mismatched"
            )
            matches[i] = m.model_copy(update={"status": "mismatched", "decided_by": "stef"})


def _label(f: QuestionFilter) -> str:
    return f.text or f"{f.lhs or ''} {f.op} {f.rhs}".strip()


@dataclass(frozen=True)
class _Claim:
    """What one filter already covers, worked out once per filter (not once per question value:
    that was quadratic in the number of values)."""

    values: frozenset[str]
    texts: tuple[str, str]

    @classmethod
    def of(cls, f: QuestionFilter, src: _Sources) -> _Claim:
        values = frozenset([*_claimed_values(f, src), fold_value(f.rhs)])
        return cls(values, (fold_text(f.text), fold_text(f.rhs)))

    def covers(self, value: str) -> bool:
        return value in self.values or stated_in(value, self.texts)


class _Coverage:
    """What every claim so far covers, merged: ``covers`` is ``any(c.covers(value) for c in
    claims)`` without asking each claim (question values x filters was quadratic: 0.6 s for
    600 quoted values that each became a filter).

    The union of the claims' values and of their texts' numbers; their texts joined by a
    newline, which no folded value contains (whitespace is collapsed to spaces) and which is
    not a word character, so a whole-word match in the joined text is one in a single text.
    """

    def __init__(self) -> None:
        self.values: set[str] = set()
        self.numbers: set[str] = set()
        self.texts: list[str] = []
        self._joined: str | None = ""

    def add(self, claim: _Claim) -> None:
        self.values |= claim.values
        for t in claim.texts:
            self.numbers |= _numbers(t)
        self.texts.extend(claim.texts)
        self._joined = None

    def covers(self, value: str) -> bool:
        if value in self.values:
            return True
        if not value:
            return False
        if _is_number(value):
            return value in self.numbers
        if self._joined is None:
            self._joined = "\n".join(self.texts)
        return as_word(value, self._joined)


def _stef_match(
    value: str, preds: Sequence[Predicate], index: int, column: str | None = None
) -> FilterMatch:
    """STEF's own reading of a question value: matched by an agreeing predicate, mismatched by
    predicates of the same kind with other values -- another date, or another value on the
    column the question names (``element = 'c'`` against ``element = 'si'``) --, else missing."""
    hits = [p.id for p in preds if agrees(value, p)]
    if hits:
        return FilterMatch(filter=index, status="matched", predicates=hits, decided_by="stef")
    if column is not None:
        other = [p.id for p in preds if p.lhs == column and agrees(value, p) is False]
        if other:
            return FilterMatch(
                filter=index, status="mismatched", predicates=other, decided_by="stef"
            )
    if _DATE_LIKE.fullmatch(value):
        same = [
            p.id
            for p in preds
            if agrees(value, p) is False and all(_DATE_LIKE.match(v) for v in p.values)
        ]
        if same:
            return FilterMatch(
                filter=index, status="mismatched", predicates=same, decided_by="stef"
            )
    return FilterMatch(filter=index, status="missing", decided_by="stef")

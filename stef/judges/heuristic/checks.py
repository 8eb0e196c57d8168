"""The heuristic judge's checks: each a small named function from the evidence to findings.

A finding is an issue label, a reason, and whether it is strong evidence of a wrong answer
(see :func:`stef.judges.heuristic.judge.heuristic` for how findings weigh into the verdict).
:data:`CHECKS` lists them in the order their findings are reported.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from stef.cues import cued
from stef.judges.base import JudgeRequest
from stef.judges.heuristic.named_columns import unused_columns
from stef.judges.heuristic.question import DISTINCT_WORDS
from stef.judges.heuristic.readings import asked_directions, first_ranked, sql_extremes
from stef.models import (
    Enrichment,
    EnrichmentStatus,
    FilterMatch,
    Issue,
    QuestionSpec,
    SqlSpec,
)
from stef.sql.canonical import SQL_STRING
from stef.stages.align import is_benign, is_ignored


@dataclass(frozen=True)
class Evidence:
    """What the checks look at for one record.

    Attributes:
        request: the judge request (record, SQL spec, flags, rules).
        qs: the question spec read from Qu (and the values a faithful Qe spells out).
        matches: for each question filter, the SQL predicates that satisfy it.
        drift: how Qe departs from Qu.
        operator_mismatch: run :func:`operator_mismatch` (opt-in, see ``HeuristicOptions``).
        enrichment_distinct: run :func:`enrichment_distinct` (opt-in).
    """

    request: JudgeRequest
    qs: QuestionSpec
    matches: list[FilterMatch]
    drift: Enrichment
    replaced: frozenset[int] = frozenset()
    operator_mismatch: bool = False
    enrichment_distinct: bool = False

    @property
    def spec(self) -> SqlSpec:
        return self.request.sql_spec

    @property
    def question(self) -> str:
        return self.request.record.question

    @property
    def enriched(self) -> str | None:
        return self.request.record.enriched_question

    @property
    def funcs(self) -> set[str]:
        """The aggregate functions the SQL computes."""
        return {a.func for a in self.spec.aggregations}

    @property
    def division(self) -> bool:
        """Whether an output column divides (a ratio, a share, a hand-made average)."""
        return any("/" in p for p in self.spec.projections)


@dataclass(frozen=True)
class Finding:
    """``weight``: how many pieces of strong evidence it holds (each question value missed or
    contradicted counts apart)."""

    label: Issue
    reason: str
    strong: bool
    weight: int = 1


Check = Callable[[Evidence], Iterator[Finding]]


# ----------------------------------------------------------------------------- question filters

# Filter kinds whose absence from the SQL is strong evidence of a wrong answer; a capitalized
# phrase may also be a column or a category the SQL reaches by a join, so it counts as weak.
_STRONG_KINDS = {"value", "number", "year", "date", "quarter", "enrichment"}


_FILTER_STATUSES: tuple[tuple[str, Issue, str], ...] = (
    ("missing", "filters_missing", "no predicate for"),
    ("mismatched", "filters_incorrect", "wrong value or operator for"),
)


def question_filters(ev: Evidence) -> Iterator[Finding]:
    """Question filters with no predicate, or with a predicate of the wrong value."""
    for status, label, what in _FILTER_STATUSES:
        hit = [m.filter for m in ev.matches if m.status == status]
        hits = [ev.qs.filters[i] for i in hit]
        strong = [
            f.kind in _STRONG_KINDS or i in ev.replaced for i, f in zip(hit, hits, strict=True)
        ]
        hard = [f.text for f, s in zip(hits, strong, strict=True) if s]
        soft = [f.text for f, s in zip(hits, strong, strict=True) if not s]
        if hard:
            # The user's own values count one each; the enrichment's (the agent's rewrite, which
            # also describes scales: "csat_score from 1 to 5") count once together.
            # An enrichment's explicit definition (``SEX = 'M'``) counts as the user's own.
            own = sum(
                1
                for f, s in zip(hits, strong, strict=True)
                if s and (f.kind != "enrichment" or f.lhs is not None)
            )
            weight = own + (1 if own < len(hard) else 0)
            yield Finding(label, f"{what} {', '.join(hard)}", strong=True, weight=weight)
        if soft:
            yield Finding(label, f"{what} {', '.join(soft)}", strong=False)


# ------------------------------------------------------------------------------------ structure

_PERCENT = cued(r"\bpercent(age)?\b|\bratio\b|\bproportion\b|\brate\b|\bshare\b|%", re.I)
_NEGATION = cued(
    r"\b(not|never|without|excluding|except|other than|no longer|isn't|aren't|wasn't|weren't|"
    r"doesn't|don't|didn't|haven't|hasn't|non|neither|nor)\b",
    re.I,
)
_NEGATING_SQL = re.compile(r"\bnot\b|<>|!=|\bexcept\b|\bis\s+null\b", re.I)
# Structural findings that were strong evidence on the dev set; the rest only lower the verdict
# to Likely Correct.
_STRONG_STRUCTURE: tuple[Issue, ...] = (
    "aggregation_wrong",
    "limit_unrequested",
    "ordering_wrong",
)

_Structure = Callable[[Evidence], Iterator[tuple[Issue, str]]]


_AVG_CALL = re.compile(r"\bavg\s*\(", re.I)
_THAN_AVERAGE = re.compile(
    r"\b(?:above|below|over|under|than|exceed(?:s|ed|ing)?)[\s-]+(?:the\s+)?(?:overall\s+)?"
    r"average\b",
    re.I,
)


def _averages(ev: Evidence) -> bool:
    """ "above the average price" compares with an average: an AVG anywhere in the SQL (a
    subquery's) meets it."""
    if not _THAN_AVERAGE.search(ev.question):
        return False
    return _AVG_CALL.search(SQL_STRING.sub("''", ev.request.record.sql)) is not None


def _aggregation_words(ev: Evidence) -> Iterator[tuple[Issue, str]]:
    """How many / average / total / maximum in the question, without the aggregate."""
    funcs, division, spec = ev.funcs, ev.division, ev.spec
    asked = {a.func for a in ev.qs.aggregations}
    for a in ev.qs.aggregations:
        if a.func == "COUNT" and not funcs & {"COUNT", "SUM"} and funcs & {"MAX", "MIN", "AVG"}:
            yield ("aggregation_wrong", "the question asks how many; the SQL computes another")
        elif a.func == "COUNT" and not funcs & {"COUNT", "SUM"} and spec.limit is None:
            yield ("aggregation_missing", "the question asks how many; the SQL counts nothing")
        elif a.func == "AVG" and "AVG" not in funcs and not division and not _averages(ev):
            yield ("aggregation_wrong", "the question asks for an average; no AVG or division")
        elif a.func == "SUM" and not funcs & {"SUM", "COUNT"} and "AVG" in funcs - asked:
            # "the average total price" asks for AVG; a total beside it is the summed column.
            yield ("aggregation_wrong", "the question asks for a total; the SQL averages")
        elif (
            a.func == "SUM"
            and funcs & {"COUNT", "SUM"} == {"COUNT"}
            and not any(b.func == "COUNT" for b in ev.qs.aggregations)
            and _AMOUNT.search(ev.question)
        ):
            yield ("aggregation_wrong", "the question asks for a total amount; the SQL counts")
        elif (
            a.func == "SUM" and not funcs & {"SUM", "COUNT"} and not division and "AVG" not in asked
        ):
            yield ("aggregation_missing", "the question asks for a total; no SUM or COUNT")
        elif a.func in ("MAX", "MIN") and a.func not in funcs and not spec.order_by:
            yield (
                "aggregation_missing",
                f"the question asks for a {a.func.lower()}imum; no {a.func} or ORDER BY",
            )


_AMOUNT = re.compile(
    r"\bsum of\b|\btotal\s+(?:\w+\s+)?(?:revenue|sales|amount|spend|spent|cost|price|value|"
    r"salary|salaries|income|profit|quantity|hours|points|balance|payments?)\b",
    re.I,
)


def _share_without_division(ev: Evidence) -> Iterator[tuple[Issue, str]]:
    if (
        _PERCENT.search(ev.question)
        and not ev.division
        and "AVG" not in ev.funcs
        and ev.spec.aggregations
    ):
        yield ("aggregation_wrong", "the question asks for a share; the SQL divides nothing")


# "the difference between A and B", "how many more ... than": a number one side less the other.
_DIFFERENCE = cued(
    r"\bdifferences?\s+(?:between|in|of)\b|\bhow\s+(?:much|many)\s+(?:more|less|fewer|higher|"
    r"lower|bigger|smaller|larger|longer|shorter|older|younger|greater)\b",
    re.I,
)
_QUOTED = re.compile(r"'[^']*'|\"[^\"]*\"")
# Subtraction in SQL: a minus between operands (not a comment's "--" nor "->"), or a function
# that subtracts dates.
_SUBTRACTS = re.compile(
    r"(?<![-<>=!])-(?![->])|\b(?:datediff|date_diff|timestampdiff|timestamp_diff|age|"
    r"months_between)\s*\(",
    re.I,
)


def _difference_without_subtraction(ev: Evidence) -> Iterator[tuple[Issue, str]]:
    """ "the difference between players 6 and 23's scores" answered without subtracting (the
    two scores side by side); a title in quotes that says "differences" asks for none."""
    if not _DIFFERENCE.search(ev.question) or not _DIFFERENCE.search(_QUOTED.sub(" ", ev.question)):
        return
    if not _SUBTRACTS.search(SQL_STRING.sub("''", ev.request.record.sql)):
        yield ("aggregation_wrong", "the question asks for a difference; the SQL subtracts nothing")


def _top_k_without_ordering(ev: Evidence) -> Iterator[tuple[Issue, str]]:
    if (
        ev.qs.top_k is not None
        and not ev.spec.order_by
        and not ev.funcs & {"MAX", "MIN"}
        and not sql_extremes(ev.spec, ev.request.rules.limit_min)
    ):
        yield ("ordering_wrong", "the question asks for a top/extreme; no ORDER BY, MAX or MIN")


def _top_k_limit_differs(ev: Evidence) -> Iterator[tuple[Issue, str]]:
    """A top-k question whose small LIMIT is another k (a large LIMIT is a safety cap)."""
    k, limit = ev.qs.top_k, ev.spec.limit
    if k is None or limit is None or limit == k or limit >= ev.request.rules.limit_min:
        return
    yield ("ordering_wrong", f"the question asks for {k}; LIMIT is {limit}")


def _extreme_direction(ev: Evidence) -> Iterator[tuple[Issue, str]]:
    """ "highest" answered by ``ORDER BY … ASC LIMIT`` or ``MIN()``; "lowest" the other way."""
    spec = ev.spec
    order_expr = first_ranked(spec)
    faithful = ev.enriched if ev.drift.status is not EnrichmentStatus.MAJOR_DRIFT else None
    asked = asked_directions(ev.question, order_expr, faithful)
    if len(asked) != 1:
        return  # none, or both ("the cheapest of the top 5"): nothing to hold the SQL to
    extremes = sql_extremes(spec, ev.request.rules.limit_min)
    if extremes and not any(way in asked for way, _ in extremes):
        want = "highest" if "desc" in asked else "lowest"
        shown = ", ".join(evidence for _, evidence in extremes)
        label: Issue = "ordering_wrong" if spec.order_by else "aggregation_wrong"
        yield (label, f"the question asks for the {want}; the SQL picks the other end ({shown})")


def _by_without_group(ev: Evidence) -> Iterator[tuple[Issue, str]]:
    """ "revenue by currency": an aggregate beside the plain column "by" names, no GROUP BY."""
    spec = ev.spec
    if spec.group_by or not spec.aggregations or spec.has_window:
        return
    plain = [
        p.casefold()
        for p, agg in zip(spec.projections, spec.projection_aggregated, strict=False)
        if not agg
    ]
    for m in _BY_WORD.finditer(ev.question):
        word = m.group(1).casefold()
        if any(re.search(r"\b\w*" + re.escape(word.rstrip("s")), p) for p in plain):
            yield ("grouping_wrong", f"the question asks per {word}; the SQL has no GROUP BY")
            return


_BY_WORD = re.compile(r"\b(?:by|per|for each|for every)\s+(?:the\s+|each\s+)?(\w{2,})", re.I)


def _limit_below_min(ev: Evidence) -> Iterator[tuple[Issue, str]]:
    if "limit_below_min" in ev.request.flags:
        yield ("limit_unrequested", f"LIMIT {ev.spec.limit} truncates an unranked answer")


def sql_negates(sql: str) -> bool:
    """Whether the SQL text negates (NOT, <>, EXCEPT, IS NULL) outside its string literals."""
    bare = SQL_STRING.sub("''", sql)
    return bool(_NEGATING_SQL.search(bare))


def _negation_not_applied(ev: Evidence) -> Iterator[tuple[Issue, str]]:
    spec = ev.spec
    if _NEGATION.search(ev.question) and not (
        spec.negated or spec.has_set_operation or sql_negates(ev.request.record.sql)
    ):
        yield ("logic_error", "the question negates; the SQL has no NOT, <> or EXCEPT")


# "revenue by currency": "by" and a lower-case noun after a measure (not "sorted by", "by John").
_BY_MEASURE = re.compile(
    r"(?<!sorted )(?<!ordered )(?<!ranked )\bby\s+(each\s+|every\s+)?(?:the\s+)?([a-z]\w+)"
)
# What "by" brings that is no grouping: a determiner, a pronoun or a quantifier ("by the
# Student_Club" read past its capital, "by their ID", "by an elder user", "by the most
# influential user").
_NOT_A_GROUP = frozenset({
    "a", "an", "the", "their", "its", "his", "her", "our", "my", "your", "this", "that", "these",
    "those", "them", "it", "which", "whom", "most", "least", "more", "less", "all", "any", "some",
    "many", "much", "far",
})  # fmt: skip


def _measure_groups(question: str, sql: str) -> list[str]:
    """The words "by" names as groups after a measure ("revenue by currency"), not a word the
    SQL itself names (a literal, a column: "posts owned by csgillespie" with ``DisplayName =
    'csgillespie'``, "comments posted by user ID 13" with ``UserId = 13``): that is who or what
    the answer is filtered on, one group. "each" asks per it whatever ("made by each employee")."""
    named = sql.casefold()
    words = []
    for m in _BY_MEASURE.finditer(question):
        each, word = m.group(1), m.group(2)
        if word in _NOT_A_GROUP:
            continue
        stem = word.casefold().removesuffix("s") if len(word) > 3 else word.casefold()
        if not each and stem[: max(4, len(stem) - 2)] in named:
            continue
        words.append(word)
    return words


def _grouping_not_applied(ev: Evidence) -> Iterator[tuple[Issue, str]]:
    spec = ev.spec
    if spec.group_by or not spec.aggregations or spec.has_window:
        return
    if any(True for _ in _by_without_group(ev)):
        return  # said once, strongly
    words = list(ev.qs.group_by)
    if not words and (ev.qs.aggregations or _ASKS_SUM.search(ev.question)):
        words = _measure_groups(ev.question, ev.request.record.sql)
    if words:
        yield (
            "grouping_wrong",
            f"the question groups per {', '.join(words)}; the SQL has no GROUP BY",
        )


# An aggregate call in a rendered ORDER BY term ("count(bond_type)").
_AGGREGATE_CALL = re.compile(
    r"\b(?:count|sum|avg|min|max|total|group_concat|string_agg|array_agg|listagg|median"
    r"|stddev\w*|var_\w+|variance|any_value|bool_and|bool_or|every)\s*\(",
    re.I,
)


def _grouping_unrequested(ev: Evidence) -> Iterator[tuple[Issue, str]]:
    """GROUP BY whose groups nothing aggregates, nothing asked for. An aggregate in HAVING or
    ORDER BY is what the groups are for ("the most common bond type": GROUP BY bond_type
    ORDER BY COUNT(*) DESC LIMIT 1)."""
    spec = ev.spec
    if (
        spec.group_by
        and not ev.qs.group_by
        and not ev.request.normalizations
        and not any(spec.projection_aggregated)
        and not spec.having_count
        and not any(_AGGREGATE_CALL.search(o.expr) for o in spec.order_by)
    ):
        yield ("grouping_wrong", "GROUP BY without aggregates or a grouping request")


def _distinct_not_applied(ev: Evidence) -> Iterator[tuple[Issue, str]]:
    spec = ev.spec
    if (
        DISTINCT_WORDS.search(ev.question)
        and not spec.distinct
        and not any(a.distinct for a in spec.aggregations)
        and not spec.group_by
    ):
        yield ("columns_wrong", "the question asks for distinct values; the SQL keeps duplicates")


STRUCTURE_CHECKS: tuple[_Structure, ...] = (
    _aggregation_words,
    _share_without_division,
    _difference_without_subtraction,
    _top_k_without_ordering,
    _top_k_limit_differs,
    _extreme_direction,
    _by_without_group,
    _limit_below_min,
    _negation_not_applied,
    _grouping_not_applied,
    _grouping_unrequested,
    _distinct_not_applied,
)


def structure(ev: Evidence) -> Iterator[Finding]:
    """The question's words vs the SQL structure; nothing to compare when the SQL is unparsed."""
    if not ev.spec.parsed:
        return
    for check in STRUCTURE_CHECKS:
        for label, reason in check(ev):
            yield Finding(label, reason, strong=label in _STRONG_STRUCTURE)


# ------------------------------------------------------------------ predicates and aggregates


def unrequested_predicates(ev: Evidence) -> Iterator[Finding]:
    """SQL predicates no question filter accounts for, that the rules neither ignore nor allow.

    Diagnostic only (weak): lowering the verdict on it cut agreement on the dev set.
    """
    spec, rules = ev.spec, ev.request.rules
    used = {i for m in ev.matches for i in m.predicates}
    extras = [
        p.text
        for p in spec.filters
        if p.id not in used
        and p.clause != "qualify"
        and not is_ignored(p, rules)
        and not is_benign(p, rules, spec.dialect)
    ]
    if extras:
        yield Finding("filters_extra", f"unrequested predicates: {'; '.join(extras)}", False)


_ENRICHMENT_AGGREGATES = cued(r"\b(count|sum|avg|max|min)\s*\(", re.I)


def enrichment_aggregates(ev: Evidence) -> Iterator[Finding]:
    """Aggregates the enrichment spells out (``refers to COUNT(id)``) that the SQL lacks."""
    spec = ev.spec
    if not ev.enriched or not spec.parsed:
        return
    named = {m.group(1).upper() for m in _ENRICHMENT_AGGREGATES.finditer(ev.enriched)}
    for func in sorted(named):
        if func in ev.funcs:
            continue
        if func in ("SUM", "COUNT") and {"SUM", "COUNT"} <= named and "AVG" in ev.funcs:
            continue  # DIVIDE(SUM(x), COUNT(id)) is the average AVG(x) computes
        if func in ("MAX", "MIN") and spec.order_by:
            continue
        if func == "AVG" and ev.division:
            continue
        yield Finding(
            "aggregation_missing", f"the enrichment names {func}(); the SQL has none", True
        )


def idle_joins(ev: Evidence) -> Iterator[Finding]:
    """A joined table the answer takes nothing from, at a leaf of the join graph
    (:func:`stef.sql.joins.idle_joins`): it drops the rows without a match and repeats the rows
    with several. Strong: on the dev set it fires on 99 records, 75 labelled wrong (32 of the
    44 it takes from Correct)."""
    if ev.spec.idle_joins:
        reason = f"joined but never read: {', '.join(ev.spec.idle_joins)}"
        yield Finding("joins_suspect", reason, True)


def mismatched_keys(ev: Evidence) -> Iterator[Finding]:
    """A join that equates columns naming different things (``atom.atom_id = bond.bond_id``,
    :func:`stef.sql.joins.mismatched_keys`): the rows it pairs do not belong together."""
    if ev.spec.mismatched_keys:
        reason = f"the join equates different keys: {'; '.join(ev.spec.mismatched_keys)}"
        yield Finding("joins_suspect", reason, True)


def enrichment_columns(ev: Evidence) -> Iterator[Finding]:
    """Columns a faithful enrichment names (``refers to MIN(milliseconds)``) that the SQL never
    uses (:mod:`stef.judges.heuristic.named_columns`)."""
    if not ev.enriched or not ev.spec.parsed or ev.drift.status is EnrichmentStatus.MAJOR_DRIFT:
        return
    unused = list(unused_columns(ev.question, ev.enriched, ev.request.record.sql))
    if unused:
        reason = f"the enrichment names {', '.join(unused)}; the SQL never uses it"
        yield Finding("columns_wrong", reason, True)


_ASKS_SUM = re.compile(
    r"total|sum|how (many|much)|number|percent|ratio|share|average|amount|much|proportion|overall|"
    r"combined|altogether|in all|spen[dt]|cost|rate|revenue|sales|sold|units|earn|income|profit|"
    r"volume|quantity",
    re.I,
)
_ASKS_AVG = re.compile(r"average|avg|mean|per\b|ratio|rate", re.I)


def unasked_aggregates(ev: Evidence) -> Iterator[Finding]:
    """SUM/AVG in the SQL although neither Qu nor Qe asks for a total or an average."""
    if not ev.spec.parsed:
        return
    if ev.qs.group_by and ev.spec.group_by:
        return  # "revenue by region": a total or an average per group is what was asked
    text = f"{ev.question} {ev.enriched or ''}"
    for func, asks in (("SUM", _ASKS_SUM), ("AVG", _ASKS_AVG)):
        if func in ev.funcs and not asks.search(text):
            yield Finding(
                "aggregation_wrong", f"the SQL computes {func}() that nobody asked for", True
            )


_TRUNCATING_DIALECTS = {"sqlite", "postgres", "redshift", "tsql"}
_FLOAT_HINT = re.compile(r"cast\(|real|float|double|decimal|numeric|\d\.\d|::", re.I)


# AVG(x) / COUNT(y), CAST(AVG(x) AS REAL) / COUNT(y): an average divided again by a count.
_AVERAGE_OVER_COUNT = cued(
    r"\bavg\s*\((?:[^()]|\([^()]*\))*\)\s*(?:as\s+\w+\s*\)\s*)?/\s*(?:cast\s*\(\s*)?count\s*\(",
    re.I,
)


def average_over_count(ev: Evidence) -> Iterator[Finding]:
    """An average divided by a count: SUM(x) / COUNT(y) made an average twice."""
    if _AVERAGE_OVER_COUNT.search(SQL_STRING.sub("''", ev.request.record.sql)):
        yield Finding("aggregation_wrong", "an AVG() divided again by a COUNT()", True)


def integer_division(ev: Evidence) -> Iterator[Finding]:
    """A ratio of integer aggregates in a dialect whose ``/`` truncates integers.

    Weak when the dialect was guessed: the first dialect that parsed need not be the engine's.
    """
    spec = ev.spec
    if spec.dialect not in _TRUNCATING_DIALECTS:
        return
    if any(
        "/" in p and re.search(r"\b(count|sum)\(", p) and not _FLOAT_HINT.search(p)
        for p in spec.projections
    ):
        reason = "integer aggregates divided in a dialect that truncates"
        if spec.dialect_guessed:
            reason += f" ({spec.dialect}, guessed)"
        yield Finding("logic_error", reason, not spec.dialect_guessed)


# ---------------------------------------------------------------------------- enrichment, parse


def enrichment_drift(ev: Evidence) -> Iterator[Finding]:
    if ev.drift.status is EnrichmentStatus.MAJOR_DRIFT:
        yield Finding("enrichment_drift", f"Qe drops {', '.join(ev.drift.dropped)}", False)


def unparsed(ev: Evidence) -> Iterator[Finding]:
    if not ev.spec.parsed:
        reason = f"sqlglot could not parse the SQL: {ev.spec.parse_error}"
        yield Finding("unparsed_sql", reason, False)


# ------------------------------------------------------------------------ opt-in signals

_RANGE_OPS = {">", ">=", "<", "<="}


def operator_mismatch(ev: Evidence) -> Iterator[Finding]:
    """A comparison the question words ("more than 3", "at most 5") that the SQL applies to the
    same value with another operator (``>= 3``, ``< 5``). Opt-in."""
    if not ev.operator_mismatch:
        return
    preds = {p.id: p for p in ev.spec.filters}
    wrong = []
    for m in ev.matches:
        q = ev.qs.filters[m.filter]
        if m.status != "matched" or q.op not in _RANGE_OPS or not m.predicates:
            continue
        ops = {preds[i].op for i in m.predicates if i in preds}
        if ops and ops <= _RANGE_OPS and q.op not in ops:
            wrong.append(f"{q.text} ({q.op}; the SQL has {', '.join(sorted(ops))})")
    if wrong:
        yield Finding("filters_incorrect", f"wrong operator for {', '.join(wrong)}", True)


def enrichment_distinct(ev: Evidence) -> Iterator[Finding]:
    """Qe asks for distinct values and the SQL keeps duplicates. Opt-in."""
    spec = ev.spec
    if (
        ev.enrichment_distinct
        and spec.parsed
        and ev.enriched
        and DISTINCT_WORDS.search(ev.enriched)
        and not DISTINCT_WORDS.search(ev.question)
        and not spec.distinct
        and not any(a.distinct for a in spec.aggregations)
        and not spec.group_by
    ):
        yield Finding("columns_wrong", "the enrichment asks for distinct values; none", True)


CHECKS: tuple[Check, ...] = (
    question_filters,
    structure,
    unrequested_predicates,
    enrichment_aggregates,
    enrichment_columns,
    idle_joins,
    mismatched_keys,
    unasked_aggregates,
    average_over_count,
    integer_division,
    operator_mismatch,
    enrichment_distinct,
    enrichment_drift,
    unparsed,
)

"""Reference stage: the generated SQL compared with the record's reference SQL (reference mode).

A team's golden set gives, per question, a reviewed SQL answer. When a record carries one
(``gold_sql``, or a line of the ``references`` file for its question), :func:`reference` compares
the generated SQL with it component by component (:mod:`stef.sql.compare`) and says:

- ``Correct``: the same structure once equivalent rewrites are undone;
- ``Likely Correct``: only duplicates or NULL guards differ (DISTINCT, GROUP BY on what is
  projected, ``IS NOT NULL``);
- ``Incorrect``: anything else differs, or the generated SQL does not parse.

``p_correct`` is how often SQL with that verdict was labelled correct on the dev set (the table
below). The final score weighs ``100 * p_correct`` three times the judge's score
(``_combined_score``): one documented weight, no fitted mixture.
"""

from __future__ import annotations

import itertools
import math
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from decimal import Decimal
from typing import Any

from stef.models import (
    Database,
    Execution,
    InputRecord,
    Reference,
    ReferenceDifference,
    ReferenceExecution,
    Result,
    SqlSpec,
    Verdict,
)
from stef.question import question_key
from stef.rules import AppRules
from stef.sql.budget import BUDGET_SPENT, NO_DEADLINE, CpuDeadline
from stef.sql.compare import Parts, compare_parts, parts_of
from stef.sql.suite import telling
from stef.stages.normalize import question_cues
from stef.stages.reference_generated import RANDOM_ROWS, Generated, random_rows, run_generated
from stef.stages.reference_rules import without_app_defaults
from stef.stages.score import tier_of
from stef.stages.sqlspec import guess_candidates, sqlspec

# P(label correct | reference verdict) on ../shared/data/judge-dev.jsonl (1,942 records with
# gold_sql; measured with the structural comparison of this module, SQL as logged):
#   Correct 594/639, Likely Correct 117/133, Incorrect 314/1170.
P_CORRECT: dict[Verdict, float] = {
    Verdict.CORRECT: 0.93,
    Verdict.LIKELY_CORRECT: 0.88,
    Verdict.INCORRECT: 0.27,
}
# The reference's share of the final score, 100 * p_correct against the judge's score. At 3/4 an
# Incorrect reference always fails the default pass threshold (at most 25 + 0.75 * 27 = 45) and
# a Correct one passes unless the judge scores below 21. Measured on the dev set with the
# heuristic judge (records with gold_sql, pass at 75): kappa 0.552 at 1/2, 0.604 at 3/4, 0.618
# for the reference alone; 3/4 keeps the judge a voice (an LLM judge knows more than the
# heuristic) without letting it outvote the reference.
REFERENCE_WEIGHT = 0.75


def reference(
    sql: str,
    gold_sql: str,
    dialect: str | None,
    *,
    ordering_requested: bool,
    guess: bool = True,
    deadline: CpuDeadline = NO_DEADLINE,
) -> Reference:
    """Compare ``sql`` with ``gold_sql``, both read in ``dialect``.

    Args:
        sql: the generated SQL.
        gold_sql: the reference SQL of the same question.
        dialect: the sqlglot dialect of both (None: generic).
        ordering_requested: the question asks for an order: ORDER BY counts without a LIMIT.
        guess: with no dialect named, a query the generic dialect cannot parse is read in the
            first dialect that parses it, as the SQL spec stage guesses (each query on its own:
            a golden set may be written for another engine's parser than the agent's).
        deadline: the record's CPU deadline, checked between each reading of a query.

    Raises:
        CpuBudgetSpent: ``deadline`` passed before the comparison was done: no verdict.
    """
    found = compare_parts(
        _parts_guessed(sql, dialect, guess, deadline),
        _parts_guessed(gold_sql, dialect, guess, deadline),
        ordered=ordering_requested,
    )
    differences = [
        ReferenceDifference(component=d.component, generated=d.generated, reference=d.reference)
        for d in found.differences
    ]
    if found.error == "reference_unparsed":
        return Reference(verdict=None, error=found.error)
    if found.error is not None:
        verdict = Verdict.INCORRECT
    elif found.equivalent:
        verdict = Verdict.CORRECT
    elif found.minor_only:
        verdict = Verdict.LIKELY_CORRECT
    else:
        verdict = Verdict.INCORRECT
    return Reference(
        verdict=verdict, p_correct=P_CORRECT[verdict], differences=differences, error=found.error
    )


def _parts_guessed(
    sql: str, dialect: str | None, guess: bool, deadline: CpuDeadline
) -> Parts | None:
    # Each reading of a long query costs: a 1,900-term OR chain that no dialect could compare
    # cost 0.5 s a reading, 3.5 s in all its guessed dialects.
    parts = parts_of(sql, dialect, deadline)
    if parts is not None or dialect is not None or not guess:
        return parts
    for candidate in guess_candidates(sql):
        deadline.check()
        parts = parts_of(sql, candidate, deadline)
        if parts is not None:
            return parts
    return None


def with_reference(
    result: Result,
    record: InputRecord,
    rules: AppRules,
    references: Mapping[str, str],
    database: Database | None = None,
    generated: Generated | None = None,
    deadline: CpuDeadline = NO_DEADLINE,
) -> Result:
    """``result`` compared with the record's reference SQL: its own ``gold_sql``, else the
    references file's line for its question. Only an evaluated result is compared; it gets
    ``reference``, the differences among its issues, the reference's score and confidence
    (an unsafe SQL keeps its 0) and ``judge.p_correct``. With a ``database`` both queries also
    run there (``_executed``), and the rows decide the verdict when both ran; with
    ``generated``, they run on databases generated for them (:func:`run_generated`) without a
    ``database``, or after one that told nothing (:func:`_told_nothing`: its run is kept as
    the reference's ``database``). Without a reference the result is returned as it is.

    ``deadline`` is what is left of the record's CPU budget: when it passes during the
    execution on generated databases, the structure's verdict stands and ``execution`` says
    the budget ran out (``not_run``); before the structural comparison is done, no verdict can
    stand. A ``database``'s statements have their own bounds (its timeout and row limit); the
    budget bounds only the reference run again after a generated query that did not finish.

    Raises:
        CpuBudgetSpent: ``deadline`` passed before the structural comparison was done.
    """
    gold = record.gold_sql or references.get(question_key(record.question))
    if gold is None or result.outcome != "evaluated":
        return result
    dialect = record.dialect or rules.dialect
    cues = question_cues(record.question)
    ordered = cues.ordering_requested or cues.top_k is not None
    # The app's defaults (a safety LIMIT, benign and ignored filters) are no difference.
    sql, gold = (without_app_defaults(s, dialect, rules) for s in (record.sql, gold))
    spec = result.sql_spec
    if spec is not None and sql != record.sql:
        spec = sqlspec(sql, dialect)
    deadline.check()
    ref = reference(sql, gold, dialect, ordering_requested=ordered, deadline=deadline)
    if ref.verdict is not None:
        ref = ref.model_copy(update={"decided_by": "structure"})
    if database is not None and spec is not None:
        # A team's database has its own bound: reference.timeout_s a statement.
        run = _executed(database, spec, sql, gold, dialect, ordered, deadline)
        ref = _decided_by_rows(ref, run)
        if generated is not None and ref.verdict is not None and _told_nothing(run, deadline):
            # Where the team's rows tell nothing, rows made for the two queries can.
            ref = run_generated(
                ref, spec, sql, gold, dialect, ordered, generated, deadline, record.timestamp
            )
            ref = ref.model_copy(update={"database": run})
    elif generated is not None and spec is not None and ref.verdict is not None:
        ref = run_generated(
            ref, spec, sql, gold, dialect, ordered, generated, deadline, record.timestamp
        )
    return _referenced(result, ref, rules)


def _told_nothing(run: ReferenceExecution, deadline: CpuDeadline) -> bool:
    """Whether the generated databases run after the team's database (``run``): it told nothing
    about the generated query (the same rows holding nothing, neither query runs there, or the
    reference fails there), and the record's CPU budget is not spent. A query that is not one
    SELECT, a generated query that did not finish, or memory reached there would meet the same
    on them."""
    if deadline.passed():
        return False
    return run.status in ("undecided", "reference_failed") or (
        run.status == "not_run" and run.detail.startswith(NEITHER_RUNS)
    )


def _referenced(result: Result, ref: Reference, rules: AppRules) -> Result:
    update: dict[str, object] = {"reference": ref}
    found = _reference_issues(ref)
    if found:
        issues = [i for i in dict.fromkeys([*result.issues, *found]) if i != "none"]
        update["issues"] = issues
    unsafe = result.safety.mutating or result.safety.multiple_statements
    if result.score is not None and not unsafe:
        score = _combined_score(result.score, ref)
        update |= {"score": score, "tier": tier_of(score, rules)}
    if ref.p_correct is not None and ref.verdict is not None:
        # The reference's probability is the record's: the estimate and the review read it.
        update["judge"] = result.judge.model_copy(update={"p_correct": ref.p_correct})
        if result.components is not None and ref.verdict is not Verdict.LIKELY_CORRECT:
            # A decisive reference sets the confidence; the verdict stays the judge's, so the
            # verdict mix and the detected-error alert read what the judge found (a golden set
            # written without the app's every default would otherwise turn them into errors).
            sure = max(ref.p_correct, 1 - ref.p_correct)
            update["components"] = result.components.model_copy(update={"confidence": sure})
    return result.model_copy(update=update)


def _executed(
    database: Database,
    spec: SqlSpec,
    sql: str,
    gold_sql: str,
    dialect: str | None,
    ordered: bool,
    deadline: CpuDeadline = NO_DEADLINE,
) -> ReferenceExecution:
    """Run both queries on ``database`` and compare their rows: column order ignored, integers
    exact, other numbers rounded to 6 decimals, row order only when ``ordered``. Only a plain
    SELECT runs (STEF's safety check on the generated SQL's ``spec`` and on the reference); a
    failure is a finding, and so is a timeout or too many rows when the reference finishes
    within the same bounds (:func:`_unfinished`). Running STEF out of memory, in the database
    or comparing the rows, is no finding on the query: ``not_run``, the structure decides."""
    gold_spec = sqlspec(gold_sql, dialect)
    for who, checked in (("generated", spec), ("reference", gold_spec)):
        if not _plain_select(checked):
            return ReferenceExecution(status="not_run", detail=f"the {who} SQL is not one SELECT")
    try:
        run = _compared(database, sql, gold_sql, ordered, deadline)
    except MemoryError:
        # Past the database's own catch: the rows are within max_rows and 16 MiB of text, not
        # of numbers (10,000 rows of 1,000 columns are 10 million cells, each keyed as a tuple).
        return _out_of_memory("running and comparing the queries")
    if run.status == "different" and random_rows(sql, gold_sql, dialect):
        # The same query as its reference: SELECT RANDOM() differs from one run to the next.
        return run.model_copy(update={"status": "not_run", "detail": RANDOM_ROWS})
    return run


def _compared(
    database: Database, sql: str, gold_sql: str, ordered: bool, deadline: CpuDeadline
) -> ReferenceExecution:
    """Both queries' rows on ``database``, compared (both plain SELECTs)."""
    mine = database.run(sql)
    if mine.status == "out_of_memory":
        return _out_of_memory("the generated SQL")
    if mine.status in _UNFINISHED:
        return _unfinished(database, mine, gold_sql, deadline)
    if mine.status != "ok":
        return _failed(database, mine, gold_sql, deadline)
    theirs = database.run(gold_sql)
    if theirs.status == "out_of_memory":
        return _out_of_memory("the reference SQL")
    if theirs.status != "ok":
        return ReferenceExecution(
            status="reference_failed",
            detail=f"{theirs.status}: {theirs.detail}",
            generated_rows=len(mine.rows),
        )
    same = _same_rows(mine.rows, theirs.rows, ordered)
    if same and not telling(theirs.rows):
        # As on generated databases: no row passed either query's filters, so agreeing rows
        # say nothing about them (a wrong year and the right one both find no 2030 orders).
        return ReferenceExecution(
            status="undecided",
            detail=NOTHING_TOLD,
            generated_rows=len(mine.rows),
            reference_rows=len(theirs.rows),
        )
    return ReferenceExecution(
        status="same" if same else "different",
        generated_rows=len(mine.rows),
        reference_rows=len(theirs.rows),
    )


NOTHING_TOLD = (
    "both queries returned the same rows holding nothing but NULL and 0 (or no rows): "
    "the database cannot tell them apart"
)


NEITHER_RUNS = "neither query runs on this database"


# A statement stopped at one of the database's bounds (its time, its rows, their bytes): on a
# slow or loaded database, or for a question whose answer is that large, the reference stops
# there too, and that says nothing against the generated query.
_UNFINISHED = frozenset({"timeout", "too_many_rows", "too_large"})


def _unfinished(
    database: Database, mine: Execution, gold_sql: str, deadline: CpuDeadline
) -> ReferenceExecution:
    """The generated query stopped at a bound of ``database`` (``mine``): a finding when the
    reference, run within the same bounds, finishes (``generated_failed``); nothing decided
    when it stops at one too (``not_run``: the structure decides). That second run is only for
    this decision, so it runs within what is left of the record's CPU budget (``deadline``)
    when that is less than the database's timeout, and not at all when nothing is: stopped
    there, or not run, it is ``not_run`` with :data:`BUDGET_SPENT` (a SQLite statement's steps
    are this thread's CPU)."""
    failed = f"{mine.status}: {mine.detail}"
    theirs, bound = _reference_within(database, gold_sql, deadline)
    if theirs is None:
        return ReferenceExecution(status="not_run", detail=BUDGET_SPENT)
    if theirs.status == "ok":
        return ReferenceExecution(
            status="generated_failed", detail=failed, reference_rows=len(theirs.rows)
        )
    if theirs.status == "out_of_memory":
        return _out_of_memory("the reference SQL")
    if theirs.status == "timeout" and bound < database.timeout_s:
        return ReferenceExecution(status="not_run", detail=BUDGET_SPENT)
    if theirs.status in _UNFINISHED:
        stopped = f"{theirs.status}: {theirs.detail}"
        detail = f"neither query finished: the generated SQL {failed}; the reference {stopped}"
        return ReferenceExecution(status="not_run", detail=detail)
    return ReferenceExecution(status="reference_failed", detail=f"{theirs.status}: {theirs.detail}")


def _failed(
    database: Database, mine: Execution, gold_sql: str, deadline: CpuDeadline
) -> ReferenceExecution:
    """The generated query failed on ``database`` (``mine``, an error): a finding
    (``generated_failed``) unless the reference fails there too. Then neither runs on this
    database, which says nothing about the generated query: SQL of another dialect than the
    database's engine (Postgres' ``DATE_TRUNC`` on SQLite), or a table the database no longer
    has; ``not_run``, the structure decides. The reference runs within what is left of the
    record's CPU budget; with none left the error stands, as it did before the reference was
    asked (an error is usually met before a statement runs)."""
    failed = f"{mine.status}: {mine.detail}"
    theirs, _ = _reference_within(database, gold_sql, deadline)
    if theirs is None:
        return ReferenceExecution(status="generated_failed", detail=failed)
    if theirs.status == "error":
        detail = (
            f"{NEITHER_RUNS}: the generated SQL {failed}; "
            f"the reference {theirs.status}: {theirs.detail}"
        )
        return ReferenceExecution(status="not_run", detail=detail)
    rows = len(theirs.rows) if theirs.status == "ok" else None
    return ReferenceExecution(status="generated_failed", detail=failed, reference_rows=rows)


def _reference_within(
    database: Database, gold_sql: str, deadline: CpuDeadline
) -> tuple[Execution | None, float]:
    """The reference run after the generated query did not give rows, only to decide what
    that means: within the database's timeout or what is left of the record's CPU budget,
    whichever is less (the bound, returned); not run (None) when the budget is spent."""
    bound = min(database.timeout_s, deadline.left())
    if bound <= 0:
        return None, bound
    return database.run(gold_sql, timeout_s=bound), bound


def _out_of_memory(what: str) -> ReferenceExecution:
    """Nothing decided: ``what`` ran STEF's process out of memory (its host's bound, e.g. a
    container's memory limit, not the query's fault: the structure's verdict stands)."""
    return ReferenceExecution(status="not_run", detail=f"{what} ran STEF out of memory")


def _plain_select(spec: SqlSpec) -> bool:
    return (
        spec.parsed
        and spec.statement_type == "select"
        and not spec.mutating
        and not spec.multiple_statements
    )


def _value_key(value: Any) -> tuple[int, Any]:
    """One cell as compared: integers exactly, other numbers as floats rounded to 6 decimals
    (1 and 1.0 alike: Python's 1 == 1.0, with the same hash), everything else as its text;
    NULL apart. The tag keeps the kinds apart when sorting."""
    if value is None:
        return (0, "")
    if isinstance(value, bool | int):
        # Not as a float: past 2**53 (64-bit ids) an integer and its neighbour are one float.
        return (1, int(value))
    if isinstance(value, Decimal) and value.is_finite() and value == value.to_integral_value():
        return (1, int(value))  # DuckDB's HUGEINT and DECIMAL(38, 0) likewise
    if isinstance(value, float | Decimal):
        number = float(value)
        if math.isfinite(number):
            return (1, round(number, 6) + 0.0)  # + 0.0: -0.0 reads 0.0
    return (2, str(value))


# The most ways to pair columns of equal values tried, and the most rows all the tries may
# pair (720 tries of up to 277 rows, 20 of 10,000): past either the rows agree as each row's
# multiset of cells did. 10,000 rows of 6 columns of the same values, no pairing matching,
# took 21.8 s of CPU in all 720 tries.
_MAX_PAIRINGS = 720
_MAX_PAIRED_ROWS = 200_000


def _same_rows(
    mine: Sequence[Sequence[Any]], theirs: Sequence[Sequence[Any]], ordered: bool
) -> bool:
    """Whether two results hold the same rows, column order ignored: some one pairing of the
    columns makes them equal (as lists when ``ordered``, else as bags). The rows must first
    agree each as the multiset of its cells (which alone takes id and age swapped in one row
    for the same); then columns holding the same values are paired, within
    :data:`_MAX_PAIRINGS` tries and :data:`_MAX_PAIRED_ROWS` rows, past which that agreement
    stands."""
    if _rows_key(mine, ordered) != _rows_key(theirs, ordered):
        return False  # no pairing of the columns can make rows of other cells equal
    a = [tuple(_value_key(v) for v in row) for row in mine]
    b = [tuple(_value_key(v) for v in row) for row in theirs]
    if not a:
        return True
    tries = min(_MAX_PAIRINGS, max(1, _MAX_PAIRED_ROWS // len(a)))
    want: object = b if ordered else Counter(b)
    for n, pairing in enumerate(_pairings(a, b)):
        if n == tries:
            return True
        permuted = [tuple(row[i] for i in pairing) for row in a]
        if (permuted if ordered else Counter(permuted)) == want:
            return True
    return False


def _pairings(a: list[tuple[Any, ...]], b: list[tuple[Any, ...]]) -> Iterator[tuple[int, ...]]:
    """Each way to give every column of ``b`` a column of ``a`` holding the same values, as
    the ``a`` index for each ``b`` column; none when the columns' values differ. Columns of
    one set of values pair in every order: the product of each such group's permutations."""
    width = len(b[0])
    in_a: dict[tuple[Any, ...], list[int]] = {}
    in_b: dict[tuple[Any, ...], list[int]] = {}
    for i in range(width):
        in_a.setdefault(tuple(sorted(row[i] for row in a)), []).append(i)
        in_b.setdefault(tuple(sorted(row[i] for row in b)), []).append(i)
    if {k: len(v) for k, v in in_a.items()} != {k: len(v) for k, v in in_b.items()}:
        return  # the columns' values differ: no pairing
    groups = [(in_b[k], in_a[k]) for k in in_b]
    # product() holds each group's orders: at most what is tried (20 NULL columns have 20!).
    orders = [
        itertools.islice(itertools.permutations(mine), _MAX_PAIRINGS + 1) for _, mine in groups
    ]
    for choice in itertools.product(*orders):
        pairing = [0] * width
        for (theirs, _), order in zip(groups, choice, strict=True):
            for j, i in zip(theirs, order, strict=True):
                pairing[j] = i
        yield tuple(pairing)


def _rows_key(rows: Sequence[Sequence[Any]], ordered: bool) -> object:
    # Column order ignored: a row is the sorted multiset of its cells.
    keyed = [tuple(sorted(_value_key(v) for v in row)) for row in rows]
    return keyed if ordered else Counter(keyed)


def _decided_by_rows(ref: Reference, run: ReferenceExecution) -> Reference:
    """The rows decide when both queries ran: the same rows are Correct, others Incorrect;
    a generated query that fails is Incorrect; otherwise the structure's verdict stands."""
    verdict = ref.verdict
    if run.status == "same":
        verdict = Verdict.CORRECT
    elif run.status in ("different", "generated_failed"):
        verdict = Verdict.INCORRECT
    p_correct = ref.p_correct if verdict is None else P_CORRECT[verdict]
    decided_by = "execution" if run.status in ("same", "different", "generated_failed") else None
    return ref.model_copy(
        update={
            "verdict": verdict,
            "p_correct": p_correct,
            "execution": run,
            "decided_by": decided_by or ref.decided_by,
        }
    )


def _combined_score(judge_score: float, ref: Reference) -> float:
    """The final score with a reference: ``100 * p_correct`` when the reference is decisive
    (Correct or Incorrect); for Likely Correct ``REFERENCE_WEIGHT * 100 * p_correct`` plus the
    rest of the judge's score; the judge's score alone when the reference could not be
    compared."""
    if ref.p_correct is None:
        return judge_score
    if ref.verdict in (Verdict.CORRECT, Verdict.INCORRECT):
        return round(100 * ref.p_correct, 2)
    mixed = (1 - REFERENCE_WEIGHT) * judge_score + REFERENCE_WEIGHT * 100 * ref.p_correct
    return round(mixed, 2)


# Each differing component as the result's issue label (the taxonomy of stef.models.Issue).
ISSUE_OF_COMPONENT = {
    "shape": "logic_error",
    "subqueries": "logic_error",
    "tables": "joins_suspect",
    "joins": "joins_suspect",
    "projections": "columns_wrong",
    "aggregates": "aggregation_wrong",
    "distinct": "logic_error",
    "filters": "filters_incorrect",
    "null_checks": "filters_extra",
    "group_by": "grouping_wrong",
    "having": "filters_incorrect",
    "order_by": "ordering_wrong",
    "limit": "limit_unrequested",
}


def _reference_issues(ref: Reference) -> list[str]:
    """The issue labels of ``ref``'s differences, each once, in component order."""
    return list(dict.fromkeys(ISSUE_OF_COMPONENT[d.component] for d in ref.differences))

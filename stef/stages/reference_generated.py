"""Reference mode's execution on generated databases: the verdict from rows when no database
is configured (``reference.generate``, on by default).

:func:`run_generated` runs the generated SQL and the reference on small databases generated for
them (:func:`stef.sql.suite.run_suite`) and decides:

- a database on which their rows differ: ``Incorrect``, with the counterexample;
- rows that differ only by repeats and rows with NULLs: ``Likely Correct``;
- the same rows on every database that could tell: ``Correct``, more surely the more databases
  could tell;
- nothing could tell, or the queries could not be read or run: the structure's verdict stands,
  and ``reference.error`` says why;
- the same rows where the structure says ``Incorrect`` and the two differ in a LIMIT or an
  ORDER BY direction that the databases cannot exercise (they cannot tell the reference from
  itself with those changed): the structure's verdict stands (``execution_unexercised``).

``P_EXECUTION`` is how often SQL with each outcome was labelled correct on the dev set.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from sqlglot import exp
from sqlglot.errors import SqlglotError

from stef.errors import CpuBudgetSpent
from stef.models import (
    Reference,
    ReferenceCounterexample,
    ReferenceExecution,
    SqlSpec,
    Verdict,
)
from stef.sql.budget import BUDGET_SPENT, NO_DEADLINE, CpuDeadline
from stef.sql.compare import keyed_grouping, parts_of
from stef.sql.dialects import parse_sql
from stef.sql.suite import SuiteOutcome, perturbed, run_suite, touched
from stef.sql.suite_dates import instant_of
from stef.stages.sqlspec import sqlspec

# P(label correct | outcome on generated databases, and for the same rows the structure's
# verdict) on ../shared/data/judge-dev.jsonl (1,942 records with gold_sql, 8 + 2 + 4 databases
# each): different 204/1030, duplicates 120/134, grouped by an entity's key or its name 8/8
# (taken as (8 + 1)/(8 + 2): few records); same rows with a Correct structure 570/598, Likely
# Correct 18/19, Incorrect 79/96. Measured by scripts/reference_rates.py (docs/reference.md).
P_EXECUTION: dict[str, float] = {"different": 0.2, "duplicates": 0.9, "keyed_groups": 0.9}
# Why rows that differ are still Likely Correct (``execution.detail``).
KEYED_GROUPS = (
    "the rows differ only where two rows share the name one query groups by and the other "
    "groups by their key"
)
P_SAME: dict[Verdict, float] = {
    Verdict.CORRECT: 0.95,
    Verdict.LIKELY_CORRECT: 0.95,
    Verdict.INCORRECT: 0.82,
}
_VERDICT = {
    "same": Verdict.CORRECT,
    "duplicates": Verdict.LIKELY_CORRECT,
    "different": Verdict.INCORRECT,
}


# What small generated databases cannot always exercise (a LIMIT inside a scalar subquery, an
# order among rows a key makes unique): agreeing rows overrule it only when they can.
UNEXERCISED = frozenset({"limit", "order_by"})

# Databases that could tell, from which agreement is as sure as the dev rate says.
_SURE = 6


# What makes a query's rows differ from one run to the next: sqlglot's random functions,
# SQLite's RANDOMBLOB and SETSEED (read as anonymous functions), and sampling.
_RANDOM = (exp.Rand, exp.Randn, exp.Randstr, exp.Uuid, exp.TableSample)
_RANDOM_NAMES = frozenset(("randomblob", "setseed"))
# Why rows that differ did not decide (the generated databases' or the team's).
RANDOM_ROWS = "a query calls a random function or samples: rows that differ decide nothing"


def random_rows(sql: str, gold_sql: str, dialect: str | None) -> bool:
    """Whether either query calls a random function or samples: then rows that differ say
    nothing (the same query as its reference, ``SELECT RANDOM()``, differs from itself)."""
    for text in (sql, gold_sql):
        try:
            trees = parse_sql(text, dialect)
        except (SqlglotError, RecursionError, ValueError):
            continue
        for node in (n for tree in trees for n in tree.find_all(*_RANDOM, exp.Anonymous)):
            if not isinstance(node, exp.Anonymous) or node.name.casefold() in _RANDOM_NAMES:
                return True
    return False


# Why the generated databases did not decide when running them ran STEF out of memory.
OUT_OF_MEMORY = "running the queries on the generated databases ran STEF out of memory"


@dataclass(frozen=True)
class Generated:
    """Reference mode's generated databases (``reference.generate``): how many per record,
    the time all of them may take, the most rows one query may return."""

    databases: int = 8
    timeout_s: float = 1.0
    max_rows: int = 10_000


DEFAULT_GENERATED = Generated()


def run_generated(
    ref: Reference,
    spec: SqlSpec,
    sql: str,
    gold_sql: str,
    dialect: str | None,
    ordered: bool,
    generated: Generated,
    deadline: CpuDeadline = NO_DEADLINE,
    asked_at: str | None = None,
) -> Reference:
    """``ref`` (the structural comparison) decided by rows on generated databases, when they
    can tell. "Now" in either query is when the question was asked: ``asked_at``, the
    record's ``timestamp`` (:func:`stef.sql.suite_dates.instant_of`), else a fixed day in
    2020 (:data:`stef.sql.suite_dates.NOW`). Only plain SELECTs run (STEF's safety check on
    ``spec`` and the reference). When ``deadline`` (what is left of the record's CPU budget)
    passes, the structure's verdict stands: ``not_run``, :data:`BUDGET_SPENT`; likewise when
    they run STEF out of memory (:data:`OUT_OF_MEMORY`), which says nothing about the
    queries."""
    run = _Run(sql, gold_sql, dialect, ordered, generated, deadline, instant_of(asked_at))
    try:
        return _decided(ref, spec, run)
    except CpuBudgetSpent:
        return _structure(ref, "not_run", BUDGET_SPENT)
    except MemoryError:
        # The rows are within max_rows and 16 MiB of text, not of numbers: 10,000 rows of 250
        # columns on one database, each result kept in both row orders and keyed, were a
        # MemoryError (a dead letter) with 256 MB of address space left.
        return _structure(ref, "not_run", OUT_OF_MEMORY)


@dataclass(frozen=True)
class _Run:
    """What one record's run on generated databases is given, from :func:`run_generated` to
    the helpers that decide: the two queries, the dialect they are read in, whether the order
    of rows counts, the databases' settings, what is left of the record's CPU budget and the
    instant "now" stands for."""

    sql: str
    gold_sql: str
    dialect: str | None
    ordered: bool
    generated: Generated
    deadline: CpuDeadline
    now: str | None

    def suite(self, sql: str, timeout_s: float) -> SuiteOutcome:
        """``sql`` against the reference on the record's generated databases, within
        ``timeout_s`` for all of them (:func:`stef.sql.suite.run_suite`)."""
        return run_suite(
            sql,
            self.gold_sql,
            self.dialect,
            ordered=self.ordered,
            n=self.generated.databases,
            timeout_s=timeout_s,
            max_rows=self.generated.max_rows,
            deadline=self.deadline,
            now=self.now,
        )


def _decided(ref: Reference, spec: SqlSpec, run: _Run) -> Reference:
    run.deadline.check()
    gold_spec = sqlspec(run.gold_sql, run.dialect)
    run.deadline.check()
    for who, checked in (("generated", spec), ("reference", gold_spec)):
        if not (
            checked.parsed
            and checked.statement_type == "select"
            and not checked.mutating
            and not checked.multiple_statements
        ):
            return _structure(ref, "not_run", f"the {who} SQL is not one SELECT")
    # With no dialect named, the one a query was read in (guessed: backticks are MySQL's and
    # SQLite's) reads both: the generic dialect rejects what the guess read.
    run = replace(run, dialect=run.dialect or spec.dialect or gold_spec.dialect)
    found = run.suite(run.sql, run.generated.timeout_s)
    execution = _execution(found)
    if found.status in ("not_run", "undecided"):
        reason = f"execution_{found.status}: {found.detail}"
        return ref.model_copy(update={"execution": execution, "error": ref.error or reason})
    if found.status in ("different", "duplicates") and random_rows(
        run.sql, run.gold_sql, run.dialect
    ):
        return _structure(ref, "not_run", RANDOM_ROWS)
    unexercised = _unexercised(ref, found, run)
    if unexercised:
        reason = "execution_unexercised: the generated databases cannot tell the reference from "
        reason += f"itself with its {' and '.join(sorted(unexercised))} changed"
        return ref.model_copy(update={"execution": execution, "error": ref.error or reason})
    verdict = _VERDICT[found.status]
    p_correct = _p_correct(found, ref.verdict)
    if found.status == "different" and _grouped_by_key(ref, run):
        # Rows that differ only where two entities share a name: grouping by an entity's key
        # or by its name, usually the same answer.
        verdict, p_correct = Verdict.LIKELY_CORRECT, P_EXECUTION["keyed_groups"]
        execution = execution.model_copy(update={"detail": KEYED_GROUPS})
    return ref.model_copy(
        update={
            "verdict": verdict,
            "p_correct": p_correct,
            "execution": execution,
            "decided_by": "execution",
        }
    )


def _grouped_by_key(ref: Reference, run: _Run) -> bool:
    """Whether the structure differs only in the GROUP BY, by an entity's key
    (:func:`stef.sql.compare.keyed_grouping`)."""
    if not ref.differences or any(d.component != "group_by" for d in ref.differences):
        return False
    gen = parts_of(run.sql, run.dialect, run.deadline)
    gold = parts_of(run.gold_sql, run.dialect, run.deadline)
    return gen is not None and gold is not None and keyed_grouping(gen, gold)


def _unexercised(ref: Reference, found: SuiteOutcome, run: _Run) -> frozenset[str]:
    """Where agreeing rows cannot overrule a structural ``Incorrect``: the LIMIT or ORDER BY
    differences (anywhere, a subquery's too) that databases generated the same way cannot
    tell apart (a LIMIT inside a scalar subquery, an order among rows a key makes unique):
    they cannot tell the reference from itself with those changed. Empty: the rows decide.
    When ``deadline`` passes first, as when no time is left, the rows prove nothing."""
    if found.status != "same" or ref.verdict is not Verdict.INCORRECT:
        return frozenset()
    differing = touched(run.sql, run.gold_sql, run.dialect) & UNEXERCISED
    if not differing:
        return frozenset()
    if run.deadline.passed():
        return differing
    changed = perturbed(run.gold_sql, run.dialect, differing)
    # The check has what the record's databases left of their time (all of them within
    # timeout_s): with its own, one record's two suites took twice that.
    left = run.generated.timeout_s - found.elapsed_ms / 1000
    if changed is None or left <= 0 or run.deadline.passed():
        return differing
    try:
        check = run.suite(changed, left)
    except CpuBudgetSpent:
        return differing
    return frozenset() if check.status == "different" else differing


def _p_correct(found: SuiteOutcome, structural: Verdict | None) -> float:
    """The outcome's dev rate; for ``same`` (by the structure's verdict) it grows with the
    databases that could tell: half-way from 0.5 to the rate with one, 15/16 of the way with
    four, all of it with ``_SURE`` or more."""
    if found.status != "same":
        return P_EXECUTION[found.status]
    rate = P_SAME[structural or Verdict.INCORRECT]
    if found.informative >= _SURE:
        return rate
    return round(0.5 + (rate - 0.5) * (1 - 0.5 ** max(found.informative, 1)), 4)


def _structure(ref: Reference, status: str, detail: str) -> Reference:
    execution = ReferenceExecution(status="not_run", detail=detail, source="generated")
    reason = f"execution_{status}: {detail}"
    return ref.model_copy(update={"execution": execution, "error": ref.error or reason})


def _execution(found: SuiteOutcome) -> ReferenceExecution:
    example = found.counterexample
    return ReferenceExecution(
        status=found.status,
        detail=found.detail,
        source="generated",
        databases=found.databases,
        informative=found.informative,
        counterexample=None
        if example is None
        else ReferenceCounterexample(
            tables=example.tables,
            columns=example.columns,
            generated=example.generated,
            reference=example.reference,
        ),
    )

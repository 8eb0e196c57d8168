"""Property tests: the SQL spec stage, validation and the whole pipeline never crash on any input,
and the spec of generated SQL (built from sqlglot expressions, rendered in several dialects) keeps
its invariants."""

from __future__ import annotations

import json
import string
from dataclasses import dataclass, field

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlglot import exp

from stef.errors import InvalidInput, StefError
from stef.judges.heuristic.judge import HeuristicJudge
from stef.models import InputRecord, Result, SqlSpec
from stef.pipeline import Pipeline
from stef.rules import load_rules
from stef.stages.sqlspec import sqlspec
from stef.stages.validate import validate

SETTINGS = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])

DIALECTS = [None, "snowflake", "bigquery", "postgres", "tsql", "sqlite"]
COLUMNS = ["region", "amount", "city", "qty", "price", "status_code"]
TABLES = ["sales", "orders", "customers", "items"]
CTE_NAMES = ["recent", "big_ones", "cte_x"]


# ------------------------------------------------------------------------- (a) arbitrary text

SQL_TOKENS = [
    "SELECT", "FROM", "WHERE", "GROUP BY", "ORDER BY", "LIMIT", "TOP", "WITH", "AS", "UNION",
    "QUALIFY", "OVER", "(", ")", ";", "'", '"', "`", "[", "]", "--", "/*", "*/", "\n", "\x00",
    "DROP", "TABLE", "DELETE", "INSERT", "INTO", "t", "a", "1", "2023.0", "=", "<>", "AND", "OR",
    "NOT", "IN", "LIKE", "ILIKE", "'%x%'", "BETWEEN", "IS", "NULL", "::", "*", ",", "$$", "@",
    "\\", "CASE", "WHEN", "END", "EXEC", "COPY",
]  # fmt: skip

# Lone surrogates reach us from JSON escapes ("\ud800"); st.text() never makes them.
surrogate = st.characters(min_codepoint=0xD800, max_codepoint=0xDFFF, categories=["Cs"])
surrogate_text = st.tuples(st.text(max_size=12), surrogate, st.text(max_size=12)).map("".join)
any_text = st.one_of(
    st.text(),
    surrogate_text,
    st.text(alphabet=st.characters(codec="utf-8", categories=["L", "N", "P", "S", "Z", "Cc"])),
    st.lists(st.sampled_from(SQL_TOKENS), max_size=40).map(" ".join),
    st.integers(1, 6000).map(lambda n: "(" * n),
    st.integers(1, 3000).map(lambda n: "SELECT " + "(" * n + "1" + ")" * n),
    st.integers(1, 3000).map(lambda n: "SELECT a FROM t WHERE " + "NOT " * n + "a = 1"),
)
any_dialect = st.sampled_from([*DIALECTS, "mysql", "oracle", "duckdb", "no-such-dialect"])


@SETTINGS
@given(text=any_text, dialect=any_dialect)
def test_sqlspec_never_raises_on_any_text(text: str, dialect: str | None) -> None:
    spec = sqlspec(text, dialect)
    assert isinstance(spec, SqlSpec)
    assert [p.id for p in spec.filters] == list(range(1, len(spec.filters) + 1))
    if not spec.parsed:
        assert spec.parse_error


# --------------------------------------------------------------------- (b) generated SQL


@dataclass
class Gen:
    """What a generated statement is known to contain."""

    tables: set[str] = field(default_factory=set)
    ctes: set[str] = field(default_factory=set)
    limit: int | None = None
    group_by: list[str] | None = None
    where: bool = False
    subquery: bool = False
    union: bool = False
    mutating: bool = False


string_values = st.text(alphabet=string.ascii_letters + string.digits + " '%_-", max_size=12)
numbers = st.one_of(
    st.integers(-(10**6), 10**6).map(exp.Literal.number),
    st.integers(-(10**6), 10**6).map(lambda n: exp.Literal.number(f"{n / 100:.2f}")),
)
literals = st.one_of(string_values.map(exp.Literal.string), numbers)
columns = st.sampled_from(COLUMNS).map(exp.column)
COMPARISONS = [exp.EQ, exp.NEQ, exp.GT, exp.GTE, exp.LT, exp.LTE]


@st.composite
def comparison(draw: st.DrawFn) -> exp.Expr:
    op = draw(st.sampled_from(COMPARISONS))
    col, lit = draw(columns), draw(literals)
    if draw(st.booleans()):
        return op(this=lit, expression=col)  # literal on the left
    return op(this=col, expression=lit)


@st.composite
def in_list(draw: st.DrawFn) -> exp.Expr:
    node = draw(columns).isin(*draw(st.lists(literals, min_size=1, max_size=4)))
    return exp.not_(node) if draw(st.booleans()) else node


@st.composite
def between(draw: st.DrawFn) -> exp.Expr:
    return exp.Between(this=draw(columns), low=draw(numbers), high=draw(numbers))


@st.composite
def like(draw: st.DrawFn, dialect: str | None) -> exp.Expr:
    col, pattern = draw(columns), exp.Literal.string(draw(string_values))
    # T-SQL, BigQuery and SQLite have no ILIKE; sqlglot would still print it.
    if dialect in (None, "snowflake", "postgres") and draw(st.booleans()):
        return col.ilike(pattern)
    return col.like(pattern)


def is_null(col: exp.Expr) -> exp.Expr:
    return col.is_(exp.null())


def leaf(dialect: str | None) -> st.SearchStrategy[exp.Expr]:
    return st.one_of(
        comparison(),
        in_list(),
        between(),
        like(dialect),
        columns.map(is_null),
    )


def condition(dialect: str | None) -> st.SearchStrategy[exp.Expr]:
    return st.recursive(
        leaf(dialect),
        lambda inner: st.one_of(
            st.tuples(inner, inner).map(lambda ab: exp.and_(*ab)),
            st.tuples(inner, inner).map(lambda ab: exp.or_(*ab)),
            inner.map(exp.not_),
        ),
        max_leaves=6,
    )


@st.composite
def select(
    draw: st.DrawFn, dialect: str | None, gen: Gen, source: str | None = None, top: bool = True
) -> exp.Select:
    """One SELECT; ``top`` allows GROUP BY / ORDER BY / LIMIT (not inside a set operation)."""
    table = source or draw(st.sampled_from(TABLES))
    if source is None:
        gen.tables.add(table)
    grouped = top and draw(st.booleans())
    if grouped:
        keys = draw(st.lists(st.sampled_from(COLUMNS), min_size=1, max_size=2, unique=True))
        query = exp.select(*keys, exp.func("SUM", exp.column("amount"))).from_(table)
        query = query.group_by(*keys)
        gen.group_by = keys
    else:
        cols = draw(st.lists(st.sampled_from(COLUMNS), min_size=1, max_size=3, unique=True))
        query = exp.select(*cols).from_(table)
    if draw(st.booleans()):
        cond = draw(condition(dialect))
        if draw(st.integers(0, 4)) == 0:
            inner_table = draw(st.sampled_from(TABLES))
            gen.tables.add(inner_table)
            sub = exp.select("qty").from_(inner_table).where(draw(condition(dialect)))
            cond = exp.and_(cond, exp.column("qty").isin(query=sub))
            gen.subquery = True
        query = query.where(cond)
        gen.where = True
    if top and draw(st.booleans()):
        order = draw(st.sampled_from(gen.group_by or COLUMNS[:1]))
        query = query.order_by(exp.Ordered(this=exp.column(order), desc=draw(st.booleans())))
    if top and draw(st.booleans()):
        gen.limit = draw(st.integers(0, 100_000))
        query = query.limit(gen.limit)
    return query


@st.composite
def statement(draw: st.DrawFn, dialect: str | None) -> tuple[exp.Expr, Gen]:
    gen = Gen()
    kind = draw(st.sampled_from(["select", "union", "cte", "delete", "drop"]))
    node: exp.Expr
    if kind == "select":
        node = draw(select(dialect, gen))
    elif kind == "union":
        cols = draw(st.lists(st.sampled_from(COLUMNS), min_size=1, max_size=2, unique=True))
        branches = []
        for _ in range(draw(st.integers(2, 3))):
            table = draw(st.sampled_from(TABLES))
            gen.tables.add(table)
            branch = exp.select(*cols).from_(table)
            if draw(st.booleans()):
                branch = branch.where(draw(condition(dialect)))
                gen.where = True
            branches.append(branch)
        op = draw(st.sampled_from([exp.union, exp.intersect, exp.except_]))
        node = op(*branches, distinct=draw(st.booleans()) if op is exp.union else True)
        if draw(st.booleans()):
            gen.limit = draw(st.integers(1, 1000))
            node = node.limit(gen.limit)
        gen.union = True
    elif kind == "cte":
        name = draw(st.sampled_from(CTE_NAMES))
        inner = draw(select(dialect, gen, top=False))
        outer = draw(select(dialect, gen, source=name))
        node = outer.with_(name, as_=inner)
        gen.ctes.add(name)
    elif kind == "delete":
        table = draw(st.sampled_from(TABLES))
        gen.tables.add(table)
        node = exp.delete(table, where=draw(condition(dialect)))
        gen.mutating = True
    else:
        table = draw(st.sampled_from(TABLES))
        gen.tables.add(table)
        node = exp.Drop(tables=[exp.to_table(table)], kind="TABLE")
        gen.mutating = True
    return node, gen


@st.composite
def rendered(draw: st.DrawFn) -> tuple[str, str | None, Gen]:
    dialect = draw(st.sampled_from(DIALECTS))
    node, gen = draw(statement(dialect))
    return node.sql(dialect=dialect), dialect, gen


# Predicate.op as documented in stef/models.py, plus the negations the stage has always produced.
OPS = {
    "=", "!=", "<", "<=", ">", ">=", "like", "not like", "in", "not in", "between",
    "not between", "is null", "is not null", "or", "and", "exists", "not exists", "expr",
}  # fmt: skip


@SETTINGS
@given(case=rendered())
def test_generated_sql_keeps_the_invariants(case: tuple[str, str | None, Gen]) -> None:
    sql, dialect, gen = case
    spec = sqlspec(sql, dialect)
    assert spec.parsed, spec.parse_error
    assert [p.id for p in spec.filters] == list(range(1, len(spec.filters) + 1))
    assert set(spec.tables) <= gen.tables
    assert set(spec.ctes) == gen.ctes
    assert spec.mutating is gen.mutating
    assert spec.multiple_statements is False
    for p in spec.filters:
        assert p.op in OPS, f"op {p.op!r} of {p.text!r} is outside the vocabulary"
        for v in p.values:
            assert v == " ".join(v.split()).casefold(), f"{v!r} is not folded"
    if gen.mutating:
        return
    assert spec.statement_type == "select"
    assert spec.limit == gen.limit
    assert spec.has_set_operation is gen.union
    assert spec.has_cte is bool(gen.ctes)
    if gen.where:
        assert spec.filters
    if gen.subquery:
        assert spec.has_subquery and spec.has_nested_where
        assert any(p.op == "in" and p.rhs == "(subquery)" for p in spec.filters)
    if gen.group_by is not None and not gen.union:
        assert spec.group_by == gen.group_by


# ------------------------------------------------------------------------- (c) validation

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | surrogate_text,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(surrogate_text, inner, max_size=3),
    max_leaves=8,
)
record_like = st.fixed_dictionaries(
    {},
    optional={
        "id": json_values,
        "question": json_values,
        "sql": json_values,
        "enriched_question": json_values,
        "app": json_values,
        "dialect": json_values,
        "metadata": json_values,
    },
)
text_fields = st.one_of(
    st.text(max_size=20), surrogate_text, st.sampled_from(["", " ", "SELECT 1", "q"])
)
plausible_record = st.fixed_dictionaries(
    {"question": text_fields, "sql": text_fields},
    optional={
        "id": st.one_of(text_fields, st.integers(), st.floats(), st.booleans()),
        "enriched_question": text_fields,
        "app": text_fields,
        "agent_version": st.one_of(text_fields, st.integers(), st.floats(allow_nan=False)),
        "metadata": json_values,
    },
)
payloads = st.one_of(
    st.binary(max_size=200),
    st.tuples(plausible_record, st.booleans()).map(
        lambda v: json.dumps(v[0], ensure_ascii=v[1]).encode("utf-8", "surrogatepass")
    ),
    st.tuples(json_values | record_like, st.booleans()).map(
        lambda v: json.dumps(v[0], ensure_ascii=v[1]).encode("utf-8", "surrogatepass")
    ),
    st.tuples(json_values | record_like, st.booleans()).map(
        lambda v: json.dumps(v[0], ensure_ascii=v[1])
    ),
)


def test_validate_lone_surrogate_without_id() -> None:
    """A JSON escape like \\ud800 is not Unicode text: invalid input, not a crash."""
    with pytest.raises(InvalidInput) as info:
        validate(b'{"question": "!", "sql": "\\ud800"}')
    assert info.value.reason == "not_utf8"


@SETTINGS
@given(payload=payloads)
def test_validate_raises_only_invalid_input(payload: bytes | str) -> None:
    try:
        record = validate(payload)
    except InvalidInput as exc:
        assert exc.reason in {
            "not_utf8", "not_json", "not_object", "missing_field", "wrong_type", "too_large",
            "limits_exceeded", "unknown_dialect", "unreadable",
        }  # fmt: skip
        return
    assert isinstance(record, InputRecord)
    assert record.question.strip() and record.sql.strip() and record.id


# ------------------------------------------------------------------------- (d) the pipeline

PIPELINE = Pipeline(load_rules(None), HeuristicJudge())
questions = st.one_of(
    st.text(min_size=1),
    st.sampled_from(
        [
            "total sales by region in 2023",
            "top 5 customers in China",
            "how many distinct orders per month, sorted",
            "average price of items where status is 'Active'",
        ]
    ),
)
sql_texts = st.one_of(any_text, rendered().map(lambda c: c[0]))


@SETTINGS
@given(question=questions, sql=sql_texts, dialect=st.sampled_from([*DIALECTS, "nope"]))
def test_pipeline_never_raises_outside_stef_errors(
    question: str, sql: str, dialect: str | None
) -> None:
    record = InputRecord(id="prop", question=question, sql=sql, dialect=dialect)
    try:
        result = PIPELINE.judge_record(record)
    except StefError:  # the contract allows it, though a Result is what should come back
        return
    assert isinstance(result, Result)

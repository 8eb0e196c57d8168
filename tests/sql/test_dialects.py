"""SQLite's double-quoted strings: ``country = "France"`` compares a string wherever no column is
named France, and SQL written for SQLite (BIRD's among it) relies on it. And the tokenizer and
parser each thread keeps for :func:`parse_sql`."""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

import pytest
from sqlglot import exp
from sqlglot.errors import SqlglotError

from stef.judges.heuristic.judge import HeuristicJudge
from stef.pipeline import Pipeline
from stef.rules import load_rules
from stef.sql.dialects import _readers, dialect_names, dialect_of, parse_sql, render
from stef.stages.reference import reference


def _strings(sql: str, dialect: str | None = "sqlite") -> list[str]:
    (tree,) = parse_sql(sql, dialect)
    return sorted(lit.name for lit in tree.find_all(exp.Literal) if lit.is_string)


@pytest.mark.parametrize(
    ("sql", "strings"),
    [
        ('SELECT name FROM singer WHERE country = "France"', ["France"]),
        ('SELECT name FROM singer WHERE country <> "France"', ["France"]),
        ('SELECT name FROM singer WHERE name LIKE "%an%"', ["%an%"]),
        ('SELECT name FROM singer WHERE country IN ("France", "Spain")', ["France", "Spain"]),
        ('SELECT name FROM singer WHERE day BETWEEN "2020-01-01" AND "2020-12-31"',
         ["2020-01-01", "2020-12-31"]),
        ('SELECT name FROM singer AS s WHERE s.country = "United States"', ["United States"]),
        ('SELECT COUNT(*) FROM t WHERE LOWER(t.kind) = "gold"', ["gold"]),
        # A format is a value too (BIRD's most frequent form).
        ('SELECT COUNT(*) FROM t WHERE strftime("%Y", t.day) = "1995"', ["%Y", "1995"]),
    ],
)  # fmt: skip
def test_a_double_quoted_value_is_a_string(sql: str, strings: list[str]) -> None:
    assert _strings(sql) == strings


@pytest.mark.parametrize(
    "sql",
    [
        # Names in double quotes that are columns: projected, compared on the left, used again.
        'SELECT "Free Meal Count" FROM frpm WHERE "Free Meal Count" > 10',
        'SELECT a FROM t WHERE "Enrollment" > 5 AND b = "Enrollment"',
        # Qualified: a column of that table.
        'SELECT a FROM t JOIN u ON t.id = u.id WHERE t.x = u."y"',
        # An alias or a table of that name.
        'SELECT COUNT(*) AS "total" FROM t GROUP BY k HAVING k = "total"',
        'SELECT a FROM t JOIN "u" ON t.id = "u".id WHERE t.x = "u"',
        # A CTE's column, and the row id SQLite gives every table.
        'WITH c("n", m) AS (SELECT a, b FROM t) SELECT m FROM c WHERE m = "n"',
        'SELECT a FROM t WHERE n = "rowid"',
        # The left side: more often a column compared with another than a reversed test.
        'SELECT a FROM t JOIN u ON t.id = u.id WHERE "Name" = u.name',
        # Backticks and brackets quote names only.
        "SELECT a FROM t WHERE b = `c`",
        "SELECT a FROM t WHERE b = [c]",
        # Two names written alike: two columns compared.
        'SELECT a FROM t WHERE "start_date" < "end_date"',
        # Nothing of a column on the other side: no value is compared.
        'SELECT a FROM t WHERE 1 = "c"',
    ],
)
def test_a_double_quoted_name_that_can_be_a_column_stays_one(sql: str) -> None:
    assert _strings(sql) == []


@pytest.mark.parametrize("dialect", ["postgres", "duckdb", "snowflake", None])
def test_other_dialects_keep_double_quotes_for_names(dialect: str | None) -> None:
    assert _strings('SELECT name FROM singer WHERE country = "France"', dialect) == []


def test_a_long_in_list_is_read_whole() -> None:
    items = ", ".join(f'"v{i}"' for i in range(3_000))
    strings = _strings(f"SELECT a FROM t WHERE b IN ({items})")
    assert len(strings) == 3_000 and "v2999" in strings


def test_a_string_reads_back_as_sqlite_runs_it() -> None:
    (tree,) = parse_sql('SELECT name FROM singer WHERE country = "France"', "sqlite")
    assert render(tree, "sqlite") == "SELECT name FROM singer WHERE country = 'France'"


def test_the_reference_of_either_quote_is_the_same_query() -> None:
    # It was Incorrect: `filters` differed (a column France against the string 'France').
    ref = reference(
        "SELECT name FROM singer WHERE country = 'France'",
        'SELECT name FROM singer WHERE country = "France"',
        "sqlite",
        ordering_requested=False,
    )
    assert ref.differences == []
    assert ref.verdict is not None and ref.verdict.value == "Correct"


def test_a_year_of_strftime_in_double_quotes_is_the_reference_s() -> None:
    ref = reference(
        'SELECT COUNT(*) FROM orders WHERE strftime("%Y", day) = "1995"',
        "SELECT COUNT(*) FROM orders WHERE strftime('%Y', day) = '1995'",
        "sqlite",
        ordering_requested=False,
    )
    assert ref.differences == []


def test_the_heuristic_finds_the_question_s_value_in_double_quotes() -> None:
    pipeline = Pipeline(lambda: load_rules(None), HeuristicJudge())
    record = {
        "id": "r",
        "question": "Names of singers from France",
        "sql": 'SELECT name FROM singer WHERE country = "France"',
        "dialect": "sqlite",
    }
    result = pipeline.process(json.dumps(record).encode(), {"line": 1}).result
    assert result is not None and result.sql_spec is not None
    assert [f.values for f in result.sql_spec.filters] == [("france",)]
    assert result.issues == ["none"]


@pytest.mark.parametrize(
    "broken",
    ["SELECT (", 'SELECT "unclosed', "SELECT a FROM t WHERE", "SELECT * FROM (SELECT 1"],
)
def test_a_failed_parse_leaves_nothing_behind(broken: str) -> None:
    """Each thread keeps its tokenizer and parser: what a failed parse left in them must not
    reach the next statement."""
    good = "SELECT a FROM t WHERE b = 1"
    expected = [render(t) for t in parse_sql(good, "sqlite")]
    with pytest.raises(SqlglotError):
        parse_sql(broken, "sqlite")
    assert [render(t) for t in parse_sql(good, "sqlite")] == expected


def test_threads_parse_side_by_side() -> None:
    statements = [f"SELECT c{i} FROM t{i} WHERE c{i} > {i}" for i in range(400)]
    expected = [render(parse_sql(s, "postgres")[0]) for s in statements]
    with ThreadPoolExecutor(max_workers=8) as pool:
        got = list(pool.map(lambda s: render(parse_sql(s, "postgres")[0]), statements))
    assert got == expected


@pytest.mark.parametrize("name", dialect_names())
def test_nothing_holds_a_parsed_statement(name: str) -> None:
    """Once parsed (or failed), a statement is held by nothing STEF keeps: each thread keeps its
    readers (a replica runs a thread per LLM call in flight), and they must not keep the last
    statement's text and tokens until the thread's next parse."""
    columns = ", ".join(f"c{i}" for i in range(2000))
    for sql in (f"SELECT {columns} FROM t", f"SELECT {columns} FROM t WHERE ("):
        held = sys.getrefcount(sql)
        with contextlib.suppress(SqlglotError):  # some dialects (dax, prql) read neither
            parse_sql(sql, name)
        assert sys.getrefcount(sql) == held
    pair = _readers(name)
    if _readers(name) is pair:  # kept: emptied
        assert pair[0].tokens == [] and pair[1].errors == []


def test_a_dialect_s_settings_are_its_own() -> None:
    """sqlglot's dialects compare equal whatever their settings: each spelling keeps its own."""
    lowered = "mysql, normalization_strategy = lowercase"
    for name in ("mysql", lowered, "mysql"):
        parse_sql("SELECT a FROM t", name)
        assert _readers(name)[1].dialect.normalization_strategy == (
            dialect_of(name).normalization_strategy
        )
    assert dialect_of("mysql").normalization_strategy != dialect_of(lowered).normalization_strategy


# sqlglot's metaclass enters a dialect's class in its registry, then builds its time tries, then
# sets its parser and generator: a pause in the tries holds the window open.
_FIRST_USE_FROM_THREADS = """
import json, threading, time
import sqlglot.dialects.dialect as registry
from sqlglot import parse_one
from stef.sql.dialects import dialect_names, parse_sql, render
build = registry.new_trie
calls = []
def slow_trie(*args, **kwargs):
    calls.append(1)
    time.sleep(0.05 if len(calls) <= 8 else 0)  # the first two dialects loaded (4 tries each)
    return build(*args, **kwargs)
registry.new_trie = slow_trie
tree = parse_one("SELECT a FROM t WHERE name ILIKE '%acme%'")
seen = []
def write():
    seen.append(render(tree, "sqlite"))
def read():
    (parsed,) = parse_sql("SELECT a FROM t WHERE name ILIKE '%acme%'", "postgres")
    seen.append(type(parsed.find(registry.exp.ILike)).__name__)
def names():
    seen.append(str(len(dialect_names()) > 30))
threads = [threading.Thread(target=f) for f in (write, write, read, names, read, write)]
for t in threads:
    t.start()
    time.sleep(0.01)
for t in threads:
    t.join()
print(json.dumps(sorted(set(seen))))
"""


def test_threads_that_first_name_a_dialect_get_all_of_it() -> None:
    """Threads that name a dialect while another loads it wait for the whole of it: sqlglot
    registers a dialect's class before it sets the class's generator, and reference mode's workers,
    first writing SQLite side by side, once wrote ``ILIKE`` (generic SQL, which SQLite cannot run).
    Here the registration's window is held open; every thread writes and reads as SQLite and
    PostgreSQL do."""
    out = subprocess.run(
        [sys.executable, "-c", _FIRST_USE_FROM_THREADS],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    written = "SELECT a FROM t WHERE LOWER(name) LIKE LOWER('%acme%')"
    assert json.loads(out.stdout) == sorted({written, "ILike", "True"})

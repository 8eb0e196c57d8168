"""The regexes and tree walks that read untrusted text run in linear time, even on their worst
input.

A super-linear regex on a 4 KB question or a 50 KB SQL text holds the GIL for seconds. Each case
times one pattern (or one stage helper) on an adversarial input of n units and of 8n: a linear scan
costs about 8 times more, a quadratic one 64 times. The bound (24x) is relative to the same code on
the smaller input, so a slow or busy machine does not make it fail.
"""

from __future__ import annotations

import gc
import re
import time
from collections.abc import Callable

import pytest
import sqlglot
from sqlglot import exp

from stef import question as reading
from stef.cues import Cued
from stef.io.otlp import record as otlp_record
from stef.judges.heuristic import question as q
from stef.judges.heuristic import readings
from stef.question import Found
from stef.sql.canonical import SQL_STRING
from stef.sql.census import Census
from stef.sql.extract import extract_sql
from stef.sql.safety import scan_unparsed
from stef.sql.scope import conditions, cte_bodies, feeding_selects
from stef.stages import sqlspec as sqlspec_stage
from stef.stages import verify
from stef.stages.normalize import question_cues
from stef.stages.validate import Limits, is_blank, validate

FACTOR = 8
BOUND = 32  # linear: ~8 (tree walks 11-15 on a quiet machine, 24.7 once in CI); quadratic: ~64


def _cpu(run: Callable[[str], object], text: str, reps: int) -> float:
    """This thread's least CPU time of three: threads other tests left running spend process
    time, and the machine's other work only ever lengthens a time. The garbage collector is off
    while timing: a collection of the other tests' objects landing in one run is no growth."""
    best = float("inf")
    gc.collect()
    gc.disable()
    try:
        for _ in range(3):
            started = time.thread_time()
            for _ in range(reps):
                run(text)
            best = min(best, time.thread_time() - started)
    finally:
        gc.enable()
    return best


def growth(run: Callable[[str], object], make: Callable[[int], str], n: int) -> float:
    """CPU time on ``make(FACTOR * n)`` over CPU time on ``make(n)``."""
    small, big = make(n), make(FACTOR * n)
    reps = 1
    while _cpu(run, small, reps) < 0.002 and reps < 4096:  # above the timer's noise
        reps *= 2
    # The least of three of each: a time is only ever lengthened by the machine's other work.
    slow = min(_cpu(run, big, reps) for _ in range(3))
    fast = min(_cpu(run, small, reps) for _ in range(3))
    return slow / max(fast, 1e-6)


def _regex(pattern: re.Pattern[str] | Cued) -> re.Pattern[str]:
    """A cued pattern's own regex: an attacker's text holds the cues it needs (stef/cues.py), so
    the scan is timed, not the check that skips it."""
    return pattern.regex if isinstance(pattern, Cued) else pattern


def _scan(pattern: re.Pattern[str] | Cued) -> Callable[[str], object]:
    regex = _regex(pattern)
    return lambda text: sum(1 for _ in regex.finditer(text))


def _search(pattern: re.Pattern[str] | Cued) -> Callable[[str], object]:
    return _regex(pattern).search


def _rep(unit: str, tail: str = "") -> Callable[[int], str]:
    """``unit`` repeated to n characters, then ``tail`` (the character that makes it fail)."""
    return lambda n: (unit * (n // len(unit) + 1))[:n] + tail


COMPARATORS = [pattern for pattern, _ in reading._COMPARATORS]
AGG_CUES = [pattern for pattern, _ in q._AGG_CUES]

# (title, what runs, adversarial text of about n characters)
CASES: list[tuple[str, Callable[[str], object], Callable[[int], str]]] = [
    ("quoted: unclosed quotes past 200 chars", _scan(reading._QUOTED), _rep("'" + "x" * 250)),
    ("quoted: double quotes, newline", _scan(reading._QUOTED), _rep('"' + "x" * 150 + "\n")),
    ("quoted: backticks", _scan(reading._QUOTED), _rep("`" + "x" * 300)),
    ("iso date: almost dates", _scan(reading._ISO_DATE), _rep("2020-01-")),
    ("quarter: Q1 then spaces", _scan(reading._QUARTER), _rep("Q1" + " " * 50 + "x ")),
    ("month year: month then spaces", _scan(reading._MONTH_YEAR), _rep("march" + " " * 60 + "x ")),
    ("number: comma chain ending in a letter", _scan(reading._NUMBER), _rep("1,", "x")),
    ("number: one long digit run then a letter", _scan(reading._NUMBER), lambda n: "1" * n + "a"),
    ("number: dotted chain", _scan(reading._NUMBER), _rep("1.", "-")),
    ("number: minus chain", _scan(reading._NUMBER), _rep("-1")),
    ("number: percent chain", _scan(reading._NUMBER), _rep("5%")),
    ("entity: capital then joiners", _scan(reading._ENTITY), lambda n: "A" + _rep(" of")(n) + " x"),
    ("entity: joiner runs", _scan(reading._ENTITY), _rep("A of the and ", "x")),
    ("entity: capitals", _scan(reading._ENTITY), _rep("A ")),
    ("entity: punctuated word", _scan(reading._ENTITY), _rep("A'&.-")),
    ("top-k: top then spaces", _scan(reading._TOP_K_NUMBER), lambda n: "top" + " " * n + "x"),
    ("top-k: digits then no superlative", _scan(reading._TOP_K_NUMBER), lambda n: "1" * n + " x"),
    ("top-k: numbers", _scan(reading._TOP_K_NUMBER), _rep("5 ")),
    ("top-k: repeated superlatives", _scan(reading._TOP_K_NUMBER), _rep("highest ")),
    ("grouping: per then spaces", _scan(q._GROUPING), lambda n: "per" + " " * n + "!"),
    ("grouping: repeated openers", _scan(q._GROUPING), _rep("for each ")),
    ("distinct words", _scan(q.DISTINCT_WORDS), _rep("distinc ")),
    ("range: between then digits", _scan(reading._RANGE), _rep("between 1 ", "x")),
    ("range: from then dates", _scan(reading._RANGE), _rep("from 2020-01-01-", "x")),
    ("number words", _scan(reading._WORD_NUMBER), _rep("fivefive ")),
    ("counted: which then digits", _scan(reading._COUNTED), _rep("which 1 ")),
    ("superlative: -est chains", _scan(readings._SUPERLATIVE), _rep("at most ")),
    ("negation before a value", _search(readings._NEGATION_BEFORE), _rep("not x-", "!")),
    ("sql window span", _scan(readings._SQL_SPAN), _rep("day, -1 ")),
    (
        "period: a date then a time",
        _search(readings._PERIOD),
        lambda n: "2020-01-01 10:00" + "x" * n,
    ),
    ("sql string: unclosed", _scan(SQL_STRING), lambda n: "'" + "a" * n),
    ("sql string: doubled quotes", _scan(SQL_STRING), lambda n: "'" + "''" * (n // 2)),
    ("sql string: pairs then unclosed", _scan(SQL_STRING), _rep("'a''", "'")),
    *[
        (f"comparator {i}: words without a number", _search(p), _rep(w))
        for i, (p, w) in enumerate(
            zip(
                COMPARATORS,
                [
                    ">= ",
                    "<= ",
                    "-> ",
                    "< ",
                    "at least ",
                    "until ",
                    "no more ",
                    "more than ",
                    "less   ",
                ],
                strict=True,
            )
        )
    ],
    *[
        (f"comparator {i}: word then spaces", _search(p), lambda n, w=w: w + " " * n + "x")
        for i, (p, w) in enumerate(
            zip(
                COMPARATORS,
                [">=", "<=", ">", "<", "since", "until", "up", "over", "below"],
                strict=True,
            )
        )
    ],
    *[
        (f"aggregation cue {i}", _scan(p), _rep(w))
        for i, (p, w) in enumerate(
            zip(AGG_CUES, ["how  ", "avg", "in al", "maxi", "mini"], strict=True)
        )
    ],
    # Past the cache: every call must scan.
    ("question literals: superlatives", reading._question_literals.__wrapped__, _rep("highest ")),
    # Each value was tested against every value taken before it.
    ("question literals: numbers", reading._question_literals.__wrapped__, _rep("1 ")),
    # A lazy gap from each "the" to a superlative later in the sentence.
    (
        "question cues: the after a superlative",
        question_cues.__wrapped__,  # past the cache, as the literals
        lambda n: "highest. " + _rep("the ")(n),
    ),
    # One search of the whole question per "best" / "latest".
    ("question cues: best", question_cues.__wrapped__, _rep("best ")),
    ("question cues: latest", question_cues.__wrapped__, _rep("latest ")),
    # A lazy block comment retried from each unclosed opener.
    ("unparsed sql scan: unclosed comment openers", scan_unparsed, _rep("/* ")),
    (
        "unparsed sql scan: openers after a comment",
        scan_unparsed,
        lambda n: "/* closed */ " + _rep("/* ")(n),
    ),
    ("blank check: invisible text", is_blank, _rep("\u200b \u2060\x00\ufeff")),
]

# Every limit lifted: validate then runs each of its counts over the whole text.
NO_LIMITS = Limits(
    **{name: 10**9 for name in Limits.model_fields}
    | {"max_json_depth": 200, "max_digit_run": 4_000}
)


def _validate_sql(sql: str) -> object:
    return validate({"question": "How many?", "sql": sql}, limits=NO_LIMITS)


VALIDATE_CASES: list[tuple[str, Callable[[int], str]]] = [
    ("unclosed comment openers", _rep("/* ")),
    ("nested parentheses", lambda n: "SELECT " + "(" * (n // 2) + ")" * (n // 2)),
    ("stray closing parentheses", _rep(")(")),
    ("AS then spaces", lambda n: "SELECT a AS" + " " * n + "x"),
    ("repeated AS", _rep("as AS ")),
    ("digit runs", _rep("9" * 99 + " ")),
    ("punctuation tokens", _rep(",")),
    ("word tokens", _rep("a ")),
]


@pytest.mark.parametrize(("title", "run", "make"), CASES, ids=[c[0] for c in CASES])
def test_question_regex_is_linear(
    title: str, run: Callable[[str], object], make: Callable[[int], str]
) -> None:
    assert growth(run, make, 2_000) < BOUND, title


@pytest.mark.parametrize(("title", "make"), VALIDATE_CASES, ids=[c[0] for c in VALIDATE_CASES])
def test_validate_checks_are_linear(title: str, make: Callable[[int], str]) -> None:
    assert growth(_validate_sql, make, 4_000) < BOUND, title


def test_the_measure_catches_a_quadratic_pattern() -> None:
    """The same measure on a known quadratic pattern (a lazy block comment over unclosed
    openers, as stef/sql/safety.py had it) is past the bound. It measures 36-85 on a quiet
    machine; work beside it lengthens the small input's time and lowers a single measure, so
    the measure has three tries to show it."""
    quadratic = re.compile(r"/\*.*?\*/", re.S)
    assert any(growth(_scan(quadratic), _rep("/* "), 1_000) > BOUND for _ in range(3))


def _column_before_last_value(text: str) -> object:
    value = len(text) - 3
    return verify._column_before(text, Found("v", "'v'", "value", span=(value, len(text))))


def test_the_column_before_a_value_is_read_in_linear_time() -> None:
    # A long name before a value that no operator precedes: tried from each of its letters, the
    # search read the rest of the name again (22 s of CPU for one enrichment: a 3,000-letter
    # name, then 40 values).
    assert growth(_column_before_last_value, lambda n: "n" * n + " 'v'", 2_000) < BOUND


# ------------------------------------------------------------------- walks of the parsed SQL
# Timed on a parsed tree (parsing is sqlglot's cost, not ours), n = CTEs or nesting levels of a
# fixed width: the walks once repeated per CTE or per level were quadratic in n.


def _wide_cte_chain(k: int) -> exp.Expr:
    """k CTEs, each reading the one before through a join, each with a 10-term WHERE."""
    where = " AND ".join(f"x{j} = {j}" for j in range(10))
    ctes = ", ".join(
        f"c{i} AS (SELECT a FROM c{i - 1} JOIN u ON u.id = c{i - 1}.a WHERE {where})"
        for i in range(1, k)
    )
    return sqlglot.parse_one(f"WITH c0 AS (SELECT a FROM t), {ctes} SELECT a FROM c{k - 1}")


def _unused_ctes(k: int) -> exp.Expr:
    """k CTEs nothing reads, each a join with a 10-term WHERE."""
    where = " AND ".join(f"x{j} = {j}" for j in range(10))
    ctes = ", ".join(
        f"c{i} AS (SELECT t.a FROM t JOIN u ON u.id = t.a WHERE {where})" for i in range(k)
    )
    return sqlglot.parse_one(f"WITH {ctes} SELECT a FROM t")


def _nested_aggregating_subqueries(d: int) -> exp.Expr:
    """d nested subqueries, each aggregating and filtering with a 10-term WHERE."""
    where = " AND ".join(f"x{j} = {j}" for j in range(10))
    inner = "(SELECT a, SUM(b) AS b FROM " * d + "t" + f") AS x WHERE {where}" * d
    return sqlglot.parse_one("SELECT a FROM " + inner)


def _union_chain(k: int) -> exp.Expr:
    """k SELECTs joined by UNION ALL: a tree k levels deep."""
    return sqlglot.parse_one(
        " UNION ALL ".join(f"SELECT a FROM t{i} WHERE b = {i}" for i in range(k))
    )


def _union_in_where(k: int) -> exp.Expr:
    """A WHERE ... IN over a chain of k UNIONs: k SELECTs deep inside a condition."""
    union = " UNION ".join(f"SELECT b FROM u{i} WHERE c = {i}" for i in range(k))
    return sqlglot.parse_one(f"SELECT a FROM t WHERE b IN ({union})")


def _structure(stmt: exp.Expr) -> object:
    census = Census.of(stmt)  # the one walk the flags read, timed with them
    return sqlspec_stage._has_subquery(stmt, census), sqlspec_stage._has_nested_where(
        census.selects, census.conditions
    )


def _feeding(stmt: exp.Expr) -> object:
    selects = list(stmt.find_all(exp.Select))
    return feeding_selects(stmt, selects, cte_bodies(stmt), conditions(stmt))


def _aggregations(stmt: exp.Expr) -> object:
    census = Census.of(stmt)
    return sqlspec_stage._aggregations(census, census.selects)


def tree_growth(
    run: Callable[[exp.Expr], object], make: Callable[[int], exp.Expr], n: int
) -> float:
    """CPU time of ``run`` on ``make(FACTOR * n)`` over its time on ``make(n)``."""
    small, big = make(n), make(FACTOR * n)
    reps = 1
    while _cpu(run, small, reps) < 0.02 and reps < 4096:
        reps *= 2
    # The least of three of each: a time is only ever lengthened by the machine's other work.
    slow = min(_cpu(run, big, reps) for _ in range(3))
    fast = min(_cpu(run, small, reps) for _ in range(3))
    return slow / max(fast, 1e-6)


# (title, what runs, parsed tree of size n, n large enough for a quadratic term to show)
TREE_CASES: list[tuple[str, Callable[[exp.Expr], object], Callable[[int], exp.Expr], int]] = [
    # Each table read was looked for in every CTE body by walking the body.
    ("feeding selects: a chain of wide CTEs", _feeding, _wide_cte_chain, 8),
    # Each SELECT was looked for in every unused CTE body.
    ("feeding selects: unused CTEs", _feeding, _unused_ctes, 8),
    # Each SELECT climbed to the root to learn whether a condition is above it.
    ("feeding selects: a chain of UNIONs", _feeding, _union_chain, 40),
    ("subquery flags: UNIONs inside a WHERE", _structure, _union_in_where, 40),
    # Each SELECT's aggregates were found by walking it, nested SELECTs included.
    ("aggregations: nested subqueries", _aggregations, _nested_aggregating_subqueries, 4),
]


@pytest.mark.parametrize(("title", "run", "make", "n"), TREE_CASES, ids=[c[0] for c in TREE_CASES])
def test_sql_walks_are_linear(
    title: str, run: Callable[[exp.Expr], object], make: Callable[[int], exp.Expr], n: int
) -> None:
    assert tree_growth(run, make, n) < BOUND, title


# SQL an agent logged inside a fence (stef/sql/extract.py), and a span's fenced SQL
# (stef/io/otlp/record.py): long runs of fence characters or blanks on a line with no line break
# after. The first was cubic (4,000 backticks: 19 s), the second quadratic in the blanks.
FENCE_CASES: list[tuple[str, Callable[[str], object], Callable[[int], str]]] = [
    ("extract: backticks, no line break", extract_sql, lambda n: "`" * n),
    ("extract: tildes, no line break", extract_sql, lambda n: "~" * n),
    ("extract: backticks after a line", extract_sql, lambda n: "select 1\n" + "`" * n),
    ("extract: fence then blanks", extract_sql, lambda n: "```" + " " * n),
    ("extract: fences and words", extract_sql, _rep("```sql ")),
    ("extract: unclosed fences on lines", extract_sql, _rep("```sql\nselect 1\n")),
    ("otlp: fence then blanks", _search(otlp_record._FENCE), lambda n: "```" + " " * n),
    ("otlp: fence, a word, blanks", _search(otlp_record._FENCE), lambda n: "``` sql" + " " * n),
]


@pytest.mark.parametrize(("title", "run", "make"), FENCE_CASES, ids=[c[0] for c in FENCE_CASES])
def test_fenced_sql_is_read_in_linear_time(
    title: str, run: Callable[[str], object], make: Callable[[int], str]
) -> None:
    assert growth(run, make, 1_000) < BOUND, title

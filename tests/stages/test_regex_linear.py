"""The regexes that read untrusted text run in linear time, even on their worst input.

A super-linear regex on a 4 KB question or a 50 KB SQL text holds the GIL for seconds. Each case
times one pattern on an adversarial text of n characters and of 8n: a linear scan costs about 8
times more, a quadratic one 64 times. The bound (24x) is relative to the same pattern on the
smaller text, so a slow or busy machine does not make it fail.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable

import pytest

from stef.judges.heuristic import question as q
from stef.stages.validate import Limits, is_blank, validate

FACTOR = 8
BOUND = 24  # linear: ~8; quadratic: ~64


def _cpu(run: Callable[[str], object], text: str, reps: int) -> float:
    best = float("inf")
    for _ in range(3):
        started = time.process_time()
        for _ in range(reps):
            run(text)
        best = min(best, time.process_time() - started)
    return best


def growth(run: Callable[[str], object], make: Callable[[int], str], n: int) -> float:
    """CPU time on ``make(FACTOR * n)`` over CPU time on ``make(n)``."""
    small, big = make(n), make(FACTOR * n)
    reps = 1
    while _cpu(run, small, reps) < 0.002 and reps < 4096:  # above the timer's noise
        reps *= 2
    return _cpu(run, big, reps) / max(_cpu(run, small, reps), 1e-6)


def _scan(pattern: re.Pattern[str]) -> Callable[[str], object]:
    return lambda text: sum(1 for _ in pattern.finditer(text))


def _search(pattern: re.Pattern[str]) -> Callable[[str], object]:
    return pattern.search


def _rep(unit: str, tail: str = "") -> Callable[[int], str]:
    """``unit`` repeated to n characters, then ``tail`` (the character that makes it fail)."""
    return lambda n: (unit * (n // len(unit) + 1))[:n] + tail


COMPARATORS = [pattern for pattern, _ in q._COMPARATORS]
AGG_CUES = [pattern for pattern, _ in q._AGG_CUES]

# (title, what runs, adversarial text of about n characters)
CASES: list[tuple[str, Callable[[str], object], Callable[[int], str]]] = [
    ("quoted: unclosed quotes past 200 chars", _scan(q._QUOTED), _rep("'" + "x" * 250)),
    ("quoted: double quotes, newline", _scan(q._QUOTED), _rep('"' + "x" * 150 + "\n")),
    ("quoted: backticks", _scan(q._QUOTED), _rep("`" + "x" * 300)),
    ("iso date: almost dates", _scan(q._ISO_DATE), _rep("2020-01-")),
    ("quarter: Q1 then spaces", _scan(q._QUARTER), _rep("Q1" + " " * 50 + "x ")),
    ("month year: month then spaces", _scan(q._MONTH_YEAR), _rep("march" + " " * 60 + "x ")),
    ("number: comma chain ending in a letter", _scan(q._NUMBER), _rep("1,", "x")),
    ("number: one long digit run then a letter", _scan(q._NUMBER), lambda n: "1" * n + "a"),
    ("number: dotted chain", _scan(q._NUMBER), _rep("1.", "-")),
    ("number: minus chain", _scan(q._NUMBER), _rep("-1")),
    ("number: percent chain", _scan(q._NUMBER), _rep("5%")),
    ("entity: capital then joiners", _scan(q._ENTITY), lambda n: "A" + _rep(" of")(n) + " x"),
    ("entity: joiner runs", _scan(q._ENTITY), _rep("A of the and ", "x")),
    ("entity: capitals", _scan(q._ENTITY), _rep("A ")),
    ("entity: punctuated word", _scan(q._ENTITY), _rep("A'&.-")),
    ("top-k: top then spaces", _scan(q._TOP_K_NUMBER), lambda n: "top" + " " * n + "x"),
    ("top-k: digits then no superlative", _scan(q._TOP_K_NUMBER), lambda n: "1" * n + " x"),
    ("top-k: numbers", _scan(q._TOP_K_NUMBER), _rep("5 ")),
    ("top-k: repeated superlatives", _scan(q._TOP_K_NUMBER), _rep("highest ")),
    ("grouping: per then spaces", _scan(q._GROUPING), lambda n: "per" + " " * n + "!"),
    ("grouping: repeated openers", _scan(q._GROUPING), _rep("for each ")),
    ("distinct words", _scan(q.DISTINCT_WORDS), _rep("distinc ")),
    ("sql string: unclosed", _scan(q.SQL_STRING), lambda n: "'" + "a" * n),
    ("sql string: doubled quotes", _scan(q.SQL_STRING), lambda n: "'" + "''" * (n // 2)),
    ("sql string: pairs then unclosed", _scan(q.SQL_STRING), _rep("'a''", "'")),
    *[
        (f"comparator {i}: words without a number", _search(p), _rep(w))
        for i, (p, w) in enumerate(
            zip(COMPARATORS, ["more than ", "less   ", "at least ", "no more "], strict=True)
        )
    ],
    *[
        (f"comparator {i}: word then spaces", _search(p), lambda n, w=w: w + " " * n + "x")
        for i, (p, w) in enumerate(zip(COMPARATORS, ["over", "below", "or", "up"], strict=True))
    ],
    *[
        (f"aggregation cue {i}", _scan(p), _rep(w))
        for i, (p, w) in enumerate(
            zip(AGG_CUES, ["how  ", "avg", "in al", "maxi", "mini"], strict=True)
        )
    ],
    # Past the cache: every call must scan.
    ("question literals: superlatives", q._question_literals.__wrapped__, _rep("highest ")),
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
    openers, as stef/stages/sqlspec.py had it) is far past the bound."""
    quadratic = re.compile(r"/\*.*?\*/", re.S)
    assert growth(_scan(quadratic), _rep("/* "), 1_000) > BOUND

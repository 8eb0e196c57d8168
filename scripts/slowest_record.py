"""CPU seconds of the most expensive records that :func:`stef.stages.validate.validate` accepts.

    .venv/bin/python scripts/slowest_record.py                 # every family, at the default limits
    .venv/bin/python scripts/slowest_record.py --family cte_chain --family in_list
    .venv/bin/python scripts/slowest_record.py --size 2000     # fixed size, limits off: the cost
                                                               # of what the limits now reject
    .venv/bin/python scripts/slowest_record.py --limit max_question_chars=4000   # a looser limit

Each family builds adversarial records from a size ``n`` (comment openers, nested subqueries, a
chain of CTEs, long IN lists, ...). Unless ``--size`` is given, the script finds the largest ``n``
whose record validate still accepts (doubling, then bisection), then measures the CPU time
(``time.process_time``) of validate + ``Pipeline(load_rules("rules"), HeuristicJudge())`` +
serializing the result, the work one record costs a worker while it holds the GIL. Prints one line
per family and the slowest record last. Exit status 1 when a record within the limits costs more
than ``--budget`` seconds or crashes a stage.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from stef.errors import InvalidInput  # noqa: E402
from stef.judges.heuristic.judge import HeuristicJudge  # noqa: E402
from stef.pipeline import Pipeline  # noqa: E402
from stef.rules import load_rules  # noqa: E402
from stef.stages.validate import Limits, validate  # noqa: E402

# The limits the combination families put at their bound (main() applies --limit here).
_LIMITS = Limits()
Q = "How many orders did EMEA customers place in 2023?"
Record = dict[str, Any]


def _sql(sql: str, question: str = Q, **extra: Any) -> Record:
    return {"question": question, "sql": sql, "app": "sales", **extra}


def _nested_json(n: int) -> Any:
    value: Any = 1
    for _ in range(n):
        value = {"a": value}
    return value


def _nested_sub(n: int) -> str:
    return "SELECT a FROM " + "(SELECT a FROM " * n + "t" + ") AS x" * n


def _cte_chain(n: int) -> str:
    ctes = ["c0 AS (SELECT a FROM t)"] + [f"c{i} AS (SELECT a FROM c{i - 1})" for i in range(1, n)]
    return "WITH " + ", ".join(ctes) + f" SELECT a FROM c{n - 1}"


# family -> record of size n. Sizes grow until validate rejects the record.
FAMILIES: dict[str, Callable[[int], Record]] = {
    "comment_openers": lambda n: _sql("SELECT a FROM t WHERE b = 1 " + "/* " * n),
    "comment_openers_in_string": lambda n: _sql("SELECT a FROM t WHERE b = '" + "/* " * n + "'"),
    "nested_subqueries": lambda n: _sql(_nested_sub(n)),
    "nested_parentheses": lambda n: _sql("SELECT " + "(" * n + "1" + ")" * n + " FROM t"),
    "nested_functions": lambda n: _sql("SELECT " + "COALESCE(" * n + "a" + ", 0)" * n + " FROM t"),
    "cte_chain": lambda n: _sql(_cte_chain(n)),
    "in_list": lambda n: _sql(
        "SELECT a FROM t WHERE b IN (" + ", ".join(str(i) for i in range(n)) + ")"
    ),
    "in_list_strings": lambda n: _sql(
        "SELECT a FROM t WHERE b IN (" + ", ".join(f"'v{i}'" for i in range(n)) + ")"
    ),
    "and_chain": lambda n: _sql(
        "SELECT a FROM t WHERE " + " AND ".join(f"c{i} = {i}" for i in range(n))
    ),
    "or_chain": lambda n: _sql(
        "SELECT a FROM t WHERE " + " OR ".join(f"c{i} = {i}" for i in range(n))
    ),
    "and_or_mixed": lambda n: _sql(
        "SELECT a FROM t WHERE " + " OR ".join(f"(c{i} = {i} AND d{i} > {i})" for i in range(n))
    ),
    "not_chain": lambda n: _sql("SELECT a FROM t WHERE " + "NOT " * n + "b = 1"),
    "unary_minus": lambda n: _sql("SELECT " + "- " * n + "1 FROM t"),
    "arithmetic_chain": lambda n: _sql("SELECT " + " + ".join(["a"] * n) + " FROM t"),
    "concat_chain": lambda n: _sql("SELECT " + " || ".join(["a"] * n) + " FROM t"),
    "joins": lambda n: _sql(
        "SELECT t0.a FROM t0 "
        + " ".join(f"JOIN t{i} ON t{i}.id = t{i - 1}.id AND t{i}.k = {i}" for i in range(1, n))
    ),
    "unions": lambda n: _sql(
        " UNION ALL ".join(f"SELECT a FROM t{i} WHERE b = {i}" for i in range(n))
    ),
    "unions_in_where": lambda n: _sql(
        "SELECT a FROM t WHERE b IN ("
        + " UNION ".join(f"SELECT b FROM u{i} WHERE c = {i}" for i in range(n))
        + ")"
    ),
    "statements": lambda n: _sql("; ".join(f"SELECT a FROM t WHERE b = {i}" for i in range(n))),
    "case_when": lambda n: _sql(
        "SELECT CASE " + " ".join(f"WHEN a = {i} THEN {i}" for i in range(n)) + " END FROM t"
    ),
    "nested_case": lambda n: _sql(
        "SELECT " + "CASE WHEN a = 1 THEN " * n + "1" + " END" * n + " FROM t"
    ),
    "projections": lambda n: _sql(
        "SELECT " + ", ".join(f"SUM(c{i}) AS s{i}" for i in range(n)) + " FROM t GROUP BY a"
    ),
    "group_order_by": lambda n: _sql(
        "SELECT COUNT(*) FROM t GROUP BY "
        + ", ".join(f"c{i}" for i in range(n))
        + " ORDER BY "
        + ", ".join(f"c{i} DESC" for i in range(n))
    ),
    "window_functions": lambda n: _sql(
        "SELECT "
        + ", ".join(f"ROW_NUMBER() OVER (PARTITION BY c{i} ORDER BY d{i})" for i in range(n))
        + " FROM t"
    ),
    "exists_subqueries": lambda n: _sql(
        "SELECT a FROM t WHERE "
        + " AND ".join(f"EXISTS (SELECT 1 FROM u{i} WHERE u{i}.id = t.id)" for i in range(n))
    ),
    "string_literal": lambda n: _sql("SELECT a FROM t WHERE b = '" + "x" * n + "'"),
    "quoted_quotes": lambda n: _sql("SELECT a FROM t WHERE b = '" + "''" * n + "'"),
    "unclosed_string": lambda n: _sql("SELECT a FROM t WHERE b = '" + "x" * n),
    "identifier": lambda n: _sql("SELECT " + "x" * n + " FROM t"),
    "quoted_identifier": lambda n: _sql('SELECT "' + "x" * n + '" FROM t'),
    "sql_digits": lambda n: _sql("SELECT a FROM t WHERE b = " + "9" * n),
    "sql_decimal_digits": lambda n: _sql("SELECT a FROM t WHERE b = 1." + "9" * n),
    "tokens": lambda n: _sql("SELECT a FROM t WHERE b = 1 " + "x " * n),
    "punctuation": lambda n: _sql("SELECT a FROM t WHERE b = 1 " + ", " * n),
    "id_digits": lambda n: _sql("SELECT 1", id=int("9" * n)),
    "question_digits": lambda n: _sql("SELECT a FROM t", question="Orders over " + "9" * n),
    "question_superlatives": lambda n: _sql(
        "SELECT a FROM t ORDER BY b DESC LIMIT 1", question=("highest " * n)[: 8 * n]
    ),
    "question_latest": lambda n: _sql("SELECT a FROM t", question="latest " * n),
    "question_best": lambda n: _sql("SELECT a FROM t", question="best " * n),
    "question_the_after_superlative": lambda n: _sql(
        "SELECT a FROM t", question="highest. " + "the " * n
    ),
    "question_numbers": lambda n: _sql("SELECT a FROM t WHERE b = 1", question="1 " * n),
    "question_percentages": lambda n: _sql("SELECT a FROM t", question="5% " * n),
    "question_quarters": lambda n: _sql("SELECT a FROM t", question="Q1 2020 " * n),
    "question_quotes": lambda n: _sql("SELECT a FROM t", question="'a " * n),
    "question_entities": lambda n: _sql("SELECT a FROM t", question="Ab x " * n),
    "question_top": lambda n: _sql("SELECT a FROM t", question="top 5 " * n),
    "enriched_numbers": lambda n: _sql("SELECT a FROM t WHERE b = 1", enriched_question="1 " * n),
    "enriched_latest": lambda n: _sql("SELECT a FROM t", enriched_question="latest " * n),
    "question_and_sql_words": lambda n: _sql(
        "SELECT a FROM t WHERE " + " AND ".join(f"Col{i} = 'V{i}'" for i in range(n)),
        question=" ".join(f"V{i} x" for i in range(n)),
    ),
    # Combinations: each one limit at its bound, multiplied by another.
    "cte_chain_wide": lambda n: _sql(
        "WITH c0 AS (SELECT a FROM t), "
        + ", ".join(
            f"c{i} AS (SELECT a FROM c{i - 1} JOIN u ON u.id = c{i - 1}.a WHERE "
            + " AND ".join(f"x{j} = {j}" for j in range(n))
            + ")"
            for i in range(1, _LIMITS.max_sql_ctes)
        )
        + f" SELECT a FROM c{_LIMITS.max_sql_ctes - 1}"
    ),
    "cte_chain_joins": lambda n: _sql(
        "WITH c0 AS (SELECT a FROM t), "
        + ", ".join(
            f"c{i} AS (SELECT c{i - 1}.a FROM c{i - 1} "
            + " ".join(f"JOIN u{j} ON u{j}.id = c{i - 1}.a" for j in range(n))
            + ")"
            for i in range(1, _LIMITS.max_sql_ctes)
        )
        + f" SELECT a FROM c{_LIMITS.max_sql_ctes - 1}"
    ),
    "unused_ctes_joins": lambda n: _sql(
        "WITH "
        + ", ".join(
            f"c{i} AS (SELECT t.a FROM t "
            + " ".join(f"JOIN u{j} ON u{j}.id = t.a" for j in range(n))
            + ")"
            for i in range(_LIMITS.max_sql_ctes)
        )
        + " SELECT a FROM t JOIN "
        + " JOIN ".join(f"v{j} ON v{j}.id = t.a" for j in range(n))
    ),
    "nested_subqueries_wide": lambda n: _sql(
        "SELECT a FROM "
        + "(SELECT a, b FROM " * (_LIMITS.max_sql_nesting - 1)
        + "t"
        + (") AS x WHERE " + " AND ".join(f"x{j} = {j}" for j in range(n)))
        * (_LIMITS.max_sql_nesting - 1)
    ),
    "question_numbers_vs_predicates": lambda n: _sql(
        "SELECT a FROM t WHERE " + " AND ".join(f"c{i} = {i}" for i in range(n)),
        question=" ".join(str(i) for i in range(n)),
    ),
    "enriched_numbers_vs_predicates": lambda n: _sql(
        "SELECT a FROM t WHERE " + " AND ".join(f"c{i} = {i}" for i in range(n)),
        enriched_question=" ".join(str(i) for i in range(n)),
    ),
    # Issue 21: a digit-heavy question against one long OR chain (or IN list) of numbers held
    # every question value against every literal (1.9 s of CPU before the literals were indexed).
    "question_numbers_vs_or_chain": lambda n: _sql(
        "SELECT a FROM t WHERE " + " OR ".join(f"b = {1000 + i}" for i in range(n)),
        question=" ".join(str(1000 + i) for i in range(n)),
    ),
    # The same, the chain at the SQL's own limits and the question at its own (790 numbers fill
    # its 4,000 characters): 0.29 to 0.39 s on 2026-11-30, twice the family above.
    "question_numbers_vs_longer_or_chain": lambda n: _sql(
        "SELECT a FROM t WHERE " + " OR ".join(f"b = {1000 + i}" for i in range(n)),
        question=" ".join(str(1000 + i) for i in range(min(n, 790))),
    ),
    # SQLite reads a double-quoted name that can only be a value as a string (docs/input-record.md):
    # every one of a long OR chain is tested for it (0.18 to 0.23 s).
    "sqlite_double_quoted_or_chain": lambda n: _sql(
        "SELECT a FROM t WHERE " + " OR ".join(f'b = "v{i}"' for i in range(n)), dialect="sqlite"
    ),
    "question_numbers_vs_in_list": lambda n: _sql(
        "SELECT a FROM t WHERE b IN (" + ", ".join(str(1000 + i) for i in range(n)) + ")",
        question=" ".join(str(1000 + i) for i in range(n)),
    ),
    "question_entities_vs_in_list": lambda n: _sql(
        "SELECT a FROM t WHERE b IN (" + ", ".join(f"'Name{i}'" for i in range(n)) + ")",
        question=" and ".join(f"Name{i}" for i in range(n)),
    ),
    "question_quotes_vs_likes": lambda n: _sql(
        "SELECT a FROM t WHERE " + " OR ".join(f"b LIKE '%v{i}%'" for i in range(n)),
        question=" ".join(f"'v{i}'" for i in range(n)),
    ),
    "metadata_depth": lambda n: _sql("SELECT a FROM t", metadata=_nested_json(n)),
    "metadata_width": lambda n: _sql(
        "SELECT a FROM t", metadata={f"k{i}": [i, str(i)] for i in range(n)}
    ),
}


def _accepted(payload: bytes, limits: Limits) -> bool:
    try:
        validate(payload, limits=limits)
    except InvalidInput:
        return False
    return True


def _payload(make: Callable[[int], Record], n: int) -> bytes | None:
    try:
        return json.dumps(make(n), ensure_ascii=False).encode("utf-8")
    except (ValueError, RecursionError):  # int-str limit, or too deep for json itself
        return None


def largest_accepted(make: Callable[[int], Record], limits: Limits, cap: int) -> int:
    """The largest n <= cap whose record validate accepts (0: even n=1 is rejected)."""

    def ok(n: int) -> bool:
        payload = _payload(make, n)
        return payload is not None and _accepted(payload, limits)

    if not ok(1):
        return 0
    lo, hi = 1, 2
    while hi <= cap and ok(hi):
        lo, hi = hi, hi * 2
    hi = min(hi, cap + 1)
    while hi - lo > 1:  # invariant: ok(lo), not ok(hi) (or hi beyond the cap)
        mid = (lo + hi) // 2
        if ok(mid):
            lo = mid
        else:
            hi = mid
    return lo


def measure(payload: bytes, pipeline: Pipeline, limits: Limits) -> tuple[float, str]:
    """CPU seconds of validate + judge + serialize, and what became of the record."""
    started = time.process_time()
    try:
        record = validate(payload, limits=limits)
        result = pipeline.judge_record(record)
        result.model_dump_json().encode("utf-8")
        parsed = result.sql_spec.parsed if result.sql_spec is not None else None
        what = f"{result.outcome}" + ("" if parsed is None else f" parsed={parsed}")
    except InvalidInput as exc:
        what = f"invalid ({exc.reason}: {exc.detail[:60]})"
    except Exception as exc:  # a crash is what this script looks for
        what = f"CRASH {type(exc).__name__}: {str(exc)[:60]}"
    return time.process_time() - started, what


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    p.add_argument("--family", action="append", choices=sorted(FAMILIES), help="repeatable")
    p.add_argument("--size", type=int, help="fixed size n, every limit lifted (before/after)")
    p.add_argument("--cap", type=int, default=200_000, help="largest n the search tries")
    p.add_argument("--budget", type=float, default=1.0, help="CPU seconds a record may cost")
    p.add_argument(
        "--limit",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="one Limits field set to another value (repeatable): try a looser limit",
    )
    args = p.parse_args()

    global _LIMITS  # the combination families read the bounds of the limits being tried
    overrides = {name: int(value) for name, _, value in (o.partition("=") for o in args.limit)}
    limits = _LIMITS = Limits(**overrides)
    if args.size is not None:
        # Every limit lifted: what a record of this size would cost if validate let it through.
        limits = Limits(
            **{name: 10**9 for name in Limits.model_fields}
            | {"max_json_depth": 200, "max_digit_run": 4_000}  # their own upper bounds
        )
    pipeline = Pipeline(load_rules(ROOT / "rules"), HeuristicJudge())
    worst: tuple[float, str, int] = (0.0, "", 0)
    failed = False
    print(f"{'family':32s} {'n':>7s} {'bytes':>7s} {'cpu_s':>7s}  outcome")
    for name in args.family or FAMILIES:
        make = FAMILIES[name]
        n = args.size if args.size is not None else largest_accepted(make, limits, args.cap)
        payload = _payload(make, n) if n else None
        if payload is None:
            print(f"{name:32s} {n:7d} {'-':>7s} {'-':>7s}  rejected at every size")
            continue
        seconds, what = measure(payload, pipeline, limits)
        print(f"{name:32s} {n:7d} {len(payload):7d} {seconds:7.3f}  {what}", flush=True)
        if seconds > worst[0]:
            worst = (seconds, name, n)
        if args.size is None and (seconds > args.budget or what.startswith("CRASH")):
            failed = True
    print(f"slowest: {worst[1]} n={worst[2]}: {worst[0]:.3f} CPU s")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())

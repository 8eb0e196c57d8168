"""Reference mode on generated databases (no ``reference.execute``): on by default, the rows
decide when they can, the counterexample is in the result, and what cannot run falls back to
the structure with its reason and a metric."""

from __future__ import annotations

import json
import textwrap
import time
from dataclasses import replace
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from stef.judges.heuristic.judge import HeuristicJudge
from stef.metrics import Metrics
from stef.models import ReferenceCounterexample, Result, Verdict
from stef.pipeline import Pipeline, PipelineOptions
from stef.rules import load_rules
from stef.sql.budget import BUDGET_SPENT
from stef.sql.suite import SuiteOutcome
from stef.stages import reference_generated
from stef.stages.reference_generated import Generated
from stef.stages.validate import Limits
from tests.conftest import last_json_of_child


def _judge(record: dict[str, Any], metrics: Metrics | None = None) -> Result:
    pipeline = Pipeline(load_rules(None), HeuristicJudge(), metrics=metrics)
    processed = pipeline.process(json.dumps({"id": "r", **record}).encode(), {"line": 1})
    assert processed.result is not None, processed.error
    return processed.result


def test_a_counterexample_decides_incorrect_and_is_in_the_result() -> None:
    result = _judge(
        {
            "question": "Which singer has the second highest fee?",
            "sql": "SELECT name FROM singer ORDER BY fee DESC LIMIT 2, 1",
            "gold_sql": "SELECT name FROM singer ORDER BY fee DESC LIMIT 1, 1",
        }
    )
    ref = result.reference
    assert ref is not None and ref.verdict is Verdict.INCORRECT
    assert ref.decided_by == "execution"
    run = json.loads(result.to_json())["reference"]["execution"]
    assert run["source"] == "generated" and run["status"] == "different"
    example = run["counterexample"]
    assert example["generated"] != example["reference"]
    assert set(example["tables"]) == set(example["columns"]) == {"singer"}
    assert result.score is not None and result.score < 50


def test_rows_of_a_random_function_never_make_a_query_differ_from_itself() -> None:
    # The same query as its reference: its rows differ from one run to the next (each of these
    # was different, Incorrect, in about half of the runs). The structure decides, or rows that
    # happened to agree.
    seen = set()
    for sql in (
        "SELECT name FROM singer ORDER BY RANDOM() LIMIT 1",
        "SELECT name FROM singer WHERE RANDOM() > 0",
    ):
        for _ in range(8):
            result = _judge({"question": "A random singer", "sql": sql, "gold_sql": sql})
            ref = result.reference
            assert ref is not None and ref.verdict is Verdict.CORRECT, ref
            assert ref.execution is not None
            seen.add(ref.execution.status)
            if ref.execution.status == "not_run":
                assert ref.error is not None and "random" in ref.error
    assert "not_run" in seen


def test_agreement_on_every_database_is_correct_and_can_be_excellent() -> None:
    result = _judge(
        {
            "question": "List the singers from France older than 30",
            "sql": "SELECT name FROM singer WHERE country = 'France'",
            "gold_sql": "SELECT s.name FROM singer AS s WHERE (s.country = 'France')",
        }
    )
    ref = result.reference
    assert ref is not None and ref.verdict is Verdict.CORRECT
    assert ref.decided_by == "execution"
    assert ref.execution is not None and ref.execution.informative
    assert ref.p_correct is not None and result.judge.p_correct == ref.p_correct
    assert result.tier == "excellent"


def test_now_in_a_query_is_when_its_question_was_asked() -> None:
    # "The last 90 days" beside 2023 keeps no row when asked in June 2025; on the fixed day in
    # 2020 that stands for a record without a timestamp, every day of 2023 is within them.
    record = {
        "question": "Monthly revenue trend for APAC in 2023",
        "sql": "SELECT DATE_TRUNC('month', order_date) AS month, SUM(net_revenue_usd) FROM "
        "orders WHERE region_name = 'APAC' AND YEAR(order_date) = 2023 AND order_date >= "
        "DATEADD(day, -90, CURRENT_DATE()) GROUP BY 1 ORDER BY month",
        "gold_sql": "SELECT DATE_TRUNC('month', order_date) AS month, SUM(net_revenue_usd) FROM "
        "orders WHERE region_name = 'APAC' AND YEAR(order_date) = 2023 GROUP BY 1 ORDER BY month",
        "dialect": "snowflake",
    }
    asked = _judge({**record, "timestamp": "2025-06-03T16:56:25.163Z"}).reference
    assert asked is not None and asked.verdict is Verdict.INCORRECT
    assert asked.execution is not None and asked.execution.status == "different"
    unknown = _judge(record).reference
    assert unknown is not None and unknown.execution is not None
    assert unknown.execution.status == "same"


def test_the_same_record_gives_the_same_databases() -> None:
    record = {
        "question": "How many singers are from France?",
        "sql": "SELECT COUNT(*) FROM singer WHERE country = 'Germany'",
        "gold_sql": "SELECT COUNT(*) FROM singer WHERE country = 'France'",
    }
    first, second = _judge(record).reference, _judge(record).reference
    assert first is not None and second is not None
    assert first.execution is not None and second.execution is not None
    assert first.execution.counterexample == second.execution.counterexample


def test_what_cannot_run_falls_back_to_the_structure_with_its_reason_and_a_metric() -> None:
    registry = CollectorRegistry()
    metrics = Metrics(registry)
    # json_each is a table-valued function: no table to generate, nothing to run.
    result = _judge(
        {
            "question": "Which values are listed?",
            "sql": "SELECT value FROM json_each('[1, 2]')",
            "gold_sql": "SELECT value FROM json_each('[1, 2]')",
        },
        metrics,
    )
    ref = result.reference
    assert ref is not None and ref.verdict is Verdict.CORRECT
    assert ref.decided_by == "structure"
    assert ref.error is not None and ref.error.startswith("execution_not_run")
    labels = {"app": "default", "reason": "not_run"}
    assert registry.get_sample_value("stef_reference_execution_fallbacks_total", labels) == 1
    verdicts = {"app": "default", "verdict": "Correct", "decided_by": "structure"}
    assert registry.get_sample_value("stef_reference_verdicts_total", verdicts) == 1


def test_agreeing_rows_do_not_overrule_a_limit_the_databases_cannot_exercise() -> None:
    # SQLite takes a scalar subquery's first row: LIMIT 1 and LIMIT 2 agree on every database.
    result = _judge(
        {
            "question": "What is the body of the post whose tag has the highest count?",
            "sql": "SELECT body FROM posts WHERE id = "
            "(SELECT post_id FROM tags ORDER BY count DESC LIMIT 2)",
            "gold_sql": "SELECT body FROM posts WHERE id = "
            "(SELECT post_id FROM tags ORDER BY count DESC LIMIT 1)",
        }
    )
    ref = result.reference
    assert ref is not None and ref.verdict is Verdict.INCORRECT
    assert ref.decided_by == "structure"
    assert ref.execution is not None and ref.execution.status == "same"
    assert ref.error is not None and ref.error.startswith("execution_unexercised")


def test_agreeing_rows_overrule_an_order_the_databases_exercise() -> None:
    result = _judge(
        {
            "question": "Which singer is the oldest?",
            "sql": "SELECT name FROM singer ORDER BY birthday ASC LIMIT 1",
            "gold_sql": "SELECT name FROM singer ORDER BY JULIANDAY(birthday) ASC LIMIT 1",
        }
    )
    ref = result.reference
    assert ref is not None and ref.decided_by == "execution"
    assert ref.verdict is Verdict.CORRECT


def test_backticks_in_the_generated_sql_run_when_no_dialect_is_named() -> None:
    # The generic dialect rejects backtick-quoted names; the generated SQL is read in the
    # dialect guessed for it (MySQL's reading, SQLite's quoting), and so is the reference,
    # instead of falling back to the structure with "cannot infer the schema".
    result = _judge(
        {
            "question": "How many female patients were born in 1997?",
            "sql": "SELECT count(id) FROM patient WHERE sex = 'F' "
            "AND strftime('%Y', `birthday`) = '1997'",
            "gold_sql": "SELECT COUNT(ID) FROM Patient WHERE SEX = 'F' "
            "AND STRFTIME('%Y', Birthday) = '1998'",
        }
    )
    ref = result.reference
    assert ref is not None and ref.decided_by == "execution", ref
    assert ref.verdict is Verdict.INCORRECT
    assert ref.execution is not None and ref.execution.status == "different"


def _per_shop(group: str) -> Result:
    """Employees per shop, grouped by ``group``, against the gold's ``GROUP BY s.name``."""
    return _judge(
        {
            "question": "For each shop, return the number of employees and the shop's name.",
            "sql": "SELECT COUNT(*), s.name FROM shop AS s JOIN hiring AS h "
            f"ON s.shop_id = h.shop_id GROUP BY {group}",
            "gold_sql": "SELECT COUNT(*), s.name FROM hiring AS h JOIN shop AS s "
            "ON h.shop_id = s.shop_id GROUP BY s.name",
        }
    )


def test_grouping_by_the_entity_key_or_its_name_is_likely_correct() -> None:
    # The rows differ only where two shops share a name: the counterexample stays, the
    # verdict is Likely Correct and the detail says why.
    ref = _per_shop("s.shop_id").reference
    assert ref is not None and ref.verdict is Verdict.LIKELY_CORRECT
    assert ref.decided_by == "execution"
    assert ref.execution is not None and ref.execution.status == "different"
    assert ref.execution.counterexample is not None
    assert "groups by their key" in ref.execution.detail


def test_grouping_by_another_attribute_stays_incorrect() -> None:
    ref = _per_shop("s.city").reference
    assert ref is not None and ref.verdict is Verdict.INCORRECT
    assert ref.execution is not None and ref.execution.status == "different"


def test_the_unexercised_check_has_what_the_databases_left_of_their_time(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # All of a record's databases within timeout_s: the check had its own timeout_s too, and
    # one record took twice its time.
    timeouts: list[float] = []
    real = reference_generated.run_suite

    def timed(*args: Any, **kwargs: Any) -> SuiteOutcome:
        timeouts.append(kwargs["timeout_s"])
        found = real(*args, **kwargs)
        return replace(found, elapsed_ms=400.0) if len(timeouts) == 1 else found

    monkeypatch.setattr(reference_generated, "run_suite", timed)
    test_agreeing_rows_do_not_overrule_a_limit_the_databases_cannot_exercise()
    assert timeouts == [1.0, pytest.approx(0.6)]


def _counterexample_against_names(sql: str) -> tuple[Result, ReferenceCounterexample]:
    """Judge ``sql`` against the gold ``SELECT name FROM singer``, which it differs from, and
    return the result with the counterexample it must carry."""
    result = _judge(
        {
            "question": "List the singers' names.",
            "sql": sql,
            "gold_sql": "SELECT name FROM singer",
        }
    )
    ref = result.reference
    assert ref is not None and ref.execution is not None
    example = ref.execution.counterexample
    assert example is not None
    return result, example


def test_a_blob_in_a_counterexample_is_shown_as_its_literal() -> None:
    # JSON has no bytes: the result could not be written, an internal_error dead letter.
    result, example = _counterexample_against_names("SELECT X'FF00FE', name FROM singer")
    assert example.generated[0][0] == "X'FF00FE'"
    assert "X'FF00FE'" in result.model_dump_json()


def test_a_counterexample_cuts_long_values() -> None:
    # Values of 60,000 characters, a few rows of them (of 1 MiB, one record's result was 6 MB).
    result, example = _counterexample_against_names(
        "SELECT printf('%.*c', 60000, 'a') || name, zeroblob(1000) FROM singer"
    )
    assert all(len(text) == 201 and text.endswith("…") for text, _ in example.generated)
    # A blob's literal is kept whole (its closing quote was cut off), the cut said after it.
    assert all(b.startswith("X'00") and b.endswith("'…") for _, b in example.generated)
    assert len(result.model_dump_json()) < 20_000


def test_the_generated_databases_stop_where_the_records_cpu_budget_runs_out() -> None:
    # 3,000 rows of 20 columns from both queries on each database: 4 s of CPU for three
    # databases, all of it after the pipeline's last look at the budget. The wall clock
    # (timeout_s) gives them a minute: the CPU budget is what stops them.
    columns = ", ".join(f"x * 1.5 + {i}" for i in range(20))
    sql = (
        "WITH RECURSIVE r(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM r LIMIT 3000) "
        f"SELECT {columns} FROM r, (SELECT 1 FROM customers LIMIT 1)"
    )
    options = PipelineOptions(
        limits=Limits(max_record_cpu_s=0.5),
        reference_generated=Generated(databases=2, timeout_s=60.0),
    )
    registry = CollectorRegistry()
    pipeline = Pipeline(load_rules(None), HeuristicJudge(), options, metrics=Metrics(registry))
    record = {"id": "r", "question": "List the customers", "sql": sql, "gold_sql": sql}
    started = time.thread_time()
    processed = pipeline.process(json.dumps(record).encode(), {"line": 1})
    spent = time.thread_time() - started
    assert processed.result is not None, processed.error
    ref = processed.result.reference
    # The structure's verdict stands, and the result says why the rows did not decide.
    assert ref is not None and ref.verdict is Verdict.CORRECT and ref.decided_by == "structure"
    assert ref.execution is not None and ref.execution.status == "not_run"
    assert ref.execution.detail == BUDGET_SPENT
    assert ref.error == f"execution_not_run: {BUDGET_SPENT}"
    assert spent < 1.0
    # Counted apart from the other not_run causes: what to raise is limits.max_record_cpu_s.
    fallbacks = "stef_reference_execution_fallbacks_total"
    assert registry.get_sample_value(fallbacks, {"app": "default", "reason": "budget"}) == 1
    assert registry.get_sample_value(fallbacks, {"app": "default", "reason": "not_run"}) is None


# A child process judges a record whose two queries return 10,000 rows of 100 numbers on a
# generated database, with 128 MB of address space left once its pipeline has judged a first
# record, and a CPU budget that does not stop it first.
_OUT_OF_MEMORY_CHILD = textwrap.dedent(
    """
    import json, re, resource
    from stef.judges.heuristic.judge import HeuristicJudge
    from stef.pipeline import Pipeline, PipelineOptions
    from stef.rules import load_rules
    from stef.stages.reference_generated import Generated
    from stef.stages.validate import Limits

    options = PipelineOptions(
        limits=Limits(max_record_cpu_s=60),
        reference_generated=Generated(databases=1, timeout_s=60),
    )
    pipeline = Pipeline(load_rules(None), HeuristicJudge(), options)

    def judge(sql):
        record = {"id": "r", "question": "List the customers", "sql": sql,
                  "gold_sql": "SELECT name FROM customers"}
        return pipeline.process(json.dumps(record).encode(), {"line": 1})

    judge("SELECT name FROM customers")
    size = int(re.search(r"VmSize:\\s+(\\d+)", open("/proc/self/status").read()).group(1))
    resource.setrlimit(resource.RLIMIT_AS, ((size << 10) + (128 << 20), resource.RLIM_INFINITY))
    columns = ", ".join(f"x * 1.5 + {i}" for i in range(100))
    processed = judge(
        "WITH RECURSIVE r(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM r LIMIT 10000) "
        f"SELECT {columns} FROM r, (SELECT 1 FROM customers LIMIT 1)"
    )
    print(json.dumps({
        "error": processed.reason,
        "result": None if processed.result is None else json.loads(processed.result.to_json()),
    }))
    """
)


def test_running_out_of_memory_on_the_generated_databases_leaves_the_structure() -> None:
    out = last_json_of_child(_OUT_OF_MEMORY_CHILD)
    # Not a dead letter (internal_error): the host's memory says nothing about the queries.
    assert out["error"] is None
    ref = out["result"]["reference"]
    assert ref["verdict"] == "Incorrect" and ref["decided_by"] == "structure"
    assert ref["execution"]["status"] == "not_run"
    assert ref["execution"]["detail"] == reference_generated.OUT_OF_MEMORY

"""Reference mode's execution (``reference.execute``): both queries run read-only on a SQLite or
DuckDB file built here, and their rows decide; failures and timeouts are findings."""

from __future__ import annotations

import json
import sqlite3
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from stef.errors import ConfigError
from stef.io.database import Database, open_database
from stef.judges.heuristic.judge import HeuristicJudge
from stef.metrics import Metrics
from stef.models import Reference, ReferenceExecution, Result, Verdict
from stef.pipeline import Pipeline, PipelineOptions
from stef.review import explain
from stef.rules import load_rules
from stef.service.wiring import build_backend, build_pipeline
from stef.settings import Settings
from stef.sql.budget import BUDGET_SPENT, CpuDeadline
from stef.stages.reference import _told_nothing
from tests.conftest import last_json_of_child

ROWS = [(1, "Ann", "France", 31, 1.5), (2, "Bob", "France", 45, 2.25), (3, "Eve", "Spain", 28, 3.0)]
CREATE = "CREATE TABLE singer (id INTEGER, name TEXT, country TEXT, age INTEGER, fee DOUBLE)"


def _sqlite(path: Path) -> str:
    conn = sqlite3.connect(path)
    conn.execute(CREATE)
    conn.executemany("INSERT INTO singer VALUES (?, ?, ?, ?, ?)", ROWS)
    conn.commit()
    conn.close()
    return f"sqlite:///{path}"  # path is absolute: four slashes in all


def _duckdb(path: Path) -> str:
    duckdb = pytest.importorskip("duckdb")
    conn = duckdb.connect(str(path))
    conn.execute(CREATE)
    conn.executemany("INSERT INTO singer VALUES (?, ?, ?, ?, ?)", ROWS)
    conn.close()
    return f"duckdb:///{path}"


BUILDERS = {"sqlite": (_sqlite, "db"), "duckdb": (_duckdb, "duckdb")}


@pytest.fixture(params=sorted(BUILDERS))
def database_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    build, ext = BUILDERS[request.param]
    return build(tmp_path / f"golden.{ext}")


def _pipeline(url: str, **execute: Any) -> Pipeline:
    """Reference mode on the database at ``url``: its rows alone (``generate: false``) unless
    ``execute`` says otherwise."""
    settings = Settings(reference={"execute": url, "generate": False, **execute})
    return build_pipeline(settings, load_rules(None), build_backend(settings))


def _judge(pipeline: Pipeline, question: str, sql: str, gold: str) -> Result:
    record = {"id": "r", "question": question, "sql": sql, "gold_sql": gold}
    processed = pipeline.process(json.dumps(record).encode(), {"file": "t", "line": 1})
    assert processed.result is not None, processed.error
    return processed.result


def _reference(pipeline: Pipeline, question: str, sql: str, gold: str) -> Reference:
    """The reference of ``sql`` judged against ``gold``, with the execution every record judged
    here must carry."""
    ref = _judge(pipeline, question, sql, gold).reference
    assert ref is not None and ref.execution is not None
    return ref


def _execution(pipeline: Pipeline, question: str, sql: str, gold: str) -> ReferenceExecution:
    """What running ``sql`` and ``gold`` found."""
    execution = _reference(pipeline, question, sql, gold).execution
    assert execution is not None
    return execution


def test_same_rows_another_structure_is_correct(database_url: str) -> None:
    result = _judge(
        _pipeline(database_url),
        "Names and fees of singers from France",
        # Another column order, another way to say the filter, float arithmetic.
        "SELECT fee * 1.0 + 0.0000001, name FROM singer WHERE country IN ('France') AND age > 0",
        "SELECT name, fee FROM singer WHERE country = 'France'",
    )
    ref = result.reference
    assert ref is not None and ref.execution is not None
    assert ref.execution.status == "same"
    assert (ref.execution.generated_rows, ref.execution.reference_rows) == (2, 2)
    assert ref.verdict is Verdict.CORRECT
    assert ref.differences  # the structure differs: still listed


def test_other_rows_are_incorrect(database_url: str) -> None:
    result = _judge(
        _pipeline(database_url),
        "Names of singers from France",
        "SELECT name FROM singer WHERE country = 'Spain'",
        "SELECT name FROM singer WHERE country = 'France'",
    )
    ref = result.reference
    assert ref is not None and ref.execution is not None
    assert (ref.execution.status, ref.verdict) == ("different", Verdict.INCORRECT)


@pytest.mark.parametrize(
    ("question", "sql", "gold"),
    [
        (
            "Names of singers from Italy",
            "SELECT name FROM singer WHERE country = 'Germany'",
            "SELECT name FROM singer WHERE country = 'Italy'",
        ),
        (
            "How many singers are over 100?",
            "SELECT COUNT(*) FROM singer WHERE age > 90",
            "SELECT COUNT(*) FROM singer WHERE age > 100",
        ),
        (
            "The total fee of singers from Italy",
            "SELECT SUM(fee) FROM singer WHERE country = 'Germany'",
            "SELECT SUM(fee) FROM singer WHERE country = 'Italy'",
        ),
    ],
    ids=["no-rows", "count-of-0", "sum-of-nothing"],
)
def test_rows_that_hold_nothing_decide_nothing(
    database_url: str, question: str, sql: str, gold: str
) -> None:
    # No row passes either query's filter: another country or bound finds the same nothing, so
    # the structure decides (it was `same`, Correct).
    ref = _reference(_pipeline(database_url), question, sql, gold)
    assert ref.execution is not None
    assert ref.execution.status == "undecided"
    assert ref.execution.detail
    assert (ref.verdict, ref.decided_by) == (Verdict.INCORRECT, "structure")


@pytest.mark.parametrize(
    ("sql", "gold", "status", "verdict"),
    [
        (
            "SELECT name FROM singer WHERE country = 'Germany'",
            "SELECT name FROM singer WHERE country = 'Italy'",
            "different",
            Verdict.INCORRECT,
        ),
        (
            "SELECT name FROM singer WHERE country IN ('Italy')",
            "SELECT name FROM singer WHERE country = 'Italy'",
            "same",
            Verdict.CORRECT,
        ),
    ],
    ids=["another-country", "the-same-country"],
)
def test_generated_databases_decide_where_the_team_s_rows_hold_nothing(
    database_url: str, sql: str, gold: str, status: str, verdict: Verdict
) -> None:
    # The team's database has no Italian singer: both queries find nothing there. Databases
    # generated for the two queries hold one, and tell Germany from Italy.
    registry = CollectorRegistry()
    settings = Settings(reference={"execute": database_url})  # generate: true, the default
    pipeline = build_pipeline(
        settings, load_rules(None), build_backend(settings), Metrics(registry)
    )
    result = _judge(pipeline, "Names of singers from Italy", sql, gold)
    ref = result.reference
    assert ref is not None and ref.execution is not None and ref.database is not None
    assert (ref.database.source, ref.database.status) == ("database", "undecided")
    assert (ref.execution.source, ref.execution.status) == ("generated", status)
    assert (ref.verdict, ref.decided_by) == (verdict, "execution")
    written = json.loads(result.to_json())
    assert written["reference"]["database"]["status"] == "undecided"
    said = explain.reference(written)  # the review page's and the report's words
    assert said is not None and "after the configured database told nothing (undecided)" in said
    fallbacks = "stef_reference_execution_fallbacks_total"
    assert registry.get_sample_value(fallbacks, {"app": "default", "reason": "undecided"}) is None


def test_generated_databases_decide_where_neither_query_runs_on_the_team_s(
    database_url: str,
) -> None:
    # A table the team's database does not have (a golden set ahead of its copy of the data).
    pipeline = _pipeline(database_url, generate=True)
    ref = _reference(
        pipeline,
        "Titles of albums by Ann",
        "SELECT title FROM album WHERE artist = 'Bob'",
        "SELECT title FROM album WHERE artist = 'Ann'",
    )
    assert ref.database is not None and ref.database.status == "not_run"
    assert ref.database.detail.startswith("neither query runs on this database")
    assert ref.execution is not None and ref.execution.source == "generated"
    assert (ref.execution.status, ref.verdict) == ("different", Verdict.INCORRECT)


def test_rows_the_team_s_database_decides_keep_to_it(database_url: str) -> None:
    # Telling rows, a failing generated query: the team's database decides, nothing is
    # generated, and the result has no `database` key.
    pipeline = _pipeline(database_url, generate=True)
    for sql, status in (
        ("SELECT name FROM singer WHERE country = 'Spain'", "different"),
        ("SELECT name FROM singer WHERE stef_no_such_fn(age) > 30", "generated_failed"),
    ):
        result = _judge(
            pipeline, "Names of singers from France", sql, "SELECT name FROM singer WHERE age > 30"
        )
        ref = result.reference
        assert ref is not None and ref.execution is not None and ref.database is None
        assert (ref.execution.source, ref.execution.status) == ("database", status)
        assert "database" not in json.loads(result.to_json())["reference"]


def test_generated_databases_that_cannot_decide_after_the_team_s_are_named_as_such(
    database_url: str,
) -> None:
    # Nobody of 98 or 99 in the team's data; on generated ones the random function's rows
    # decide nothing. The words say where each ran (they said "the configured database").
    pipeline = _pipeline(database_url, generate=True)
    result = _judge(
        pipeline,
        "Names of singers aged 98",
        "SELECT name FROM singer WHERE age = 99 AND ABS(RANDOM()) % 2 = 0",
        "SELECT name FROM singer WHERE age = 98",
    )
    ref = result.reference
    assert ref is not None and ref.database is not None and ref.execution is not None
    assert ref.database.status == "undecided"
    assert (ref.execution.source, ref.execution.status) == ("generated", "not_run")
    assert ref.decided_by == "structure"
    said = explain.reference(json.loads(result.to_json()))
    assert said is not None and "(not_run on generated databases)" in said
    assert "on the configured database)" not in said


def test_a_spent_budget_runs_no_generated_database_after_the_team_s() -> None:
    undecided = ReferenceExecution(status="undecided", detail="nothing")
    assert _told_nothing(undecided, CpuDeadline.after(60))
    assert not _told_nothing(undecided, CpuDeadline(0.0))  # thread CPU is past 0 already
    for told in ("same", "different", "generated_failed"):
        assert not _told_nothing(ReferenceExecution(status=told), CpuDeadline.after(60))
    timed_out = ReferenceExecution(status="not_run", detail="neither query finished: ...")
    assert not _told_nothing(timed_out, CpuDeadline.after(60))


def test_a_count_that_differs_from_a_reference_of_0_is_incorrect(database_url: str) -> None:
    ref = _reference(
        _pipeline(database_url),
        "How many singers are over 100?",
        "SELECT COUNT(*) FROM singer WHERE age > 30",
        "SELECT COUNT(*) FROM singer WHERE age > 100",
    )
    assert ref.execution is not None
    assert (ref.execution.status, ref.verdict) == ("different", Verdict.INCORRECT)
    assert ref.decided_by == "execution"


def test_columns_are_matched_once_for_all_rows(database_url: str) -> None:
    pipeline = _pipeline(database_url)
    # Another column order is the same answer.
    swapped = _execution(
        pipeline, "Ids and ages", "SELECT age, id FROM singer", "SELECT id, age FROM singer"
    )
    assert swapped.status == "same"
    # Id and age swapped in one row only: each row holds the same values, the answer does not.
    partly = _execution(
        pipeline,
        "Ids and ages",
        "SELECT CASE WHEN id = 1 THEN age ELSE id END, CASE WHEN id = 1 THEN id ELSE age END "
        "FROM singer",
        "SELECT id, age FROM singer",
    )
    assert partly.status == "different"


def test_integers_past_a_float_s_precision_stay_apart(database_url: str) -> None:
    # 64-bit ids (snowflake, Twitter) past 2**53: as floats, an id and its neighbour are equal.
    pipeline = _pipeline(database_url)
    for mine, theirs in ((2**53 + 1, 2**53), (2**63 - 1, 2**63 - 2)):
        execution = _execution(pipeline, "The id", f"SELECT {mine}", f"SELECT {theirs}")
        assert execution.status == "different", (mine, theirs)
    # A number is still the same number however typed: an integer and its float.
    same = _execution(pipeline, "The number", "SELECT 3", "SELECT 3.0")
    assert same.status == "same"


def test_rows_of_a_random_function_decide_nothing(database_url: str) -> None:
    # The same query as its reference: two runs of RANDOM() differ, the query is not wrong.
    sql = "SELECT name, RANDOM() AS r FROM singer ORDER BY r LIMIT 1"
    result = _judge(_pipeline(database_url), "A random singer", sql, sql)
    ref = result.reference
    assert ref is not None and ref.execution is not None
    assert ref.execution.status == "not_run"
    assert "random" in ref.execution.detail
    assert (ref.verdict, ref.decided_by) == (Verdict.CORRECT, "structure")
    # Then the structure decides: another filter is still Incorrect.
    other = _judge(
        _pipeline(database_url),
        "A random singer from France",
        "SELECT name FROM singer WHERE country = 'Spain' ORDER BY RANDOM() LIMIT 1",
        "SELECT name FROM singer WHERE country = 'France' ORDER BY RANDOM() LIMIT 1",
    )
    assert other.reference is not None and other.reference.verdict is Verdict.INCORRECT
    # Rows that agree still decide.
    same = _execution(
        _pipeline(database_url),
        "Singers from France, shuffled",
        "SELECT name FROM singer WHERE country = 'France' ORDER BY RANDOM()",
        "SELECT name FROM singer WHERE country = 'France'",
    )
    assert same.status == "same"


def test_row_order_counts_only_when_the_question_asks_for_it(database_url: str) -> None:
    pipeline = _pipeline(database_url)
    asc, desc = "SELECT name FROM singer ORDER BY age", "SELECT name FROM singer ORDER BY age DESC"
    unordered = _judge(pipeline, "Names of the singers", asc, "SELECT name FROM singer")
    assert unordered.reference is not None and unordered.reference.execution is not None
    assert unordered.reference.execution.status == "same"
    ordered = _judge(pipeline, "Names of the singers sorted by age, oldest first", asc, desc)
    assert ordered.reference is not None and ordered.reference.execution is not None
    assert ordered.reference.execution.status == "different"


def test_a_failing_query_is_a_finding_not_a_crash(database_url: str) -> None:
    pipeline = _pipeline(database_url)
    bad = _judge(pipeline, "Names", "SELECT nme FROM singer", "SELECT name FROM singer")
    assert bad.outcome == "evaluated" and bad.reference is not None
    assert bad.reference.execution is not None
    assert bad.reference.execution.status == "generated_failed"
    assert bad.reference.verdict is Verdict.INCORRECT
    gold_bad = _judge(pipeline, "Names", "SELECT name FROM singer", "SELECT nme FROM singer")
    assert gold_bad.reference is not None and gold_bad.reference.execution is not None
    assert gold_bad.reference.execution.status == "reference_failed"


def test_queries_neither_of_which_runs_on_the_database_decide_nothing(database_url: str) -> None:
    # SQL the database cannot run whoever wrote it (another engine's function, here one that
    # neither SQLite nor DuckDB has): the gold fails as the generated query does, so the
    # database cannot tell. The generated query was Incorrect for the database's failing it.
    registry = CollectorRegistry()
    settings = Settings(reference={"execute": database_url, "generate": False})
    pipeline = build_pipeline(
        settings, load_rules(None), build_backend(settings), Metrics(registry)
    )
    sql = "SELECT name FROM singer WHERE stef_no_such_fn(age) > 30"
    gold = "SELECT name FROM singer WHERE stef_no_such_fn(age) >= 31"
    run = _execution(pipeline, "Singers over 30", sql, gold)
    assert run.status == "not_run"
    assert run.detail.count("error") == 2  # the generated SQL's and the reference's
    fallbacks = "stef_reference_execution_fallbacks_total"
    assert registry.get_sample_value(fallbacks, {"app": "default", "reason": "not_run"}) == 1
    # The reference runs: the generated query's error is a finding, as before.
    ok_gold = _execution(pipeline, "Singers over 30", sql, "SELECT name FROM singer WHERE age > 30")
    assert ok_gold.status == "generated_failed" and ok_gold.reference_rows == 2


RUNAWAY = (
    "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n) SELECT COUNT(*) FROM n, singer"
)


def test_a_runaway_query_times_out_when_the_reference_finishes(database_url: str) -> None:
    result = _judge(
        _pipeline(database_url, timeout_s=0.3),
        "How many singers?",
        RUNAWAY,
        "SELECT COUNT(*) FROM singer",
    )
    ref = result.reference
    assert ref is not None and ref.execution is not None
    assert ref.execution.status == "generated_failed"
    assert ref.execution.detail.startswith("timeout")
    assert (ref.verdict, ref.decided_by) == (Verdict.INCORRECT, "execution")


def test_a_timeout_the_reference_shares_decides_nothing(database_url: str) -> None:
    # The database is too slow for the question itself (or loaded): the reference, run within
    # the same timeout, does not finish either; the structure decides, the metric says why.
    registry = CollectorRegistry()
    settings = Settings(reference={"execute": database_url, "timeout_s": 0.3})
    pipeline = build_pipeline(
        settings, load_rules(None), build_backend(settings), Metrics(registry)
    )
    gold = (
        "WITH RECURSIVE m(j) AS (SELECT 0 UNION ALL SELECT j + 1 FROM m) "
        "SELECT COUNT(*) FROM m, singer"
    )
    result = _judge(pipeline, "How many singers?", RUNAWAY, gold)
    ref = result.reference
    assert ref is not None and ref.execution is not None
    assert ref.execution.status == "not_run"
    assert ref.execution.detail.count("timeout") == 2  # the generated SQL's and the reference's
    assert ref.verdict is not None and ref.decided_by == "structure"
    fallbacks = "stef_reference_execution_fallbacks_total"
    assert registry.get_sample_value(fallbacks, {"app": "default", "reason": "not_run"}) == 1


def test_a_timeout_past_the_cpu_budget_runs_no_reference(tmp_path: Path) -> None:
    # A SQLite statement's steps are the record's thread CPU: a generated query that timed out
    # after 1 s spent the record's 0.2 s budget, so the reference is not run again to see.
    registry = CollectorRegistry()
    settings = Settings(
        reference={"execute": _sqlite(tmp_path / "golden.db"), "timeout_s": 1.0},
        limits={"max_record_cpu_s": 0.2},
    )
    pipeline = build_pipeline(
        settings, load_rules(None), build_backend(settings), Metrics(registry)
    )
    _judge(pipeline, "How many singers?", "SELECT COUNT(*) FROM singer", "SELECT 3")  # warm
    started = time.monotonic()
    result = _judge(pipeline, "How many singers?", RUNAWAY, RUNAWAY)
    took = time.monotonic() - started
    ref = result.reference
    assert ref is not None and ref.execution is not None
    assert (ref.execution.status, ref.execution.detail) == ("not_run", BUDGET_SPENT)
    assert ref.verdict is Verdict.CORRECT and ref.decided_by == "structure"
    assert took < 2.0  # one timeout of 1 s, not two
    fallbacks = "stef_reference_execution_fallbacks_total"
    assert registry.get_sample_value(fallbacks, {"app": "default", "reason": "budget"}) == 1


def test_too_many_rows_is_a_finding_when_the_reference_has_fewer(database_url: str) -> None:
    execution = _execution(
        _pipeline(database_url, max_rows=2),
        "All singers",
        "SELECT name FROM singer",
        "SELECT name FROM singer WHERE country = 'France'",
    )
    assert execution.status == "generated_failed"
    assert execution.detail.startswith("too_many_rows")
    assert execution.reference_rows == 2


def test_too_many_rows_on_both_sides_decides_nothing(database_url: str) -> None:
    # The same query as its reference is no error because the answer is past max_rows.
    result = _judge(
        _pipeline(database_url, max_rows=2),
        "All singers",
        "SELECT name FROM singer",
        "SELECT name FROM singer",
    )
    ref = result.reference
    assert ref is not None and ref.execution is not None
    assert ref.execution.status == "not_run"
    assert ref.execution.detail.count("too_many_rows") == 2
    assert (ref.verdict, ref.decided_by) == (Verdict.CORRECT, "structure")


def test_rows_past_the_size_limit_are_a_finding(database_url: str) -> None:
    # 100,000 rows of 400 bytes: 40 MB of text, within max_rows (SQLite: within its 1 MiB a value).
    many = (
        "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 100000) "
        f"SELECT name || '{'x' * 400}' || i FROM n, singer WHERE singer.id = 1"
    )
    # The CPU budget well past what building 40 MB takes on a loaded machine: the reference
    # must get its run (with the default 1 s it can be spent, and nothing is decided).
    settings = Settings(
        reference={"execute": database_url, "max_rows": 1_000_000, "timeout_s": 60},
        limits={"max_record_cpu_s": 60},
    )
    pipeline = build_pipeline(settings, load_rules(None), build_backend(settings))
    execution = _execution(pipeline, "Singer names", many, "SELECT name FROM singer")
    assert execution.status == "generated_failed"
    assert execution.detail.startswith("too_large")


# A child process judges a record whose generated SQL needs 400 MB in one value, with 256 MB
# of address space left once its pipeline has run a first record (DuckDB reserves 0.8 GB of it
# at connect, so a fixed prlimit --as would measure the host's cores, not STEF).
_OUT_OF_MEMORY_CHILD = textwrap.dedent(
    """
    import json, re, resource, sys
    from stef.rules import load_rules
    from stef.service.wiring import build_backend, build_pipeline
    from stef.settings import Settings

    settings = Settings(reference={"execute": sys.argv[1]})
    pipeline = build_pipeline(settings, load_rules(None), build_backend(settings))

    def judge(sql):
        record = {"id": "r", "question": "How many singers?", "sql": sql,
                  "gold_sql": "SELECT COUNT(*) FROM singer"}
        return pipeline.process(json.dumps(record).encode(), {"line": 1})

    judge("SELECT COUNT(*) FROM singer")
    size = int(re.search(r"VmSize:\\s+(\\d+)", open("/proc/self/status").read()).group(1))
    resource.setrlimit(resource.RLIMIT_AS, ((size << 10) + (256 << 20), resource.RLIM_INFINITY))
    processed = judge(sys.argv[2])
    print(json.dumps({
        "error": processed.reason,
        "result": None if processed.result is None else json.loads(processed.result.to_json()),
    }))
    """
)
_HUGE_VALUE = {
    "sqlite": "SELECT length(randomblob(400000000))",
    "duckdb": "SELECT length(repeat('x', 400000000))",
}


@pytest.mark.parametrize("kind", sorted(BUILDERS))
def test_running_out_of_memory_leaves_the_structure_to_decide(kind: str, tmp_path: Path) -> None:
    build, ext = BUILDERS[kind]
    url = build(tmp_path / f"golden.{ext}")
    out = last_json_of_child(_OUT_OF_MEMORY_CHILD, url, _HUGE_VALUE[kind])
    # Not a dead letter (internal_error), not a finding on the query (generated_failed): the
    # host's memory ran out, and the structure's verdict stands.
    assert out["error"] is None
    ref = out["result"]["reference"]
    assert ref["verdict"] == "Incorrect" and ref["decided_by"] == "structure"
    assert ref["execution"]["status"] == "not_run"
    assert "out of memory" in ref["execution"]["detail"]


def test_a_large_value_of_the_team_database_is_read(tmp_path: Path) -> None:
    # The generated databases' 64 KiB a value is theirs: set on a team's database, a query
    # reading a stored value of 2 MB failed, and the gold SQL itself was Incorrect.
    path = tmp_path / "docs.db"
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE docs (id INTEGER, body TEXT)")
    conn.execute("INSERT INTO docs VALUES (1, ?), (2, 'short')", ("z" * 2_000_000,))
    conn.commit()
    conn.close()
    gold = "SELECT id FROM docs WHERE body LIKE '%z%'"
    execution = _execution(_pipeline(f"sqlite:///{path}"), "Which docs hold a z?", gold, gold)
    assert execution.status == "same"


def test_only_a_select_runs_and_the_file_is_never_written(database_url: str) -> None:
    result = _judge(
        _pipeline(database_url),
        "Remove the singers",
        "DELETE FROM singer",
        "SELECT name FROM singer",
    )
    assert result.reference is not None and result.reference.execution is not None
    assert result.reference.execution.status == "not_run"
    assert result.score == 0.0
    # Read-only even for a statement the safety check missed: the connection refuses writes.
    db: Database = open_database(database_url, timeout_s=1.0, max_rows=10)
    try:
        assert db.run("DELETE FROM singer").status == "error"
        assert len(db.run("SELECT * FROM singer").rows) == 3
    finally:
        db.close()


@pytest.mark.parametrize(
    "url",
    ["sqlite:///{tmp}/missing.db", "postgres://localhost/x", "sqlite:///{tmp}/notadb.db"],
)
def test_a_bad_database_fails_at_start(tmp_path: Path, url: str) -> None:
    (tmp_path / "notadb.db").write_text("hello, not a database\n" * 100)
    with pytest.raises((ConfigError, ValueError)):
        _pipeline(url.format(tmp=tmp_path))


def test_with_generation_off_and_no_database_nothing_runs() -> None:
    pipeline = Pipeline(
        load_rules(None), HeuristicJudge(), PipelineOptions(reference_generated=None)
    )
    result = _judge(pipeline, "Names", "SELECT name FROM singer", "SELECT name FROM singer")
    assert result.reference is not None and result.reference.execution is None
    assert result.reference.decided_by == "structure"
    assert "execution" not in json.loads(result.to_json())["reference"]


def test_reference_generate_false_turns_generated_databases_off() -> None:
    settings = Settings(reference={"generate": False})
    pipeline = build_pipeline(settings, load_rules(None), build_backend(settings))
    assert pipeline.options.reference_generated is None
    on = Settings()
    assert (
        build_pipeline(on, load_rules(None), build_backend(on)).options.reference_generated
        is not None
    )

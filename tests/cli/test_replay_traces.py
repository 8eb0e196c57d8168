"""``stef replay`` on trace files, through the same span mappings as the Kafka source: the
Collector's file exporter (OTLP JSON lines of real SDK traces), a Langfuse observations export in
Parquet (a few hundred rows) and a LangSmith runs export in JSON lines; each judged with the
scores of the equivalent flat records."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from stef.io.otlp.exports import ParquetRows
from stef.testing.fake_server import FakeLlmServer
from tests.conftest import ROOT, run_stef, write_jsonl
from tests.otel.traces import CASES, Case, otlp_json, spans_of, sql_tool_spans, traces_data

_REGIONS = ["EMEA", "APAC", "Americas", "Nordics", "Iberia"]


def _replay(path: Path, tmp_path: Path, *extra: str) -> tuple[int, list[dict[str, Any]], str]:
    out = tmp_path / f"{path.name}.results.jsonl"
    done = run_stef(
        "replay",
        str(path),
        "-o",
        str(out),
        "--no-progress",
        "--dead-letters",
        str(tmp_path / "dead.jsonl"),
        *extra,
        cwd=ROOT,
        timeout=300,
    )
    results = [json.loads(x) for x in out.read_text().splitlines()] if out.exists() else []
    return done.returncode, results, done.stderr


def _flat_scores(tmp_path: Path, pairs: list[tuple[str, str]]) -> dict[str, float]:
    flat = tmp_path / "flat.jsonl"
    flat.write_text("".join(json.dumps({"question": q, "sql": s}) + "\n" for q, s in pairs))
    status, results, err = _replay(flat, tmp_path)
    assert status == 0, err
    return {r["input"]["question"]: r["score"] for r in results}


def test_collector_file_exporter_lines(tmp_path: Path) -> None:
    with FakeLlmServer() as server:
        lines = [otlp_json(traces_data(spans_of(case, server))) for case in CASES]
    path = tmp_path / "traces.jsonl"
    path.write_bytes(b"\n".join(lines) + b"\n")
    status, results, err = _replay(path, tmp_path)
    assert status == 0, err
    expected = _flat_scores(tmp_path, [(c.question, c.sql) for c in CASES])
    assert {r["input"]["question"]: r["score"] for r in results} == expected
    assert all(r["app"] == "sales" for r in results)


def _pairs(n: int) -> list[tuple[str, str]]:
    return [
        (
            f"How many customers are in {_REGIONS[i % 5]} since {2000 + i}?",
            f"SELECT COUNT(*) FROM customers WHERE region = '{_REGIONS[i % 5]}' "
            f"AND since >= {2000 + i}",
        )
        for i in range(n)
    ]


def _langfuse_rows(pairs: list[tuple[str, str]]) -> list[dict[str, Any]]:
    rows = []
    for i, (question, sql) in enumerate(pairs):
        trace = f"{i + 1:032x}"
        root, gen, tool = f"{i:08x}aaaaaaaa", f"{i:08x}bbbbbbbb", f"{i:08x}cccccccc"
        base = {"trace_id": trace, "trace_name": "sales", "version": "2.1", "metadata": "{}"}
        rows += [
            {
                **base,
                "id": root,
                "parent_observation_id": None,
                "type": "SPAN",
                "name": "agent",
                "input": json.dumps({"question": question}),
                "output": None,
                "start_time": f"2026-11-01T10:{i % 60:02d}:00Z",
            },
            {
                **base,
                "id": gen,
                "parent_observation_id": root,
                "type": "GENERATION",
                "name": "chat",
                "input": json.dumps([{"role": "user", "content": question}]),
                "output": json.dumps({"role": "assistant", "content": f"```sql\n{sql}\n```"}),
                "start_time": f"2026-11-01T10:{i % 60:02d}:01Z",
            },
            {
                **base,
                "id": tool,
                "parent_observation_id": root,
                "type": "TOOL",
                "name": "run_sql",
                "input": json.dumps({"query": sql}),
                "output": "[[3]]",
                "start_time": f"2026-11-01T10:{i % 60:02d}:02Z",
            },
        ]
    return rows


def test_langfuse_parquet_export_of_hundreds_of_rows(tmp_path: Path) -> None:
    duckdb = pytest.importorskip("duckdb")
    pairs = _pairs(100)
    rows = tmp_path / "rows.jsonl"
    write_jsonl(rows, _langfuse_rows(pairs))
    parquet = tmp_path / "observations.parquet"
    with duckdb.connect() as conn:
        conn.execute(
            f"COPY (SELECT * FROM read_json('{rows}', format='newline_delimited', "
            "columns={trace_id: 'VARCHAR', trace_name: 'VARCHAR', version: 'VARCHAR', "
            "metadata: 'VARCHAR', id: 'VARCHAR', parent_observation_id: 'VARCHAR', "
            "type: 'VARCHAR', name: 'VARCHAR', input: 'VARCHAR', output: 'VARCHAR', "
            f"start_time: 'TIMESTAMP'}})) TO '{parquet}' (FORMAT parquet)"
        )
    status, results, err = _replay(parquet, tmp_path)
    assert status == 0, err
    assert len(results) == 100
    expected = _flat_scores(tmp_path, pairs)
    assert {r["input"]["question"]: r["score"] for r in results} == expected
    first = next(r for r in results if r["input"]["question"] == pairs[0][0])
    assert first["id"] == f"{1:032x}:{0:08x}cccccccc"  # the trace and its SQL tool span
    assert (first["app"], first["agent_version"]) == ("sales", "2.1")


def test_a_parquet_export_asked_for_no_row_reads_none(tmp_path: Path) -> None:
    """A full window asks the source for nothing (poll(0)); the OpenTelemetry source passes
    that on. Before, a Parquet export read a row on each such poll, so the traces waiting grew
    without bound behind a slow judge."""
    duckdb = pytest.importorskip("duckdb")
    parquet = tmp_path / "rows.parquet"
    with duckdb.connect() as conn:
        conn.execute(f"COPY (SELECT range AS n FROM range(5)) TO '{parquet}' (FORMAT parquet)")
    rows = ParquetRows(str(parquet))
    rows.start()
    assert [rows.poll(0, 0.0) for _ in range(3)] == [[], [], []]
    assert len(rows.poll(2, 0.0)) == 2


def test_a_parquet_export_closed_before_its_end_is_not_exhausted(tmp_path: Path) -> None:
    """A replay stopped by SIGTERM closes its source: closing marked the rows read, and the
    replay exited 0 with nothing written (stopped while DuckDB sorted a large file)."""
    duckdb = pytest.importorskip("duckdb")
    parquet = tmp_path / "rows.parquet"
    with duckdb.connect() as conn:
        conn.execute(f"COPY (SELECT range AS n FROM range(5)) TO '{parquet}' (FORMAT parquet)")
    for read in (0, 2):
        rows = ParquetRows(str(parquet))
        rows.start()
        assert len(rows.poll(read, 0.0)) == read
        rows.close()
        assert not rows.exhausted and rows.poll(5, 0.0) == []
    rows = ParquetRows(str(parquet))
    rows.start()
    assert len(rows.poll(10, 0.0)) == 5 and rows.poll(10, 0.0) == [] and rows.exhausted
    rows.close()
    assert rows.exhausted


def test_a_parquet_row_past_the_size_limit_is_a_dead_letter_never_fetched(tmp_path: Path) -> None:
    """A row whose values pass the limit is measured in DuckDB and dead-lettered as too large,
    as a JSON lines export's line is; its trace is judged without it (the SQL is in the model's
    reply too). Before, the whole row (a 700 MB cell: 2.9 GB resident) was fetched into Python."""
    duckdb = pytest.importorskip("duckdb")
    pairs = _pairs(3)
    rows = _langfuse_rows(pairs)
    rows[5]["output"] = "x" * (17 * 1024 * 1024)  # the second trace's SQL tool span
    jsonl = tmp_path / "rows.jsonl"
    write_jsonl(jsonl, rows)
    parquet = tmp_path / "observations.parquet"
    with duckdb.connect() as conn:
        conn.execute(
            f"COPY (SELECT * FROM read_json('{jsonl}', format='newline_delimited', "
            "maximum_object_size=33554432)) TO ? (FORMAT parquet)",
            [str(parquet)],
        )
    status, results, err = _replay(parquet, tmp_path)
    assert status == 0, err
    assert sorted(r["input"]["question"] for r in results) == sorted(q for q, _ in pairs)
    (big,) = [json.loads(x) for x in (tmp_path / "dead.jsonl").read_text().splitlines()]
    assert big["reason"] == "too_large"
    size, limit = (int(n) for n in re.findall(r"\d+", big["error"]))
    assert size > 17 * 1024 * 1024 and limit == 16 * 1024 * 1024  # the export's, not a record's
    assert big["payload"].startswith("{") and len(big["payload"]) <= 4096
    assert big["source"]["row"] == 6


def test_parquet_rows_measure_a_row_before_fetching_it(tmp_path: Path) -> None:
    duckdb = pytest.importorskip("duckdb")
    parquet = tmp_path / "rows.parquet"
    with duckdb.connect() as conn:
        conn.execute(
            "COPY (SELECT range AS n, CASE WHEN range = 1 THEN repeat('y', 5000) ELSE 'z' END "
            'AS "odd ""name""", \'w\' AS __stef_json0 FROM range(3)) '
            f"TO '{parquet}' (FORMAT parquet)"
        )
    rows = ParquetRows(str(parquet), max_row_bytes=1000)
    rows.start()
    got = rows.poll(10, 0.0)
    assert [e.oversized is None for e in got] == [True, False, True]
    # A column named as the query's own JSON column is a column like any other.
    assert json.loads(got[0].payload) == {"n": 0, 'odd "name"': "z", "__stef_json0": "w"}
    big = got[1].oversized
    assert big is not None and big.size > 5000 and len(big.sha256) == 64
    assert got[1].payload.startswith(b'{"n":1,') and len(got[1].payload) <= 4096
    assert [e.position["row"] for e in got] == [1, 2, 3]


def test_a_parquet_source_of_stef_run_is_refused_at_start(tmp_path: Path) -> None:
    """Read as JSON lines, a Parquet export came out as a not_utf8 dead letter per chunk."""
    duckdb = pytest.importorskip("duckdb")
    parquet = tmp_path / "observations.parquet"
    with duckdb.connect() as conn:
        conn.execute(f"COPY (SELECT 1 AS a) TO '{parquet}' (FORMAT parquet)")
    done = run_stef(
        "run", "--source", f"file:{parquet}", "--results", f"file:{tmp_path / 'r.jsonl'}",
        "--dead-letters", f"file:{tmp_path / 'd.jsonl'}", "--metrics-port", "off",
        cwd=ROOT, timeout=120,
    )  # fmt: skip
    assert done.returncode == 2 and "stef replay" in done.stderr, done.stderr
    assert "Traceback" not in done.stderr and not (tmp_path / "d.jsonl").exists()


def test_langsmith_runs_jsonl_and_a_trace_without_sql(tmp_path: Path) -> None:
    pairs = _pairs(3)
    runs = []
    for i, (question, sql) in enumerate(pairs):
        trace = f"00000000-0000-0000-0000-{i + 1:012x}"
        runs.append(
            {
                "id": trace,
                "trace_id": trace,
                "parent_run_id": None,
                "run_type": "chain",
                "name": "AgentExecutor",
                "inputs": {"input": question},
                "outputs": {},
                "session_name": "sales",
            }
        )
        if i < 2:
            runs.append(
                {
                    "id": f"11111111-0000-0000-0000-{i:012x}",
                    "trace_id": trace,
                    "parent_run_id": trace,
                    "run_type": "tool",
                    "name": "sql_db_query",
                    "inputs": {"input": sql},
                    "outputs": {"output": "[(3,)]"},
                }
            )
    path = tmp_path / "runs.jsonl"
    write_jsonl(path, runs)
    status, results, err = _replay(path, tmp_path)
    assert status == 0, err
    letters = [json.loads(x) for x in (tmp_path / "dead.jsonl").read_text().splitlines()]
    assert [(d["reason"], "sql" in d["error"]) for d in letters] == [("missing_field", True)]
    expected = _flat_scores(tmp_path, pairs[:2])
    assert {r["input"]["question"]: r["score"] for r in results} == expected


def test_a_parquet_file_of_no_known_export_is_one_line_and_exit_2(tmp_path: Path) -> None:
    duckdb = pytest.importorskip("duckdb")
    path = tmp_path / "other.parquet"
    with duckdb.connect() as conn:
        conn.execute(f"COPY (SELECT 1 AS a) TO '{path}' (FORMAT parquet)")
    status, _, err = _replay(path, tmp_path)
    assert status == 2 and "Traceback" not in err and "Langfuse" in err


def test_a_first_line_nested_past_the_parser_is_read_as_records(tmp_path: Path) -> None:
    """The format is guessed from the first line: one nested past the JSON parser's depth
    stopped replay of the whole file before any line was read."""
    path = tmp_path / "deep.jsonl"
    record = {"question": "How many customers?", "sql": "SELECT COUNT(*) FROM customers"}
    path.write_text('{"a":' + "[" * 5000 + "\n" + json.dumps(record) + "\n")
    status, results, err = _replay(path, tmp_path)
    assert status == 0, err
    assert [r["input"]["question"] for r in results] == ["How many customers?"]
    dead = [json.loads(x) for x in (tmp_path / "dead.jsonl").read_text().splitlines()]
    assert [d["reason"] for d in dead] == ["not_json"]


def test_an_export_row_nested_past_the_parser_is_a_dead_letter(tmp_path: Path) -> None:
    rows = _langfuse_rows(_pairs(1))
    path = tmp_path / "langfuse.jsonl"
    nested = '{"trace_id": "t9", "id": "o9", "parent_observation_id": null, "input": '
    path.write_text("".join(json.dumps(r) + "\n" for r in rows) + nested + "[" * 5000 + "\n")
    status, results, err = _replay(path, tmp_path)
    assert status == 0, err
    assert len(results) == 1
    dead = [json.loads(x) for x in (tmp_path / "dead.jsonl").read_text().splitlines()]
    assert [d["reason"] for d in dead] == ["not_json"]


def test_an_export_trace_id_of_any_text_is_judged_and_so_is_the_rest(tmp_path: Path) -> None:
    """A Langfuse trace id is text, not hex: ``trace-é`` stopped replay with a
    UnicodeEncodeError (the trace's key was its id in ASCII), exit 1, the good trace before it
    lost too."""
    rows = _langfuse_rows(_pairs(2))
    for row in rows[3:]:
        row["trace_id"] = "trace-é"
    path = tmp_path / "langfuse.jsonl"
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows))
    status, results, err = _replay(path, tmp_path)
    assert status == 0, err
    assert _flat_scores(tmp_path, _pairs(2)) == {
        r["input"]["question"]: r["score"] for r in results
    }


def test_export_rows_nested_about_as_deep_as_json_reads_are_dead_letters(tmp_path: Path) -> None:
    """An ``input`` about a thousand lists deep is read by ``json.loads`` and not written back by
    ``json.dumps`` a few levels deeper, in the trace's dead letter: RecursionError out of the
    source, exit 1, nothing written. Which depth does it depends on the stack: a range."""
    rows = _langfuse_rows(_pairs(1))
    deep = [
        json.dumps({"trace_id": f"deep{n}", "id": f"o{n}", "parent_observation_id": None})[:-1]
        + ', "input": '
        + "[" * n
        + "]" * n
        + "}"
        for n in range(940, 1000, 4)
    ]
    path = tmp_path / "langfuse.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows) + "\n".join(deep) + "\n")
    status, results, err = _replay(path, tmp_path)
    assert status == 0, err
    assert "Traceback" not in err
    assert [r["input"]["question"] for r in results] == [_pairs(1)[0][0]]
    dead = [json.loads(x) for x in (tmp_path / "dead.jsonl").read_text().splitlines()]
    assert len(dead) == len(deep)
    assert {d["reason"] for d in dead} <= {"not_json", "missing_field"}


_RECORD = {"question": "How many customers are in EMEA?", "sql": "SELECT COUNT(*) FROM customers"}


@pytest.mark.parametrize(
    "extra",
    [
        {"resourceSpans": []},  # read as an OTLP file: every line after it was dropped
        {"trace_id": "t1", "parent_observation_id": None},  # as Langfuse: none judged
        {"trace_id": "t1", "run_type": "chain"},  # as LangSmith: five merged into one
    ],
)
def test_records_carrying_trace_keys_are_read_as_records(
    tmp_path: Path, extra: dict[str, Any]
) -> None:
    path = tmp_path / "records.jsonl"
    path.write_text(
        "".join(json.dumps({**_RECORD, "id": f"r{i}", **extra}) + "\n" for i in range(5))
    )
    status, results, err = _replay(path, tmp_path)
    assert status == 0, err
    assert sorted(r["id"] for r in results) == [f"r{i}" for i in range(5)]


def test_a_long_first_line_is_otlp_only_if_it_opens_as_otlp(tmp_path: Path) -> None:
    """A first line past 1 MiB is read by its opening: OTLP named inside a record's metadata
    made the whole file OTLP, and every record was dropped."""
    path = tmp_path / "records.jsonl"
    long = {"id": "r0", "metadata": {"otel": {"resourceSpans": []}}, **_RECORD}
    lines = [json.dumps({**long, "blob": "x" * 1_100_000})]
    lines += [json.dumps({**_RECORD, "id": f"r{i}"}) for i in range(1, 5)]
    path.write_text("\n".join(lines) + "\n")
    status, results, err = _replay(path, tmp_path)
    assert status == 0, err
    assert sorted(r["id"] for r in results) == [f"r{i}" for i in range(1, 5)]
    dead = [json.loads(x) for x in (tmp_path / "dead.jsonl").read_text().splitlines()]
    assert [d["reason"] for d in dead] == ["too_large"]


def test_a_line_that_is_not_otlp_in_a_trace_file_is_a_dead_letter(tmp_path: Path) -> None:
    """Every line comes out: the traces as results, a record or other JSON among them as
    ``not_otlp`` (it read as an empty message, and was lost)."""
    with FakeLlmServer() as server:
        lines = [otlp_json(traces_data(spans_of(case, server))) for case in CASES[:2]]
    others = [json.dumps(_RECORD).encode(), b"{}", b"[]"]
    path = tmp_path / "traces.jsonl"
    path.write_bytes(b"\n".join([lines[0], *others, lines[1]]) + b"\n")
    status, results, err = _replay(path, tmp_path)
    assert status == 0, err
    assert len(results) == 2
    dead = [json.loads(x) for x in (tmp_path / "dead.jsonl").read_text().splitlines()]
    assert sorted(d["source"]["line"] for d in dead) == [2, 3, 4]
    assert {d["reason"] for d in dead} == {"not_otlp"}
    # Each said on stderr with its line, as a records file's are (they were never said).
    for line in (2, 3, 4):
        assert f"{path}:{line}: invalid input (not_otlp)" in err


def test_a_trace_whose_sql_holds_a_lone_surrogate_is_a_dead_letter(tmp_path: Path) -> None:
    """A tool span's JSON input ``{"query": "SELECT \\ud800 1"}`` is valid JSON in valid
    UTF-8, and decodes to text no UTF-8 can carry. Before: UnicodeEncodeError out of the
    source, exit 1 and no output at all, the good trace before it lost too (under stef run, a
    crash loop that never committed the partition)."""
    good = Case("How many orders in 2001?", "SELECT COUNT(*) FROM orders WHERE year = 2001", "")
    bad = Case("How many orders?", "SELECT \ud800 1", "")
    path = tmp_path / "traces.jsonl"
    path.write_bytes(
        b"".join(otlp_json(traces_data(sql_tool_spans(c))) + b"\n" for c in (good, bad))
    )
    status, results, err = _replay(path, tmp_path)
    assert status == 0, err
    assert [r["input"]["question"] for r in results] == [good.question]
    dead = [json.loads(x) for x in (tmp_path / "dead.jsonl").read_text().splitlines()]
    assert [d["reason"] for d in dead] == ["not_utf8"]

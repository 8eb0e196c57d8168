"""`make bench`: throughput, memory and prompt-size figures, each beside a same-run baseline.

Writes bench/report.json and bench/report.md. Benchmarks are not tests: no number fails the build.
Every throughput is reported with the baseline measured in the same process run, and their ratio,
because the machines are shared and absolute numbers drift.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import sqlglot

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench import clear_caches  # noqa: E402
from bench.against import AgainstError, resolve, run_against, side_by_side  # noqa: E402
from stef.judges.heuristic.judge import HeuristicJudge  # noqa: E402
from stef.pipeline import Pipeline, Processed  # noqa: E402
from stef.rules import load_rules  # noqa: E402

# The dev set lives outside the repository (/work/shared/data); BENCH_CORPUS points elsewhere.
DEV_SET = Path(
    os.environ.get("BENCH_CORPUS", str(ROOT.parent / "shared" / "data" / "judge-dev.jsonl"))
)
SAMPLE_LOG = ROOT / "examples" / "agent_log.jsonl"
# Chunks of the two sides of a ratio alternate in one window, so drift hits both alike.
CHUNK = 25
# Passes over the corpus, caches emptied before each: every record is judged cold each time.
PASSES = 3


class CorpusMissing(SystemExit):
    """The dev set is not there: the figures would silently shift to a 400-record corpus."""


def load_corpus() -> list[dict[str, Any]]:
    """The bench corpus: the dev set plus the valid records of the sample log.

    Raises:
        CorpusMissing: the dev set is missing (set BENCH_CORPUS to its path).
    """
    if not DEV_SET.exists():
        raise CorpusMissing(
            f"bench: the dev corpus {DEV_SET} is missing; figures on another corpus are not "
            "comparable (set BENCH_CORPUS=/path/to/judge-dev.jsonl)"
        )
    records: list[dict[str, Any]] = []
    for path, dialect in ((DEV_SET, "sqlite"), (SAMPLE_LOG, None)):
        for line in path.read_text(encoding="utf-8").splitlines():
            try:
                obj = json.loads(line)
            except json.JSONDecodeError:
                continue
            if not isinstance(obj, dict) or not isinstance(obj.get("sql"), str):
                continue
            if not isinstance(obj.get("question"), str) or len(obj["sql"]) > 50_000:
                continue
            obj.pop("gold_sql", None)
            if dialect and "dialect" not in obj:
                obj["dialect"] = dialect
            records.append(obj)
    return records


def interleaved(
    sides: dict[str, Callable[[Any], object]], items: list[Any], chunk: int = CHUNK
) -> dict[str, list[float]]:
    """Seconds each side spends on each item, the sides alternating chunk by chunk in one window
    (the order of the sides flips every chunk)."""
    times: dict[str, list[float]] = {name: [] for name in sides}
    order = list(sides)
    for start in range(0, len(items), chunk):
        part = items[start : start + chunk]
        for name in order:
            fn, out = sides[name], times[name]
            for item in part:
                t0 = time.perf_counter()
                fn(item)
                out.append(time.perf_counter() - t0)
        order.reverse()
    return times


def _span(low: float, high: float) -> str:
    if high == float("inf"):
        return f"{low:.0f}+"
    return f"{low:.0f}" if high - 1 == low else f"{low:.0f}-{high - 1:.0f}"


def _bucket_table(
    rows: list[tuple[float, float]], edges: list[float], label: str
) -> list[dict[str, Any]]:
    """Median and p95 milliseconds per record for each bucket of ``rows`` (value, seconds)."""
    table = []
    bounds = [*edges, float("inf")]
    low = 0.0
    for high in bounds:
        secs = sorted(t for v, t in rows if low <= v < high)
        if secs:
            table.append(
                {
                    label: _span(low, high),
                    "records": len(secs),
                    "median_ms": round(1000 * statistics.median(secs), 2),
                    "p95_ms": round(1000 * secs[min(len(secs) - 1, int(0.95 * len(secs)))], 2),
                }
            )
        low = high
    return table


def _synthetic(kind: str, n: int) -> dict[str, Any]:
    """A record whose SQL grows with ``n``: ``n`` AND-ed predicates, a chain of ``n`` CTEs, or
    ``n`` nested subqueries (the shapes whose cost grows fastest)."""
    question = "How many orders were shipped to EMEA in 2023 with status open?"
    if kind == "predicates":
        where = " AND ".join(f"c{i} = 'v{i}'" for i in range(n))
        sql = f"SELECT COUNT(*) FROM orders WHERE {where}"
    elif kind == "cte_chain":
        ctes = ["t0 AS (SELECT id, region, amount FROM orders WHERE year = 2023)"]
        ctes += [
            f"t{i} AS (SELECT id, region, amount FROM t{i - 1} WHERE amount > {i})"
            for i in range(1, n)
        ]
        sql = f"WITH {', '.join(ctes)} SELECT COUNT(*) FROM t{n - 1} WHERE region = 'EMEA'"
    else:
        sql = "SELECT id FROM orders WHERE region = 'EMEA'"
        for i in range(n):
            sql = f"SELECT id FROM ({sql}) AS s{i} WHERE id > {i}"
    return {"id": f"scale-{kind}-{n}", "app": "sales", "question": question, "sql": sql}


def bench_scale(pipeline: Pipeline) -> list[dict[str, Any]]:
    """Time per record (best of three, caches emptied before each) of synthetic records."""
    rows = []
    for kind, sizes in (
        ("predicates", (1, 4, 16, 64, 256)),
        ("cte_chain", (1, 4, 16, 64)),
        ("nested", (1, 4, 16, 64)),
    ):
        for n in sizes:
            record = _synthetic(kind, n)
            payload = json.dumps(record).encode()
            best = float("inf")
            for _ in range(3):
                clear_caches()
                t0 = time.perf_counter()
                processed = pipeline.process(payload, {"line": 0})
                best = min(best, time.perf_counter() - t0)
            result = processed.result
            rows.append(
                {
                    "shape": kind,
                    "n": n,
                    "sql_chars": len(record["sql"]),
                    "predicates": len(result.sql_spec.filters)
                    if result is not None and result.sql_spec is not None
                    else "-",
                    "ms_per_record": round(1000 * best, 2),
                }
            )
    return rows


def _cold_pass(
    parse: Callable[[int], None], stef: Callable[[int], None], items: list[int]
) -> dict[str, list[float]]:
    clear_caches()
    return interleaved({"parse": parse, "stef": stef}, items)


def bench_deterministic(corpus: list[dict[str, Any]]) -> dict[str, Any]:
    """sqlglot parse of the same SQL in the same dialect vs the whole record path (bytes in:
    validation, analysis, the heuristic judge, the result's JSON out), interleaved in chunks;
    every pass starts with empty caches, so each record is judged cold. Also the time per
    record (best of the passes) against SQL size and number of predicates."""
    rules = load_rules(ROOT / "rules")
    pipeline = Pipeline(lambda: rules, HeuristicJudge())
    payloads = [json.dumps(r).encode() for r in corpus]
    # The dialect the pipeline starts with: the record's, else its app's.
    dialects = [r.get("dialect") or rules.for_app(r.get("app")).dialect for r in corpus]
    items = list(range(len(corpus)))

    def parse(i: int) -> None:
        with contextlib.suppress(sqlglot.errors.SqlglotError, ValueError, RecursionError):
            sqlglot.parse(corpus[i]["sql"], read=dialects[i])

    outputs: dict[int, Processed] = {}

    def stef(i: int) -> None:
        outputs[i] = pipeline.process(payloads[i], {"line": i})

    for i in items[:5]:  # imports and first-use setup, outside the window
        parse(i)
        stef(i)
    passes = [_cold_pass(parse, stef, items) for _ in range(PASSES)]
    parse_s = sum(sum(p["parse"]) for p in passes)
    stef_s = sum(sum(p["stef"]) for p in passes)
    per_record = [min(ts) for ts in zip(*(p["stef"] for p in passes), strict=True)]
    scale = []
    for i, t in zip(items, per_record, strict=True):
        result = outputs[i].result
        preds = len(result.sql_spec.filters) if result and result.sql_spec else 0
        scale.append((len(corpus[i]["sql"]), preds, t))
    return {
        "records": len(items),
        "passes": PASSES,
        "parse_only_per_s": round(PASSES * len(items) / parse_s, 1),
        "deterministic_per_s": round(PASSES * len(items) / stef_s, 1),
        "deterministic_vs_parse_ratio": round(parse_s / stef_s, 3),
        "scale_by_sql_chars": _bucket_table(
            [(c, t) for c, _, t in scale], [200, 500, 1000, 2000, 5000, 10000], "sql_chars"
        ),
        "scale_by_predicates": _bucket_table(
            [(p, t) for _, p, t in scale], [1, 2, 3, 5, 9, 17], "predicates"
        ),
        "scale_synthetic": bench_scale(pipeline),
    }


SECTIONS: list[tuple[str, Callable[[list[dict[str, Any]], argparse.Namespace], dict[str, Any]]]] = [
    ("deterministic", lambda corpus, args: bench_deterministic(corpus)),
]


def _register_optional_sections() -> None:
    """Sections that need the LLM fake server, the Kafka broker or the service (bench/*.py)."""
    for name, module, function in (
        ("llm", "bench.llm", "run"),
        ("prompt", "bench.prompt", "run"),
        ("kafka", "bench.kafka", "run"),
        ("memory", "bench.kafka", "run_memory"),
        ("memory_inflight", "bench.kafka", "run_memory_inflight"),
        ("scaleout", "bench.scaleout", "run"),
        ("otlp", "bench.otlp", "run"),
        ("instructions", "bench.instructions", "run"),
    ):
        try:
            mod = __import__(module, fromlist=[function])
        except ImportError as exc:
            print(f"bench: section {name} unavailable: {exc}", file=sys.stderr)
            continue
        SECTIONS.append((name, getattr(mod, function)))


def sqlglot_build() -> str:
    """Which sqlglot parses here: its compiled modules (``sqlglotc``, the ``fast`` extra) or pure
    Python. The parse baseline is about 4 times faster compiled and the record path about a
    quarter, so deterministic / parse reads far lower with it: the report says which."""
    import sqlglot.parser

    return "pure Python" if str(sqlglot.parser.__file__).endswith(".py") else "compiled (sqlglotc)"


def _markdown(report: dict[str, Any]) -> str:
    build = f", {report['sqlglot_build']}" if report.get("sqlglot_build") else ""
    lines = [
        "# STEF benchmark report",
        "",
        f"Run at {report['run_at']} on {report['machine']} (Python {report['python']}, "
        f"sqlglot {report['sqlglot']}{build}). Corpus: {report['corpus_records']} records "
        "(judge-dev set plus the sample log). Every throughput sits beside a baseline measured "
        "in the same window (the two sides alternate in chunks), and the ratio is the number "
        "to compare across machines.",
        "",
        "| figure | value |",
        "| --- | --- |",
    ]
    tables: list[tuple[str, list[dict[str, Any]]]] = []
    for section, figures in report["sections"].items():
        for key, value in figures.items():
            if isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
                tables.append((f"{section}.{key}", value))
            else:
                lines.append(f"| {section}.{key} | {value} |")
    for title, rows in tables:
        columns = list(rows[0])
        lines += ["", f"## {title}", "", "| " + " | ".join(columns) + " |"]
        lines.append("| " + " | ".join("---" for _ in columns) + " |")
        lines += ["| " + " | ".join(str(r.get(c, "")) for c in columns) + " |" for r in rows]
    if report.get("against"):
        lines += _against_markdown(report["against"], report["comparison"])
    if report.get("notes"):
        lines += ["", "## Notes", ""] + [f"- {n}" for n in report["notes"]]
    return "\n".join(lines) + "\n"


def _against_markdown(against: dict[str, Any], rows: list[dict[str, Any]]) -> list[str]:
    lines = ["", f"## against {against['ref']} ({against['commit'][:12]})", ""]
    lines += [
        "The same sections on that commit's code (git archive in a temporary folder), "
        "same machine, same run; each side's ratio is against its own baseline.",
        "",
    ]
    if rows:
        columns = list(rows[0])
        lines += ["| " + " | ".join(columns) + " |"]
        lines.append("| " + " | ".join("---" for _ in columns) + " |")
        lines += ["| " + " | ".join(str(r[c]) for c in columns) + " |" for r in rows]
    for key in _ROUNDS:
        if against.get(key):
            lines += _rounds_markdown(key, against[key])
    if against.get("instructions"):
        lines += _instructions_markdown(against["instructions"])
    return lines


def _instructions_markdown(counted: dict[str, Any]) -> list[str]:
    """Both sides' instruction counts (bench/instructions.py), figure by figure."""
    if "error" in counted:
        title = "### instructions, both sides counted: not measured"
        return ["", title, "", "```", counted["error"].replace("`", "'"), "```"]
    names = list(counted["sides"])
    lines = ["", "### instructions, both sides counted (callgrind)", ""]
    lines += [
        "Instructions a record, one record at a time, under valgrind's callgrind; the same "
        "code in two folders counts within half a percent, so a change of a few percent "
        "shows. Above 1 in the last column: this tree costs more instructions a record.",
        "",
        "| figure | " + " | ".join(names) + " | this tree / ref |",
        "| --- |" + " --- |" * (len(names) + 1),
    ]
    ratios = counted["first_over_second"]
    for key in counted["sides"][names[0]]:
        cells = [str(counted["sides"][n].get(key, "-")) for n in names]
        lines.append(f"| {key} | " + " | ".join(cells) + f" | {ratios.get(key, '-')} |")
    return lines


def _deterministic_intro(paired: dict[str, Any]) -> str:
    return (
        "Each round runs both sides in fresh processes, the order flipping every round: the "
        "parse of each chunk of 50 records and the record path of the same chunk, in this "
        "thread's CPU time. Medians of the rounds."
    )


def _llm_intro(paired: dict[str, Any]) -> str:
    return (
        "Each round runs both sides' LLM path in fresh processes, the order flipping every "
        f"round: {paired['records']} records at {paired['concurrency']} in flight against a fake "
        f"endpoint ({paired['latency_ms']:g} ms, one a round), in the process's CPU time (every "
        "thread); "
        "every record evaluated by the endpoint in every round, else not measured. Medians of "
        "the rounds; lower is cheaper."
    )


# The paired rounds of a --against run (bench/paired.py): report key -> section, introduction,
# each side's columns (title, figure; the last is every round's), the two sides' comparison.
_ROUNDS: dict[str, tuple[str, Callable[[dict[str, Any]], str], tuple[tuple[str, str], ...], str]]
_ROUNDS = {
    "paired": (
        "deterministic",
        _deterministic_intro,
        (
            ("deterministic / parse (CPU)", "deterministic_vs_parse_cpu_ratio"),
            ("record path CPU ms", "record_path_cpu_ms"),
            ("by round", "ratio_by_round"),
        ),
        "first_over_second",
    ),
    "paired_llm": (
        "llm",
        _llm_intro,
        (
            ("CPU ms a record", "cpu_ms_per_record"),
            ("records/s", "records_per_s"),
            ("CPU ms by round", "cpu_ms_by_round"),
        ),
        "cpu_first_over_second",
    ),
}


def _rounds_markdown(key: str, paired: dict[str, Any]) -> list[str]:
    """One paired section: each side's medians, then every round's figure (the last column)."""
    section, intro, columns, compared = _ROUNDS[key]
    if "error" in paired:
        title = f"### {section}, both sides in alternating rounds: not measured"
        return ["", title, "", "```", paired["error"].replace("`", "'"), "```"]
    title = f"### {section}, both sides in {paired['rounds']} alternating rounds (CPU time)"
    lines = ["", title, "", intro(paired), ""]
    lines += ["| side | " + " | ".join(c for c, _ in columns) + " |"]
    lines += ["| --- |" + " --- |" * len(columns)]
    for side, figures in paired["sides"].items():
        *medians, by_round = (figures[f] for _, f in columns)
        cells = [*map(str, medians), ", ".join(map(str, by_round))]
        lines.append(f"| {side} | " + " | ".join(cells) + " |")
    return [*lines, "", f"this tree / ref, {columns[0][0]}: {paired[compared]}"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", default=str(ROOT / "bench"), help="report directory")
    parser.add_argument("--only", action="append", help="run only these sections")
    parser.add_argument("--llm-latency-ms", type=float, default=200.0)
    parser.add_argument("--llm-concurrency", type=int, default=64)
    parser.add_argument("--backlog", type=int, default=100_000)
    parser.add_argument(
        "--against",
        metavar="REF",
        help="also run the llm and deterministic sections on commit REF's code (exported to a "
        "temporary folder) in this run, and report both sides",
    )
    args = parser.parse_args(argv)
    _register_optional_sections()
    corpus = load_corpus()
    try:  # a REF that is not a commit is said before an hour of benchmarks, not after
        against = resolve(ROOT, args.against) if args.against else None
    except AgainstError as exc:
        print(exc.message, file=sys.stderr)
        return 2
    report: dict[str, Any] = {
        "run_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "machine": f"{platform.machine()} {os.cpu_count()} cpus",
        "python": platform.python_version(),
        "sqlglot": sqlglot.__version__,
        "sqlglot_build": sqlglot_build(),
        "corpus_records": len(corpus),
        "sections": {},
        "notes": [],
    }
    for name, fn in SECTIONS:
        if args.only and name not in args.only:
            continue
        print(f"bench: {name} ...", file=sys.stderr, flush=True)
        try:
            report["sections"][name] = fn(corpus, args)
        except Exception as exc:
            report["sections"][name] = {"error": f"{type(exc).__name__}: {exc}"}
    if args.against and against:
        try:
            ran = [name for name, _ in SECTIONS if not args.only or name in args.only]
            report["against"] = run_against(
                ROOT,
                args.against,
                against,
                ran,
                args,
                DEV_SET.resolve(),
                corpus,
                report["sections"],
            )
        except AgainstError as exc:
            print(exc.message, file=sys.stderr)
            return 2
        report["comparison"] = side_by_side(report["sections"], report["against"])
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "report.json").write_text(json.dumps(report, indent=2) + "\n")
    (out / "report.md").write_text(_markdown(report))
    print(_markdown(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())

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
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import sqlglot

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from stef.judges.heuristic.judge import HeuristicJudge  # noqa: E402
from stef.pipeline import Pipeline  # noqa: E402
from stef.rules import load_rules  # noqa: E402
from stef.stages.validate import validate  # noqa: E402

DEV_SET = ROOT.parent / "shared" / "data" / "judge-dev.jsonl"
SAMPLE_LOG = ROOT / "examples" / "agent_log.jsonl"


def load_corpus() -> list[dict[str, Any]]:
    """The bench corpus: the dev set (when present) plus the valid records of the sample log."""
    records: list[dict[str, Any]] = []
    for path, dialect in ((DEV_SET, "sqlite"), (SAMPLE_LOG, None)):
        if not path.exists():
            continue
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


def _rate(fn: Callable[[], int], min_seconds: float = 2.0) -> float:
    """Items per second of ``fn`` (which returns how many items it processed), best of repeats."""
    best = 0.0
    spent = 0.0
    rounds = 0
    while spent < min_seconds or rounds < 2:
        t0 = time.perf_counter()
        n = fn()
        dt = time.perf_counter() - t0
        spent += dt
        rounds += 1
        best = max(best, n / dt)
    return best


def bench_deterministic(corpus: list[dict[str, Any]]) -> dict[str, Any]:
    """Bare sqlglot parse vs the full pipeline with the heuristic judge, same records."""
    rules = load_rules(ROOT / "rules")
    pipeline = Pipeline(rules, HeuristicJudge())
    records = [validate(r) for r in corpus]

    def parse_only() -> int:
        for r in records:
            with contextlib.suppress(sqlglot.errors.SqlglotError, ValueError, RecursionError):
                sqlglot.parse(r.sql, read=r.dialect)
        return len(records)

    def deterministic() -> int:
        for r in records:
            pipeline.judge_record(r)
        return len(records)

    parse_rate = _rate(parse_only)
    det_rate = _rate(deterministic)
    return {
        "records": len(records),
        "parse_only_per_s": round(parse_rate, 1),
        "deterministic_per_s": round(det_rate, 1),
        "deterministic_vs_parse_ratio": round(det_rate / parse_rate, 3),
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
        ("scaleout", "bench.scaleout", "run"),
    ):
        try:
            mod = __import__(module, fromlist=[function])
        except ImportError as exc:
            print(f"bench: section {name} unavailable: {exc}", file=sys.stderr)
            continue
        SECTIONS.append((name, getattr(mod, function)))


def _markdown(report: dict[str, Any]) -> str:
    lines = [
        "# STEF benchmark report",
        "",
        f"Run at {report['run_at']} on {report['machine']} (Python {report['python']}, "
        f"sqlglot {report['sqlglot']}). Corpus: {report['corpus_records']} records "
        "(judge-dev set plus the sample log). Throughputs are best-of-repeats; every figure "
        "sits beside a baseline measured in the same run, and the ratio is the number to "
        "compare across machines.",
        "",
        "| figure | value |",
        "| --- | --- |",
    ]
    for section, figures in report["sections"].items():
        for key, value in figures.items():
            lines.append(f"| {section}.{key} | {value} |")
    if report.get("notes"):
        lines += ["", "## Notes", ""] + [f"- {n}" for n in report["notes"]]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", default=str(ROOT / "bench"), help="report directory")
    parser.add_argument("--only", action="append", help="run only these sections")
    parser.add_argument("--llm-latency-ms", type=float, default=200.0)
    parser.add_argument("--llm-concurrency", type=int, default=64)
    parser.add_argument("--backlog", type=int, default=100_000)
    args = parser.parse_args(argv)
    _register_optional_sections()
    corpus = load_corpus()
    report: dict[str, Any] = {
        "run_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "machine": f"{platform.machine()} {os.cpu_count()} cpus",
        "python": platform.python_version(),
        "sqlglot": sqlglot.__version__,
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
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "report.json").write_text(json.dumps(report, indent=2) + "\n")
    (out / "report.md").write_text(_markdown(report))
    print(_markdown(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())

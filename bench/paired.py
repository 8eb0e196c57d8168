"""The record path of this tree and of REF, in alternating rounds of CPU time: the deterministic
path (:func:`run_rounds`) and the LLM path (:func:`run_llm_rounds`).

A ``--against`` run measures each side's sections in its own window, one after the other; on a
shared machine the speed of the two windows can differ by more than a change moves (a parse
baseline 1.6 times faster on one side than on the other, in one run). Here each round runs both
sides, in a fresh process each, their order flipping every round, and counts this thread's CPU
time (``time.thread_time``) rather than the wall clock: the parse of each chunk of records and
the record path of the same chunk, alternating. The median of the rounds is reported, with
every round's figure.

The LLM path's figure in a ``--against`` run is a wall-clock ratio to a plain client, and the
plain client is held by the endpoint (a Python server on the same cores) while STEF's side is
held by its own interpreter: the same code gave 0.69 to 0.84 at 64 in flight within half an
hour. So both sides' LLM path also runs in alternating rounds, in fresh processes against a
fake endpoint (one per round, both sides at it), counting the process's CPU time (every
thread: the judge, the client, the metrics) a record: what a change of the path costs,
whatever held the clock, with every round beside the medians. Fresh processes of the same code
spend from 4.2 to 5.7 ms a record on a shared two-core machine (a tenth either way, the hash
seed fixed or not), so the medians of five rounds tell a regression of a third, not one of a
few percent.

This file is also the worker: ``python bench/paired.py CORPUS RULES`` judges the corpus (one
JSON record a line) with the ``stef`` package first on ``PYTHONPATH``, so one worker runs
either side's code; ``python bench/paired.py --llm URL CONCURRENCY RECORDS CORPUS`` runs the LLM
path over ``RECORDS`` of it against the endpoint at ``URL``.
"""

from __future__ import annotations

import contextlib
import gc
import json
import os
import select
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

ROUNDS = 5
CHUNK = 50
# The LLM path's window in each round: records judged at the bench's concurrency (64), about 4 s
# at the fake endpoint's 200 ms, after twice the concurrency to open the connections and warm up.
LLM_RECORDS = 640
# A worker takes seconds (the deterministic one about ten, the LLM one under ten); one that
# runs for minutes is hung (a REF whose judge never answers) and is stopped.
WORKER_TIMEOUT_S = 600
# Set by bench.instructions, which runs the worker under valgrind's callgrind: the worker says
# when each of its windows starts and waits for the counter to be switched (:func:`_gate`).
GATES_ENV = "STEF_BENCH_GATES"
GATE = "GATE"
# Counted, a record runs about fifty times slower than natively: its CPU budget
# (limits.max_record_cpu_s, a second) would make dead letters of the slowest records, as many as
# the machine's load decides. The counted workers lift it to this.
COUNTED_CPU_BUDGET_S = 3600.0


def run_rounds(
    trees: dict[str, Path], corpus: list[dict[str, Any]], rounds: int = ROUNDS
) -> dict[str, Any]:
    """Both sides' record path over ``corpus`` in ``rounds`` alternating rounds.

    Args:
        trees: the side's name -> its source tree (the folder holding its ``stef`` package and
            the ``rules`` it judges under).
        corpus: the bench corpus (records with their dialect).
        rounds: rounds of one run per side.

    Returns:
        Per side: the median ratio of parse CPU time to record-path CPU time, the median
        record-path CPU milliseconds a record, and every round's ratio; and this side's
        median ratio over the other's (``first / second``, the sides in ``trees``' order).
    """
    names = list(trees)
    runs: dict[str, list[dict[str, Any]]] = {name: [] for name in names}
    with _corpus_file(corpus) as path:
        for i in range(rounds):
            for name in names if i % 2 == 0 else names[::-1]:
                runs[name].append(_worker(trees[name], str(path), str(trees[name] / "rules")))
    out: dict[str, Any] = {"rounds": rounds, "sides": {}}
    for name in names:
        ratios = [r["parse_cpu_s"] / r["stef_cpu_s"] for r in runs[name]]
        per_record = [r["stef_cpu_s"] / r["records"] * 1e3 for r in runs[name]]
        out["sides"][name] = {
            "deterministic_vs_parse_cpu_ratio": round(statistics.median(ratios), 4),
            "record_path_cpu_ms": round(statistics.median(per_record), 3),
            "ratio_by_round": [round(r, 4) for r in ratios],
        }
    first, second = (out["sides"][n]["deterministic_vs_parse_cpu_ratio"] for n in names[:2])
    out["first_over_second"] = round(first / second, 3)
    return out


def run_llm_rounds(
    trees: dict[str, Path],
    corpus: list[dict[str, Any]],
    rounds: int = ROUNDS,
    *,
    concurrency: int = 64,
    latency_ms: float = 200.0,
    records: int = LLM_RECORDS,
) -> dict[str, Any]:
    """Both sides' LLM path (built as ``stef run`` builds it) in ``rounds`` alternating rounds,
    each side in a fresh process, against a fake endpoint with ``latency_ms`` of latency (one
    per round, both sides at it).

    Returns:
        Per side: the median CPU milliseconds a record (the process's, every thread), the
        median records a second, and every round's CPU; and the first side's median CPU a
        record over the second's (``cpu_first_over_second``: above 1, the first side spends
        more).

    Raises:
        RuntimeError: a worker failed, or a side did not get every record of a round evaluated
            by the endpoint (a judge error or a dead letter costs a fraction of a call: such a
            side would read cheap).
    """
    # Imported here: run as the worker, this file must not import this tree's stef.
    from bench.llm import fake_endpoint

    names = list(trees)
    runs: dict[str, list[dict[str, Any]]] = {name: [] for name in names}
    with _corpus_file(corpus) as path:
        for i in range(rounds):
            # An endpoint per round (it keeps every request it answers), both sides at it.
            with fake_endpoint(latency_ms / 1000) as url:
                args = ("--llm", url, str(concurrency), str(records), str(path))
                for name in names if i % 2 == 0 else names[::-1]:
                    runs[name].append(_judged_all(name, _worker(trees[name], *args)))
    out: dict[str, Any] = {
        "rounds": rounds,
        "concurrency": concurrency,
        "latency_ms": latency_ms,
        "records": records,
        "sides": {},
    }
    for name in names:
        cpu = [r["cpu_s"] / r["records"] * 1e3 for r in runs[name]]
        out["sides"][name] = {
            "cpu_ms_per_record": round(statistics.median(cpu), 3),
            "records_per_s": round(
                statistics.median(r["records"] / r["wall_s"] for r in runs[name]), 1
            ),
            "cpu_ms_by_round": [round(c, 3) for c in cpu],
        }
    first, second = (out["sides"][n]["cpu_ms_per_record"] for n in names[:2])
    out["cpu_first_over_second"] = round(first / second, 3)
    return out


@contextlib.contextmanager
def _corpus_file(corpus: list[dict[str, Any]]) -> Iterator[Path]:
    with tempfile.NamedTemporaryFile("w", suffix=".jsonl", encoding="utf-8") as f:
        f.writelines(json.dumps(r) + "\n" for r in corpus)
        f.flush()
        yield Path(f.name)


def _judged_all(side: str, figures: dict[str, Any]) -> dict[str, Any]:
    if figures["evaluated"] != figures["records"]:
        raise RuntimeError(
            f"{side}: the LLM path evaluated {figures['evaluated']:g} of {figures['records']:g} "
            "records (judge errors or dead letters): its CPU a record is not the path's"
            + _reasons(figures)
        )
    return figures


def _reasons(figures: dict[str, Any]) -> str:
    """The judge errors a worker reported (none from a tree before they were), for a message."""
    errors = figures.get("errors") or []
    return f"; judge errors: {'; '.join(map(str, errors))}" if errors else ""


def _worker(tree: Path, *args: str) -> dict[str, Any]:
    """One worker's figures.

    Raises:
        RuntimeError: it failed, ran past :data:`WORKER_TIMEOUT_S`, printed no figures as its
            last line, or imported another tree's ``stef``.
    """
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["PYTHONPATH"] = str(tree)
    command = [sys.executable, str(Path(__file__).resolve()), *args]
    try:
        done = subprocess.run(
            command,
            cwd=tree,
            env=env,
            capture_output=True,
            text=True,
            check=False,
            timeout=WORKER_TIMEOUT_S,
        )
    except subprocess.TimeoutExpired:
        raise RuntimeError(
            f"paired worker in {tree} ran past {WORKER_TIMEOUT_S} s and was stopped"
        ) from None
    if done.returncode != 0:
        raise RuntimeError(
            f"paired worker in {tree} failed (exit {done.returncode}): {done.stderr.strip()[-500:]}"
        )
    lines = done.stdout.strip().splitlines()
    return _figures("paired", tree, lines[-1] if lines else "")


def _figures(who: str, tree: Path, last: str) -> dict[str, Any]:
    """The figures a worker on ``tree`` printed as its ``last`` line, without the path of the
    ``stef`` it imported (``who`` names the worker in an error).

    Raises:
        RuntimeError: ``last`` holds no figures, or names another tree's ``stef``.
    """
    try:
        figures: dict[str, Any] = json.loads(last)
        where = Path(figures.pop("stef"))
    except (ValueError, KeyError, TypeError, AttributeError):
        raise RuntimeError(
            f"{who} worker in {tree} printed no figures as its last line: {last[-300:]!r}"
        ) from None
    if not where.resolve().is_relative_to(tree.resolve()):
        raise RuntimeError(f"{who} worker in {tree} imported another tree's stef")
    return figures


def _clear_stef_caches() -> None:
    """Every functools cache of the stef package emptied: the window starts cold. (A copy of
    :func:`bench.clear_caches`: run as the worker, this file has another tree's packages on its
    path and must not import this tree's ``bench``.)"""
    for name, module in list(sys.modules.items()):
        if name == "stef" or name.startswith("stef."):
            for value in list(vars(module).values()):
                clear = getattr(value, "cache_clear", None)
                if callable(clear) and getattr(value, "__module__", None) == name:
                    clear()


def _gate(window: str) -> None:
    """Under :mod:`bench.instructions`' counter, ``window`` starts here (``end``: the last one
    ended): freeze the objects alive so far out of the collector's reach (its collections in the
    window then cost what the window's own garbage costs, on either side), say so, and wait
    until the counter is switched. Otherwise nothing."""
    if os.environ.get(GATES_ENV) == "1":
        gc.freeze()
        print(f"{GATE} {window}", flush=True)
        # Polled, not a blocking read: a process blocked in a system call can be reached by
        # the counter's control only through ptrace, which many hosts restrict.
        while not select.select([sys.stdin], [], [], 0.05)[0]:
            pass
        sys.stdin.readline()


def _counted_limits() -> dict[str, Any]:
    """Under the counter, the record path's limits with the CPU budget lifted
    (:data:`COUNTED_CPU_BUDGET_S`), as keyword arguments; otherwise none (the defaults)."""
    if os.environ.get(GATES_ENV) != "1":
        return {}
    from stef.stages.validate import Limits

    if "max_record_cpu_s" not in Limits.model_fields:
        return {}  # a tree from before the budget: nothing to lift
    return {"limits": Limits(max_record_cpu_s=COUNTED_CPU_BUDGET_S)}


def _deterministic_pipeline(rules: Any) -> Any:
    """The record path with the heuristic judge, as the tree builds it (its CPU budget lifted
    under the counter)."""
    from stef.judges.heuristic.judge import HeuristicJudge
    from stef.pipeline import Pipeline

    limits = _counted_limits()
    if not limits:
        return Pipeline(lambda: rules, HeuristicJudge())
    try:
        from stef.pipeline import PipelineOptions
    except ImportError:  # a tree from before the options object: limits were a keyword
        return Pipeline(lambda: rules, HeuristicJudge(), **limits)
    return Pipeline(lambda: rules, HeuristicJudge(), PipelineOptions(**limits))


def _work(corpus: Path, rules_dir: Path) -> dict[str, Any]:
    import sqlglot

    import stef
    from stef.rules import load_rules

    records = [json.loads(line) for line in corpus.read_text(encoding="utf-8").splitlines()]
    rules = load_rules(rules_dir)
    pipeline = _deterministic_pipeline(rules)
    payloads = [json.dumps(r).encode() for r in records]
    dialects = [r.get("dialect") or rules.for_app(r.get("app")).dialect for r in records]

    def parse(i: int) -> None:
        with contextlib.suppress(Exception):
            sqlglot.parse(records[i]["sql"], read=dialects[i])

    for i in range(min(5, len(records))):  # imports and first-use setup, outside the window
        parse(i)
        pipeline.process(payloads[i], {"line": i})
    _clear_stef_caches()
    if os.environ.get(GATES_ENV) == "1":  # counted, not timed: one window each, in turn
        _gate("parse")
        for i in range(len(records)):
            parse(i)
        _gate("stef")
        for i in range(len(records)):
            pipeline.process(payloads[i], {"line": i})
        _gate("end")
        return {"stef": stef.__file__, "records": len(records)}
    parse_s = stef_s = 0.0
    for start in range(0, len(records), CHUNK):
        part = range(start, min(start + CHUNK, len(records)))
        t0 = time.thread_time()
        for i in part:
            parse(i)
        t1 = time.thread_time()
        for i in part:
            pipeline.process(payloads[i], {"line": i})
        t2 = time.thread_time()
        parse_s += t1 - t0
        stef_s += t2 - t1
    return {
        "stef": stef.__file__,
        "records": len(records),
        "parse_cpu_s": parse_s,
        "stef_cpu_s": stef_s,
    }


def _work_llm(url: str, concurrency: int, count: int, corpus: Path) -> dict[str, Any]:
    from concurrent.futures import ThreadPoolExecutor

    from prometheus_client import CollectorRegistry

    import stef
    from stef.judges.llm import build_llm_judge
    from stef.judges.llm.config import LlmConfig
    from stef.metrics import Metrics
    from stef.rules import load_rules
    from stef.service.wiring import build_pipeline
    from stef.settings import Settings

    lines = [line.encode() for line in corpus.read_text(encoding="utf-8").splitlines()]
    warm = 2 * concurrency
    payloads = [lines[i % len(lines)] for i in range(count + warm)]
    config = LlmConfig(
        base_url=url, model="bench-fake", max_concurrency=concurrency, cache_size=0, timeout_s=30
    )
    metrics = Metrics(CollectorRegistry())
    judge = build_llm_judge(config, metrics)
    settings = Settings(llm=config, **_counted_limits())
    pipeline = build_pipeline(settings, load_rules(None), judge, metrics)
    outcomes: list[str] = []
    errors: list[str] = []  # the first few judge errors' reasons, for the report

    def judged(payload: bytes) -> None:
        done = pipeline.process(payload, {"line": 0})
        result = done.result
        outcomes.append(result.outcome if result is not None else "dead_letter")
        error = done.error if result is None else result.error or result.outcome
        if outcomes[-1] != "evaluated" and len(errors) < 3:
            errors.append(f"{outcomes[-1]}: {error}"[:300])

    collector = _settle_collector(settings)
    try:
        with ThreadPoolExecutor(max_workers=concurrency) as pool:
            list(pool.map(judged, payloads[count:]))  # connections and first use, outside
            _clear_stef_caches()
            outcomes.clear()
            _gate("llm")
            cpu, wall = time.process_time(), time.perf_counter()
            list(pool.map(judged, payloads[:count]))
            cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
            _gate("end")
    finally:
        if collector is not None:
            collector()
        judge.close()
    return {
        "stef": stef.__file__,
        "records": count,
        "evaluated": outcomes.count("evaluated"),
        "errors": errors,
        "cpu_s": cpu,
        "wall_s": wall,
    }


def _settle_collector(settings: Any) -> Callable[[], None] | None:
    """The collector as the tree's replica sets it once built (`stef run`), and the call that
    undoes it; None for a tree from before the setting (its replicas left the collector alone,
    as in the regression of 2026-11 this bench was built to see)."""
    try:
        from stef.service.collector import restore_collector, settle_collector
    except ImportError:
        return None
    before = settle_collector(settings.gc_gen0)
    return lambda: restore_collector(before)


if __name__ == "__main__":
    # This folder, put first on the path by running this file, must not hide the tree's stef.
    sys.path = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).parent]
    if sys.argv[1] == "--llm":
        url, concurrency, count, corpus = sys.argv[2:6]
        print(json.dumps(_work_llm(url, int(concurrency), int(count), Path(corpus))))
    else:
        print(json.dumps(_work(Path(sys.argv[1]), Path(sys.argv[2]))))

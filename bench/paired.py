"""The deterministic record path of this tree and of REF, in alternating rounds of CPU time.

A ``--against`` run measures each side's sections in its own window, one after the other; on a
shared machine the speed of the two windows can differ by more than a change moves (a parse
baseline 1.6 times faster on one side than on the other, in one run). Here each round runs both
sides, in a fresh process each, their order flipping every round, and counts this thread's CPU
time (``time.thread_time``) rather than the wall clock: the parse of each chunk of records and
the record path of the same chunk, alternating. The median of the rounds is reported, with
every round's figure.

This file is also the worker: ``python bench/paired.py CORPUS RULES`` judges the corpus (one
JSON record a line) with the ``stef`` package first on ``PYTHONPATH``, so one worker runs
either side's code.
"""

from __future__ import annotations

import contextlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

ROUNDS = 5
CHUNK = 50


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
    runs: dict[str, list[dict[str, float]]] = {name: [] for name in names}
    with _corpus_file(corpus) as path:
        for i in range(rounds):
            for name in names if i % 2 == 0 else names[::-1]:
                runs[name].append(_worker(trees[name], path))
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


@contextlib.contextmanager
def _corpus_file(corpus: list[dict[str, Any]]) -> Iterator[Path]:
    with tempfile.NamedTemporaryFile("w", suffix=".jsonl", encoding="utf-8") as f:
        f.writelines(json.dumps(r) + "\n" for r in corpus)
        f.flush()
        yield Path(f.name)


def _worker(tree: Path, corpus: Path) -> dict[str, float]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["PYTHONPATH"] = str(tree)
    done = subprocess.run(
        [sys.executable, str(Path(__file__).resolve()), str(corpus), str(tree / "rules")],
        cwd=tree,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"paired worker in {tree} failed: {done.stderr.strip()[-500:]}")
    figures: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    if not Path(figures.pop("stef")).resolve().is_relative_to(tree.resolve()):
        raise RuntimeError(f"paired worker in {tree} imported another tree's stef")
    return figures


def _clear_stef_caches() -> None:
    """Every functools cache of the stef package emptied: the window starts cold."""
    for name, module in list(sys.modules.items()):
        if name == "stef" or name.startswith("stef."):
            for value in list(vars(module).values()):
                clear = getattr(value, "cache_clear", None)
                if callable(clear) and getattr(value, "__module__", None) == name:
                    clear()


def _work(corpus: Path, rules_dir: Path) -> dict[str, Any]:
    import sqlglot

    import stef
    from stef.judges.heuristic.judge import HeuristicJudge
    from stef.pipeline import Pipeline
    from stef.rules import load_rules

    records = [json.loads(line) for line in corpus.read_text(encoding="utf-8").splitlines()]
    rules = load_rules(rules_dir)
    pipeline = Pipeline(lambda: rules, HeuristicJudge())
    payloads = [json.dumps(r).encode() for r in records]
    dialects = [r.get("dialect") or rules.for_app(r.get("app")).dialect for r in records]

    def parse(i: int) -> None:
        with contextlib.suppress(Exception):
            sqlglot.parse(records[i]["sql"], read=dialects[i])

    for i in range(min(5, len(records))):  # imports and first-use setup, outside the window
        parse(i)
        pipeline.process(payloads[i], {"line": i})
    _clear_stef_caches()
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


if __name__ == "__main__":
    # This folder, put first on the path by running this file, must not hide the tree's stef.
    sys.path = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).parent]
    print(json.dumps(_work(Path(sys.argv[1]), Path(sys.argv[2]))))

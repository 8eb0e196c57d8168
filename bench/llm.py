"""Bench section: the LLM path against a local fake endpoint with a fixed latency.

The endpoint runs in its own process (``python -m stef.testing.fake_server``), as a real one would:
in this process it would compete with the judge for the GIL.

The baseline is Little's law: with N calls in flight and a latency of L seconds, no client can
exceed N / L records per second. The ratio says how close the judge's own overhead (prompt
rendering, HTTP, validation, scoring) lets it get.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from typing import Any

from stef.judges.llm import build_llm_judge
from stef.judges.llm.config import LlmConfig
from stef.pipeline import Pipeline
from stef.rules import load_rules
from stef.stages.validate import validate


@contextmanager
def fake_endpoint(latency_s: float) -> Iterator[str]:
    """A fake OpenAI-compatible server in a subprocess; yields its base URL."""
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "stef.testing.fake_server",
            "--port",
            "0",
            "--latency-s",
            str(latency_s),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        assert proc.stdout is not None
        base_url = proc.stdout.readline().strip()
        if not base_url.startswith("http://127.0.0.1:"):
            raise RuntimeError(f"fake server did not start: {base_url!r}")
        yield base_url
    finally:
        os.kill(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()


def run(corpus: list[dict[str, Any]], args: argparse.Namespace) -> dict[str, Any]:
    latency = args.llm_latency_ms / 1000
    concurrency = args.llm_concurrency
    # Enough records for ~8 s of steady state, at most the corpus.
    n = min(len(corpus), max(concurrency * 4, int(8 * concurrency / latency)))
    records = [validate(r) for r in corpus[:n]]
    with fake_endpoint(latency) as base_url:
        config = LlmConfig(
            base_url=base_url,
            model="bench-fake",
            max_concurrency=concurrency,
            cache_size=0,
            timeout_s=30,
        )
        judge = build_llm_judge(config)
        try:
            pipeline = Pipeline(load_rules(None), judge)
            started = time.perf_counter()
            with ThreadPoolExecutor(max_workers=concurrency) as pool:
                results = list(pool.map(pipeline.judge_record, records))
            elapsed = time.perf_counter() - started
        finally:
            judge.close()
    evaluated = sum(r.outcome == "evaluated" for r in results)
    rate = len(results) / elapsed
    bound = concurrency / latency
    return {
        "records": len(results),
        "evaluated": evaluated,
        "latency_ms": args.llm_latency_ms,
        "concurrency": concurrency,
        "llm_path_per_s": round(rate, 1),
        "littles_law_bound_per_s": round(bound, 1),
        "llm_vs_bound_ratio": round(rate / bound, 3),
    }

"""Bench section: the LLM path against a local fake endpoint with a fixed latency.

The baseline is Little's law: with N calls in flight and a latency of L seconds, no client can
exceed N / L records per second. The ratio says how close the judge's own overhead (prompt
rendering, HTTP, validation, scoring) lets it get.
"""

from __future__ import annotations

import argparse
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from stef.llm import build_llm_judge
from stef.llm.config import LlmConfig
from stef.llm.fake_server import FakeLlmServer
from stef.pipeline import Pipeline
from stef.rules import load_rules
from stef.stages.validate import validate


def run(corpus: list[dict[str, Any]], args: argparse.Namespace) -> dict[str, Any]:
    latency = args.llm_latency_ms / 1000
    concurrency = args.llm_concurrency
    # Enough records for ~8 s of steady state, at most the corpus.
    n = min(len(corpus), max(concurrency * 4, int(8 * concurrency / latency)))
    records = [validate(r) for r in corpus[:n]]
    with FakeLlmServer(latency_s=latency) as server:
        config = LlmConfig(
            base_url=server.base_url, model="bench-fake", max_concurrency=concurrency,
            cache_size=0, timeout_s=30,
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

"""Bench section: the LLM path against a local fake endpoint with a fixed latency.

The endpoint runs in its own process (``python -m stef.testing.fake_server``), as a real one would:
in this process it would compete with the judge for the GIL. The record path is built as
``stef run`` builds it (:func:`stef.service.wiring.build_pipeline`: metrics, calibration, the
heuristic's second opinion) and runs under the collector settings of a replica: until 2026-11-28
it ran without metrics, and a metric that cost 1.2 ms a record went unseen here.

The baseline is a plain client (``httpx``, the transport under the ``openai`` client) sending the
very bodies STEF sends (:meth:`LlmJudge.request_body`: log-probabilities asked for included, so
the endpoint answers both sides alike), at the same concurrency, to the same server, in chunks
alternating with STEF's in one window. Little's law (N in flight / latency L) is the bound both
approach; the ratio says how much of what the transport reaches the judge's own overhead
(analysis, prompt rendering, the client, validation, scoring, the result's JSON) leaves. Measured
at 64 and 256 in flight. Until the log-probabilities were asked for in the bodies here (2026-11),
the baseline's replies were lighter than STEF's: ratios from before are not comparable. Beside
the ratio of the summed windows, each round's ratio (its two windows are next to each other in
time) and their median: the same code read 0.69 to 0.84 at 64 from one run to the next, and one
figure alone cannot say how far it is from the target.

The baseline's transport is ``httpx``, the client most teams call an endpoint with. Since
2026-11-29 STEF itself sends to a plain ``http://`` endpoint (the fake one here) over the
standard library (:mod:`stef.judges.llm.plainhttp`), which costs less per call than ``httpx``:
the ratio says what judging costs beside a plain call made the usual way, not beside the
cheapest possible call.

The wall ratio also says which process was the bottleneck, and that moves with the machine: the
plain client is often held by the endpoint (a Python server on the same two cores) while STEF's
side is held by its own interpreter. So each side's window also counts CPU time: this process's
(every thread: the client, the judge, the metrics) per record, and the endpoint's share of a core
(read from ``/proc``; absent where there is none). ``llm_vs_plain_cpu_ratio`` (the plain client's
CPU per record over STEF's) is the interpreter cost alone, whatever holds the wall clock.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from typing import Any

import httpx2 as httpx
from prometheus_client import CollectorRegistry

from bench import clear_caches
from stef.judges.llm import build_llm_judge
from stef.judges.llm.config import LlmConfig
from stef.judges.llm.judge import LlmJudge
from stef.metrics import Metrics
from stef.models import InputRecord
from stef.pipeline import Pipeline, judge_request
from stef.rules import load_rules
from stef.service.collector import restore_collector, settle_collector
from stef.service.wiring import build_pipeline
from stef.settings import Settings
from stef.stages.validate import validate


@contextmanager
def fake_endpoint(latency_s: float) -> Iterator[str]:
    """A fake OpenAI-compatible server in a subprocess; yields its base URL."""
    with _fake_server(latency_s) as (base_url, _):
        yield base_url


@contextmanager
def _fake_server(latency_s: float) -> Iterator[tuple[str, int]]:
    """:func:`fake_endpoint`, yielding the server's process id too."""
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
        yield base_url, proc.pid
    finally:
        os.kill(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()


def _request_bodies(pipeline: Pipeline, judge: LlmJudge, records: list[InputRecord]) -> list[bytes]:
    """The chat-completion body STEF sends for each record: built by the judge's own client
    (json_schema mode with the record's schema, the log-probabilities and completion cap it
    asks for), so the baseline cannot drift from what STEF sends."""
    bodies = []
    for record in records:
        request, _ = judge_request(record, pipeline.rules.for_app(record.app))
        bodies.append(judge.request_body(request))
    return bodies


def _plain_sender(base_url: str, concurrency: int) -> tuple[httpx.Client, Callable[[bytes], None]]:
    """The baseline: one POST of a prepared body and a JSON read of the answer, nothing else."""
    client = httpx.Client(
        base_url=base_url,
        limits=httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency),
        timeout=30,
    )

    def send(body: bytes) -> None:
        resp = client.post(
            "/chat/completions", content=body, headers={"content-type": "application/json"}
        )
        resp.raise_for_status()
        json.loads(resp.json()["choices"][0]["message"]["content"])

    return client, send


def _cpu_of(pid: int) -> float | None:
    """CPU seconds (user and system) process ``pid`` has used; None without ``/proc``."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as f:
            # The fields after the command (which may hold spaces), from the state on.
            fields = f.read().rpartition(")")[2].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return None


class _Side:
    """One side's windows: wall seconds, this process's CPU seconds, the endpoint's."""

    def __init__(self) -> None:
        self.wall = self.cpu = 0.0
        self.endpoint: float | None = 0.0
        self.walls: list[float] = []  # each window's, in order

    def run(
        self, pool: ThreadPoolExecutor, fn: Callable[[Any], object], items: list[Any], pid: int
    ) -> None:
        cpu, endpoint = time.process_time(), _cpu_of(pid)
        self.walls.append(_window(pool, fn, items))
        self.wall += self.walls[-1]
        self.cpu += time.process_time() - cpu
        after = _cpu_of(pid)
        if self.endpoint is None or endpoint is None or after is None:
            self.endpoint = None
        else:
            self.endpoint += after - endpoint


def _window(pool: ThreadPoolExecutor, fn: Callable[[Any], object], items: list[Any]) -> float:
    started = time.perf_counter()
    list(pool.map(fn, items))
    return time.perf_counter() - started


def measure(corpus: list[dict[str, Any]], latency_ms: float, concurrency: int) -> dict[str, Any]:
    """STEF's LLM path against a plain client sending the same bodies, chunks alternating."""
    latency = latency_ms / 1000
    # Chunks of ~2 s of the bound each; three of each side, alternating.
    chunk = max(concurrency * 2, int(2 * concurrency / latency))
    rounds = 3
    raw = [corpus[i % len(corpus)] for i in range(chunk * rounds)]
    records = [validate(r) for r in raw]
    payloads = [json.dumps(r).encode() for r in raw]
    with _fake_server(latency) as (base_url, server_pid):
        config = LlmConfig(
            base_url=base_url,
            model="bench-fake",
            max_concurrency=concurrency,
            cache_size=0,
            timeout_s=30,
        )
        # Built as `stef run` builds it: metrics on (the quality gauges' estimate, the LLM call
        # histograms), the default calibration, the heuristic's second opinion.
        metrics = Metrics(CollectorRegistry())
        judge = build_llm_judge(config, metrics)
        client, send = _plain_sender(base_url, concurrency)
        collector = None
        try:
            settings = Settings(llm=config)
            pipeline = build_pipeline(settings, load_rules(None), judge, metrics)
            bodies = _request_bodies(pipeline, judge, records)
            # Building the bodies read every record: STEF's windows start as cold as the bench's
            # other sections (until 2026-11-30 they found the question readings cached).
            clear_caches()
            # The collector as a replica sets it once built (`stef run`): both sides run under it.
            collector = settle_collector(settings.gc_gen0)
            stef, plain = _Side(), _Side()
            outcomes: list[str] = []

            def judged(payload: bytes) -> None:
                result = pipeline.process(payload, {"line": 0}).result
                outcomes.append(result.outcome if result is not None else "dead_letter")

            with ThreadPoolExecutor(max_workers=concurrency) as pool:
                _window(pool, send, bodies[:concurrency])  # connections up, outside the window
                for r in range(rounds):
                    part = slice(r * chunk, (r + 1) * chunk)
                    sides = [(plain, send, bodies[part]), (stef, judged, payloads[part])]
                    for side, fn, items in sides if r % 2 == 0 else reversed(sides):
                        side.run(pool, fn, items, server_pid)
        finally:
            restore_collector(collector)
            client.close()
            judge.close()
    n = chunk * rounds
    by_round = [round(p / w, 3) for p, w in zip(plain.walls, stef.walls, strict=True)]
    figures: dict[str, Any] = {
        "records": n,
        "evaluated": outcomes.count("evaluated"),
        "latency_ms": latency_ms,
        "concurrency": concurrency,
        "llm_path_per_s": round(n / stef.wall, 1),
        "plain_client_per_s": round(n / plain.wall, 1),
        "littles_law_bound_per_s": round(concurrency / latency, 1),
        "llm_vs_plain_ratio": round(plain.wall / stef.wall, 3),
        # Each round's two windows are next to each other in time: their ratios show the spread
        # the ratio of the sums hides.
        "llm_vs_plain_ratio_by_round": by_round,
        "llm_vs_plain_ratio_median": round(statistics.median(by_round), 3),
        "llm_path_cpu_ms_per_record": round(stef.cpu / n * 1e3, 2),
        "plain_client_cpu_ms_per_record": round(plain.cpu / n * 1e3, 2),
        "llm_vs_plain_cpu_ratio": round(plain.cpu / stef.cpu, 3),
        "llm_path_process_cores": round(stef.cpu / stef.wall, 2),
        "plain_client_process_cores": round(plain.cpu / plain.wall, 2),
    }
    if stef.endpoint is not None and plain.endpoint is not None:
        figures["endpoint_cores_beside_llm_path"] = round(stef.endpoint / stef.wall, 2)
        figures["endpoint_cores_beside_plain_client"] = round(plain.endpoint / plain.wall, 2)
    return figures


def run(corpus: list[dict[str, Any]], args: argparse.Namespace) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for concurrency in sorted({args.llm_concurrency, 256}):
        figures = measure(corpus, args.llm_latency_ms, concurrency)
        suffix = "" if concurrency == args.llm_concurrency else f"_at_{concurrency}"
        out.update({f"{k}{suffix}": v for k, v in figures.items() if k != "latency_ms"})
    out["latency_ms"] = args.llm_latency_ms
    return out

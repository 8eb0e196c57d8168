"""Measure ``stef run`` through a real broker: throughput with the heuristic judge, and peak RSS
while a large backlog waits in the topic (memory must stay flat: fetching pauses at the bound).

    .venv/bin/python scripts/measure_service.py --records 100000 --partitions 4 --concurrency 8

Starts an in-memory Tansu broker on 127.0.0.1, produces the records (every tenth invalid), runs
``stef run`` from the Kafka topic to Kafka results/dead-letter topics, waits until the consumer lag
is zero, and prints one JSON line: records, seconds, records/second, peak RSS (VmHWM) in MiB.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.kafka import metric_samples, rss_mib  # noqa: E402
from tests.brokers import FAST_GROUP, free_port, tansu_broker  # noqa: E402
from tests.service.conftest import make_log  # noqa: E402


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--records", type=int, default=100_000)
    p.add_argument("--partitions", type=int, default=4)
    p.add_argument("--concurrency", type=int, default=8)
    p.add_argument("--log-level", default="warning")
    args = p.parse_args()

    log = make_log(args.records)
    with tansu_broker() as broker:
        source = broker.create_topic("measure-in", args.partitions)
        results = broker.create_topic("measure-results", args.partitions)
        dead = broker.create_topic("measure-dead", 1)
        t0 = time.monotonic()
        broker.produce(source, log.payloads)
        produce_s = time.monotonic() - t0
        port = free_port()
        env = {k: v for k, v in os.environ.items() if not k.startswith("STEF_")}
        env["STEF_KAFKA_CONSUMER"] = json.dumps(FAST_GROUP)
        cmd = [
            str(ROOT / ".venv" / "bin" / "stef"),
            "run",
            "--source", broker.url(source, "measure"),
            "--results", broker.url(results),
            "--dead-letters", broker.url(dead),
            "--concurrency", str(args.concurrency),
            "--metrics-port", str(port),
            "--log-level", args.log_level,
        ]  # fmt: skip
        proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            started = None
            peak_inflight = 0.0
            while True:
                time.sleep(0.5)
                if proc.poll() is not None:
                    raise SystemExit(f"stef run exited with {proc.returncode}")
                try:
                    m = metric_samples(port)
                except OSError:
                    continue
                done = sum(v for k, v in m.items() if k.startswith("stef_records_total{"))
                peak_inflight = max(peak_inflight, m.get("stef_inflight{}", 0.0))
                if started is None and done > 0:
                    started, done_at_start = time.monotonic(), done
                lags = [v for k, v in m.items() if k.startswith("stef_consumer_lag{")]
                if done >= args.records and len(lags) == args.partitions and not any(lags):
                    elapsed = time.monotonic() - (started or t0)
                    break
            peak = rss_mib(proc.pid, "VmHWM")
            now = rss_mib(proc.pid, "VmRSS")
            os.kill(proc.pid, signal.SIGTERM)
            rc = proc.wait(timeout=60)
        finally:
            if proc.poll() is None:
                os.kill(proc.pid, signal.SIGKILL)
                proc.wait()
    print(
        json.dumps(
            {
                "records": args.records,
                "partitions": args.partitions,
                "concurrency": args.concurrency,
                "produce_s": round(produce_s, 1),
                "judge_s": round(elapsed, 1),
                "records_per_s": round((args.records - done_at_start) / elapsed, 1),
                "peak_rss_mib": round(peak, 1),
                "rss_at_end_mib": round(now, 1),
                "peak_inflight_seen": peak_inflight,
                "exit_code": rc,
            }
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())

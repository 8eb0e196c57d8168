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
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.kafka import stef_run_until_drained  # noqa: E402
from tests.brokers import tansu_broker  # noqa: E402
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
        run = stef_run_until_drained(
            broker.bootstrap,
            source,
            results,
            dead,
            args.records,
            args.concurrency,
            log_level=args.log_level,
        )
    print(
        json.dumps(
            {
                "records": args.records,
                "partitions": args.partitions,
                "concurrency": args.concurrency,
                "produce_s": round(produce_s, 1),
                "judge_s": round(run["seconds"], 1),
                "records_per_s": round(run["per_s"], 1),
                "peak_rss_mib": round(run["peak_rss_mb"], 1),
                "rss_at_end_mib": round(run["rss_at_end_mb"], 1),
                "peak_inflight_seen": run["peak_inflight"],
                "exit_code": run["exit_code"],
            }
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())

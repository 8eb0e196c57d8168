"""``stef run``: the service, until the source ends or a signal stops it."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from stef.cli.common import (
    add_common,
    every_record_invalid,
    preflight,
    report_error,
    settings_of,
)
from stef.errors import SourceLost, StefError
from stef.exits import Exit
from stef.logs import configure_logging
from stef.service.loop import Service
from stef.service.wiring import refuse_feedback


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "run",
        help="the service: judge every logged request of a source, at least once",
        description="The STEF service: judge every logged request of a source, at least once. "
        "Exit status: 0 after a clean stop or the end of a file source; 1 when a sink failed; "
        "2 for invalid settings or rules; 3 when the LLM endpoint fails its check at start; "
        "128 + the signal number on a second SIGTERM/SIGINT.",
        epilog="Precedence: defaults < --config file < STEF_* environment < flags. "
        "LLM endpoint: STEF_LLM_* (none configured: the heuristic judge).",
    )
    p.add_argument(
        "--source",
        help="kafka://HOST:PORT/TOPIC?group=GROUP, file:PATH, - (stdin; the default), or "
        "otlp+kafka://HOST:PORT/TOPIC?group=GROUP&encoding=otlp_proto|otlp_json (traces: "
        "docs/opentelemetry.md)",
    )
    p.add_argument(
        "--follow",
        action="store_true",
        default=None,
        help="keep reading a file: source as it grows; survives rotation",
    )
    p.add_argument(
        "--results",
        help="kafka://HOST:PORT/TOPIC, file:PATH or - (stdout; default); otlp+http://HOST:PORT "
        "or otlp+kafka://HOST:PORT/TOPIC: gen_ai.evaluation.result log records",
    )
    p.add_argument(
        "--dead-letters",
        help="same forms as --results (default: dead_letters.jsonl in $STEF_STATE_DIR, "
        "else $XDG_STATE_HOME/stef, else ~/.local/state/stef)",
    )
    p.add_argument("--concurrency", type=int, help="records judged at once (default 8)")
    p.add_argument(
        "--max-inflight", type=int, help="fetched, unacknowledged records (max(256, 4x conc.))"
    )
    p.add_argument("--max-inflight-bytes", type=int, help="the same bound on their bytes (4 MiB)")
    p.add_argument(
        "--drain-timeout", type=float, help="seconds to finish in-flight work on SIGTERM (30)"
    )
    p.add_argument("--metrics-host", help="interface for /metrics, /healthz, /readyz (127.0.0.1)")
    p.add_argument(
        "--metrics-port", help="port for /metrics (default 9464; 0: any free port; off: none)"
    )
    p.add_argument("--group", help="consumer group when the source URL names none (stef)")
    p.add_argument(
        "--canary",
        type=Path,
        help="labelled JSONL (the stef calibrate format) re-judged every canary.interval_s "
        "(at most canary.sample_size records a run)",
    )
    _add_position_flags(p)
    add_common(p, rules_help="rules file or directory (hot-reloaded)")
    p.set_defaults(func=run)


def _add_position_flags(p: argparse.ArgumentParser) -> None:
    """Where reading starts and resumes, and how outputs to Kafka are compressed."""
    p.add_argument(
        "--file-checkpoint",
        metavar="PATH",
        help="where a followed file: source keeps its read position (default: beside the "
        "results, or beside the log when results go to stdout or Kafka; off: none)",
    )
    p.add_argument(
        "--auto-offset-reset",
        choices=("latest", "earliest"),
        help="where a consumer group without a committed offset starts (latest)",
    )
    p.add_argument(
        "--start-from",
        metavar="TIME",
        help="a new group starts at this instant, with timezone (2026-11-01T00:00Z)",
    )
    p.add_argument(
        "--kafka-compression",
        choices=("lz4", "zstd", "gzip", "snappy", "none"),
        help="codec of results and dead letters written to Kafka (lz4)",
    )


def _overrides(args: argparse.Namespace) -> dict[str, Any]:
    return {
        "source": args.source,
        "follow": args.follow,
        "results": args.results,
        "dead_letters": args.dead_letters,
        "concurrency": args.concurrency,
        "max_inflight": args.max_inflight,
        "max_inflight_bytes": args.max_inflight_bytes,
        "drain_timeout_s": args.drain_timeout,
        "metrics_host": args.metrics_host,
        "metrics_port": args.metrics_port,
        "group": args.group,
        "file_checkpoint": args.file_checkpoint,
        "auto_offset_reset": args.auto_offset_reset,
        "start_from": args.start_from,
        "kafka_compression": args.kafka_compression,
    }


def run(args: argparse.Namespace) -> int:
    try:
        settings = settings_of(args, _overrides(args))
        refuse_feedback(settings)
    except StefError as exc:
        return report_error("stef run", exc)
    if args.canary is not None:
        canary = settings.canary.model_copy(update={"path": args.canary})
        settings = settings.model_copy(update={"canary": canary})
    # The service logs at its own level: one line per record at info, its default.
    configure_logging(settings.log_level, settings.log_format, settings.log_deps_level)
    unusable = preflight("stef run", settings)
    if unusable is not None:
        return unusable
    try:
        service = Service(settings, with_canary=True)
    except (StefError, OSError) as exc:
        return report_error("stef run", exc)
    service.install_signal_handlers()
    try:
        status = service.run()
    except SourceLost as exc:  # gone while running: a restart starts afresh
        print(f"stef run: {exc}", file=sys.stderr)
        return Exit.FAILURE
    except StefError as exc:  # the source could not be reached at start
        print(f"stef run: {exc}", file=sys.stderr)
        return Exit.USAGE
    except OSError as exc:  # a file output that cannot be created: one line, exit 1
        return report_error("stef run", exc)
    finite = not settings.source_endpoint.is_kafka and not settings.follow
    dead, judged = service.counts["dead_letters"], service.counts["results"]
    if status == Exit.OK and finite and dead and not judged:
        # A log read to its end without one result: the field names, most likely.
        print(every_record_invalid("stef run", dead, None, settings.field_mapping), file=sys.stderr)
        return Exit.FAILURE
    return status

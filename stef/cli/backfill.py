"""``stef backfill``: re-judge a time range of a topic (a new rules version, a new judge model)
without disturbing the live consumer group; stops at the range's end offsets."""

from __future__ import annotations

import argparse
import sys
from datetime import datetime
from typing import Any

import structlog
from prometheus_client import CollectorRegistry

from stef.cli.common import add_common, preflight, report_error, settings_of
from stef.cli.progress import Progress
from stef.errors import ConfigError, StefError
from stef.exits import Exit
from stef.io import Source
from stef.io.kafka_range import KafkaRangeSource
from stef.logs import configure_logging
from stef.metrics import BackfillMetrics
from stef.models import Backfill
from stef.service.health import HealthServer
from stef.service.loop import Service
from stef.service.wiring import open_sink, otlp_records, refuse_feedback
from stef.settings import Settings

log = structlog.get_logger(__name__)


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "backfill",
        help="re-judge a time range of a Kafka topic, outside the live group",
        description="Re-judge the records of a Kafka topic whose timestamps fall in [--from, "
        "--to), by manual partition assignment: no consumer group is joined or committed, so "
        'the live service is not disturbed. Every result carries "backfill": {"from", '
        '"to"}; results and dead letters written to Kafka carry the header stef-backfill: '
        "FROM/TO; --metrics-port serves stef_backfill_* metrics, never the live ones. Exit "
        "status: 0 done, 1 a sink failed, a record never finished, or the run stopped before "
        "the range's end (a signal, the broker lost: it prints the --resume that finishes it), "
        "2 invalid settings, 3 the LLM endpoint failed its check before any record was read.",
    )
    p.add_argument(
        "--source",
        required=True,
        help="kafka://HOST:PORT/TOPIC, or otlp+kafka://HOST:PORT/TOPIC?encoding=... (traces)",
    )
    p.add_argument(
        "--from", dest="start", required=True, help="start, with timezone (2026-11-01T00:00Z)"
    )
    p.add_argument("--to", dest="end", help="end, excluded (default: the topic's end now)")
    p.add_argument(
        "--resume",
        metavar="P:OFFSET,...",
        help="finish a stopped run: read only these partitions, each from its offset (what the "
        "stopped run printed; give the same --from and --to)",
    )
    p.add_argument("--results", help="kafka://HOST:PORT/TOPIC, file:PATH or - (stdout; default)")
    p.add_argument(
        "--dead-letters",
        help="same forms as --results (default: dead_letters.jsonl in $STEF_STATE_DIR, "
        "else $XDG_STATE_HOME/stef, else ~/.local/state/stef)",
    )
    p.add_argument("--concurrency", type=int, help="records judged at once (default 8)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.add_argument("--metrics-host", help="interface for /metrics, /healthz, /readyz (127.0.0.1)")
    p.add_argument(
        "--metrics-port",
        default="off",
        help="serve stef_backfill_* metrics on this port (default off; 0: any free port)",
    )
    add_common(p)
    p.set_defaults(func=run)


def _instant(text: str, flag: str) -> datetime:
    try:
        when = datetime.fromisoformat(text)
    except ValueError as exc:
        raise ConfigError(f"{flag} {text!r}: not an ISO 8601 timestamp") from exc
    if when.utcoffset() is None:
        raise ConfigError(f"{flag} {text!r}: give a timezone (Z or +HH:MM)")
    if when.timestamp() < 0:
        raise ConfigError(f"{flag} {text!r}: before 1970-01-01, where Kafka timestamps start")
    return when


def _settings(args: argparse.Namespace) -> tuple[Settings, datetime, datetime | None]:
    """The settings (the metrics port is the backfill's own flag, never STEF_METRICS_PORT) and
    the range."""
    overrides: dict[str, Any] = {
        "source": args.source,
        "results": args.results,
        "dead_letters": args.dead_letters,
        "concurrency": args.concurrency,
        "metrics_host": args.metrics_host,
        "metrics_port": args.metrics_port,
        "follow": False,
    }
    start = _instant(args.start, "--from")
    end = _instant(args.end, "--to") if args.end else None
    _resume(args.resume)  # checked with the other flags, before any connection
    if end is not None and end <= start:
        raise ConfigError("--to must be after --from")
    settings = settings_of(args, overrides)
    endpoint = settings.source_endpoint
    if not endpoint.is_kafka or not endpoint.topic:
        raise ConfigError("--source must be kafka://HOST:PORT/TOPIC or otlp+kafka://...")
    refuse_feedback(settings)
    return settings, start, end


def _service(
    settings: Settings, source: KafkaRangeSource, mark: Backfill, progress: Progress
) -> Service:
    """The service on the range, with its results marked, serving only the backfill's metrics;
    an ``otlp+kafka://`` range's messages are read as traces (``span_mapping``)."""
    endpoint = settings.source_endpoint
    records: Source = source
    if endpoint.kind == "otlp+kafka":
        records = otlp_records(source, endpoint, settings)
    # Kafka consumers of the results tell a backfill from the live stream by this header too.
    header = [("stef-backfill", f"{mark.from_}/{mark.to or ''}".encode())]
    results = open_sink(settings.results_endpoint, settings, headers=header)
    dead = open_sink(settings.dead_letters_endpoint, settings, headers=header)
    service = Service(
        settings.model_copy(update={"metrics_port": None}),  # the live families stay unserved
        source=records,
        results=results,
        dead_letters=dead,
        observer=lambda envelope, processed: progress.step(),
        backfill=mark,
    )
    if settings.metrics_port is not None:
        served = CollectorRegistry()
        exported = BackfillMetrics(served, service.metrics)
        exported.range_records.set_function(lambda: source.total)
        service.server = HealthServer(
            served, service.health, settings.metrics_host, settings.metrics_port
        ).start()
        log.info("backfill_metrics", port=service.server.port)
    return service


def _resume(text: str | None) -> dict[int, int] | None:
    """``--resume 0:120,3:77`` -> ``{0: 120, 3: 77}``."""
    if text is None:
        return None
    out = {}
    for part in text.split(","):
        partition, sep, offset = part.strip().partition(":")
        try:
            if not sep:
                raise ValueError(part)
            p, o = int(partition), int(offset)
        except ValueError:
            raise ConfigError(
                f"--resume {text!r}: expected PARTITION:OFFSET[,PARTITION:OFFSET...]"
            ) from None
        if p < 0 or o < 0:
            raise ConfigError(f"--resume {text!r}: partitions and offsets are not negative")
        out[p] = o
    return out


def _stopped_early(source: KafkaRangeSource, status: int) -> str | None:
    """The one line saying where a run that did not finish its range stopped, else None."""
    left = source.unfinished()
    if not left:
        return None
    # The loop ends at the range's end, on a lost broker, or on a stop request; a failed run
    # (a sink, records that never finished) returns non-zero.
    failed = "a sink failed or records never finished"
    why = source.stopped or (failed if status != Exit.OK else "stopped by a signal")
    where = ", ".join(f"partition {p} at offset {o}" for p, o in sorted(left.items()))
    spec = ",".join(f"{p}:{o}" for p, o in sorted(left.items()))
    return (
        f"stef backfill: the range is not finished ({why}): {where}; rerun with the same "
        f"--from and --to and --resume {spec} to finish it"
    )


def run(args: argparse.Namespace) -> int:
    try:
        settings, start, end = _settings(args)
    except StefError as exc:
        return report_error("stef backfill", exc)
    configure_logging(settings.log_level, settings.log_format, settings.log_deps_level)
    unusable = preflight("stef backfill", settings)
    if unusable is not None:
        return unusable
    endpoint = settings.source_endpoint
    source = KafkaRangeSource(
        list(endpoint.bootstrap),
        endpoint.topic or "",
        start,
        end,
        consumer_options=settings.kafka_consumer,
        resume=_resume(args.resume),
        unreachable_timeout_s=settings.source_unreachable_timeout_s,
    )
    progress = Progress(None, sys.stderr.isatty() and not args.no_progress)
    mark = Backfill(**{"from": start.isoformat(), "to": end.isoformat() if end else None})
    service = None
    try:
        service = _service(settings, source, mark, progress)
        source.start()
    except (StefError, OSError) as exc:
        if service is not None and service.server is not None:
            service.server.close()
        return report_error("stef backfill", exc)
    progress.total = source.total
    service.install_signal_handlers()
    try:
        status = service.run()
    except (StefError, OSError) as exc:  # an output that cannot be created: one line
        return report_error("stef backfill", exc)
    progress.close()
    print(
        f"stef backfill: {service.counts['results']} results, "
        f"{service.counts['dead_letters']} dead letters of {source.total} records",
        file=sys.stderr,
    )
    stopped = _stopped_early(source, status)
    if stopped is not None:
        print(stopped, file=sys.stderr)
        return max(status, Exit.FAILURE)
    return status

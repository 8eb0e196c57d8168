"""The one builder of what a command runs on, from the settings: the judge backend, the record path,
sources and sinks. ``stef run``, ``replay``, ``judge`` and ``calibrate`` all build through here, so
they read the same settings (config file, ``STEF_*``, flags) the same way."""

from __future__ import annotations

from collections.abc import Callable

from stef.calibration import calibration_for
from stef.errors import ConfigError
from stef.io import Sink, Source
from stef.io.checkpoint import Checkpoint
from stef.io.database import Database, open_database
from stef.io.discard import DiscardSink
from stef.io.jsonl import FileSource, JsonlSink
from stef.io.kafka import KafkaSink, KafkaSource
from stef.io.otlp.decode import require_otlp
from stef.io.otlp.exports import MAX_TRACE_LINE_BYTES, ParquetRows, detect_format, row_spans
from stef.io.otlp.record import check_field_mapping
from stef.io.otlp.sinks import OtlpHttpSink, OtlpKafkaSink
from stef.io.otlp.source import OtlpSource
from stef.io.references import load_references
from stef.io.rotation import process_started
from stef.io.urls import Endpoint, same_place
from stef.judges.base import Judge
from stef.judges.heuristic.judge import HeuristicJudge, HeuristicOptions
from stef.judges.llm import LlmJudge, build_llm_judge
from stef.judges.ratelimit import RateLimitedJudge
from stef.metrics import Metrics
from stef.models import Backfill
from stef.pipeline import Cascade, Pipeline, PipelineOptions
from stef.rules import RuleSet
from stef.settings import Settings
from stef.stages.reference_generated import Generated


def build_backend(settings: Settings, metrics: Metrics | None = None) -> Judge:
    """The judge backend: the LLM judge when an endpoint is configured, else the heuristic one;
    behind the per-replica rate limits when any is set."""
    backend: Judge
    if settings.llm.configured:
        backend = build_llm_judge(settings.llm, metrics)
    else:
        backend = HeuristicJudge(HeuristicOptions(**settings.heuristic.model_dump()))
    if settings.llm_requests_per_s or settings.llm_tokens_per_min:
        backend = RateLimitedJudge(
            backend,
            requests_per_s=settings.llm_requests_per_s,
            tokens_per_min=settings.llm_tokens_per_min,
        )
    return backend


def build_canary_backend(settings: Settings, live: Judge, metrics: Metrics | None = None) -> Judge:
    """The canary's twin of the live backend: the same endpoint, model and prompts from the same
    settings, but without the judge cache (a cached answer would hide a changed model for ever)
    and with its own connection pool; behind the live backend's rate-limit buckets, so the
    replica's request and token budgets hold. ``metrics`` sees its LLM calls (real spend); the
    reported-model watch is the live judge's, so a model swap counts once."""
    twin: Judge
    inner = live.backend if isinstance(live, RateLimitedJudge) else live
    if settings.llm.configured:
        uncached = settings.llm.model_copy(update={"cache_size": 0, "cache_path": None})
        watch = inner.model_watch if isinstance(inner, LlmJudge) else None
        twin = build_llm_judge(uncached, metrics, model_watch=watch)
    else:
        twin = HeuristicJudge(HeuristicOptions(**settings.heuristic.model_dump()))
    return live.sharing(twin) if isinstance(live, RateLimitedJudge) else twin


def build_pipeline(
    settings: Settings,
    rules: RuleSet | Callable[[], RuleSet],
    backend: Judge,
    metrics: Metrics | None = None,
    *,
    backfill: Backfill | None = None,
    cascade: bool = True,
) -> Pipeline:
    """The record path with the settings' field mapping, limits and dead-letter cap; with the
    heuristic as a second opinion when another backend decides (``llm.second_opinion``);
    ``backfill`` marks every result (``stef backfill`` only); the calibration of the settings
    (or the backend's default) applied to every result.

    With ``llm.verdict: cascade`` (and ``cascade`` true; the canary passes false, it watches the
    LLM itself) the heuristic judges first, with its default calibration, and ``backend`` only
    the records it escalates; ``calibration`` is then the LLM's.

    Raises:
        ConfigError: the calibration file is bad or was fitted for another judge.
    """
    calibration = calibration_for(settings.calibration, backend.info)
    stages: Cascade | None = None
    if cascade and _cascade_mode(settings) and backend.info.backend != "heuristic":
        heuristic = HeuristicJudge(HeuristicOptions(**settings.heuristic.model_dump()))
        first = calibration_for(None, heuristic.info)
        if first is None:
            raise ConfigError("llm.verdict cascade needs the heuristic's calibration")
        stages = Cascade(backend, calibration, settings.cascade_below)
        backend, calibration = heuristic, first
    if metrics is not None and calibration is not None:
        metrics.set_calibration(calibration)
    second = None
    if backend.info.backend != "heuristic" and settings.llm.second_opinion:
        second = HeuristicJudge(HeuristicOptions(**settings.heuristic.model_dump()))
    options = PipelineOptions(
        mapping=settings.mapping,
        limits=settings.limits,
        dead_letter_max_bytes=settings.dead_letter_max_bytes,
        guess_dialect=settings.guess_dialect,
        second_opinion=second,
        backfill=backfill,
        calibration=calibration,
        review_below=settings.review_below,
        cascade=stages,
        include_input=settings.results_include_input,
        references=(
            load_references(
                settings.references,
                settings.limits.max_sql_chars,
                max_question_chars=settings.limits.max_question_chars,
                max_call_nesting=settings.limits.max_sql_call_nesting,
            )
            if settings.references
            else {}
        ),
        reference_db=_reference_db(settings),
        reference_generated=_reference_generated(settings),
    )
    return Pipeline(rules, backend, options, metrics=metrics)


def _reference_db(settings: Settings) -> Database | None:
    """The database of reference mode's execution; None unless ``reference.execute`` is set.
    It lives as long as the process (SQLite opens a connection per statement anyway)."""
    ref = settings.reference
    if ref.execute is None:
        return None
    return open_database(ref.execute, timeout_s=ref.timeout_s, max_rows=ref.max_rows)


def _reference_generated(settings: Settings) -> Generated | None:
    """Reference mode's generated databases: on unless ``reference.generate`` is false (a
    configured ``reference.execute`` database goes first)."""
    ref = settings.reference
    if not ref.generate:
        return None
    # All of a record's databases within its CPU budget (limits.max_record_cpu_s).
    timeout_s = min(ref.timeout_s, settings.limits.max_record_cpu_s)
    return Generated(databases=ref.databases, timeout_s=timeout_s, max_rows=ref.max_rows)


def _cascade_mode(settings: Settings) -> bool:
    """``llm.verdict`` is ``cascade`` (read by name: the verdict modes live in the LLM config)."""
    return getattr(settings.llm, "verdict", None) == "cascade"


def open_source(endpoint: Endpoint, settings: Settings) -> Source:
    """The source of a parsed ``--source`` URL.

    Raises:
        ConfigError: an ``otlp+kafka://`` source without the ``otel`` extra, or with a
            ``field_mapping`` it cannot lay records out for; a Parquet file (``stef replay``
            reads trace exports).
    """
    if endpoint.kind == "otlp+kafka":
        return otlp_records(_kafka_source(endpoint, settings), endpoint, settings)
    if endpoint.kind == "kafka":
        return _kafka_source(endpoint, settings)
    path = endpoint.path if endpoint.kind == "file" else "-"
    if path and path.endswith(".parquet"):
        # Read as lines, its bytes were a dead letter per chunk and the run's hint was about
        # field names.
        raise ConfigError(
            f"source {endpoint}: a Parquet file is a trace export, which stef replay reads "
            "(a source reads JSON lines)"
        )
    # The checkpoint belongs to the configured source, not to another file opened here.
    where = settings.checkpoint_path if endpoint == settings.source_endpoint else None
    return FileSource(
        path or "-",
        follow=settings.follow,
        checkpoint=Checkpoint(where) if where is not None else None,
        max_line_bytes=settings.limits.max_record_bytes,
        # Lines logged and rotated away while the process was starting are not lost.
        since=process_started(),
        rotate_wait_s=settings.file_rotate_wait_s,
    )


def otlp_records(messages: Source, endpoint: Endpoint, settings: Settings) -> OtlpSource:
    """The records of the OTLP messages ``messages`` reads from an ``otlp+kafka://`` endpoint
    (``encoding``, ``signal``: ``logs`` by default on a topic whose name says logs).

    Raises:
        ConfigError: the ``otel`` extra is missing, or a ``field_mapping`` records from traces
            cannot be laid out for.
    """
    require_otlp(f"source {endpoint}")
    check_field_mapping(settings.mapping)
    default_signal = "logs" if "log" in (endpoint.topic or "").lower() else "traces"
    json_encoded = endpoint.option("encoding", "otlp_proto") == "otlp_json"
    return OtlpSource(
        messages,
        encoding="otlp_json" if json_encoded else "otlp_proto",
        signal="logs" if endpoint.option("signal", default_signal) == "logs" else "traces",
        mapping=settings.span_mapping,
        fields=settings.mapping,
    )


def open_file_source(path: str, settings: Settings, input_format: str = "auto") -> Source:
    """The source of a file ``stef replay`` reads: STEF's flat records (JSONL), the Collector's
    OTLP JSON lines, or a Langfuse / LangSmith trace export (JSON lines or Parquet), the
    format told by the file (``auto``) or named. Trace files go through ``span_mapping``.

    Raises:
        ConfigError: a Parquet file of no known export, duckdb or opentelemetry-proto missing,
            a ``field_mapping`` records from traces cannot be laid out for.
    """
    fmt = detect_format(path) if input_format == "auto" and path != "-" else input_format
    if fmt in ("auto", "records"):
        return FileSource(path, max_line_bytes=settings.limits.max_record_bytes)
    check_field_mapping(settings.mapping)
    mapping, fields = settings.span_mapping, settings.mapping
    if fmt in ("otlp", "otlp_logs"):
        require_otlp(f"{path} (OTLP JSON lines)")
        return OtlpSource(
            FileSource(path, max_line_bytes=MAX_TRACE_LINE_BYTES),
            encoding="otlp_json",
            signal="logs" if fmt == "otlp_logs" else "traces",
            mapping=mapping,
            fields=fields,
        )
    inner: Source = (
        ParquetRows(path)
        if path.endswith(".parquet")
        else FileSource(path, max_line_bytes=MAX_TRACE_LINE_BYTES)
    )
    return OtlpSource(
        inner, mapping=mapping, fields=fields, decoder=lambda payload: row_spans(payload, fmt)
    )


def _kafka_source(endpoint: Endpoint, settings: Settings) -> KafkaSource:
    return KafkaSource(
        list(endpoint.bootstrap),
        endpoint.topic or "",
        endpoint.group or settings.group,
        revoke_timeout_s=min(settings.drain_timeout_s, 10.0),
        consumer_options=settings.kafka_consumer,
        auto_offset_reset=settings.auto_offset_reset,
        start_from=settings.start_from,
        unreachable_timeout_s=settings.source_unreachable_timeout_s,
    )


def open_sink(
    endpoint: Endpoint | None,
    settings: Settings,
    *,
    headers: list[tuple[str, bytes]] | None = None,
) -> Sink:
    """The sink of a parsed ``--results`` or ``--dead-letters`` URL; None keeps nothing.
    ``headers`` go on every message of a Kafka sink (files have no place for them)."""
    if endpoint is None:
        return DiscardSink()
    if endpoint.kind == "otlp+http":
        return OtlpHttpSink(endpoint.path or "")
    if endpoint.kind == "otlp+kafka":
        return OtlpKafkaSink(_kafka_sink(endpoint, settings, headers))
    if endpoint.kind == "kafka":
        return _kafka_sink(endpoint, settings, headers)
    return JsonlSink(endpoint.path if endpoint.kind == "file" and endpoint.path else "-")


def _kafka_sink(
    endpoint: Endpoint, settings: Settings, headers: list[tuple[str, bytes]] | None
) -> KafkaSink:
    return KafkaSink(
        list(endpoint.bootstrap),
        endpoint.topic or "",
        settings.kafka_producer,
        compression=settings.kafka_compression,
        headers=headers,
    )


def refuse_feedback(settings: Settings) -> None:
    """Refuse results or dead letters written to the topic or file the source reads: each output
    would be read back, judged (a result or a dead letter is not a valid record: a dead letter)
    and written again, for ever.

    Raises:
        ConfigError: the results or the dead letters go where the source reads.
    """
    source = settings.source_endpoint
    for what, sink in (
        ("results", settings.results_endpoint),
        ("dead_letters", settings.dead_letters_endpoint),
    ):
        if same_place(source, sink):
            raise ConfigError(
                f"{what} {sink} is where the source reads: its output would be read back "
                "and judged again, for ever; write it elsewhere"
            )

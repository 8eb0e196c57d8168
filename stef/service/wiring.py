"""The one builder of what a command runs on, from the settings: the judge backend, the record path,
sources and sinks. ``stef run``, ``replay``, ``judge`` and ``calibrate`` all build through here, so
they read the same settings (config file, ``STEF_*``, flags) the same way."""

from __future__ import annotations

from collections.abc import Callable

from stef.io import Sink, Source
from stef.io.checkpoint import Checkpoint
from stef.io.discard import DiscardSink
from stef.io.jsonl import FileSource, JsonlSink
from stef.io.kafka import KafkaSink, KafkaSource
from stef.io.urls import Endpoint
from stef.judges.base import Judge
from stef.judges.heuristic.judge import HeuristicJudge, HeuristicOptions
from stef.judges.llm import LlmJudge, build_llm_judge
from stef.judges.ratelimit import RateLimitedJudge
from stef.metrics import Metrics
from stef.models import Backfill
from stef.pipeline import Pipeline
from stef.rules import RuleSet
from stef.settings import Settings


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
) -> Pipeline:
    """The record path with the settings' field mapping, limits and dead-letter cap; with the
    heuristic as a second opinion when another backend decides (``llm.second_opinion``);
    ``backfill`` marks every result (``stef backfill`` only)."""
    second = None
    if backend.info.backend != "heuristic" and settings.llm.second_opinion:
        second = HeuristicJudge(HeuristicOptions(**settings.heuristic.model_dump()))
    return Pipeline(
        rules,
        backend,
        mapping=settings.mapping,
        limits=settings.limits,
        metrics=metrics,
        dead_letter_max_bytes=settings.dead_letter_max_bytes,
        guess_dialect=settings.guess_dialect,
        second_opinion=second,
        backfill=backfill,
        include_input=settings.results_include_input,
    )


def open_source(endpoint: Endpoint, settings: Settings) -> Source:
    """The source of a parsed ``--source`` URL."""
    if endpoint.kind == "kafka":
        return KafkaSource(
            list(endpoint.bootstrap),
            endpoint.topic or "",
            endpoint.group or settings.group,
            revoke_timeout_s=min(settings.drain_timeout_s, 10.0),
            consumer_options=settings.kafka_consumer,
            auto_offset_reset=settings.auto_offset_reset,
            start_from=settings.start_from,
        )
    path = endpoint.path if endpoint.kind == "file" else "-"
    # The checkpoint belongs to the configured source, not to another file opened here.
    where = settings.checkpoint_path if endpoint == settings.source_endpoint else None
    return FileSource(
        path or "-",
        follow=settings.follow,
        checkpoint=Checkpoint(where) if where is not None else None,
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
    if endpoint.kind == "kafka":
        return KafkaSink(
            list(endpoint.bootstrap),
            endpoint.topic or "",
            settings.kafka_producer,
            compression=settings.kafka_compression,
            headers=headers,
        )
    return JsonlSink(endpoint.path if endpoint.kind == "file" and endpoint.path else "-")

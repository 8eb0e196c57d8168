"""Process settings of ``stef run``: a YAML config file, overridden by ``STEF_*`` env, then flags.

Validated once at start and frozen. Precedence, lowest first: defaults, the config file,
environment variables, command-line flags. LLM settings live under ``llm:`` in the file and
``STEF_LLM_*`` in the environment (:class:`stef.judges.llm.config.LlmConfig`); the API key is a
``SecretStr`` and is never logged.

Example config file::

    source: kafka://kafka:9092/agent-logs?group=stef
    results: kafka://kafka:9092/stef-results
    dead_letters: kafka://kafka:9092/stef-dead-letters
    rules: /etc/stef/rules
    concurrency: 16
    metrics_port: 9464
    field_mapping:            # STEF field -> path in the agent's log record
      question: user_query
      sql: payload.sql
    known_agents: [sql-agent@2.0, sql-agent@2.1]
    llm_requests_per_s: 5
    llm:
      base_url: http://vllm:8000/v1
      model: qwen2.5-coder-32b
    canary:                   # labelled records re-judged every interval_s (at most sample_size)
      path: /etc/stef/canary.jsonl
      interval_s: 3600
      sample_size: 20
"""

from __future__ import annotations

import difflib
import os
from collections.abc import Mapping
from datetime import datetime
from pathlib import Path
from typing import Any, Literal, get_args, get_origin

import yaml
from kafka import KafkaConsumer, KafkaProducer  # type: ignore[import-untyped]
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from stef.errors import ConfigError, FileError, RulesError
from stef.files import read_bounded, utf8_text
from stef.io.jsonl import ROTATE_WAIT_S
from stef.io.otlp.mapping import SpanMapping
from stef.io.urls import Endpoint, parse_endpoint
from stef.judges.llm.config import (
    PROCESS_LLM_VARIABLES,
    LlmConfig,
    check_env_names,
    read_secret_file,
)
from stef.redact import register_secret
from stef.rules.safe_yaml import MAX_RULES_BYTES, line_of, load_yaml, yaml_problem
from stef.stages.validate import FIELDS, FieldMapping, Limits


class HeuristicSettings(BaseModel):
    """The heuristic judge's opt-in readings (see ``HeuristicOptions``); all off by default."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    backtick_names: bool = False
    operator_mismatch: bool = False
    enrichment_distinct: bool = False


class CanarySettings(BaseModel):
    """The canary: a labelled file (the ``stef calibrate`` format) re-judged on a schedule.

    Attributes:
        path: the labelled JSONL file; None: no canary.
        interval_s: seconds between two runs (the first runs at start).
        sample_size: records judged per run, at most: the bound on the canary's judge calls per
            interval (a stratified sample when the file has more).
        concurrency: records the canary judges at once, beside the live stream's workers.
        pass_threshold: the judge predicts "correct" at ``score >= pass_threshold``.
        kappa_floor: the alert fires when Cohen's kappa falls below this.
        accuracy_floor: the alert fires when accuracy falls below this.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    path: Path | None = None
    interval_s: float = Field(3600.0, gt=0)
    sample_size: int = Field(20, ge=2, le=10_000)
    concurrency: int = Field(1, ge=1, le=64)
    pass_threshold: float = Field(75.0, ge=0, le=100)
    kappa_floor: float = Field(0.4, ge=-1, le=1)
    accuracy_floor: float = Field(0.7, ge=0, le=1)


class ReferenceSettings(BaseModel):
    """Reference mode's execution (``reference:`` in the config file).

    Attributes:
        execute: ``sqlite:///file.db`` or ``duckdb:///file.duckdb`` (four slashes for an
            absolute path): the generated and the reference SELECT of every record with a
            reference run there, read-only, and their rows are compared. None: the queries
            run on generated databases instead (``generate``).
        timeout_s: the longest one statement may run; longer is a finding, not a crash. On
            generated databases: the longest all of a record's databases may take.
        max_rows: the most rows one statement may return; more is a finding.
        generate: run both queries on small databases generated for them (the schema inferred
            from the two queries) without ``execute``, or where its rows told nothing (the
            same rows holding nothing, neither query runs there, the reference fails there);
            false: structure only, or ``execute``'s rows alone.
        databases: how many databases are generated per record.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    execute: str | None = None
    timeout_s: float = Field(5.0, gt=0, le=600)
    max_rows: int = Field(10_000, ge=1, le=10_000_000)
    generate: bool = True
    databases: int = Field(8, ge=1, le=64)

    @field_validator("execute")
    @classmethod
    def _scheme(cls, value: str | None) -> str | None:
        if value is not None and not value.startswith(("sqlite:///", "duckdb:///")):
            raise ValueError("reference.execute must be sqlite:///path or duckdb:///path")
        return value


class Settings(BaseModel):
    """Everything ``stef run`` needs, validated at start.

    Attributes:
        source: ``kafka://HOST:PORT/TOPIC?group=G``, ``file:PATH``, ``-`` (stdin), or
            ``otlp+kafka://HOST:PORT/TOPIC?group=G&encoding=otlp_proto|otlp_json`` (traces).
        follow: keep reading a ``file:`` source as it grows (survives rotation).
        file_checkpoint: where a followed ``file:`` source keeps its read position (the byte
            offset past the last acknowledged line and the file's identity), so a restart
            resumes there instead of re-judging the log. Default: beside the results, as the
            hidden file ``.<name>.stef-checkpoint`` in the results file's directory; when
            results go to stdout or Kafka there is no results file, and it sits beside the
            source log instead (the log's volume is the one that outlives a container restart
            in a sidecar pod). ``off``: no checkpoint (every start reads the file from its
            beginning). Unused without ``follow``.
        file_rotate_wait_s: after a rename rotation, how long the renamed file must have gone
            unwritten before a followed ``file:`` source leaves it for the next generation: a
            writer still holding it finishes its line there (and may write more) before it
            reopens the path. The new generation's lines wait for it (order is kept); a
            renamed file last written longer ago than this is not waited for, nor is a
            copytruncate copy or a ``.gz``. 0: no wait (a half line is cut at once).
        results: where results go: ``kafka://HOST:PORT/TOPIC``, ``file:PATH``, ``-`` (stdout),
            or as OpenTelemetry evaluation log records: ``otlp+http://HOST:PORT`` or
            ``otlp+kafka://HOST:PORT/TOPIC``.
        dead_letters: where invalid and poison records go (``results``' forms but the
            OpenTelemetry ones).
            Default: ``dead_letters.jsonl`` in the state directory (:func:`state_dir`),
            created once the source is open.
        rules: rules file or directory; None: the built-in defaults.
        rules_check_interval_s: how often the rules are checked for changes (hot reload).
        concurrency: records judged at once (worker threads).
        gc_gen0: allocations between two collections of Python's youngest generation in a
            replica (Python's own default: 700). When the replica is built, before its workers
            start, what is alive is frozen out of every collection (``gc.freeze``). 0 leaves
            Python's collector as it is; at most 10⁹.
        max_inflight: records fetched but not yet acknowledged; fetching pauses at this bound.
            Defaults to ``max(256, 4 * concurrency)``: enough that the workers keep judging
            while earlier results wait for the broker's acknowledgement.
        max_inflight_bytes: the same bound on the records' bytes (raw payloads, Kafka keys):
            fetching pauses once the records in flight add up to this, and a fetch asks for no
            more records than fit at their recent mean size. Memory grows with the SQL in
            flight (analysis holds parse trees many times the SQL's size), so this is what
            bounds memory when records are large. Default 4 MiB.
        drain_timeout_s: on SIGTERM/SIGINT, how long in-flight work may take to finish.
        record_timeout_s: the longest one record may take in a worker (LLM retries included);
            a worker busy for longer fails ``/healthz``, and at the end of a file no record is
            awaited for longer than this. Default 600 s, or the LLM judge's budget when that is
            longer (:func:`load_settings`); set below that budget, it is refused.
        commit_interval_s: how often acknowledged offsets are committed.
        metrics_host: interface of the metrics/health HTTP server.
        metrics_port: its port; 0 lets the system pick one (logged); None: no server.
        group: the consumer group when the source URL names none.
        kafka_consumer: extra ``KafkaConsumer`` settings (session timeout, client id, TLS ...).
        kafka_producer: extra ``KafkaProducer`` settings for Kafka sinks.
        auto_offset_reset: where a consumer group without a committed offset starts:
            ``latest`` (Kafka's own default: only records that arrive after it joins; a new
            group does not replay the topic through the LLM) or ``earliest`` (the whole
            retained topic).
        start_from: a timestamp with its timezone (``2026-11-01T00:00:00Z``): a partition
            without a committed offset starts at the first record at or after it (the
            broker's time index); partitions with a committed offset keep it.
        kafka_compression: the codec of results and dead letters written to Kafka:
            ``lz4`` (default: the least CPU per byte of the four, understood by every broker
            since 0.10 and every client), ``zstd`` (smaller, more CPU; needs brokers 2.1+),
            ``gzip``, ``snappy`` or ``none``. A ``compression_type`` in ``kafka_producer``
            takes precedence. Consuming handles all four whatever this says.
        field_mapping: STEF field -> path in the agent's log record (dotted for nesting).
        span_mapping: OpenTelemetry traces -> records (an ``otlp+kafka://`` source, OTLP and
            trace-export files): presets, span selectors, the trace assembly bounds
            (:class:`stef.io.otlp.mapping.SpanMapping`, docs/opentelemetry.md).
        limits: record size limits beyond which a record is invalid input.
        dead_letter_max_bytes: the largest dead letter written; a longer payload is cut to a
            prefix (its length and sha256 kept). Keep it below the Kafka producer's
            ``max_request_size`` (1 MiB by default).
        known_agents: agent label values (``agent@version``) for metrics; others are ``other``.
            None: the first ``max_agents`` seen.
        max_agents: bound on distinct agent labels when ``known_agents`` is None.
        llm_requests_per_s: per-replica judge request rate (token bucket; delays, never drops).
        llm_tokens_per_min: per-replica LLM token rate (prompt + completion).
        log_level: ``debug`` (one line per judged record), ``info`` (starts, stops,
            rebalances, retries; dead letters), ``warning`` ...
        log_format: ``auto`` (console text when stderr is a terminal, JSON lines otherwise),
            ``json`` or ``console``.
        log_deps_level: the level of the HTTP and Kafka clients' own loggers; None: warning
            (or ``log_level`` when higher), whatever ``log_level`` says.
        llm: the LLM endpoint; not configured means the heuristic judge.
        guess_dialect: when neither the record nor its app's rules name a dialect and the
            generic dialect cannot parse the SQL, try a short list of dialects (the one used is
            reported in ``sql_spec.dialect``, with ``dialect_guessed``).
        heuristic: the heuristic judge's opt-in readings and signals, off by default; each
            was measured against human labels and lowered agreement on some source
            (:class:`~stef.judges.heuristic.judge.HeuristicOptions` says by how much).
        canary: the labelled records re-judged on a schedule to watch the judge itself
            (:class:`CanarySettings`; off unless ``canary.path`` is set).
        results_include_input: every result carries the record's question, enriched question
            and SQL under ``input`` (what ``stef review`` and ``stef report`` show); false
            leaves them out where results must not repeat the agent's log.
        commit_failures_unhealthy: ``/healthz`` fails once this many commits in a row (Kafka
            offsets, a followed file's checkpoint) have failed; each failure is retried at the
            next commit and counted in ``stef_commit_failures_total``.
        references: a JSONL file of reviewed SQL by question (``{"question", "gold_sql"}`` a
            line): a record whose normalised question is there is judged against that SQL
            too (reference mode); a record's own ``gold_sql`` wins.
        reference: reference mode's opt-in execution (:class:`ReferenceSettings`).
        source_unreachable_timeout_s: how long a Kafka source may stay unusable (no broker
            answers, or the group cannot be rejoined after a broker restart) before
            ``/readyz`` fails and the command exits 1 (a restart starts afresh); ``stef
            backfill`` then says where it stopped.
        calibration: the calibration file that maps the judge's raw signal to P(correct)
            (``stef calibrate LABELS --fit FILE``); unset: the package's default for the
            backend (the heuristic ships one; an LLM has none); ``none``: no calibration.
        review_below: results whose confidence is below this get ``needs_review: true``.
        cascade_below: with ``llm.verdict: cascade``, records whose calibrated heuristic
            confidence is below this (and unsafe-looking SQL) go to the LLM; the others are
            decided by the heuristic alone.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    source: str = "-"
    follow: bool = False
    results: str = "-"
    dead_letters: str = Field(default_factory=lambda: default_dead_letters(os.environ))
    rules: Path | None = None
    rules_check_interval_s: float = Field(2.0, gt=0)
    concurrency: int = Field(8, ge=1, le=1024)
    gc_gen0: int = Field(10_000, ge=0, le=1_000_000_000)
    max_inflight: int | None = Field(None, ge=1)
    max_inflight_bytes: int = Field(4 * 1024 * 1024, ge=1024)
    drain_timeout_s: float = Field(30.0, ge=0)
    record_timeout_s: float = Field(600.0, gt=0)
    commit_interval_s: float = Field(0.5, gt=0)
    metrics_host: str = "127.0.0.1"
    metrics_port: int | None = Field(9464, ge=0, le=65535)
    group: str = "stef"
    kafka_consumer: dict[str, Any] = Field(default_factory=dict)
    kafka_producer: dict[str, Any] = Field(default_factory=dict)
    file_checkpoint: str | None = None
    file_rotate_wait_s: float = Field(ROTATE_WAIT_S, ge=0, le=3600)
    auto_offset_reset: Literal["latest", "earliest"] = "latest"
    start_from: datetime | None = None
    kafka_compression: Literal["none", "gzip", "snappy", "lz4", "zstd"] = "lz4"
    field_mapping: dict[str, str] = Field(default_factory=dict)
    span_mapping: SpanMapping = Field(default_factory=lambda: SpanMapping())
    limits: Limits = Field(default_factory=Limits)
    dead_letter_max_bytes: int = Field(512 * 1024, ge=1024)
    known_agents: list[str] | None = None
    max_agents: int = Field(20, ge=1)
    llm_requests_per_s: float | None = Field(None, gt=0)
    llm_tokens_per_min: float | None = Field(None, gt=0)
    log_level: str = "info"
    llm: LlmConfig = Field(default_factory=LlmConfig)
    guess_dialect: bool = True
    heuristic: HeuristicSettings = Field(default_factory=lambda: HeuristicSettings())
    canary: CanarySettings = Field(default_factory=lambda: CanarySettings())
    results_include_input: bool = True
    commit_failures_unhealthy: int = Field(10, ge=1)

    calibration: str | None = None
    review_below: float = Field(0.6, ge=0, le=1)
    cascade_below: float = Field(0.6, ge=0, le=1)

    @model_validator(mode="after")
    def _llm_fits_the_record_timeout(self) -> Settings:
        # A slow but healthy record must not outlast record_timeout_s: /healthz would fail and
        # the liveness probe restart the replica in the middle of it.
        budget = self.llm.record_budget_s
        if self.llm.configured and budget > self.record_timeout_s:
            raise ValueError(
                f"the LLM judge may take {budget:g} s on one record (llm.timeout_s, "
                "max_retries, max_total_retry_s, backoff_max_s, samples and one re-ask), more "
                f"than record_timeout_s {self.record_timeout_s:g} s: raise record_timeout_s to "
                f"{budget:g} or lower the LLM budget"
            )
        return self

    references: Path | None = None
    reference: ReferenceSettings = Field(default_factory=lambda: ReferenceSettings())
    log_format: Literal["auto", "json", "console"] = "auto"
    log_deps_level: str | None = None
    source_unreachable_timeout_s: float = Field(120.0, gt=0)

    @field_validator("source")
    @classmethod
    def _source_url(cls, value: str) -> str:
        parse_endpoint(value, what="source")
        return value

    @field_validator("results", "dead_letters")
    @classmethod
    def _sink_url(cls, value: str) -> str:
        parse_endpoint(value, what="sink")
        return value

    @field_validator("dead_letters")
    @classmethod
    def _dead_letters_not_otlp(cls, value: str) -> str:
        if parse_endpoint(value, what="sink").kind.startswith("otlp+"):
            raise ValueError(
                "dead letters are not evaluations: write them to kafka://, file: or -, "
                "not an OpenTelemetry sink"
            )
        return value

    @field_validator("kafka_consumer")
    @classmethod
    def _consumer_options(cls, value: dict[str, Any]) -> dict[str, Any]:
        return _kafka_options(value, "consumer")

    @field_validator("kafka_producer")
    @classmethod
    def _producer_options(cls, value: dict[str, Any]) -> dict[str, Any]:
        return _kafka_options(value, "producer")

    @field_validator("field_mapping")
    @classmethod
    def _mapping(cls, value: dict[str, str]) -> dict[str, str]:
        FieldMapping(fields=value)
        unknown = set(value) - set(FIELDS)
        if unknown:
            raise ValueError(f"unknown STEF field(s) {sorted(unknown)}; known: {list(FIELDS)}")
        return value

    @field_validator("metrics_port", mode="before")
    @classmethod
    def _port(cls, value: Any) -> Any:
        if isinstance(value, str) and value.strip().lower() in ("off", "none", "-", ""):
            return None
        return value

    @field_validator("start_from")
    @classmethod
    def _aware(cls, value: datetime | None) -> datetime | None:
        if value is not None and value.utcoffset() is None:
            raise ValueError("start_from needs a timezone, e.g. 2026-11-01T00:00:00Z")
        if value is not None and value.timestamp() < 0:
            raise ValueError("start_from is before 1970-01-01, where Kafka timestamps start")
        return value

    @field_validator("log_level", "log_deps_level")
    @classmethod
    def _level(cls, value: str | None) -> str | None:
        if value is None:
            return None
        if value.lower() not in ("debug", "info", "warning", "error", "critical"):
            raise ValueError("log_level must be debug, info, warning, error or critical")
        return value.lower()

    @property
    def source_endpoint(self) -> Endpoint:
        return parse_endpoint(self.source, what="source")

    @property
    def results_endpoint(self) -> Endpoint:
        return parse_endpoint(self.results, what="results")

    @property
    def dead_letters_endpoint(self) -> Endpoint:
        return parse_endpoint(self.dead_letters, what="dead-letters")

    @property
    def mapping(self) -> FieldMapping:
        return FieldMapping(fields=self.field_mapping)

    @property
    def checkpoint_path(self) -> str | None:
        """The file source checkpoint in use: None without ``follow``, for a source that is
        not a file, or when ``file_checkpoint`` is ``off``."""
        source = self.source_endpoint
        if not self.follow or source.kind != "file" or not source.path:
            return None
        if self.file_checkpoint is not None:
            off = self.file_checkpoint.strip().lower() in ("off", "none", "-", "")
            return None if off else self.file_checkpoint
        results = self.results_endpoint
        beside = results.path if results.kind == "file" and results.path else source.path
        directory, name = os.path.split(beside)
        return os.path.join(directory, f".{name}.stef-checkpoint")

    @property
    def inflight_bound(self) -> int:
        return self.max_inflight or max(256, 4 * self.concurrency)

    @property
    def inflight_bytes_bound(self) -> int:
        return self.max_inflight_bytes


# kafka-python options that hold a secret; ``<name>_file`` reads it from a file instead.
KAFKA_SECRETS = ("sasl_plain_password", "ssl_password")
# Options STEF sets itself: a value given for them would be overridden, or break delivery.
_KAFKA_OWN = {"bootstrap_servers", "group_id", "enable_auto_commit"}


def _kafka_options(value: dict[str, Any], kind: str) -> dict[str, Any]:
    """``kafka_consumer`` / ``kafka_producer`` checked at start: every name is a kafka-python
    option (a misspelt ``sasl_mechansim`` would otherwise surface as a connection failure), and
    ``sasl_plain_password_file`` / ``ssl_password_file`` are read into their option."""
    if not value:
        return value
    known = set((KafkaConsumer if kind == "consumer" else KafkaProducer).DEFAULT_CONFIG)
    known |= {f"{k}_file" for k in KAFKA_SECRETS}
    out = dict(value)
    for name in value:
        if name not in known:
            near = difflib.get_close_matches(name, sorted(known), n=1)
            hint = f" (did you mean {near[0]}?)" if near else ""
            raise ValueError(f"{name!r} is not a kafka-python {kind} option{hint}")
        if name in _KAFKA_OWN:
            raise ValueError(f"{name!r} is set by STEF (from the URL and the settings)")
    for secret in KAFKA_SECRETS:
        path = out.pop(f"{secret}_file", None)
        if path is None:
            continue
        if secret in out:
            raise ValueError(f"give {secret} or {secret}_file, not both")
        out[secret] = read_secret_file(str(path))
    return out


def _register_secrets(settings: Settings) -> None:
    """The secrets of the settings, redacted from every log line from now on."""
    if settings.llm.api_key is not None:
        register_secret(settings.llm.api_key.get_secret_value())
    for options in (settings.kafka_consumer, settings.kafka_producer):
        for name in KAFKA_SECRETS:
            if isinstance(options.get(name), str):
                register_secret(options[name])


def _structured(annotation: Any) -> bool:
    """Whether a setting of this type is given as YAML/JSON text in its variable: a mapping, a
    list or a model, or one of them or None."""
    for kind in (annotation, *get_args(annotation)):
        origin = get_origin(kind) or kind
        if origin in (dict, list) or (isinstance(origin, type) and issubclass(origin, BaseModel)):
            return True
    return False


# Every setting has its ``STEF_<NAME>`` variable, but ``llm``: its fields are ``STEF_LLM_*``
# (:class:`LlmConfig`). Structured ones take YAML/JSON text.
_ENV_KEYS = tuple(name for name in Settings.model_fields if name != "llm")
_STRUCTURED = frozenset(k for k in _ENV_KEYS if _structured(Settings.model_fields[k].annotation))


def state_dir(env: Mapping[str, str]) -> Path:
    """Where STEF keeps what it writes by default: ``$STEF_STATE_DIR``, else
    ``$XDG_STATE_HOME/stef``, else ``~/.local/state/stef`` (the XDG base directory default).
    Never the working directory: in a container that is the read-only application folder."""
    if env.get("STEF_STATE_DIR", "").strip():
        return Path(env["STEF_STATE_DIR"].strip())
    if env.get("XDG_STATE_HOME", "").strip():
        return Path(env["XDG_STATE_HOME"].strip()) / "stef"
    return Path(env.get("HOME", "").strip() or os.path.expanduser("~")) / ".local/state/stef"


def default_dead_letters(env: Mapping[str, str]) -> str:
    """The default ``dead_letters`` sink: ``dead_letters.jsonl`` in :func:`state_dir`."""
    return f"file:{state_dir(env) / 'dead_letters.jsonl'}"


def _env_value(key: str, text: str) -> Any:
    if key in _STRUCTURED:
        name = f"STEF_{key.upper()}"
        try:
            return load_yaml(text, name)[1]
        except yaml.YAMLError as exc:
            raise ConfigError(" ".join(f"{name} is not valid YAML/JSON: {exc}".split())) from exc
        except RulesError as exc:  # nested too deep, an integer too long ...
            raise ConfigError(f"{name} is not valid YAML/JSON: {exc}") from exc
    return text


def load_settings(
    config: str | Path | None = None,
    overrides: Mapping[str, Any] | None = None,
    env: Mapping[str, str] | None = None,
) -> Settings:
    """Build the settings: defaults < config file < ``STEF_*`` env < ``overrides`` (flags).

    Raises:
        ConfigError: the file is unreadable or not a mapping, or any value fails validation
            (the message names the setting, never a secret's value).
    """
    source = os.environ if env is None else env
    _check_env_names(source)
    data: dict[str, Any] = {}
    config = config or source.get("STEF_CONFIG") or None
    node = None
    if config is not None:
        node, loaded = _read_config(config)
        data.update(loaded)
    from_file = set(data)
    for key in _ENV_KEYS:
        text = source.get(f"STEF_{key.upper()}", "").strip()
        if text:
            data[key] = _env_value(key, text)
            from_file.discard(key)
    for key, value in (overrides or {}).items():
        if value is not None:
            data[key] = value
            from_file.discard(key)
    data.setdefault("dead_letters", default_dead_letters(source))
    data["llm"] = _llm_settings(data.pop("llm", None) or {}, source, config, node)
    if "record_timeout_s" not in data and data["llm"].configured:
        # Left unset, the record timeout covers the LLM budget (a slow local model's
        # timeout_s: 300 needs no second setting); set below it, it is refused.
        default = Settings.model_fields["record_timeout_s"].default
        data["record_timeout_s"] = max(default, data["llm"].record_budget_s)
    try:
        settings = Settings.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(_problems(exc, config, node, (), from_file)) from exc
    _register_secrets(settings)
    return settings


def _llm_settings(
    llm_file: Any, source: Mapping[str, str], config: str | Path | None, node: Any
) -> LlmConfig:
    """The ``llm:`` mapping of the config file under the ``STEF_LLM_*`` variables, validated."""
    if not isinstance(llm_file, dict):
        raise ConfigError(f"config {config}:{line_of(node, ('llm',))}: 'llm' must be a mapping")
    llm_env = LlmConfig.from_env(_llm_variables(source), partial=True).model_dump(
        exclude_unset=True
    )
    if "cache_path" in llm_env:  # STEF_LLM_CACHE over the file's ``cache`` (its other name)
        llm_file = {k: v for k, v in llm_file.items() if k != "cache"}
    try:
        llm = LlmConfig.model_validate({**llm_file, **llm_env})
    except ValidationError as exc:
        file_keys = {k for k in llm_file if k not in llm_env}
        raise ConfigError(_problems(exc, config, node, ("llm",), file_keys)) from exc
    _check_llm_endpoint(llm, llm_file, source)
    return llm


def _problems(
    exc: ValidationError,
    config: str | Path | None,
    node: Any,
    prefix: tuple[str, ...],
    file_keys: set[str],
) -> str:
    """One line of every validation problem; a value from the config file is located there
    (``FILE:LINE``), so a wrong type names the file and the line to fix."""
    said = []
    for e in exc.errors(include_url=False):
        loc = (*prefix, *(str(p) for p in e["loc"]))
        name = ".".join(loc) or "settings"
        if config is not None and e["loc"] and str(e["loc"][0]) in file_keys:
            said.append(f"{config}:{line_of(node, loc)}: {name}: {e['msg']}")
        else:
            said.append(f"{name}: {e['msg']}")
    return "invalid settings: " + "; ".join(said)


# Process-level variables read elsewhere: the config path, the prompts folder, the log level, and
# the real-model test's knobs (so a developer's shell with them set can still run STEF).
_OTHER_VARIABLES = {
    "STEF_CONFIG",
    "STEF_PROMPTS_DIR",
    "STEF_LOG_LEVEL",
    "STEF_STATE_DIR",
    "STEF_SKIP_REAL_MODEL",
    "STEF_REAL_MODEL_RECORDS",
}


def _llm_variables(source: Mapping[str, str]) -> dict[str, str]:
    """The ``STEF_LLM_*`` variables of :class:`LlmConfig`: the prefix is shared by process settings
    (``llm_requests_per_s`` is ``STEF_LLM_REQUESTS_PER_S``), which are not LLM settings."""
    own = {f"STEF_{key.upper()}" for key in _ENV_KEYS} | PROCESS_LLM_VARIABLES
    return {k: v for k, v in source.items() if k.startswith("STEF_LLM_") and k not in own}


def _check_llm_endpoint(
    llm: LlmConfig, llm_file: Mapping[str, Any], env: Mapping[str, str]
) -> None:
    """LLM settings without an endpoint would judge with the heuristic, silently: the endpoint
    was most likely meant to be set too (or was set under a misspelt name)."""
    if llm.configured:
        return
    given = sorted(f"llm.{k}" for k in llm_file) + sorted(
        n for n, v in env.items() if n in _llm_variables(env) and v.strip()
    )
    if given:
        raise ConfigError(
            f"LLM settings given ({', '.join(given)}) but no endpoint: set STEF_LLM_BASE_URL "
            "(llm.base_url) or STEF_LLM_API_KEY (llm.api_key, for api.openai.com), or remove "
            "them to judge with the heuristic"
        )


def _check_env_names(source: Mapping[str, str]) -> None:
    """A misspelt variable must not be ignored silently, as an unknown config key is not: every
    STEF_* name is a setting, STEF_LLM_* (read by LlmConfig), or a process-level variable."""
    check_env_names(_llm_variables(source))
    known = {f"STEF_{key.upper()}" for key in _ENV_KEYS} | _OTHER_VARIABLES
    unknown = sorted(
        name
        for name in source
        if name.startswith("STEF_") and not name.startswith("STEF_LLM_") and name not in known
    )
    if unknown:
        raise ConfigError(
            f"unknown environment variable{'s' if len(unknown) > 1 else ''} "
            f"{', '.join(unknown)}: not a STEF setting (misspelt?); STEF_<NAME> sets the setting "
            f"<name>, one of {', '.join(sorted(_ENV_KEYS))}"
        )


def _read_config(config: str | Path) -> tuple[Any, dict[str, Any]]:
    """The composed YAML node (for line numbers) and the mapping of a config file.

    Read as rules files are: the file type checked before it is opened (a FIFO would block the
    start for ever), at most 1 MiB, UTF-8, and YAML with caps on nesting, values and integer
    length, so any file gives one line naming it (and the line) within a second.

    Raises:
        ConfigError: ``config FILE[:LINE]: what is wrong``.
    """
    path = str(config)
    text = _config_text(path)
    try:
        node, loaded = load_yaml(text, path)
    except yaml.YAMLError as exc:
        # PyYAML's message spans lines ("while parsing ... in <string>"): folded to one.
        raise ConfigError(" ".join(f"config {yaml_problem(exc, path)}".split())) from exc
    except RulesError as exc:
        raise ConfigError(f"config {exc.problems[0]}") from exc
    if loaded is None:
        return node, {}
    if not isinstance(loaded, dict):
        raise ConfigError(f"config {path}:1: top level must be a mapping of settings")
    return node, loaded


def _config_text(path: str) -> str:
    """The config file's text: a regular file of at most 1 MiB, its type checked first, UTF-8
    (the line of the first bad byte named)."""
    try:
        return utf8_text(read_bounded(path, MAX_RULES_BYTES, kind="settings file"), path)
    except FileError as exc:
        raise ConfigError(f"config {exc}") from exc

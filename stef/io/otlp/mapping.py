"""``span_mapping``: where a trace's question, enriched question and SQL are, by span selectors
and paths into attributes, with shipped presets for the GenAI semantic conventions and for
OpenInference (docs/opentelemetry.md). Settings only: reading a trace is :mod:`.record`."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from stef.fields import path_parts

SpanKind = Literal["INTERNAL", "SERVER", "CLIENT", "PRODUCER", "CONSUMER", "LOG"]


class SpanSelector(BaseModel):
    """Which spans a pick reads: every condition given must hold.

    Attributes:
        name: the span name (or a log record's event name), a glob (``execute_tool*``).
        kind: the span kind; ``LOG`` for log records.
        attributes: attributes that must equal these values (compared as text).
        root: only the trace's root span (true) or only the others (false).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str | None = None
    kind: SpanKind | None = None
    attributes: dict[str, str] = Field(default_factory=dict)
    root: bool | None = None


class Pick(BaseModel):
    """One place a field may be: an attribute of the selected spans, a path into its value (a
    JSON text is parsed first), the content of the last message of ``role`` in a message list,
    and the SQL of a fenced block. The first span (by start time, ``which``) where the whole
    pick finds non-empty text wins.

    Attributes:
        span: the spans read.
        attribute: the attribute (``body`` for a log record's body); a flattened family
            (``llm.input_messages.0.message.content`` ...) is read as the list it flattens.
        path: dotted path with ``[i]`` indexes into the attribute's value.
        role: the value is a list of chat messages: take the content of the last one of this
            role (GenAI ``parts`` and OpenAI ``content`` shapes both read).
        fenced_sql: take the SQL of the first fenced code block when there is one.
        which: ``last`` or ``first`` matching span by start time.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    span: SpanSelector = Field(default_factory=SpanSelector)
    attribute: str
    path: str | None = None
    role: str | None = None
    fenced_sql: bool = False
    which: Literal["first", "last"] = "last"

    @field_validator("path")
    @classmethod
    def _path(cls, value: str | None) -> str | None:
        if value is not None:
            path_parts(value)  # a path that cannot be read fails at start
        return value


_GENAI_CHAT = SpanSelector(attributes={"gen_ai.operation.name": "chat"})
_OI_LLM = SpanSelector(attributes={"openinference.span.kind": "LLM"})
_OI_TOOL = SpanSelector(attributes={"openinference.span.kind": "TOOL"})
_LF = {"stef.export": "langfuse"}
_LF_GENERATION = SpanSelector(attributes={**_LF, "langfuse.observation.type": "GENERATION"})
_LF_TOOL = SpanSelector(attributes={**_LF, "langfuse.observation.type": "TOOL"})
_LF_ROOT = SpanSelector(root=True, attributes=_LF)
_LS = {"stef.export": "langsmith"}
_LS_ROOT = SpanSelector(root=True, attributes=_LS)
_LS_TOOL = SpanSelector(attributes={**_LS, "langsmith.run_type": "TOOL"})
_LS_SQL_TOOL = SpanSelector(name="*sql*", attributes={**_LS, "langsmith.run_type": "TOOL"})
_LS_LLM = SpanSelector(attributes={**_LS, "langsmith.run_type": "LLM"})

# preset -> field -> picks, tried in order after the settings' own.
PRESETS: dict[str, dict[str, tuple[Pick, ...]]] = {
    "genai": {
        "question": (
            Pick(span=_GENAI_CHAT, attribute="gen_ai.input.messages", role="user", which="first"),
            Pick(span=SpanSelector(name="gen_ai.user.message"), attribute="body", path="content"),
            Pick(span=SpanSelector(kind="LOG"), attribute="gen_ai.input.messages", role="user"),
        ),
        "sql": (
            Pick(
                span=SpanSelector(attributes={"gen_ai.operation.name": "execute_tool"}),
                attribute="gen_ai.tool.call.arguments",
                path="query",
            ),
            Pick(
                span=_GENAI_CHAT,
                attribute="gen_ai.output.messages",
                role="assistant",
                fenced_sql=True,
            ),
            Pick(
                span=SpanSelector(name="gen_ai.choice"),
                attribute="body",
                path="message.content",
                fenced_sql=True,
            ),
            Pick(
                span=SpanSelector(kind="LOG"),
                attribute="gen_ai.output.messages",
                role="assistant",
                fenced_sql=True,
            ),
        ),
    },
    "openinference": {
        "question": (
            Pick(span=_OI_LLM, attribute="llm.input_messages", role="user", which="first"),
            Pick(
                span=SpanSelector(root=True, attributes={"openinference.span.kind": "CHAIN"}),
                attribute="input.value",
                path="input",
            ),
        ),
        "sql": (
            Pick(span=_OI_TOOL, attribute="input.value", path="query"),
            Pick(span=_OI_TOOL, attribute="tool.parameters", path="query"),
            Pick(span=_OI_LLM, attribute="llm.output_messages", role="assistant", fenced_sql=True),
        ),
    },
    "langfuse": {
        "question": (
            Pick(span=_LF_GENERATION, attribute="input", role="user", which="first"),
            Pick(span=_LF_ROOT, attribute="input", path="question"),
            Pick(span=_LF_ROOT, attribute="input", path="input"),
            Pick(span=_LF_ROOT, attribute="input"),
        ),
        "sql": (
            Pick(span=_LF_TOOL, attribute="input", path="query"),
            Pick(span=_LF_GENERATION, attribute="output", path="content", fenced_sql=True),
            Pick(span=_LF_GENERATION, attribute="output", fenced_sql=True),
        ),
    },
    "langsmith": {
        "question": (
            Pick(span=_LS_ROOT, attribute="inputs", path="question"),
            Pick(span=_LS_ROOT, attribute="inputs", path="input"),
        ),
        "sql": (
            Pick(span=_LS_TOOL, attribute="inputs", path="query"),
            Pick(span=_LS_SQL_TOOL, attribute="inputs", path="input"),
            Pick(span=_LS_LLM, attribute="outputs", path="generations[0][0].text", fenced_sql=True),
        ),
    },
    "none": {},
}
# Every preset: their selectors read different attributes, so one source may carry them all.
PRESETS["all"] = {
    field: tuple(
        pick
        for preset in ("genai", "openinference", "langfuse", "langsmith")
        for pick in PRESETS[preset].get(field, ())
    )
    for field in ("question", "sql")
}

# Where app, agent and agent_version come from unless mapped: resource attributes.
RESOURCE_FIELDS = ("app", "agent", "agent_version", "dialect")


class SpanMapping(BaseModel):
    """Traces -> records (the ``span_mapping`` setting).

    Attributes:
        preset: ``all`` (every one of these), ``genai`` (OpenTelemetry GenAI semantic
            conventions), ``openinference`` (Arize Phoenix: LangChain, OpenAI ...),
            ``langfuse`` (observations exports), ``langsmith`` (runs exports) or ``none``.
        question, enriched_question, sql: picks tried before the preset's.
        app, agent, agent_version, dialect: a resource attribute name, or ``=text`` for a
            constant; None leaves the field out.
        incomplete: a trace whose root span never arrived within ``idle_timeout_s`` (or that
            was evicted to keep ``max_traces``) is judged on what arrived (``judge``) or is a
            dead letter (``dead_letter``).
        idle_timeout_s: how long a trace waits for more spans after its last one arrived.
        settle_s: how long a whole trace (its root and every parent named) waits for more
            spans before it is judged: spans of one trace that came through two partitions
            may bring the root first. 0 judges it at once.
        max_traces: traces held at once; past it the oldest is handled as incomplete.
        max_open_bytes: the bytes of the messages the open traces came from (a message shared
            by its spans); past it, too, the oldest is handled as incomplete. The decoded spans
            take about two to three times that in memory, at least about 1 KB a span.
        max_spans_per_trace: spans kept per trace; a trace with more is a dead letter.
        max_spans_per_message: spans (or log records) one OTLP message may carry; a message
            with more (or with more resource and scope entries than eight times that and
            1,024) is a dead letter, whole, counted before it is parsed (:mod:`.wire`). The
            Collector's batch processor sends 8,192 spans a batch by default.
        max_message_bytes: the bytes of one OTLP message (after Kafka's decompression); a
            message with more is a dead letter, whole, unread. Parsed, a message takes up to
            about 30 times its bytes (many tiny attribute values): the Collector's Kafka
            exporter sends at most 1 MB by default.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    preset: Literal["all", "genai", "openinference", "langfuse", "langsmith", "none"] = "all"
    question: tuple[Pick, ...] = ()
    enriched_question: tuple[Pick, ...] = ()
    sql: tuple[Pick, ...] = ()
    app: str | None = "service.name"
    agent: str | None = "service.name"
    agent_version: str | None = "service.version"
    dialect: str | None = None
    incomplete: Literal["judge", "dead_letter"] = "judge"
    idle_timeout_s: float = Field(30.0, gt=0)
    settle_s: float = Field(1.0, ge=0)
    max_traces: int = Field(10_000, ge=1)
    max_open_bytes: int = Field(64 * 1024 * 1024, ge=1024)
    max_spans_per_trace: int = Field(2_000, ge=1)
    max_spans_per_message: int = Field(50_000, ge=1)
    max_message_bytes: int = Field(16 * 1024 * 1024, ge=1024)

    def picks(self, field: str) -> tuple[Pick, ...]:
        """The settings' picks for ``field``, then the preset's."""
        own: tuple[Pick, ...] = getattr(self, field)
        return own + PRESETS[self.preset].get(field, ())

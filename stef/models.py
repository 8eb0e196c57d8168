"""Frozen models that cross stage boundaries: input record, SQL and question specs, verdict, result
(and the protocol of reference mode's database).

The JSON field names of :class:`Result` are a contract (SPEC §3): tools, dashboards and tests read
them. Add fields freely; never rename one.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Literal, Protocol, get_args

from pydantic import BaseModel, ConfigDict, Field


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


def _is_none(value: object) -> bool:
    """A field left out of the JSON when unset (absent, not null), decided by the serializer as it
    goes: a wrapping serializer would build every result as Python dicts first."""
    return value is None


# --------------------------------------------------------------------------------------- input


class InputRecord(_Frozen):
    """One logged agent request, after validation and field-name mapping (SPEC §1)."""

    id: str
    question: str
    sql: str
    enriched_question: str | None = None
    app: str | None = None
    agent: str | None = None
    agent_version: str | None = None
    dialect: str | None = None
    timestamp: str | None = None
    metadata: dict[str, Any] | None = None
    gold_sql: str | None = Field(
        default=None,
        description="the reviewed reference SQL of this question (reference mode); never shown "
        "to a reference-free judge",
    )


# ------------------------------------------------------------------------------------ SQL spec


class Aggregation(_Frozen):
    """An aggregate call: ``func`` upper-case (SUM, COUNT ...), ``column`` normalized, or ``*``."""

    func: str
    column: str
    distinct: bool = False


class Predicate(_Frozen):
    """One atomic filter predicate of the SQL (an OR group stays one predicate).

    Attributes:
        id: 1-based number, stable within one SQL spec; the judge refers to predicates by it.
        lhs: normalized left-hand side (the column name without qualifier, lower-case, or the
            canonical text of an expression).
        op: normalized operator: ``=``, ``!=``, ``<``, ``<=``, ``>``, ``>=``, ``like``,
            ``not like``, ``in``, ``not in``, ``between``, ``not between``, ``is null``,
            ``is not null``, ``or``, ``and``, ``exists``, ``not exists``, ``expr``.
        rhs: normalized right-hand side text (values case- and whitespace-folded).
        text: the predicate as SQL text (generic dialect), for people and prompts.
        clause: where, having, qualify or join (an ON condition with a literal).
        columns: every column the predicate references (normalized).
        values: the literal values it compares against, normalized (wildcards of LIKE stripped).
        wildcard: the LIKE/ILIKE pattern has ``%`` or ``_`` wildcards.
    """

    id: int
    lhs: str
    op: str
    rhs: str
    text: str
    clause: Literal["where", "having", "qualify", "join"] = "where"
    columns: tuple[str, ...] = ()
    values: tuple[str, ...] = ()
    wildcard: bool = False


class OrderTerm(_Frozen):
    expr: str
    direction: Literal["asc", "desc"] = "asc"


class RankedTerm(_Frozen):
    """A SELECT anywhere in the query (a derived table, a CTE, a subquery) that keeps the first
    ``limit`` rows by its first ORDER BY term: how SQL picks "the most" or "the top 5"."""

    expr: str
    direction: Literal["asc", "desc"] = "asc"
    limit: int


class SqlSpec(_Frozen):
    """What deterministic analysis (sqlglot) extracts from the SQL (SPEC §2)."""

    projections: list[str] = Field(default_factory=list)
    projection_aggregated: list[bool] = Field(
        default_factory=list, description="per projection: contains an aggregate (not a window)"
    )
    aggregations: list[Aggregation] = Field(default_factory=list)
    filters: list[Predicate] = Field(default_factory=list)
    group_by: list[str] = Field(default_factory=list)
    order_by: list[OrderTerm] = Field(default_factory=list)
    limit: int | None = None
    tables: list[str] = Field(default_factory=list)
    ctes: list[str] = Field(default_factory=list)
    statement_type: str = "unknown"
    parsed: bool = True
    parse_error: str | None = None
    dialect: str | None = None
    dialect_guessed: bool = Field(
        default=False,
        description="neither the record nor the app named a dialect; ``dialect`` is the first "
        "of a short list that parsed the SQL",
    )
    mutating: bool = False
    multiple_statements: bool = False
    distinct: bool = False
    has_join: bool = False
    has_subquery: bool = False
    has_nested_where: bool = False
    has_window: bool = False
    has_set_operation: bool = False
    has_cte: bool = False
    select_count: int = 0
    where_count: int = 0
    having_count: int = 0
    functions: list[str] = Field(default_factory=list)
    negated: bool = False
    # Read by the judges, not part of the results contract (left out of every dump).
    ranked: list[RankedTerm] = Field(default_factory=list, exclude=True)
    # Joined tables no column outside the joins reads (stef.sql.joins.idle_joins).
    idle_joins: list[str] = Field(default_factory=list, exclude=True)
    # Join equalities whose two column names name different things (stef.sql.joins).
    mismatched_keys: list[str] = Field(default_factory=list, exclude=True)


# ------------------------------------------------------------------------------- question spec


class QuestionFilter(_Frozen):
    """A filter the question asks for: ``lhs op rhs``; ``lhs`` may be unknown (None)."""

    lhs: str | None = None
    op: str = "="
    rhs: str
    text: str = ""
    kind: str = "value"


class QuestionSpec(_Frozen):
    """Sq: what the question asks for (SPEC §2, paper §3.2.1)."""

    outputs: list[str] = Field(default_factory=list)
    aggregations: list[Aggregation] = Field(default_factory=list)
    filters: list[QuestionFilter] = Field(default_factory=list)
    group_by: list[str] = Field(default_factory=list)
    ordering_requested: bool = False
    top_k: int | None = None


# --------------------------------------------------------------------------------------- judge


class Verdict(StrEnum):
    CORRECT = "Correct"
    LIKELY_CORRECT = "Likely Correct"
    POTENTIALLY_INCORRECT = "Potentially Incorrect"
    INCORRECT = "Incorrect"


# Pass/fail of a verdict, where two judges are compared (the second opinion): the correct side
# of the scale passes, the incorrect side fails.
PASSING_VERDICTS = frozenset({Verdict.CORRECT, Verdict.LIKELY_CORRECT})


class FilterStatus(StrEnum):
    FULLY_APPLIED = "fully_applied"
    FULLY_APPLIED_WITH_EXTRAS = "fully_applied_with_extras"
    PARTIALLY_APPLIED = "partially_applied"
    NOT_APPLIED = "not_applied"


class EnrichmentStatus(StrEnum):
    FAITHFUL = "faithful"
    MINOR_DRIFT = "minor_drift"
    MAJOR_DRIFT = "major_drift"
    MISSING = "missing"


Issue = Literal[
    "filters_missing",
    "filters_incorrect",
    "filters_extra",
    "aggregation_wrong",
    "aggregation_missing",
    "columns_missing",
    "columns_wrong",
    "grouping_wrong",
    "ordering_wrong",
    "limit_unrequested",
    "joins_suspect",
    "logic_error",
    "enrichment_drift",
    "unsafe_sql",
    "unparsed_sql",
    "none",
]
ISSUE_LABELS: tuple[str, ...] = get_args(Issue)

# The kinds of repair, the label values of ``stef_judge_repairs_total{kind}``.
REPAIR_KINDS = (
    "missing_field",
    "unknown_label",
    "long_rationale",
    "long_list",
    "confidence_out_of_range",
    "unknown_predicate",
    "duplicate",
    "match_without_predicates",
    "missing_with_predicates",
    "ungrounded_filter",
    "contradicted_match",
    "uncovered_value",
    "repointed_match",
    "verdict_spelling",
)


class FilterMatch(_Frozen):
    """How one question filter is reflected in the SQL's numbered predicates."""

    filter: int = Field(description="0-based index into question_spec.filters")
    status: Literal["matched", "missing", "mismatched"]
    predicates: list[int] = Field(default_factory=list, description="SQL predicate ids")
    decided_by: Literal["stef", "judge"] = Field(
        default="judge",
        description="stef: matched or overruled by deterministic checks; judge: the backend",
    )


class Enrichment(_Frozen):
    status: EnrichmentStatus
    dropped: list[str] = Field(default_factory=list)
    added: list[str] = Field(default_factory=list)


class JudgeOutput(_Frozen):
    """What every judge backend returns (SPEC §2 "Judge")."""

    question_spec: QuestionSpec
    filter_matches: list[FilterMatch]
    enrichment: Enrichment
    verdict: Verdict
    confidence: float = Field(ge=0.0, le=1.0)
    issues: list[Issue] = Field(default_factory=list)
    rationale: str = ""
    repairs: list[str] = Field(
        default_factory=list,
        description="what was repaired in the backend's answer, one '<kind>: <detail>' each",
    )
    samples: SampleVote | None = Field(
        default=None, description="how the samples voted, when the backend asked several"
    )
    reported_model: str | None = Field(
        default=None, description="the model the endpoint named in its reply (LLM only)"
    )
    token_probability: float | None = Field(
        default=None,
        ge=0.0,
        le=1.0,
        description="the model's own probability that the SQL is correct, read from its "
        "log-probabilities: P(Yes) / (P(Yes) + P(No)) in probability mode, the passing side's "
        "share at the verdict token in structured mode; None when the endpoint sent none",
    )
    examples: list[str] | None = Field(
        default=None,
        description="the ids of the labelled examples shown in the prompt (llm.few_shot)",
    )


class SampleVote(_Frozen):
    """How the samples of one LLM judgment voted (``llm.samples`` > 1).

    Attributes:
        n: samples asked.
        answered: samples that came back with a usable verdict (the others failed).
        agreeing: answered samples whose verdict is the majority verdict.
        split: the answered samples did not all give the same verdict.
        verdicts: the verdict of each answered sample, in the order they were asked.
    """

    n: int = Field(ge=1)
    answered: int = Field(ge=1)
    agreeing: int = Field(ge=1)
    split: bool
    verdicts: list[Verdict] = Field(default_factory=list)


class SecondOpinion(_Frozen):
    """Another backend's verdict on the same record, kept beside the deciding one's.

    Attributes:
        backend: the backend that gave it (``heuristic``).
        verdict: its verdict.
        confidence: its confidence.
        agrees: it falls on the same side of pass/fail (Correct or Likely Correct pass) as the
            verdict of the result.
    """

    backend: str
    verdict: Verdict
    confidence: float = Field(ge=0.0, le=1.0)
    agrees: bool


class Usage(_Frozen):
    prompt_tokens: int = 0
    completion_tokens: int = 0
    latency_ms: float = 0.0
    cache_hit: bool = False
    cost_usd: float | None = None
    attempts: int = 0


class JudgeInfo(_Frozen):
    """The backend that decided, and (per record) what it reported and who else was asked."""

    backend: str
    model: str | None = None
    prompt_version: str | None = None
    rules_version: str | None = None
    # The fields only an LLM judgment sets are absent rather than null when unset: a heuristic
    # run's results stay as they were.
    reported_model: str | None = Field(default=None, exclude_if=_is_none)
    samples: SampleVote | None = Field(default=None, exclude_if=_is_none)
    second_opinion: SecondOpinion | None = Field(default=None, exclude_if=_is_none)
    p_correct: float | None = Field(
        default=None,
        ge=0.0,
        le=1.0,
        description="calibrated P(the SQL answers the question)",
        exclude_if=_is_none,
    )
    mode: str | None = Field(
        default=None,
        description="the LLM verdict mode: structured, probability or cascade",
        exclude_if=_is_none,
    )
    examples: list[str] | None = Field(
        default=None,
        description="the ids of the labelled examples shown with this record (llm.few_shot)",
        exclude_if=_is_none,
    )


# ------------------------------------------------------------------------------------- result


class Alignment(_Frozen):
    """Deterministic alignment of the question spec to the SQL spec (SPEC §2 "Filter alignment")."""

    matched: list[str] = Field(default_factory=list)
    missing: list[str] = Field(default_factory=list)
    mismatched: list[str] = Field(default_factory=list)
    extras: list[str] = Field(default_factory=list)
    benign_extras: list[str] = Field(default_factory=list)
    ignored: list[str] = Field(default_factory=list)
    projections_match: bool = True
    aggregations_match: bool = True
    group_by_match: bool = True
    decided_by: dict[str, Literal["stef", "judge"]] = Field(
        default_factory=dict,
        description="per question filter (as listed above): who decided its match",
    )


class Components(_Frozen):
    filter_status: FilterStatus
    filter_score: int
    verdict: Verdict
    verdict_score: int
    leniency: int
    confidence: float
    confidence_multiplier: float
    raw_signal: float | None = Field(
        default=None,
        description="the judge's raw signal in 0-1 (heuristic: uncalibrated score / 100; LLM: "
        "P(Yes), else verdict and self-reported confidence on one axis); what --fit fits",
    )
    confidence_source: Literal["calibrated", "token_probability", "self_reported"] | None = Field(
        default=None,
        description="where confidence comes from: a calibration file, the endpoint's token "
        "probabilities, or the judge's own word",
    )


class Safety(_Frozen):
    mutating: bool = False
    multiple_statements: bool = False


class ReferenceDifference(_Frozen):
    """One component in which the generated SQL differs from the reference SQL."""

    component: str
    generated: str
    reference: str


class ReferenceCounterexample(_Frozen):
    """A generated database on which the generated SQL and the reference differ (trimmed)."""

    tables: dict[str, list[list[Any]]] = Field(description="table -> its rows")
    columns: dict[str, list[str]] = Field(description="table -> its column names")
    generated: list[list[Any]] = Field(description="the generated SQL's rows there")
    reference: list[list[Any]] = Field(description="the reference's rows there")


class ReferenceExecution(_Frozen):
    """Both queries run and their rows compared: on the ``reference.execute`` database
    (``source: database``), or on small databases generated for them (``source: generated``).

    Attributes:
        status: ``same`` (the same rows, column order ignored, floats within 1e-6, row order
            only when the question asks for one), ``different``, ``duplicates`` (generated
            databases: the same rows up to repeats and rows with NULLs), ``undecided``
            (generated databases: none could tell, every reference result empty or dependent
            on row order; the team's database: the same rows, holding nothing but NULL and
            0), ``generated_failed`` (the generated query failed and the reference ran; or
            it timed out or returned too many rows or bytes and the reference, run within the
            same bounds, finished: ``detail`` says which), ``reference_failed``
            (likewise the reference), or ``not_run`` (not a plain SELECT by STEF's safety
            check, no schema could be inferred for the queries, neither query finished within
            the database's bounds or neither ran on it (both failed), rows that differ where a
            query calls a random function, running them ran STEF out of memory, or the
            record's CPU budget ran out on the generated databases or before the reference
            could be run after a generated query that did not finish: ``detail`` says which).
        detail: what failed, or why nothing ran; or why rows that differ are still Likely
            Correct (generated databases: one query groups by an entity's key, the other by its
            name).
        generated_rows: rows the generated query returned (None when it failed or did not run).
        reference_rows: rows the reference returned (likewise).
        source: where the queries ran.
        databases: generated databases run (generated only).
        informative: of those, the ones that could tell (the reference returned a value other
            than NULL and 0, and neither result depends on row order).
        counterexample: the first generated database on which the two differ.
    """

    status: Literal[
        "same",
        "different",
        "duplicates",
        "undecided",
        "generated_failed",
        "reference_failed",
        "not_run",
    ]
    detail: str = ""
    generated_rows: int | None = None
    reference_rows: int | None = None
    source: Literal["database", "generated"] = "database"
    # A configured database's execution keeps the bytes it had: no generated-only keys.
    databases: int | None = Field(default=None, exclude_if=_is_none)
    informative: int | None = Field(default=None, exclude_if=_is_none)
    counterexample: ReferenceCounterexample | None = Field(default=None, exclude_if=_is_none)


class Reference(_Frozen):
    """The generated SQL compared with the record's reference SQL (reference mode).

    Attributes:
        verdict: Correct (same structure), Likely Correct (duplicates or NULL guards differ
            only), Incorrect (anything else differs, or the generated SQL does not parse);
            None when the reference itself does not parse.
        p_correct: how often SQL with this verdict was right on the labelled dev set.
        differences: every differing component.
        error: why nothing was compared (``reference_unparsed``), or ``generated_unparsed``;
            or, when the generated databases could not decide, why
            (``execution_not_run: <reason>``, ``execution_undecided: <reason>``): the verdict
            is then the structure's.
        execution: both queries run (a configured database, or generated ones).
        decided_by: ``execution`` (rows on a database decided the verdict) or ``structure``
            (the structural comparison did).
        database: the configured database's run when it told nothing about the generated query
            (``undecided``, ``reference_failed``, or neither query runs there) and the
            generated databases ran after it: ``execution`` is theirs.
    """

    verdict: Verdict | None
    p_correct: float | None = Field(default=None, ge=0.0, le=1.0)
    differences: list[ReferenceDifference] = Field(default_factory=list)
    error: str | None = None
    # Absent, not null, unless reference.execute is set.
    execution: ReferenceExecution | None = Field(default=None, exclude_if=_is_none)
    decided_by: Literal["execution", "structure"] | None = Field(default=None, exclude_if=_is_none)
    database: ReferenceExecution | None = Field(default=None, exclude_if=_is_none)


# A database reference mode runs SELECTs on (``reference.execute``): the protocol here, so the
# reference stage needs no I/O module; :mod:`stef.io.database` opens the real ones.

ExecutionStatus = Literal["ok", "error", "timeout", "too_many_rows", "too_large", "out_of_memory"]


@dataclass(frozen=True)
class Execution:
    """What running one statement gave: its rows (``status`` ``ok``) or why not."""

    status: ExecutionStatus
    rows: tuple[tuple[Any, ...], ...] = ()
    detail: str = ""


class Database(Protocol):
    """A read-only database the reference stage runs SELECTs on.

    Attributes:
        timeout_s: the longest one statement may run (``reference.timeout_s``).
    """

    timeout_s: float

    def run(self, sql: str, timeout_s: float | None = None) -> Execution:
        """``sql``'s rows, or why not, within ``timeout_s`` (at most the database's own)."""
        ...

    def close(self) -> None: ...


Outcome = Literal["evaluated", "judge_error", "skipped_sampling"]
Tier = Literal["excellent", "good", "marginal", "poor"]
Complexity = Literal["easy", "medium", "hard", "extra_hard"]


class Backfill(_Frozen):
    """The time range of the ``stef backfill`` run that wrote a result (``--from``, ``--to``;
    ``to`` None: up to the end of the topic when the backfill started)."""

    # "from" is a Python keyword: the field is from_ in code, "from" in JSON.
    model_config = ConfigDict(
        frozen=True, extra="forbid", validate_by_name=True, serialize_by_alias=True
    )

    from_: str = Field(alias="from")
    to: str | None = None


class ResultInput(_Frozen):
    """The record's own text a reviewer reads beside the verdict (``results_include_input``)."""

    question: str
    enriched_question: str | None = None
    sql: str


class Result(_Frozen):
    """One result per record (SPEC §3)."""

    id: str
    app: str | None = None
    agent: str | None = None
    agent_version: str | None = None
    timestamp: str | None = None
    outcome: Outcome
    # 0-100 as scored (a NaN read back made stef summary's mean NaN, -5 moved it unseen).
    score: float | None = Field(None, ge=0, le=100)
    tier: Tier | None = None
    error: str | None = None
    components: Components | None = None
    enrichment: Enrichment | None = None
    question_spec: QuestionSpec | None = None
    sql_spec: SqlSpec | None = None
    alignment: Alignment | None = None
    normalizations: list[str] = Field(default_factory=list)
    flags: list[str] = Field(default_factory=list)
    issues: list[str] = Field(default_factory=list)
    safety: Safety = Field(default_factory=Safety)
    complexity: Complexity | None = None
    rationale: str = ""
    judge: JudgeInfo
    repairs: list[str] = Field(
        default_factory=list,
        description="what STEF repaired or overruled in the judge's answer ('<kind>: <detail>')",
    )
    usage: Usage = Field(default_factory=Usage)
    metadata: dict[str, Any] | None = None
    # A live result keeps the bytes it had before backfills were marked: no "backfill" key,
    # however it is dumped (the results sink, `stef judge`). Likewise "input" and "reference".
    backfill: Backfill | None = Field(
        None,
        description="set by stef backfill only; absent (not null) from live results",
        exclude_if=_is_none,
    )
    input: ResultInput | None = Field(
        None,
        description="the question, enriched question and SQL judged (results_include_input); "
        "absent (not null) when left out",
        exclude_if=_is_none,
    )
    reference: Reference | None = Field(
        None,
        description="the comparison with the record's reference SQL; absent without one",
        exclude_if=_is_none,
    )
    needs_review: bool = Field(
        default=False, description="confidence below the review bound (setting review_below)"
    )

    def to_json(self) -> str:
        return self.model_dump_json()

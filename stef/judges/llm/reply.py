"""The LLM's reply on the wire: a strict pydantic model, its JSON schema, its checked conversion.

The wire model is separate from :class:`stef.models.JudgeOutput` because strict structured output
(``response_format`` ``json_schema`` with ``strict: true``) wants every field required, no defaults
and ``additionalProperties: false`` at every level. Checks that depend on the request (predicate ids
that exist, one entry per question filter) happen in :func:`to_output`, so a bad reply is a
validation error that the judge re-asks once.
"""

from __future__ import annotations

import json
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from stef.errors import ReplyInvalid
from stef.judges.base import JudgeRequest
from stef.models import (
    Aggregation,
    Enrichment,
    EnrichmentStatus,
    FilterMatch,
    Issue,
    JudgeOutput,
    QuestionFilter,
    QuestionSpec,
    Verdict,
)

SCHEMA_NAME = "stef_judgement"


class _Wire(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class WireAggregation(_Wire):
    func: str = Field(description="upper-case SQL aggregate: SUM, AVG, COUNT, MIN, MAX")
    column: str = Field(description="the column or term aggregated, * for COUNT(*)")
    distinct: bool


class WireFilter(_Wire):
    lhs: str | None = Field(description="column or term constrained; null when unknown")
    op: str = Field(description="=, !=, <, <=, >, >=, like, in, between ...")
    rhs: str = Field(description="the value")
    text: str = Field(description="the words of the question that state this filter")


class WireQuestionSpec(_Wire):
    outputs: list[str]
    aggregations: list[WireAggregation]
    filters: list[WireFilter]
    group_by: list[str]
    ordering_requested: bool
    top_k: int | None


class WireFilterMatch(_Wire):
    filter: int = Field(description="0-based index into question_spec.filters")
    status: Literal["matched", "missing", "mismatched"]
    predicates: list[int] = Field(description="ids from the sql_predicates block")


class WireEnrichment(_Wire):
    status: Literal["faithful", "minor_drift", "major_drift"]
    dropped: list[str]
    added: list[str]


class LlmReply(_Wire):
    """What the model returns. Rationale precedes the verdict so the model reasons first."""

    question_spec: WireQuestionSpec
    filter_matches: list[WireFilterMatch]
    enrichment: WireEnrichment
    issues: list[Issue]
    rationale: str
    verdict: Verdict
    confidence: float = Field(description="certainty in the verdict, 0 to 1")

    # A validator, not Field(ge=, le=): some strict json_schema implementations reject bounds.
    @field_validator("confidence")
    @classmethod
    def _unit_interval(cls, v: float) -> float:
        if not 0.0 <= v <= 1.0:
            raise ValueError("confidence must be between 0 and 1")
        return v


def reply_schema() -> dict[str, Any]:
    """The JSON schema of :class:`LlmReply`, in the subset strict structured output accepts."""
    schema: dict[str, Any] = _drop_titles(LlmReply.model_json_schema())
    _check_strict(schema, "#")
    return schema


def _drop_titles(node: Any, *, in_properties: bool = False) -> Any:
    """Pydantic's generated titles only cost tokens; a property may still be named ``title``."""
    if isinstance(node, dict):
        return {
            k: _drop_titles(v, in_properties=k == "properties" and not in_properties)
            for k, v in node.items()
            if in_properties or k != "title"
        }
    if isinstance(node, list):
        return [_drop_titles(v) for v in node]
    return node


def _check_strict(node: Any, where: str) -> None:
    """Fail loudly if the generated schema drifts outside what strict mode accepts."""
    if isinstance(node, dict):
        if node.get("type") == "object" and "properties" in node:
            if node.get("additionalProperties") is not False:
                raise AssertionError(f"{where}: additionalProperties must be false")
            if sorted(node.get("required", [])) != sorted(node["properties"]):
                raise AssertionError(f"{where}: every property must be required")
        if "default" in node:
            raise AssertionError(f"{where}: defaults are not allowed in a strict schema")
        for key, value in node.items():
            _check_strict(value, f"{where}/{key}")
    elif isinstance(node, list):
        for i, value in enumerate(node):
            _check_strict(value, f"{where}/{i}")


def response_format(mode: str) -> dict[str, Any]:
    """The ``response_format`` argument for ``json_schema`` (strict) or ``json_object`` mode."""
    if mode == "json_schema":
        return {
            "type": "json_schema",
            "json_schema": {"name": SCHEMA_NAME, "strict": True, "schema": reply_schema()},
        }
    return {"type": "json_object"}


def _strip_fence(text: str) -> str:
    # json_object mode on some servers still wraps the object in a Markdown code fence.
    t = text.strip()
    if t.startswith("```") and t.endswith("```"):
        t = t[3:-3]
        if t.startswith("json"):
            t = t[4:]
    return t.strip()


def parse_reply(text: str | None) -> LlmReply:
    """Parse and validate the reply text.

    Raises:
        ReplyInvalid: empty (``empty_reply``), not JSON (``invalid_json``), or JSON that
            violates the schema (``invalid_reply``).
    """
    if text is None or not text.strip():
        raise ReplyInvalid(["the reply is empty"], "empty_reply")
    try:
        data = json.loads(_strip_fence(text))
    except (ValueError, RecursionError) as exc:
        # ValueError covers JSONDecodeError and the out-of-range numbers json refuses.
        raise ReplyInvalid([f"the reply is not valid JSON: {exc}"], "invalid_json") from exc
    try:
        return LlmReply.model_validate(data)
    except ValidationError as exc:
        raise ReplyInvalid(
            [
                f"{'.'.join(str(p) for p in e['loc']) or '<root>'}: {e['msg']}"
                for e in exc.errors(include_url=False)
            ]
        ) from exc


def to_output(reply: LlmReply, request: JudgeRequest) -> JudgeOutput:
    """Check the reply against the request and convert it to the judge contract.

    Raises:
        ReplyInvalid: filter indexes out of range or repeated, predicate ids that do not exist.
    """
    errors = _match_errors(reply, request)
    if errors:
        raise ReplyInvalid(errors)
    enrichment = _enrichment(reply.enrichment, request)
    return JudgeOutput(
        question_spec=_question_spec(reply.question_spec),
        filter_matches=[
            FilterMatch(filter=m.filter, status=m.status, predicates=list(m.predicates))
            for m in sorted(reply.filter_matches, key=lambda m: m.filter)
        ],
        enrichment=enrichment,
        verdict=reply.verdict,
        confidence=reply.confidence,
        issues=list(reply.issues) or ["none"],
        rationale=reply.rationale,
    )


def _match_errors(reply: LlmReply, request: JudgeRequest) -> list[str]:
    """What is wrong with ``filter_matches``, one sentence each (empty when nothing is).

    Every question filter needs exactly one entry, and every predicate id must be one the
    request numbered.
    """
    n_filters = len(reply.question_spec.filters)
    known = {p.id for p in request.sql_spec.filters}
    errors: list[str] = []
    seen: set[int] = set()
    for i, m in enumerate(reply.filter_matches):
        errors += _one_match_errors(f"filter_matches.{i}", m, n_filters, known, seen)
        seen.add(m.filter)
    absent = [i for i in range(n_filters) if i not in seen]
    if absent:
        errors.append(f"filter_matches: no entry for question filters {absent}")
    return errors


def _one_match_errors(
    where: str, m: WireFilterMatch, n_filters: int, known: set[int], seen: set[int]
) -> list[str]:
    """The problems of one ``filter_matches`` entry; ``seen`` holds the filters listed before."""
    errors: list[str] = []
    if not 0 <= m.filter < n_filters:
        errors.append(
            f"{where}.filter: {m.filter} is not an index of question_spec.filters "
            f"(0 to {n_filters - 1})"
            if n_filters
            else f"{where}: question_spec.filters is empty, so filter_matches must be empty"
        )
    elif m.filter in seen:
        errors.append(f"{where}.filter: question filter {m.filter} is listed twice")
    unknown = [p for p in m.predicates if p not in known]
    if unknown:
        valid = sorted(known) if known else "none"
        errors.append(f"{where}.predicates: unknown predicate ids {unknown} (valid: {valid})")
    if m.status == "missing" and m.predicates:
        errors.append(f"{where}: a missing filter lists no predicates")
    return errors


def _enrichment(wire: WireEnrichment, request: JudgeRequest) -> Enrichment:
    if request.record.enriched_question is None:
        # No Qe logged: the contract says "missing", whatever the model answered.
        return Enrichment(status=EnrichmentStatus.MISSING)
    return Enrichment(
        status=EnrichmentStatus(wire.status), dropped=list(wire.dropped), added=list(wire.added)
    )


def _question_spec(qs: WireQuestionSpec) -> QuestionSpec:
    return QuestionSpec(
        outputs=list(qs.outputs),
        aggregations=[
            Aggregation(func=a.func.upper(), column=a.column, distinct=a.distinct)
            for a in qs.aggregations
        ],
        filters=[
            QuestionFilter(lhs=f.lhs, op=f.op, rhs=f.rhs, text=f.text, kind="llm")
            for f in qs.filters
        ],
        group_by=list(qs.group_by),
        ordering_requested=qs.ordering_requested,
        top_k=qs.top_k,
    )

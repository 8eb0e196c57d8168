"""The LLM's reply on the wire: a strict pydantic model, its JSON schema, its checked conversion.

The wire model is separate from :class:`stef.models.JudgeOutput` because strict structured output
(``response_format`` ``json_schema`` with ``strict: true``) wants every field required, no defaults
and ``additionalProperties: false`` at every level. Each question filter carries its own match, and
the per-request schema lets predicate ids be only those that exist, so a server that enforces the
schema cannot send an inconsistent reply. What a server without ``json_schema`` can still get wrong
(a dangling or repeated id, a match with nothing to stand on, a missing field with a safe default)
is repaired in :func:`to_output` and :func:`parse_reply` and recorded; only a reply without a
usable verdict is a validation error, which the judge re-asks once.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from stef.errors import ReplyInvalid
from stef.files import SURROGATE, unicode_json
from stef.judges.base import JudgeRequest
from stef.models import (
    ISSUE_LABELS,
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
from stef.sql.canonical import SQL_STRING, norm_value

SCHEMA_NAME = "stef_judgement"

_SQL_NUMBER = re.compile(r"(?<![\w.])-?\d+(?:\.\d+)?(?![\w])")

# The longest rationale asked for (schema ``maxLength``) and kept (json_object mode truncates).
RATIONALE_MAX = 400


class _Wire(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class WireAggregation(_Wire):
    func: str = Field(description="upper-case SQL aggregate: SUM, AVG, COUNT, MIN, MAX")
    column: str = Field(description="the column or term aggregated, * for COUNT(*)")
    distinct: bool


class WireFilter(_Wire):
    """A question filter and its own match: no parallel list to keep consistent."""

    text: str = Field(description="the words of Qu (or Qe) that state this filter, copied")
    lhs: str | None = Field(description="column or term constrained; null when unknown")
    op: str = Field(description="=, !=, <, <=, >, >=, like, in, between ...")
    rhs: str = Field(description="the value as the question states it")
    status: Literal["matched", "missing", "mismatched"]
    predicates: list[int] = Field(
        description="ids of sql_predicates that apply it (matched) or constrain the same thing "
        "with another value (mismatched); empty when missing"
    )


class WireQuestionSpec(_Wire):
    outputs: list[str]
    aggregations: list[WireAggregation]
    filters: list[WireFilter]
    group_by: list[str]
    ordering_requested: bool
    top_k: int | None


class WireEnrichment(_Wire):
    status: Literal["faithful", "minor_drift", "major_drift"]
    dropped: list[str]
    added: list[str]


class LlmReply(_Wire):
    """What the model returns. Rationale precedes the verdict so the model reasons first."""

    question_spec: WireQuestionSpec
    enrichment: WireEnrichment
    issues: list[Issue]
    rationale: str = Field(max_length=RATIONALE_MAX)
    verdict: Verdict
    confidence: float = Field(description="certainty in the verdict, 0 to 1")

    @field_validator("confidence", mode="before")
    @classmethod
    def _not_a_boolean(cls, v: Any) -> Any:
        """``true`` is not a certainty of 1 (pydantic reads it so): the reply is asked again,
        as for any confidence that is not a number. A number written as text is read."""
        if isinstance(v, bool):
            raise ValueError("confidence must be a number between 0 and 1, not true or false")
        return v

    # A validator, not Field(ge=, le=): some strict json_schema implementations reject bounds.
    @field_validator("confidence")
    @classmethod
    def _unit_interval(cls, v: float) -> float:
        if not 0.0 <= v <= 1.0:
            raise ValueError("confidence must be between 0 and 1")
        return v


@dataclass(frozen=True)
class StefMatch:
    """A question filter STEF settled itself before asking: ``matched`` (its value is a
    predicate literal) or ``mismatched`` (its deterministic reading found the SQL contradicts
    it: another period, the other direction, a negation inverted)."""

    filter: QuestionFilter
    predicates: tuple[int, ...]
    status: Literal["matched", "mismatched"] = "matched"


# Fields a model may leave out, with a default that claims nothing (json_object mode only: a
# strict schema requires them all). The filter list, the verdict and the confidence have none.
_SPEC_DEFAULTS: dict[str, Any] = {
    "outputs": [],
    "aggregations": [],
    "group_by": [],
    "ordering_requested": False,
    "top_k": None,
}
_FILTER_DEFAULTS: dict[str, Any] = {
    "text": "",
    "lhs": None,
    "op": "=",
    "status": "missing",
    "predicates": [],
}
_TOP_DEFAULTS: dict[str, Any] = {"issues": [], "rationale": ""}


def reply_schema(predicate_ids: Sequence[int] | None = None) -> dict[str, Any]:
    """The JSON schema of :class:`LlmReply`, in the subset strict structured output accepts.

    Built once per process and once per set of predicate ids (a few shapes cover most
    requests): pydantic's schema generation costs more CPU than the rest of a call. The result
    is shared between calls: treat it as read-only.

    Args:
        predicate_ids: the ids of the request's SQL predicates. Given, a filter's
            ``predicates`` may only hold those (an ``enum``), at most as many as there are
            (``maxItems``; 0 when there are none), so a server that enforces the schema cannot
            emit a dangling id nor repeat one without end.
    """
    if predicate_ids is None:
        return _base_schema()
    return _schema_for_ids(tuple(sorted(set(predicate_ids))))


@lru_cache(maxsize=1)
def _base_schema() -> dict[str, Any]:
    schema: dict[str, Any] = _bounded(_drop_titles(LlmReply.model_json_schema()))
    _check_strict(schema, "#")
    return schema


@lru_cache(maxsize=256)
def _schema_for_ids(ids: tuple[int, ...]) -> dict[str, Any]:
    base = _base_schema()
    items: dict[str, Any] = {"type": "integer"}
    prop: dict[str, Any] = {"type": "array", "items": items}
    if ids:
        items["enum"] = list(ids)
    # Each id at most once: unbounded, a small model repeats one id until max_tokens.
    prop["maxItems"] = len(ids)
    # Copies only along the path to the replaced property; the rest is shared with the base.
    wire = base["$defs"]["WireFilter"]
    props = wire["properties"]
    filt = {**props, "predicates": {**prop, "description": props["predicates"]["description"]}}
    defs = {**base["$defs"], "WireFilter": {**wire, "properties": filt}}
    schema = {**base, "$defs": defs}
    _check_strict(schema, "#")
    return schema


# Bounds on every list and string the model writes. A grammar-enforcing server (llama.cpp) lets a
# small model repeat one list item until the list's bound (SmolLM2-135M does, in every list):
# with these bounds a reply with every list full and short strings takes about 900 tokens, inside
# the default ``max_tokens`` (1024); with every string padded to its bound too, about 5,400
# characters of compact JSON. Real questions fit easily: a few outputs, filters and aggregations.
_MAX_ITEMS = {
    "outputs": 6,
    "aggregations": 4,
    "filters": 6,
    "group_by": 4,
    "dropped": 4,
    "added": 4,
    "issues": 4,
}
# Free strings: a column, value or phrase is short; an operator or function name shorter still.
_MAX_TEXT = 80
_MAX_TEXT_BY_NAME = {"op": 16, "func": 16}


def _bounded(node: Any, name: str = "") -> Any:
    """The schema with ``maxItems`` on every list and ``maxLength`` on every free string."""
    if isinstance(node, list):
        return [_bounded(v) for v in node]
    if not isinstance(node, dict):
        return node
    out = {
        k: (
            {p: _bounded(v, p) for p, v in val.items()}
            if k == "properties" and isinstance(val, dict)
            else _bounded(val)
        )
        for k, val in node.items()
    }
    if out.get("type") == "array" and name in _MAX_ITEMS:
        out.setdefault("maxItems", _MAX_ITEMS[name])
    if out.get("type") == "string" and "enum" not in out:
        out.setdefault("maxLength", _MAX_TEXT_BY_NAME.get(name, _MAX_TEXT))
    return out


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


def response_format(mode: str, schema: dict[str, Any] | None = None) -> dict[str, Any]:
    """The ``response_format`` argument for ``json_schema`` (strict) or ``json_object`` mode.

    Args:
        mode: ``json_schema`` or ``json_object``.
        schema: the request's schema (:func:`reply_schema` with its predicate ids); default
            the schema without ids.
    """
    if mode == "json_schema":
        return {
            "type": "json_schema",
            "json_schema": {
                "name": SCHEMA_NAME,
                "strict": True,
                "schema": schema if schema is not None else reply_schema(),
            },
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


# A reasoning model's thinking ahead of its answer, in the content (llama.cpp with
# --reasoning-format none, vLLM without a reasoning parser): up to the first closing tag, the
# opening one being in the prompt when the chat template opens the block (DeepSeek-R1).
_THINKING = re.compile(r".*?</think(?:ing)?>", re.S)


def _loads(text: str) -> Any:
    """The JSON of the reply: the text itself (out of its fence), else the one object between the
    first ``{`` and the last ``}`` of the answer after any thinking. A sentence before or after
    the object, a fence with another tag (```JSON) or words around it, a BOM, a ``<think>``
    block: each was re-asked, then a judge_error. Two objects, or a brace in the words around,
    still fail: which one holds the verdict would be a guess; so would a draft in the thinking.

    Raises:
        ValueError: neither is JSON (the error of the text itself).
    """
    try:
        return json.loads(_strip_fence(text))
    except ValueError:
        thinking = _THINKING.match(text)
        answer = text[thinking.end() :] if thinking is not None else text
        start, end = answer.find("{"), answer.rfind("}")
        # Thinking not closed (cut off), or naming its own closing tag, may hold a draft: never
        # the answer.
        if start < 0 or end < start or "<think" in answer or "</think" in answer:
            raise
        try:
            return json.loads(answer[start : end + 1])
        except ValueError:
            pass
        raise


def parse_reply(text: str | None, *, final: bool = False) -> tuple[LlmReply, list[str]]:
    """Parse and validate the reply text, filling what a model may leave out.

    Args:
        text: the reply's content.
        final: the last reply the judge will ask for. A confidence outside 0..1 is then read as 0
            (certainty unknown: the lowest confidence multiplier) instead of failing a reply whose
            verdict is usable; earlier replies are re-asked with the error.

    Returns:
        The reply, and one repair string per default filled in or rationale truncated.

    Raises:
        ReplyInvalid: empty (``empty_reply``), not JSON (``invalid_json``), or JSON that
            violates the schema (``invalid_reply``).
    """
    if text is None or not text.strip():
        raise ReplyInvalid(["the reply is empty"], "empty_reply")
    try:
        data = _loads(text)
    except (ValueError, RecursionError) as exc:
        # ValueError covers JSONDecodeError and the out-of-range numbers json refuses.
        raise ReplyInvalid([f"the reply is not valid JSON: {exc}"], "invalid_json") from exc
    repairs: list[str] = []
    if SURROGATE.search(text):
        # A verdict whose rationale holds half an emoji is still a verdict (it was re-asked,
        # then a judge_error).
        data = unicode_json(data)
    if isinstance(data, dict):
        data = _filled(data, repairs)
        if final:
            data = _confidence_read(data, repairs)
    try:
        return LlmReply.model_validate(data), repairs
    except ValidationError as exc:
        raise ReplyInvalid(
            [
                f"{'.'.join(str(p) for p in e['loc']) or '<root>'}: {e['msg']}"
                for e in exc.errors(include_url=False)
            ]
        ) from exc


# The most items of one list a reply is read with: the schema asks for at most six, a model
# without it may write a few more; a reply of 100,000 filters cost 8 s of CPU and 255 MB.
MAX_LIST_ITEMS = 100


def _cut_lists(obj: dict[str, Any], where: str, repairs: list[str]) -> dict[str, Any]:
    """``obj`` with each list past :data:`MAX_LIST_ITEMS` cut there (one repair each)."""
    long = [k for k, v in obj.items() if isinstance(v, list) and len(v) > MAX_LIST_ITEMS]
    if not long:
        return obj
    out = dict(obj)
    for key in long:
        repairs.append(
            f"long_list: {where}{key} cut from {len(out[key])} items to {MAX_LIST_ITEMS}"
        )
        out[key] = out[key][:MAX_LIST_ITEMS]
    return out


# Each label by its case-folded spelling: "likely correct", "CORRECT" or " Correct." (spaces
# folded, the full stop off) name one label each; no spelling names two.
_VERDICTS = {v.value.casefold(): v.value for v in Verdict}


def _filled(data: dict[str, Any], repairs: list[str]) -> dict[str, Any]:
    """A copy of the reply with safe defaults for absent fields, lists cut at
    :data:`MAX_LIST_ITEMS`, issue labels outside the fixed list dropped, the verdict's label in
    its own spelling (another case was re-asked, then a judge_error) and the rationale
    capped."""
    out = _cut_lists(_with_defaults(data, _TOP_DEFAULTS, "", repairs), "", repairs)
    enrichment = out.get("enrichment")
    if isinstance(enrichment, dict):
        out["enrichment"] = _cut_lists(enrichment, "enrichment.", repairs)
    spec = out.get("question_spec")
    if isinstance(spec, dict):
        spec = _with_defaults(spec, _SPEC_DEFAULTS, "question_spec.", repairs)
        spec = _cut_lists(spec, "question_spec.", repairs)
        filters = spec.get("filters")
        if isinstance(filters, list):
            spec["filters"] = [
                _with_defaults(f, _FILTER_DEFAULTS, f"question_spec.filters.{i}.", repairs)
                if isinstance(f, dict)
                else f
                for i, f in enumerate(filters)
            ]
        out["question_spec"] = spec
    issues = out.get("issues")
    if isinstance(issues, list):
        unknown = [i for i in issues if isinstance(i, str) and i not in ISSUE_LABELS]
        # Tested against a set: a list read once per label was quadratic (16,000 unknown
        # labels in one reply cost 3 s of CPU before lists were cut at MAX_LIST_ITEMS).
        dropped = set(unknown)
        out["issues"] = [i for i in issues if not (isinstance(i, str) and i in dropped)]
        repairs += [f"unknown_label: dropped issue label {i!r}" for i in unknown]
    verdict = out.get("verdict")
    if isinstance(verdict, str):
        label = _VERDICTS.get(" ".join(verdict.split()).rstrip(".").casefold(), verdict)
        if label != verdict:
            out["verdict"] = label
            repairs.append(f"verdict_spelling: verdict {verdict[:40]!r} read as {label!r}")
    rationale = out.get("rationale")
    if isinstance(rationale, str) and len(rationale) > RATIONALE_MAX:
        out["rationale"] = rationale[: RATIONALE_MAX - 1] + "\u2026"
        repairs.append(f"long_rationale: rationale cut from {len(rationale)} characters")
    return out


def _confidence_read(data: dict[str, Any], repairs: list[str]) -> dict[str, Any]:
    """The reply with an out-of-range numeric confidence read as 0 (a small model under a grammar
    that allows any number writes 1e15 as readily as 0.9)."""
    value = data.get("confidence")
    if isinstance(value, bool) or not isinstance(value, int | float):
        return data
    if 0.0 <= value <= 1.0:
        return data
    repairs.append(
        f"confidence_out_of_range: confidence {value!r} is outside 0..1; read as 0 (certainty "
        "unknown, lowest multiplier)"
    )
    return {**data, "confidence": 0.0}


def _with_defaults(
    obj: dict[str, Any], defaults: dict[str, Any], where: str, repairs: list[str]
) -> dict[str, Any]:
    """``obj`` with each absent field set to its default, and each list with a default sent as
    null: an empty list (``"issues": null``) was re-asked, then an invalid_reply judge_error."""
    out = dict(obj)
    for key, value in defaults.items():
        if key not in out:
            out[key] = value
            repairs.append(f"missing_field: {where}{key} set to {json.dumps(value)}")
        elif out[key] is None and isinstance(value, list):
            out[key] = value
            repairs.append(f"missing_field: {where}{key} null; set to {json.dumps(value)}")
    return out


def to_output(
    reply: LlmReply,
    request: JudgeRequest,
    stef: Sequence[StefMatch] = (),
    repairs: Sequence[str] = (),
) -> JudgeOutput:
    """Convert the reply to the judge contract, repairing what is inconsistent.

    STEF's own matches come first; the model's filters follow, each with its match. A dangling or
    repeated predicate id is dropped, a ``matched`` filter left without predicates (of a parsed
    SQL) becomes ``missing``, a ``missing`` one lists none, a filter listed twice (or one STEF
    already matched) is dropped; every change is a repair string.
    """
    fixes = list(repairs)
    filters = [m.filter for m in stef]
    matches = [
        FilterMatch(filter=i, status=m.status, predicates=list(m.predicates), decided_by="stef")
        for i, m in enumerate(stef)
    ]
    seen = {_key(f.text, f.rhs) for f in filters} | {_key("", f.rhs) for f in filters}
    known = {p.id for p in request.sql_spec.filters}
    literals = _sql_literals(request.record.sql)
    for i, wf in enumerate(reply.question_spec.filters):
        where = f"filter {i} ({wf.text or wf.rhs!r})"
        if _key(wf.text, wf.rhs) in seen or _key("", wf.rhs) in seen:
            fixes.append(f"duplicate: {where} listed again; dropped")
            continue
        seen.add(_key(wf.text, wf.rhs))
        # A value used outside the predicates (a CASE arm) or in unparsed SQL may be matched
        # without an id; a match with nothing in the SQL to stand on may not.
        free = not request.sql_spec.parsed or _fold(wf.rhs) in literals
        preds, status = _match(wf, where, known, free, fixes)
        filters.append(QuestionFilter(lhs=wf.lhs, op=wf.op, rhs=wf.rhs, text=wf.text, kind="llm"))
        matches.append(FilterMatch(filter=len(filters) - 1, status=status, predicates=preds))
    qs = _question_spec(reply.question_spec).model_copy(update={"filters": filters})
    return JudgeOutput(
        question_spec=qs,
        filter_matches=matches,
        enrichment=_enrichment(reply.enrichment, request),
        verdict=reply.verdict,
        confidence=reply.confidence,
        issues=list(reply.issues) or ["none"],
        rationale=reply.rationale,
        repairs=fixes,
    )


def _fold(value: str) -> str:
    return norm_value(value.strip().strip("'\"%").strip())


def _sql_literals(sql: str) -> set[str]:
    """The folded string and number literals written anywhere in the SQL."""
    out = {_fold(m.group(1).replace("''", "'")) for m in SQL_STRING.finditer(sql)}
    return out | {norm_value(m.group(0)) for m in _SQL_NUMBER.finditer(SQL_STRING.sub(" ", sql))}


def _key(text: str, rhs: str) -> tuple[str, str]:
    return (" ".join(text.casefold().split()), " ".join(rhs.casefold().strip("'\"").split()))


def _match(
    wf: WireFilter, where: str, known: set[int], free: bool, fixes: list[str]
) -> tuple[list[int], Literal["matched", "missing", "mismatched"]]:
    """One filter's predicate ids and status, repaired; ``free``: matched needs no id."""
    preds: list[int] = []
    for p in wf.predicates:
        if p not in known:
            fixes.append(f"unknown_predicate: dropped unknown predicate id {p} from {where}")
        elif p in preds:
            fixes.append(f"duplicate: predicate id {p} listed twice in {where}")
        else:
            preds.append(p)
    status = wf.status
    if status == "matched" and not preds and not free:
        fixes.append(f"match_without_predicates: {where} matched by no predicate; missing")
        status = "missing"
    if status == "missing" and preds:
        fixes.append(f"missing_with_predicates: {where} is missing; its predicate ids dropped")
        preds = []
    return preds, status


def _enrichment(wire: WireEnrichment, request: JudgeRequest) -> Enrichment:
    if request.record.enriched_question is None:
        # No Qe logged: the contract says "missing", whatever the model answered.
        return Enrichment(status=EnrichmentStatus.MISSING)
    return Enrichment(
        status=EnrichmentStatus(wire.status), dropped=list(wire.dropped), added=list(wire.added)
    )


def _question_spec(qs: WireQuestionSpec) -> QuestionSpec:
    """The question spec without its filters (:func:`to_output` builds those with their match)."""
    return QuestionSpec(
        outputs=list(qs.outputs),
        aggregations=[
            Aggregation(func=a.func.upper(), column=a.column, distinct=a.distinct)
            for a in qs.aggregations
        ],
        group_by=list(qs.group_by),
        ordering_requested=qs.ordering_requested,
        top_k=qs.top_k,
    )

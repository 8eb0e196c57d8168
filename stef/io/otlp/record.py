"""One trace -> one STEF record, through a :class:`~.mapping.SpanMapping`: the question, the
enriched question and the SQL by picks, ``id`` from the trace and the SQL's span, ``app``,
``agent`` and ``agent_version`` from resource attributes. A trace without a question or SQL is
:class:`~stef.errors.InvalidInput` ``missing_field`` naming what was missing."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from datetime import UTC, datetime
from fnmatch import fnmatchcase
from typing import Any

from stef.errors import ConfigError, InvalidInput
from stef.fields import FieldMapping, path_parts
from stef.io.otlp.mapping import RESOURCE_FIELDS, Pick, SpanMapping, SpanSelector
from stef.io.otlp.spans import Span

# The blanks around the info word are taken whole (possessive): two runs of them side by side,
# with no line break after, were split every way at each fence (quadratic in the blanks).
_FENCE = re.compile(r"```[ \t]*+(?:sql|SQL|[A-Za-z]*)?[ \t]*+\n(.*?)```", re.S)


def trace_record(
    spans: Sequence[Span], mapping: SpanMapping, fields: FieldMapping | None = None
) -> dict[str, Any]:
    """The record of one trace, laid out where ``fields`` (the ``field_mapping``) reads it.

    Raises:
        InvalidInput: ``missing_field``: no pick found the question or the SQL.
    """
    ordered = sorted(spans, key=lambda s: (s.start_ns, s.end_ns))
    found = {name: _first(ordered, mapping.picks(name)) for name in ("question", "sql")}
    missing = [name for name, hit in found.items() if hit is None]
    if missing:
        names = " and ".join(missing)
        raise InvalidInput(
            "missing_field",
            f"trace {ordered[0].trace_id if ordered else '?'}: no span gave the {names} "
            f"(span_mapping preset {mapping.preset!r}; {len(ordered)} spans arrived: "
            f"{_names(ordered)})",
        )
    question, sql = found["question"], found["sql"]
    assert question is not None and sql is not None
    sql_span = sql[1]
    values: dict[str, Any] = {
        "id": f"{sql_span.trace_id}:{sql_span.span_id}",
        "question": question[0],
        "sql": sql[0],
        "metadata": {"otel": {"trace_id": sql_span.trace_id, "span_id": sql_span.span_id}},
    }
    when = _instant(sql_span)
    if when is not None:
        values["timestamp"] = when
    enriched = _first(ordered, mapping.picks("enriched_question"))
    if enriched is not None:
        values["enriched_question"] = enriched[0]
    for name in RESOURCE_FIELDS:
        value = _resource_value(ordered, getattr(mapping, name))
        if value is not None:
            values[name] = value
    return _laid_out(values, fields or FieldMapping())


def _names(spans: Sequence[Span]) -> str:
    names = sorted({s.name for s in spans})
    return ", ".join(names[:10]) + (" ..." if len(names) > 10 else "")


def _first(spans: Sequence[Span], picks: Sequence[Pick]) -> tuple[str, Span] | None:
    roots = {s.span_id for s in spans if s.is_root}
    for pick in picks:
        chosen = [s for s in spans if _selects(pick.span, s, roots)]
        if pick.which == "last":
            chosen.reverse()
        for span in chosen:
            text = _read(span, pick)
            if text:
                return text, span
    return None


def _selects(selector: SpanSelector, span: Span, roots: set[str]) -> bool:
    if selector.kind is not None and span.kind != selector.kind:
        return False
    if selector.name is not None and not fnmatchcase(span.name, selector.name):
        return False
    if selector.root is not None and (span.span_id in roots) != selector.root:
        return False
    return all(_text(span.attributes.get(k)) == v for k, v in selector.attributes.items())


def _read(span: Span, pick: Pick) -> str | None:
    value = span.attributes.get(pick.attribute)
    if value is None:
        value = _unflattened(span.attributes, pick.attribute)
    value = _parsed(value)
    if pick.path is not None:
        value = _at(value, pick.path)
    if pick.role is not None:
        value = _message_of(value, pick.role)
    text = _text(value)
    if text is None or not text.strip():
        return None
    if pick.fenced_sql:
        fenced = _FENCE.search(text)
        if fenced is not None:
            text = fenced.group(1)
    return text.strip() or None


def _parsed(value: Any) -> Any:
    """A JSON text (an object or a list) as what it holds; any other value as it is."""
    if isinstance(value, str) and value.lstrip()[:1] in ("{", "["):
        try:
            return json.loads(value)
        except (ValueError, RecursionError):  # nested past the parser's depth: text, as it is
            return value
    return value


def _at(value: Any, path: str) -> Any:
    for part in path_parts(path):
        value = _parsed(value)
        if isinstance(part, int):
            if not isinstance(value, list) or not -len(value) <= part < len(value):
                return None
        elif not isinstance(value, dict) or part not in value:
            return None
        value = value[part]
    return value


def _message_of(value: Any, role: str) -> Any:
    """The content of the last message of ``role`` in a chat message list."""
    if not isinstance(value, list):
        return None
    for item in reversed(value):
        message = item.get("message", item) if isinstance(item, dict) else None
        if not isinstance(message, dict) or message.get("role") != role:
            continue
        content = message.get("content")
        if content is None and isinstance(message.get("parts"), list):
            texts = [p.get("content") for p in message["parts"] if isinstance(p, dict)]
            content = "\n".join(t for t in texts if isinstance(t, str)) or None
        if isinstance(content, list):  # OpenAI content parts
            texts = [p.get("text") for p in content if isinstance(p, dict)]
            content = "\n".join(t for t in texts if isinstance(t, str)) or None
        if content:
            return content
    return None


def _unflattened(attributes: dict[str, Any], prefix: str) -> Any:
    """A flattened attribute family (``p.0.message.role``, ``p.0.message.content`` ...) as the
    nested lists and dicts it flattens; None when there is none."""
    lead = prefix + "."
    keys = [k for k in attributes if k.startswith(lead)]
    if not keys:
        return None
    root: dict[str, Any] = {}
    for key in keys:
        node = root
        parts = key[len(lead) :].split(".")
        if len(parts) > _MAX_KEY_PARTS:
            continue  # deeper than any message list: no message of it is read
        for part in parts[:-1]:
            node = node.setdefault(part, {})
            if not isinstance(node, dict):
                break
        else:
            node[parts[-1]] = attributes[key]
    return _lists(root)


def _lists(node: Any) -> Any:
    """Dicts keyed 0, 1, 2 ... (an unflattened list) as lists, in index order."""
    if not isinstance(node, dict):
        return node
    items = {k: _lists(v) for k, v in node.items()}
    # An index is ASCII digits, no longer than any list ("²" is a digit to isdigit, not to int).
    if items and all(_INDEX.fullmatch(k) for k in items):
        return [items[k] for k in sorted(items, key=int)]
    return items


_INDEX = re.compile(r"[0-9]{1,9}")
# Parts of a flattened key read (``p.0.message.content.1.text`` has six): a key of 3,000 parts
# nested the family past the interpreter's recursion limit.
_MAX_KEY_PARTS = 32


def _text(value: Any) -> str | None:
    if isinstance(value, str):
        return value
    if isinstance(value, bool) or value is None:
        return None if value is None else str(value).lower()
    if isinstance(value, int | float):
        return str(value)
    return None


def _resource_value(spans: Sequence[Span], source: str | None) -> str | None:
    if source is None:
        return None
    if source.startswith("="):
        return source[1:]
    for span in spans:
        text = _text(span.resource.get(source))
        if text:
            return text
    return None


def _laid_out(values: dict[str, Any], fields: FieldMapping) -> dict[str, Any]:
    """The record with each value where the ``field_mapping`` will look for it."""
    record: dict[str, Any] = {}
    for name, value in values.items():
        parts = path_parts(fields.source_of(name))
        node = record
        for part in parts[:-1]:
            node = node.setdefault(str(part), {})
        node[str(parts[-1])] = value
    return record


def check_field_mapping(fields: FieldMapping) -> None:
    """Records from traces are laid out where ``field_mapping`` reads them: by names and dotted
    paths, not list indexes.

    Raises:
        ConfigError: a mapped path has a list index.
    """
    for name, path in fields.fields.items():
        if any(isinstance(part, int) for part in path_parts(path)):
            raise ConfigError(
                f"field_mapping {name}: {path!r} has a list index; records made from traces "
                "cannot be laid out there (map it by name, or leave it out)"
            )


# 9999-12-31T23:59:59Z in Unix nanoseconds: the last instant an ISO 8601 timestamp can say.
_LAST_NS = 253_402_300_799 * 10**9


def _instant(span: Span) -> str | None:
    """When the SQL ran: its span's end, else its start; None when the span has neither (an
    unset time is 0, which read as 1970-01-01 would make "today" a day of 1970)."""
    for ns in (span.end_ns, span.start_ns):
        if 0 < ns <= _LAST_NS:
            return datetime.fromtimestamp(ns / 1e9, UTC).isoformat()
    return None

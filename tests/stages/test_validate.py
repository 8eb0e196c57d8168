"""Validation: bad input is a typed InvalidInput with a reason, never a crash."""

from __future__ import annotations

import json

import pytest

from stef.errors import InvalidInput
from stef.stages.validate import FieldMapping, Limits, validate


@pytest.mark.parametrize(
    ("payload", "reason"),
    [
        (b"not json", "not_json"),
        (b"\xff\xfe\x00", "not_utf8"),
        (b"[1, 2]", "not_object"),
        (b'"a string"', "not_object"),
        (b'{"sql": "SELECT 1"}', "missing_field"),
        (b'{"question": "  ", "sql": "SELECT 1"}', "missing_field"),
        (b'{"question": 42, "sql": "SELECT 1"}', "wrong_type"),
        (b'{"question": "q", "sql": "SELECT 1", "metadata": [1]}', "wrong_type"),
        (b'{"question": "q", "sql": "SELECT 1", "app": {"x": 1}}', "wrong_type"),
        (json.dumps({"question": "q", "sql": "x" * 60_000}).encode(), "too_large"),
        (b"{" * 100_000, "not_json"),
    ],
    ids=[
        "text",
        "binary",
        "array",
        "string",
        "no-question",
        "blank-question",
        "int-question",
        "metadata-list",
        "app-object",
        "sql-too-long",
        "deep-nesting",
    ],
)
def test_invalid(payload: bytes, reason: str) -> None:
    with pytest.raises(InvalidInput) as info:
        validate(payload)
    assert info.value.reason == reason
    assert info.value.detail


def test_record_too_large_in_bytes() -> None:
    with pytest.raises(InvalidInput) as info:
        validate(b'{"question": "q", "sql": "SELECT 1"}', limits=Limits(max_record_bytes=10))
    assert info.value.reason == "too_large"


def test_valid_record_and_stable_id() -> None:
    a = validate(b'{"question": "How many?", "sql": "SELECT COUNT(*) FROM t", "app": "sales"}')
    b = validate({"question": "How many?", "sql": "SELECT COUNT(*) FROM t", "app": "sales"})
    assert a.id == b.id and len(a.id) == 24
    c = validate({"question": "How many?", "sql": "SELECT COUNT(*) FROM t", "app": "support"})
    assert c.id != a.id


def test_numbers_become_strings_for_ids_and_versions() -> None:
    r = validate({"id": 7, "question": "q", "sql": "SELECT 1", "agent_version": 2.1})
    assert (r.id, r.agent_version) == ("7", "2.1")


def test_field_mapping_with_dotted_paths() -> None:
    mapping = FieldMapping(
        fields={"question": "user_query", "sql": "payload.sql", "app": "context.app"}
    )
    r = validate(
        {"user_query": "q?", "payload": {"sql": "SELECT 1"}, "context": {"app": "a"}}, mapping
    )
    assert (r.question, r.sql, r.app) == ("q?", "SELECT 1", "a")
    with pytest.raises(InvalidInput) as info:
        validate({"user_query": "q?", "payload": {}}, mapping)
    assert "payload.sql" in info.value.detail


def test_unknown_fields_are_ignored_not_passed_on() -> None:
    r = validate({"question": "q", "sql": "SELECT 1", "gold_sql": "SELECT 2", "label": True})
    assert "gold_sql" not in r.model_dump()

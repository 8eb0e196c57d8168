"""Dead letters carry the reason, the error, the source position and the original bytes."""

from __future__ import annotations

import json

from stef.io.deadletter import dead_letter, original_payload


def test_utf8_payload_is_kept_as_text() -> None:
    letter = json.loads(dead_letter("not_json", "bad", {"file": "a.jsonl", "line": 3}, b"{oops"))
    assert letter == {
        "reason": "not_json",
        "error": "bad",
        "source": {"file": "a.jsonl", "line": 3},
        "payload": "{oops",
    }


def test_binary_payload_is_base64_and_recoverable() -> None:
    raw = b'{"question": "\xff\xfe"}'
    pos = {"topic": "in", "partition": 2, "offset": 41}
    letter = json.loads(dead_letter("not_utf8", "bad bytes", pos, raw))
    assert letter["payload_encoding"] == "base64"
    assert letter["source"] == pos
    assert original_payload(letter) == raw

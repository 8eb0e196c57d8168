"""The dead-letter cap: a letter fits ``max_bytes`` whatever the payload (long, binary, or made
of characters JSON escapes 6x), a cut payload is a prefix of the original and the letter names the
original's length and sha256; the error is capped and always valid JSON."""

from __future__ import annotations

import base64
import hashlib
import json
from typing import Any

import pytest

from stef.io.deadletter import (
    DEFAULT_MAX_BYTES,
    MAX_ERROR_CHARS,
    MAX_KEY_BYTES,
    dead_letter,
    message_key,
    original_payload,
)

POSITION = {"topic": "agent-log", "partition": 3, "offset": 1234}


def _letter(payload: bytes, *, error: str = "bad", max_bytes: int = 4096) -> tuple[bytes, Any]:
    raw = dead_letter("not_json", error, POSITION, payload, max_bytes=max_bytes)
    return raw, json.loads(raw)


def test_a_payload_that_fits_is_kept_whole_without_cap_fields() -> None:
    payload = b'{"question": "' + b"x" * 1000 + b'"'
    raw, letter = _letter(payload)
    assert len(raw) <= 4096
    assert original_payload(letter) == payload
    assert not {"payload_truncated", "payload_bytes", "payload_sha256"} & letter.keys()


def test_a_payload_over_the_cap_is_cut_to_a_prefix_with_length_and_sha256() -> None:
    payload = b'{"question": "' + b"abcdefghij" * 10_000 + b'"}'
    raw, letter = _letter(payload, max_bytes=4096)
    assert len(raw) <= 4096
    assert letter["payload_truncated"] is True
    assert letter["payload_bytes"] == len(payload)
    assert letter["payload_sha256"] == hashlib.sha256(payload).hexdigest()
    kept = original_payload(letter)
    assert 0 < len(kept) < len(payload)
    assert payload.startswith(kept)
    # Everything else of the letter is untouched by the cap.
    assert (letter["reason"], letter["error"], letter["source"]) == ("not_json", "bad", POSITION)


def test_the_prefix_keeps_a_useful_share_of_the_cap() -> None:
    """Halving stops at the first prefix that fits: for plain text at least a quarter of the cap
    is payload, not an empty letter."""
    payload = b"a" * 100_000
    raw, letter = _letter(payload, max_bytes=8192)
    assert len(raw) <= 8192
    assert len(original_payload(letter)) >= 8192 // 4


def test_a_binary_payload_stays_base64_and_decodes_to_a_prefix() -> None:
    payload = bytes(range(256)) * 400  # 102,400 bytes, not UTF-8
    raw, letter = _letter(payload, max_bytes=4096)
    assert len(raw) <= 4096
    assert letter["payload_encoding"] == "base64"
    assert letter["payload_truncated"] is True
    assert letter["payload_bytes"] == len(payload)
    assert letter["payload_sha256"] == hashlib.sha256(payload).hexdigest()
    kept = base64.b64decode(letter["payload"], validate=True)
    assert kept and payload.startswith(kept)


def test_a_cut_through_a_multibyte_character_keeps_the_bytes_exact() -> None:
    """A prefix may end inside a UTF-8 character: the bytes are kept exactly, as base64."""
    payload = "é".encode() * 50_000  # two bytes each
    raw, letter = _letter(payload, max_bytes=2002)  # first prefix tried: 1,001 bytes, odd
    assert len(raw) <= 2002
    assert letter["payload_encoding"] == "base64"
    kept = original_payload(letter)
    assert len(kept) % 2 == 1 and payload.startswith(kept)


def test_a_cut_between_characters_stays_text() -> None:
    payload = "é".encode() * 50_000
    raw, letter = _letter(payload, max_bytes=4096)  # prefixes of 2,048 bytes, even
    assert len(raw) <= 4096
    assert "payload_encoding" not in letter
    assert payload.startswith(original_payload(letter))


@pytest.mark.parametrize("char", [b"\x01", b"\x1f", b'"', b"\\"])
def test_escaped_characters_never_push_a_letter_over_the_cap(char: bytes) -> None:
    """1 MB of control characters becomes 6 MB of JSON (``\\u0001``); quotes and backslashes
    double: the letter still fits."""
    payload = char * 1_000_000
    raw, letter = _letter(payload, max_bytes=DEFAULT_MAX_BYTES)
    assert len(raw) <= DEFAULT_MAX_BYTES
    assert letter["payload_truncated"] is True
    assert letter["payload_bytes"] == 1_000_000
    assert payload.startswith(original_payload(letter))


@pytest.mark.parametrize("cap", [1024, 4096, 65_536])
def test_every_cap_holds_for_a_mixed_payload(cap: int) -> None:
    payload = ('\x00\x07\n\t"\\é€😀a' * 20_000).encode()
    raw, letter = _letter(payload, max_bytes=cap)
    assert len(raw) <= cap
    assert payload.startswith(original_payload(letter))


@pytest.mark.parametrize(
    "error",
    [
        pytest.param("bad value \ud800 here", id="lone-high"),
        pytest.param("bad value \udfff", id="lone-low"),
    ],
)
def test_a_lone_surrogate_in_the_error_still_gives_valid_json(error: str) -> None:
    raw = dead_letter("not_utf8", error, POSITION, b"{}", max_bytes=4096)
    raw.decode("utf-8")  # strict: every byte of the letter is valid UTF-8
    letter = json.loads(raw)
    assert letter["error"] == error  # the escape round-trips to the same text
    assert letter["payload"] == "{}"


def test_a_lone_surrogate_with_a_capped_payload() -> None:
    payload = b"z" * 50_000
    raw = dead_letter("internal_error", "boom \ud83d", POSITION, payload, max_bytes=4096)
    raw.decode("utf-8")
    letter = json.loads(raw)
    assert len(raw) <= 4096
    assert letter["payload_truncated"] is True
    assert payload.startswith(original_payload(letter))


def test_a_long_error_is_capped() -> None:
    error = "E" * (MAX_ERROR_CHARS * 5)
    _, letter = _letter(b"{}", error=error, max_bytes=DEFAULT_MAX_BYTES)
    assert letter["error"] == "E" * MAX_ERROR_CHARS + "…"


def test_an_error_at_the_limit_is_kept_whole() -> None:
    error = "E" * MAX_ERROR_CHARS
    _, letter = _letter(b"{}", error=error, max_bytes=DEFAULT_MAX_BYTES)
    assert letter["error"] == error


def test_the_smallest_allowed_cap_holds_with_an_escaped_error() -> None:
    raw = dead_letter("internal_error", "\x01" * 5000, POSITION, b"x" * 10_000, max_bytes=1024)
    assert len(raw) <= 1024


def test_a_key_over_the_bound_is_cut_and_the_letter_keeps_its_length_and_sha256() -> None:
    key = b"\x00k" * MAX_KEY_BYTES
    assert message_key(key) == key[:MAX_KEY_BYTES]
    letter = json.loads(dead_letter("not_json", "bad", {"line": 1}, b"x", key=key))
    assert letter["key_truncated"] is True
    assert letter["key_bytes"] == len(key)
    assert letter["key_sha256"] == hashlib.sha256(key).hexdigest()


def test_a_key_within_the_bound_is_kept_and_the_letter_has_no_key_fields() -> None:
    key = b"k" * MAX_KEY_BYTES
    assert message_key(key) == key
    assert message_key(None) is None
    letter = json.loads(dead_letter("not_json", "bad", {"line": 1}, b"x", key=key))
    assert not {"key_truncated", "key_bytes", "key_sha256"} & set(letter)


def test_a_cut_key_and_a_capped_payload_together_stay_within_the_cap() -> None:
    key = b"k" * 3_000_000
    letter = dead_letter("too_large", "big", {"line": 1}, b"p" * 100_000, max_bytes=4096, key=key)
    assert len(letter) <= 4096
    parsed = json.loads(letter)
    assert parsed["payload_truncated"] is True and parsed["key_bytes"] == len(key)

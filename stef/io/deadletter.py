"""Dead letters (SPEC §3): the reason, the error, where the record came from, its original bytes.

A dead letter always fits its sink: the payload it keeps is capped (``max_bytes`` for the whole
letter, safely below a Kafka producer's default ``max_request_size`` of 1 MiB), and a capped
payload keeps its full length and sha256 beside a prefix, so the original can still be identified.
The message key an output carries is bounded the same way (:func:`message_key`): a source key
longer than :data:`MAX_KEY_BYTES` is cut to a prefix, and the letter keeps its length and sha256.
"""

from __future__ import annotations

import base64
import hashlib
import json
from typing import Any

from stef.io import Oversized

# Below kafka-python's default max_request_size (1,048,576 bytes) with room for key and headers.
DEFAULT_MAX_BYTES = 512 * 1024
MAX_ERROR_CHARS = 1000
# Message keys are identifiers; a longer one (a 3 MB key that compressed well on its way in) would
# make the output message too large for the producer, and the record could never be written.
MAX_KEY_BYTES = 1024


def message_key(key: bytes | None) -> bytes | None:
    """The key an output message carries: ``key`` itself, or its first :data:`MAX_KEY_BYTES`."""
    if key is None or len(key) <= MAX_KEY_BYTES:
        return key
    return key[:MAX_KEY_BYTES]


def _key_fields(key: bytes | None) -> dict[str, Any]:
    """What a letter says of a key :func:`message_key` cut: its whole length and sha256."""
    if key is None or len(key) <= MAX_KEY_BYTES:
        return {}
    return {
        "key_truncated": True,
        "key_bytes": len(key),
        "key_sha256": hashlib.sha256(key).hexdigest(),
    }


def dead_letter(
    reason: str,
    error: str,
    position: dict[str, Any],
    payload: bytes,
    *,
    max_bytes: int = DEFAULT_MAX_BYTES,
    whole: Oversized | None = None,
    key: bytes | None = None,
) -> bytes:
    """The dead-letter JSON line of one record that cannot become a result.

    ``key`` is the source message's key: when it is longer than :data:`MAX_KEY_BYTES` (the
    letter's own message then carries a prefix, see :func:`message_key`), the letter says so with
    ``"key_truncated": true``, ``key_bytes`` and ``key_sha256`` of the whole key.

    The payload is the original text when it is UTF-8, else base64 with
    ``"payload_encoding": "base64"``, so the original bytes can be recovered. When the letter would
    exceed ``max_bytes``, the payload is cut to a prefix (``"payload_truncated": true``) and the
    letter carries ``payload_bytes`` and ``payload_sha256`` of the whole original; if even that
    is too long, the error is cut too (only a source position longer than the cap could exceed it).

    ``whole``: ``payload`` is already only a prefix of a record the source did not hold; the
    letter is capped as above, with the whole record's length and sha256.
    """
    if len(error) > MAX_ERROR_CHARS:
        error = error[:MAX_ERROR_CHARS] + "…"
    keyed = _key_fields(key)
    keep = min(len(payload), max_bytes)
    if whole is None:
        letter = _encode({**_letter(reason, error, position, payload), **keyed})
        if len(letter) <= max_bytes:
            return letter
        whole = Oversized(len(payload), hashlib.sha256(payload).hexdigest())
        keep //= 2
    while True:
        # JSON escaping can grow text up to 6x (control characters), base64 by 4/3: halve until
        # the letter fits; the loop ends because an empty prefix always fits.
        capped = {**_letter(reason, error, position, payload[:keep]), **keyed}
        capped["payload_truncated"] = True
        capped["payload_bytes"] = whole.size
        capped["payload_sha256"] = whole.sha256
        letter = _encode(capped)
        if len(letter) <= max_bytes:
            return letter
        if keep > 0:
            keep //= 2
            continue
        # Even without its payload the letter is too long: its error escapes to more
        # bytes than the cap (control characters are 6 bytes of JSON each). Cut the error.
        text = capped["error"]
        while len(letter) > max_bytes and text:
            text = text[: len(text) // 2]
            capped["error"] = text + "…" if text else ""
            letter = _encode(capped)
        return letter


def _letter(reason: str, error: str, position: dict[str, Any], payload: bytes) -> dict[str, Any]:
    letter: dict[str, Any] = {"reason": reason, "error": error, "source": dict(position)}
    try:
        letter["payload"] = payload.decode("utf-8")
    except UnicodeDecodeError:
        # A prefix may also cut a multi-byte character: base64 keeps the bytes exact either way.
        letter["payload"] = base64.b64encode(payload).decode("ascii")
        letter["payload_encoding"] = "base64"
    return letter


def _encode(letter: dict[str, Any]) -> bytes:
    try:
        return json.dumps(letter, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        # An error message quoting a lone surrogate: ASCII escapes keep the JSON valid.
        return json.dumps(letter, ensure_ascii=True).encode("ascii")


def original_payload(letter: dict[str, Any]) -> bytes:
    """The original bytes of a dead letter (inverse of :func:`dead_letter`; a prefix when
    ``payload_truncated``)."""
    if letter.get("payload_encoding") == "base64":
        return base64.b64decode(letter["payload"])
    return str(letter["payload"]).encode("utf-8")

"""Dead letters (SPEC §3): the reason, the error, where the record came from, its original bytes."""

from __future__ import annotations

import base64
import json
from typing import Any


def dead_letter(reason: str, error: str, position: dict[str, Any], payload: bytes) -> bytes:
    """The dead-letter JSON line of one record that cannot become a result.

    The payload is the original text when it is UTF-8, else base64 with
    ``"payload_encoding": "base64"``, so the original bytes can always be recovered.
    """
    letter: dict[str, Any] = {"reason": reason, "error": error, "source": dict(position)}
    try:
        letter["payload"] = payload.decode("utf-8")
    except UnicodeDecodeError:
        letter["payload"] = base64.b64encode(payload).decode("ascii")
        letter["payload_encoding"] = "base64"
    return json.dumps(letter, ensure_ascii=False).encode("utf-8")


def original_payload(letter: dict[str, Any]) -> bytes:
    """The original bytes of a dead letter (inverse of :func:`dead_letter`)."""
    if letter.get("payload_encoding") == "base64":
        return base64.b64decode(letter["payload"])
    return str(letter["payload"]).encode("utf-8")

"""Every secret STEF knows of, kept out of what it writes: one module for both ways in.

- :func:`register_secret` / :func:`redact_secrets`: the values of STEF's own settings (the LLM
  API key, the Kafka passwords), registered once when the settings are read and replaced in every
  rendered log line (:mod:`stef.logs`), in every form they may take there.
- :func:`redact`: text an endpoint sent (an error body, a reply, an exception's message), made
  safe for an exception detail, a result or a log line: the registered values and the ones
  passed, then the credentials an endpoint may echo back, removed; whitespace folded; length
  capped.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Iterable

# Endpoint text in an exception or a log is cut to this many characters, after redaction.
DETAIL_LIMIT = 300
# Redaction scans at most this much of a body (a gateway may answer megabytes of HTML).
SCAN_LIMIT = 20_000
REDACTED = "[REDACTED]"
# Parts of a secret this short are too common to replace on their own.
_MIN_PART = 8
_secrets_lock = threading.Lock()
_registered: tuple[str, ...] = ()
# Credentials an endpoint may echo back: header values (JSON-quoted or not), bearer tokens,
# OpenAI-style keys, key query parameters. Over-redacting an error message costs nothing.
_SECRET_PATTERNS = (
    # A known scheme and its one token; any other value up to the end of the header value.
    re.compile(
        r"""((?:proxy-)?authorization["']?\s*[:=]\s*["']?)"""
        r"""(?:(?:bearer|basic|token|digest|negotiate|apikey|key)\s+[^\s"',;}]+|[^"'\r\n,;}]+)""",
        re.IGNORECASE,
    ),
    re.compile(
        r"""((?:x-)?(?:api|access|secret)[-_]?key["']?\s*[:=]\s*["']?)[^\s"',;&}]+""",
        re.IGNORECASE,
    ),
    re.compile(r"""([?&](?:api[-_]?)?key=)[^\s"'&#]+""", re.IGNORECASE),
    re.compile(r"(\bBearer\s+)[^\s\"',;}]+", re.IGNORECASE),
    re.compile(r"()\bsk-[A-Za-z0-9_\-]{6,}"),
)


def register_secret(value: str | None) -> None:
    """Redact ``value`` from every log line and endpoint text from now on: as is, as Python's
    ``repr`` and JSON escape it (a key with a newline shows as ``\\n`` in an exception's repr),
    and each of its lines when it has several."""
    global _registered
    if not value or len(value.strip()) < _MIN_PART:
        return
    forms = {value, value.encode("unicode_escape").decode("ascii"), json.dumps(value)[1:-1]}
    forms |= {part for part in value.split() if len(part) >= _MIN_PART}
    with _secrets_lock:
        # Longest first: a whole secret goes before one of its parts.
        _registered = tuple(sorted(set(_registered) | forms, key=len, reverse=True))


def redact_secrets(text: str) -> str:
    """``text`` with every registered secret replaced by ``[REDACTED]``."""
    for secret in _registered:
        if secret in text:
            text = text.replace(secret, REDACTED)
    return text


def redact(text: object, secrets: Iterable[str] = (), *, limit: int | None = DETAIL_LIMIT) -> str:
    """Endpoint text made safe for an exception detail or a log line.

    Removes every value in ``secrets`` (the configured API key) and every registered one
    (:func:`register_secret`) wherever it appears, then
    ``Authorization`` / ``api-key`` / ``x-api-key`` values, bearer tokens and ``sk-...`` keys;
    folds whitespace runs (HTML bodies) to one space; cuts the result to ``limit`` characters.

    Args:
        text: anything; ``str()`` of it is redacted.
        secrets: literal values to remove (empty ones are ignored).
        limit: maximum length of the result (None: no cap).
    """
    out = str(text)[:SCAN_LIMIT]
    for secret in sorted({s for s in secrets if s}, key=len, reverse=True):
        out = out.replace(secret, REDACTED)
    out = redact_secrets(out)
    for pattern in _SECRET_PATTERNS:
        out = pattern.sub(lambda m: m.group(1) + REDACTED, out)
    out = " ".join(out.split())
    if limit is not None and len(out) > limit:
        out = out[: max(0, limit - 1)] + "\u2026"
    return out

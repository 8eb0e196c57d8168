"""Endpoint text made safe for an exception detail or a log line (:func:`redact`): the configured
key and the credentials an endpoint may echo back removed, whitespace folded, length capped."""

from __future__ import annotations

import re
from collections.abc import Iterable

# Endpoint text in an exception or a log is cut to this many characters, after redaction.
DETAIL_LIMIT = 300
# Redaction scans at most this much of a body (a gateway may answer megabytes of HTML).
SCAN_LIMIT = 20_000
_REDACTED = "[REDACTED]"
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


def redact(text: object, secrets: Iterable[str] = (), *, limit: int | None = DETAIL_LIMIT) -> str:
    """Endpoint text made safe for an exception detail or a log line.

    Removes every value in ``secrets`` (the configured API key) wherever it appears, then
    ``Authorization`` / ``api-key`` / ``x-api-key`` values, bearer tokens and ``sk-...`` keys;
    folds whitespace runs (HTML bodies) to one space; cuts the result to ``limit`` characters.

    Args:
        text: anything; ``str()`` of it is redacted.
        secrets: literal values to remove (empty ones are ignored).
        limit: maximum length of the result (None: no cap).
    """
    out = str(text)[:SCAN_LIMIT]
    for secret in sorted({s for s in secrets if s}, key=len, reverse=True):
        out = out.replace(secret, _REDACTED)
    for pattern in _SECRET_PATTERNS:
        out = pattern.sub(lambda m: m.group(1) + _REDACTED, out)
    out = " ".join(out.split())
    if limit is not None and len(out) > limit:
        out = out[: max(0, limit - 1)] + "\u2026"
    return out

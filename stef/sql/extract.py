"""SQL that an agent logged inside prose: a markdown fence or a ``SQL:`` label around the query.

Agents that log the model's raw answer write ```` ```sql ... ``` ```` or ``SQL: SELECT ...``; the
query inside is what ran, so it is what STEF judges (the result names the extraction).
"""

from __future__ import annotations

import re
from collections.abc import Iterator

# A fenced block: ``` or ~~~, an optional info string (sql, postgresql ...), the body, the closing
# fence or the end of the text (a reply cut off before its closing fence).
_FENCE = re.compile(
    r"(?P<fence>`{3,}|~{3,})[ \t]*(?P<info>[\w+.-]*)[^\n]*\n(?P<body>.*?)(?:\n[ \t]*(?P=fence)|\Z)",
    re.S,
)
# Where a fence may start: three backticks or tildes (or more).
_FENCE_RUN = re.compile(r"`{3}|~{3}")
# A leading label: "SQL:", "SQL query:", "Query:" (any case), then the statement.
_LABEL = re.compile(r"\A\s*(?:sql(?:\s+query)?|query)\s*:\s*(?=\S)", re.I)


def extract_sql(text: str) -> str | None:
    """The query inside ``text`` when ``text`` wraps it in a markdown fence or a ``SQL:`` label;
    None when there is nothing to take out (plain SQL, or prose without a fence).

    Of several fenced blocks the first tagged ``sql`` (or a dialect such as ``postgresql``) wins,
    else the first one with any text.
    """
    if "```" in text or "~~~" in text:
        blocks = [
            (m["info"].lower(), m["body"].strip())
            for m in _fences(text)
            # An empty block runs to the end of the text with its closing fence as its body.
            if m["body"].strip() and not m["body"].strip().startswith(m["fence"])
        ]
        if blocks:
            tagged = [body for info, body in blocks if "sql" in info]
            return (tagged or [blocks[0][1]])[0]
    label = _LABEL.match(text)
    if label is not None:
        return text[label.end() :].strip()
    return None


def _fences(text: str) -> Iterator[re.Match[str]]:
    """The matches of ``_FENCE.finditer(text)``, in linear time.

    A fence needs a line break after it, so no block starts on the text's last line. There the
    search failed at every backtick or tilde, reading the rest of the line again for each
    length of its run: cubic (4,000 backticks on one line, a valid SQL field, took 19 s of CPU).
    Only starts before the last line break are tried. At each, the match succeeds on its first
    path, so it is the match ``finditer`` finds there.
    """
    last = text.rfind("\n")
    pos = 0
    while (run := _FENCE_RUN.search(text, pos, max(last, 0))) is not None:
        m = _FENCE.match(text, run.start())
        if m is None:  # never: a line break follows; kept as finditer would go on
            pos = run.start() + 1
            continue
        yield m
        pos = m.end()

"""SQL that an agent logged inside prose: a markdown fence or a ``SQL:`` label around the query.

Agents that log the model's raw answer write ```` ```sql ... ``` ```` or ``SQL: SELECT ...``; the
query inside is what ran, so it is what STEF judges (the result names the extraction).
"""

from __future__ import annotations

import re

# A fenced block: ``` or ~~~, an optional info string (sql, postgresql ...), the body, the closing
# fence or the end of the text (a reply cut off before its closing fence).
_FENCE = re.compile(
    r"(?P<fence>`{3,}|~{3,})[ \t]*(?P<info>[\w+.-]*)[^\n]*\n(?P<body>.*?)(?:\n[ \t]*(?P=fence)|\Z)",
    re.S,
)
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
            for m in _FENCE.finditer(text)
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

"""The references file of reference mode: one JSON object a line, a question and its reviewed SQL.

    {"question": "How many bonds does TR006 have?", "gold_sql": "SELECT COUNT(*) FROM bond ..."}

Read once at start; a record is matched on its normalised question
(:func:`stef.question.question_key`). A bad line fails the start loudly, with its number.
"""

from __future__ import annotations

import json
from pathlib import Path

from stef.errors import ConfigError
from stef.question import question_key


def load_references(path: Path) -> dict[str, str]:
    """Normalised question -> reference SQL, from the JSONL file at ``path``.

    Raises:
        ConfigError: the file cannot be read, or a line is not an object with the strings
            ``question`` and ``gold_sql`` (the message names the line).
    """
    out: dict[str, str] = {}
    try:
        with path.open(encoding="utf-8") as f:
            for n, line in enumerate(f, start=1):
                if not line.strip():
                    continue
                try:
                    obj = json.loads(line)
                except json.JSONDecodeError as exc:
                    raise ConfigError(f"references {path}:{n}: not JSON: {exc}") from exc
                question = obj.get("question") if isinstance(obj, dict) else None
                gold = obj.get("gold_sql") if isinstance(obj, dict) else None
                if not isinstance(question, str) or not isinstance(gold, str) or not gold.strip():
                    raise ConfigError(
                        f"references {path}:{n}: needs the strings 'question' and 'gold_sql'"
                    )
                out[question_key(question)] = gold
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"references {path}: cannot be read: {exc}") from exc
    return out

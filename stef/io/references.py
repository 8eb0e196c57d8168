"""The references file of reference mode: one JSON object a line, a question and its reviewed SQL.

    {"question": "How many bonds does TR006 have?", "gold_sql": "SELECT COUNT(*) FROM bond ..."}

Read once at start; a record is matched on its normalised question
(:func:`stef.question.question_key`). A bad line fails the start loudly, with its number.
"""

from __future__ import annotations

from pathlib import Path

from stef.errors import ConfigError, FileError
from stef.files import iter_jsonl, regular_file
from stef.question import question_key


def load_references(path: Path) -> dict[str, str]:
    """Normalised question -> reference SQL, from the JSONL file at ``path``.

    Raises:
        ConfigError: the file cannot be read, or a line is not an object with the strings
            ``question`` and ``gold_sql`` (the message names the line).
    """
    out: dict[str, str] = {}
    try:
        regular_file(path, None)  # read at start: a FIFO would block the start for ever
        for n, obj in iter_jsonl(path):
            question, gold = obj.get("question"), obj.get("gold_sql")
            if not isinstance(question, str) or not isinstance(gold, str) or not gold.strip():
                raise ConfigError(
                    f"references {path}:{n}: needs the strings 'question' and 'gold_sql'"
                )
            out[question_key(question)] = gold
    except FileError as exc:
        raise ConfigError(f"references {exc}") from exc
    return out

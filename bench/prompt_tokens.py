"""Prompt sizes of the two verdict modes in the model's own tokens, without a server.

Reads the byte-level BPE vocabulary and merges of Qwen2.5-Coder's GGUF
(``build/models/qwen2.5-coder-1.5b-q4_k_m.gguf``, ``scripts/fetch-qwen.sh``), splits text as
Qwen2's pre-tokenizer does (ASCII approximation of its Unicode classes), and counts the chat
template's tokens around each message. Prints the median, 90th percentile and maximum prompt of
probability mode on the example log and on the dev set (and on ``make eval``'s sample), and the
median structured prompt (every 10th record)::

    python -m bench.prompt_tokens
"""

from __future__ import annotations

import itertools
import json
import re
import statistics
import struct
import sys
from functools import lru_cache
from pathlib import Path
from typing import Any, BinaryIO

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.eval import LABELS, MODEL_FILE, SAMPLE  # noqa: E402
from stef.errors import InvalidInput  # noqa: E402
from stef.judges.llm.client import Messages  # noqa: E402
from stef.judges.llm.config import LlmConfig  # noqa: E402
from stef.judges.llm.judge import LlmJudge  # noqa: E402
from stef.pipeline import judge_request  # noqa: E402
from stef.rules import load_rules  # noqa: E402
from stef.stages.validate import validate  # noqa: E402

_SCALARS = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?"}
_SCALARS |= {10: "<Q", 11: "<q", 12: "<d"}
_STRING, _ARRAY = 8, 9
# Qwen2's pre-tokenizer, with \p{L} as [^\W\d_] and \p{N} as \d.
_PRE = re.compile(
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\w]?[^\W\d_]+|\d| ?[^\s\w]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)"
    r"|\s+|_+"
)
# <|im_start|>, the role and a newline before a message; <|im_end|> and a newline after it.
_PER_MESSAGE = 4
_ASSISTANT_START = 3


def _gguf_metadata(path: Path) -> dict[str, Any]:
    with path.open("rb") as f:
        if f.read(4) != b"GGUF":
            raise SystemExit(f"{path} is not a GGUF file")
        _read(f, "<I")
        _read(f, "<Q")
        count = _read(f, "<Q")
        return {_string(f): _value(f, _read(f, "<I")) for _ in range(count)}


def _read(f: BinaryIO, fmt: str) -> Any:
    return struct.unpack(fmt, f.read(struct.calcsize(fmt)))[0]


def _string(f: BinaryIO) -> str:
    return f.read(_read(f, "<Q")).decode("utf-8", "replace")


def _value(f: BinaryIO, kind: int) -> Any:
    if kind == _STRING:
        return _string(f)
    if kind == _ARRAY:
        inner, n = _read(f, "<I"), _read(f, "<Q")
        return [_value(f, inner) for _ in range(n)]
    return _read(f, _SCALARS[kind])


def _byte_chars() -> dict[int, str]:
    """GPT-2's byte-to-unicode table (byte-level BPE vocabularies are written in it)."""
    keep = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1)]
    keep += range(ord("®"), ord("ÿ") + 1)
    chars = list(keep)
    extra = 0
    for b in range(256):
        if b not in keep:
            keep.append(b)
            chars.append(256 + extra)
            extra += 1
    return {b: chr(c) for b, c in zip(keep, chars, strict=True)}


class Tokens:
    """Token counts with the GGUF's merges."""

    def __init__(self, path: Path) -> None:
        meta = _gguf_metadata(path)
        self._ranks = {
            tuple(m.split(" ", 1)): i for i, m in enumerate(meta["tokenizer.ggml.merges"])
        }
        self._chars = _byte_chars()

    def count(self, text: str) -> int:
        return sum(
            self._word("".join(self._chars[b] for b in piece.encode()))
            for piece in _PRE.findall(text)
        )

    @lru_cache(maxsize=200_000)  # noqa: B019 - one instance per run
    def _word(self, word: str) -> int:
        parts = list(word)
        none = 1 << 30
        while len(parts) > 1:
            rank, i = min(
                (self._ranks.get((a, b), none), i)
                for i, (a, b) in enumerate(itertools.pairwise(parts))
            )
            if rank == none:
                break
            parts[i : i + 2] = [parts[i] + parts[i + 1]]
        return len(parts)

    def chat(self, messages: Messages) -> int:
        return sum(_PER_MESSAGE + self.count(m["content"]) for m in messages) + _ASSISTANT_START


def _sizes(tok: Tokens, path: Path, rules_dir: Path, sample: set[str]) -> dict[str, Any]:
    url = "http://127.0.0.1:9/v1"
    probability = LlmJudge(LlmConfig(base_url=url, model="m", verdict="probability"))
    structured = LlmJudge(LlmConfig(base_url=url, model="m"))
    rules = load_rules(rules_dir)
    sizes: list[int] = []
    in_sample: list[int] = []
    big: list[int] = []
    try:
        for i, line in enumerate(path.read_text(encoding="utf-8").splitlines()):
            try:
                obj = json.loads(line)
                if not isinstance(obj, dict):
                    continue
                obj = {k: v for k, v in obj.items() if k not in ("label", "gold_sql")}
                record = validate(json.dumps(obj).encode())
            except (ValueError, InvalidInput):
                continue  # the example log's deliberately bad lines
            request, _ = judge_request(record, rules.for_app(record.app))
            n = tok.chat(probability.probability_messages(request))
            sizes.append(n)
            if record.id in sample:
                in_sample.append(n)
            if i % 10 == 0:
                big.append(tok.chat(structured.messages(request)))
    finally:
        probability.close()
        structured.close()
    ordered = sorted(sizes)
    return {
        "records": len(sizes),
        "probability_median": statistics.median(sizes),
        "probability_p90": ordered[int(len(ordered) * 0.9)],
        "probability_max": ordered[-1],
        "probability_sample_median": statistics.median(in_sample) if in_sample else None,
        "structured_median": statistics.median(big),
    }


def main() -> int:
    if not MODEL_FILE.exists():
        print(f"{MODEL_FILE} is missing: bash scripts/fetch-qwen.sh", file=sys.stderr)
        return 2
    tok = Tokens(MODEL_FILE)
    sample = set(json.loads(SAMPLE.read_text(encoding="utf-8"))["ids"])
    runs = [("example log", ROOT / "examples" / "agent_log.jsonl", ROOT / "rules")]
    if LABELS.exists():
        runs.append(("dev set", LABELS, ROOT / "examples" / "rules-judge-dev"))
    for name, path, rules in runs:
        print(name, json.dumps(_sizes(tok, path, rules, sample)), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

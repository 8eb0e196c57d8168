"""``stef judge``: one record from flags or stdin through the record path; prints the result."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

import sqlglot

from stef.api import Judge
from stef.cli.common import add_common, report_error, settings_of
from stef.cli.result_text import as_text
from stef.errors import InvalidInput, StefError
from stef.exits import Exit
from stef.files import MAX_LINE_BYTES
from stef.settings import Settings

_FLAG_FIELDS = ("id", "question", "sql", "enriched_question", "app", "dialect")


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    j = sub.add_parser(
        "judge",
        help="judge one record (flags, or one JSON record on stdin)",
        description="Judge one record. Exit status: 0 judged (or sampled out), 1 invalid input, "
        "2 usage, 3 the judge could not decide (judge_error).",
    )
    j.add_argument("--question", "-q")
    j.add_argument("--sql", "-s")
    j.add_argument("--enriched-question", "-e")
    j.add_argument("--app")
    j.add_argument("--dialect", help="sqlglot dialect of the SQL")
    j.add_argument("--id")
    j.add_argument("--cache", help="SQLite file caching LLM verdicts across runs (LLM only)")
    j.add_argument(
        "--format",
        choices=("json", "text"),
        default="json",
        help="json: the whole result (default); text: score, tier, verdict, alignment, issues",
    )
    add_common(j, rules_help="rules file or directory (default: built-in defaults)")
    j.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    problem = _usage_problem(args)
    if problem is not None:
        print(f"stef judge: {problem}", file=sys.stderr)
        return Exit.USAGE
    try:
        settings = settings_of(args, cache=args.cache)
    except (StefError, OSError) as exc:
        return report_error("stef judge", exc)
    payload = b""
    if args.question is None:
        piped = _stdin_record(settings)
        if isinstance(piped, int):
            return piped
        payload = piped
    try:
        judge = Judge(settings)
    except (StefError, OSError) as exc:
        return report_error("stef judge", exc)
    with judge:
        if args.question is not None:
            payload = _payload_from_flags(args, judge.settings)
        try:
            result = judge.judge(payload)
        except InvalidInput as exc:
            print(f"stef judge: invalid input ({exc.reason}): {exc.detail}", file=sys.stderr)
            return Exit.FAILURE
    if args.format == "text":
        print(as_text(result))
    else:
        print(json.dumps(result.model_dump(mode="json"), indent=2, ensure_ascii=False))
    if result.outcome == "judge_error":
        print(f"stef judge: judge_error: {result.error}", file=sys.stderr)
        return Exit.JUDGE_ERROR
    return Exit.OK


def _stdin_record(settings: Settings) -> bytes | int:
    """The record piped to stdin, or the exit status after saying why there is none."""
    # Bounded (stdin may be /dev/zero: read whole, it ended in a MemoryError), the bound at
    # least limits.max_record_bytes: a record the settings allow (and stef replay judges) is
    # the record path's to judge or refuse, whatever its size.
    bound = max(MAX_LINE_BYTES, settings.limits.max_record_bytes)
    payload = sys.stdin.buffer.read(bound + 1)
    if len(payload) > bound:
        size = f"{bound >> 20} MiB" if bound % (1 << 20) == 0 else f"{bound} bytes"
        print(f"stef judge: stdin: longer than {size}", file=sys.stderr)
        return Exit.FAILURE
    # A BOM (an editor's, Notepad's) is passed over, as the file readers do.
    payload = payload.strip().removeprefix(b"\xef\xbb\xbf").strip()
    if not payload:
        print(
            "stef judge: no record on stdin; pass --question and --sql, or pipe one JSON "
            "record (stef judge < record.json)",
            file=sys.stderr,
        )
        return Exit.USAGE
    return payload


def _usage_problem(args: argparse.Namespace) -> str | None:
    if (args.question is None) != (args.sql is None):
        return "--question and --sql go together (or pass one JSON record on stdin)"
    if args.dialect is not None and args.dialect not in _dialects():
        return f"unknown --dialect {args.dialect!r}; one of {', '.join(_dialects())}"
    return None


def _payload_from_flags(args: argparse.Namespace, settings: Settings) -> bytes:
    """The record the flags describe, laid out where the field mapping looks for each field."""
    record: dict[str, Any] = {}
    for name in _FLAG_FIELDS:
        value = getattr(args, name)
        if value is None:
            continue
        *parents, leaf = settings.mapping.source_of(name).split(".")
        node = record
        for part in parents:
            node = node.setdefault(part, {})
        node[leaf] = value
    return json.dumps(record, ensure_ascii=False).encode("utf-8", "surrogatepass")


def _dialects() -> list[str]:
    return sorted(d.value for d in sqlglot.Dialects if d.value)

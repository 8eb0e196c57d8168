"""``stef judge``: one record from flags or stdin through the record path; prints the result."""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
from typing import Any

import sqlglot

from stef.cli.common import add_common, report_error, settings_of
from stef.errors import StefError
from stef.exits import Exit
from stef.rules import load_rules
from stef.service.wiring import build_backend, build_pipeline
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
    add_common(j, rules_help="rules file or directory (default: built-in defaults)")
    j.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if (args.question is None) != (args.sql is None):
        print(
            "stef judge: --question and --sql go together (or pass one JSON record on stdin)",
            file=sys.stderr,
        )
        return Exit.USAGE
    if args.dialect is not None and args.dialect not in _dialects():
        print(
            f"stef judge: unknown --dialect {args.dialect!r}; one of {', '.join(_dialects())}",
            file=sys.stderr,
        )
        return Exit.USAGE
    try:
        settings = settings_of(args, cache=args.cache)
        rules = load_rules(settings.rules)
    except (StefError, OSError) as exc:
        return report_error("stef judge", exc)
    if args.question is None:
        payload = sys.stdin.buffer.read().strip()
    else:
        payload = _payload_from_flags(args, settings)
    with contextlib.ExitStack() as stack:
        try:
            backend = build_backend(settings)
        except StefError as exc:
            return report_error("stef judge", exc)
        stack.callback(backend.close)
        try:
            pipeline = build_pipeline(settings, rules, backend)
        except StefError as exc:
            return report_error("stef judge", exc)
        processed = pipeline.process(payload, {"file": "-", "line": 1})
    if processed.result is None:
        print(f"stef judge: invalid input ({processed.reason}): {processed.error}", file=sys.stderr)
        return Exit.FAILURE
    print(json.dumps(processed.result.model_dump(mode="json"), indent=2, ensure_ascii=False))
    if processed.result.outcome == "judge_error":
        print(f"stef judge: judge_error: {processed.result.error}", file=sys.stderr)
        return Exit.JUDGE_ERROR
    return Exit.OK


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

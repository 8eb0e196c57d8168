"""Command line: argument parsing and wiring, nothing else (SPEC §5).

stef judge      one record from flags or stdin; prints the result JSON
stef replay     a JSONL log through the pipeline; results JSONL and a summary table
stef summary    the summary table of a results JSONL file
stef rules      check rules files (line-numbered errors) or print their JSON schema
stef run        the service (stef.service.loop)
stef calibrate  agreement with human labels (stef.calibrate.core)
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import time
from collections import deque
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import IO, Any

import structlog

from stef import __version__
from stef.errors import InvalidInput, RulesError, StefError
from stef.judges.base import Judge
from stef.metrics import Metrics
from stef.models import Result
from stef.pipeline import Pipeline
from stef.rules import RuleSet, load_rules, rules_schema
from stef.stages.validate import validate
from stef.summary import Summary

EXIT_OK, EXIT_FAIL, EXIT_USAGE = 0, 1, 2


def configure_logging(level: str | None = None) -> None:
    """structlog JSON lines on stderr, configured once per process."""
    name = (level or os.environ.get("STEF_LOG_LEVEL", "warning")).upper()
    numeric = getattr(logging, name, logging.WARNING)
    logging.basicConfig(level=numeric, stream=sys.stderr, format="%(message)s")
    # sqlglot logs a warning for every statement it falls back to parsing as a Command.
    logging.getLogger("sqlglot").setLevel(logging.ERROR)
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.format_exc_info,
            structlog.processors.JSONRenderer(),
        ],
        wrapper_class=structlog.make_filtering_bound_logger(numeric),
        logger_factory=structlog.WriteLoggerFactory(file=sys.stderr),
        cache_logger_on_first_use=True,
    )


def build_backend(metrics: Metrics | None = None, *, cache: str | None = None) -> Judge:
    """The backend the service would build from ``STEF_LLM_*``: the LLM judge when an endpoint
    is configured, else the heuristic judge.

    Args:
        metrics: where the LLM backend reports calls, tokens and cache hits.
        cache: a SQLite file that keeps LLM verdicts across runs (LLM backend only).
    """
    from stef.judges.llm.config import LlmConfig
    from stef.service.loop import build_backend as service_backend
    from stef.settings import Settings

    config = LlmConfig.from_env()
    if cache is not None:
        config = config.model_copy(update={"cache_path": Path(cache)})
    return service_backend(Settings(llm=config), metrics)


def close_backend(backend: Judge) -> None:
    """Release what a backend holds (HTTP connections, the cache file); a no-op for others."""
    close = getattr(backend, "close", None)
    if callable(close):
        close()


# ---------------------------------------------------------------------------------- stef judge


def _cmd_judge(args: argparse.Namespace) -> int:
    rules = load_rules(args.rules)
    if args.question is None and args.sql is None:
        payload: Any = sys.stdin.buffer.read()
    elif args.question is None or args.sql is None:
        print(
            "stef judge: --question and --sql go together (or pass one JSON record on stdin)",
            file=sys.stderr,
        )
        return EXIT_USAGE
    else:
        payload = {
            k: v
            for k, v in {
                "id": args.id,
                "question": args.question,
                "sql": args.sql,
                "enriched_question": args.enriched_question,
                "app": args.app,
                "dialect": args.dialect,
            }.items()
            if v is not None
        }
    try:
        record = validate(payload)
    except InvalidInput as exc:
        print(f"stef judge: invalid input ({exc.reason}): {exc.detail}", file=sys.stderr)
        return EXIT_FAIL
    backend = build_backend(cache=args.cache)
    try:
        result = Pipeline(rules, backend).judge_record(record)
    finally:
        close_backend(backend)
    print(json.dumps(result.model_dump(mode="json"), indent=2, ensure_ascii=False))
    return EXIT_OK


# --------------------------------------------------------------------------------- stef replay


def _lines(path: str) -> Iterator[tuple[int, bytes]]:
    stream: IO[bytes] = sys.stdin.buffer if path == "-" else open(path, "rb")  # noqa: SIM115
    try:
        for n, line in enumerate(stream, start=1):
            if line.strip():
                yield n, line.rstrip(b"\r\n")
    finally:
        if stream is not sys.stdin.buffer:
            stream.close()


class _Progress:
    """A one-line progress bar on a terminal; silent otherwise."""

    def __init__(self, total: int | None, enabled: bool) -> None:
        self.total = total
        self.enabled = enabled
        self.done = 0
        self.started = time.monotonic()
        self._last = 0.0

    def step(self) -> None:
        self.done += 1
        now = time.monotonic()
        if self.enabled and (now - self._last > 0.1 or self.done == self.total):
            self._last = now
            rate = self.done / max(now - self.started, 1e-9)
            if self.total:
                width = 30
                filled = int(width * self.done / self.total)
                bar = "#" * filled + "." * (width - filled)
                sys.stderr.write(f"\r[{bar}] {self.done}/{self.total} {rate:.0f} rec/s")
            else:
                sys.stderr.write(f"\r{self.done} records {rate:.0f} rec/s")
            sys.stderr.flush()

    def close(self) -> None:
        if self.enabled:
            sys.stderr.write("\n")


def replay(
    path: str,
    pipeline: Pipeline,
    *,
    concurrency: int = 8,
    output: IO[str] | None = None,
    dead_letters: IO[str] | None = None,
    progress: bool = False,
    on_invalid: Any = None,
) -> Summary:
    """Judge every line of a JSONL log in input order; invalid lines are reported, not fatal."""
    summary = Summary()
    total = None
    if progress and path != "-":
        with open(path, "rb") as f:
            total = sum(1 for line in f if line.strip())
    bar = _Progress(total, progress)
    window: deque[Future[Result]] = deque()

    def drain(limit: int) -> None:
        while len(window) > limit:
            result = window.popleft().result()
            summary.add(result)
            if output is not None:
                output.write(result.to_json() + "\n")
            bar.step()

    with ThreadPoolExecutor(max_workers=max(1, concurrency)) as pool:
        for n, line in _lines(path):
            try:
                record = validate(line)
            except InvalidInput as exc:
                summary.invalid += 1
                bar.step()
                if on_invalid is not None:
                    on_invalid(n, exc)
                if dead_letters is not None:
                    dead_letters.write(json.dumps(_dead_letter(path, n, line, exc)) + "\n")
                continue
            window.append(pool.submit(pipeline.judge_record, record))
            drain(concurrency * 4)
        drain(0)
    bar.close()
    return summary


def _dead_letter(path: str, line_no: int, raw: bytes, exc: InvalidInput) -> dict[str, Any]:
    import base64

    try:
        payload, encoding = raw.decode("utf-8"), None
    except UnicodeDecodeError:
        payload, encoding = base64.b64encode(raw).decode("ascii"), "base64"
    letter: dict[str, Any] = {
        "reason": exc.reason,
        "error": exc.detail,
        "source": {"file": path, "line": line_no},
        "payload": payload,
    }
    if encoding:
        letter["payload_encoding"] = encoding
    return letter


def _cmd_replay(args: argparse.Namespace) -> int:
    rules = load_rules(args.rules)
    backend = build_backend(cache=args.cache)
    pipeline = Pipeline(rules, backend)
    for target in (args.output, args.dead_letters):
        if target:
            Path(target).parent.mkdir(parents=True, exist_ok=True)
    out = open(args.output, "w", encoding="utf-8") if args.output else None  # noqa: SIM115
    dead = open(args.dead_letters, "w", encoding="utf-8") if args.dead_letters else None  # noqa: SIM115

    def report(n: int, exc: InvalidInput) -> None:
        print(f"{args.file}:{n}: invalid input ({exc.reason}): {exc.detail}", file=sys.stderr)

    progress = sys.stderr.isatty() and not args.no_progress
    try:
        summary = replay(
            args.file,
            pipeline,
            concurrency=args.concurrency,
            output=out,
            dead_letters=dead,
            progress=progress,
            on_invalid=report,
        )
    except FileNotFoundError as exc:
        print(f"stef replay: {exc}", file=sys.stderr)
        return EXIT_FAIL
    finally:
        close_backend(backend)
        for f in (out, dead):
            if f is not None:
                f.close()
    print(summary.table())
    return EXIT_OK


# ------------------------------------------------------------------------ stef summary / rules


def _cmd_summary(args: argparse.Namespace) -> int:
    summary = Summary()
    with open(args.file, encoding="utf-8") as f:
        for n, line in enumerate(f, start=1):
            if not line.strip():
                continue
            try:
                summary.add(Result.model_validate_json(line))
            except ValueError as exc:
                print(f"{args.file}:{n}: not a result: {str(exc).splitlines()[0]}", file=sys.stderr)
                return EXIT_FAIL
    summary.invalid_known = bool(args.dead_letters)
    if args.dead_letters:
        with open(args.dead_letters, encoding="utf-8") as f:
            summary.invalid = sum(1 for line in f if line.strip())
    print(summary.table())
    return EXIT_OK


def _cmd_rules_check(args: argparse.Namespace) -> int:
    try:
        ruleset: RuleSet = load_rules(args.path)
    except RulesError as exc:
        for problem in exc.problems:
            print(str(problem), file=sys.stderr)
        print(f"{len(exc.problems)} problem(s) in {args.path}", file=sys.stderr)
        return EXIT_FAIL
    apps = ", ".join(ruleset.known_apps) or "(single file)"
    print(f"{args.path}: ok (rules_version {ruleset.version}; apps: {apps})")
    return EXIT_OK


def _cmd_rules_schema(args: argparse.Namespace) -> int:
    print(json.dumps(rules_schema(), indent=2))
    return EXIT_OK


# ------------------------------------------------------------------------------------- parser


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="stef", description="Production judge for Text-to-SQL agents")
    p.add_argument("--version", action="version", version=f"stef {__version__}")
    p.add_argument("--log-level", default=None, help="debug, info, warning (env STEF_LOG_LEVEL)")
    sub = p.add_subparsers(dest="command", required=True)

    j = sub.add_parser("judge", help="judge one record (flags, or one JSON record on stdin)")
    j.add_argument("--question", "-q")
    j.add_argument("--sql", "-s")
    j.add_argument("--enriched-question", "-e")
    j.add_argument("--app")
    j.add_argument("--dialect")
    j.add_argument("--id")
    j.add_argument("--rules", help="rules file or directory (default: built-in defaults)")
    j.add_argument("--cache", help="SQLite file caching LLM verdicts across runs (LLM only)")
    j.set_defaults(func=_cmd_judge)

    r = sub.add_parser("replay", help="judge a JSONL agent log and print a summary")
    r.add_argument("file", help="JSONL file, or - for stdin")
    r.add_argument("--output", "-o", help="write results as JSONL here")
    r.add_argument("--dead-letters", help="write invalid lines as dead letters (JSONL) here")
    r.add_argument("--rules", help="rules file or directory")
    r.add_argument("--concurrency", type=int, default=8, help="judge calls in flight (default 8)")
    r.add_argument("--cache", help="SQLite file caching LLM verdicts across runs (LLM only)")
    r.add_argument("--no-progress", action="store_true", help="no progress bar")
    r.set_defaults(func=_cmd_replay)

    s = sub.add_parser("summary", help="summary table of a results JSONL file")
    s.add_argument("file")
    s.add_argument("--dead-letters", help="dead-letter JSONL, to count invalid input")
    s.set_defaults(func=_cmd_summary)

    rules = sub.add_parser("rules", help="rules files")
    rsub = rules.add_subparsers(dest="rules_command", required=True)
    rc = rsub.add_parser("check", help="validate rules files; file:line errors, non-zero on error")
    rc.add_argument("path", nargs="?", default="rules")
    rc.set_defaults(func=_cmd_rules_check)
    rs = rsub.add_parser("schema", help="print the JSON schema of a rules file")
    rs.set_defaults(func=_cmd_rules_schema)

    sub.add_parser("run", help="the service (see stef run --help)", add_help=False)
    sub.add_parser(
        "calibrate", help="agreement with human labels (see stef calibrate --help)", add_help=False
    )
    return p


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    level = None
    if len(argv) >= 2 and argv[0] == "--log-level":
        level, argv = argv[1], argv[2:]
    configure_logging(level)
    if argv and argv[0] == "run":
        run_args = argv[1:]
        if level is not None and "--log-level" not in run_args:
            run_args = ["--log-level", level, *run_args]
        from stef.service.loop import cli_main as run_main

        return run_main(run_args)
    if argv and argv[0] == "calibrate":
        from stef.calibrate.core import cli_main as calibrate_main

        return calibrate_main(argv[1:])
    args = _parser().parse_args(argv)
    try:
        return int(args.func(args))
    except RulesError as exc:
        for problem in exc.problems:
            print(str(problem), file=sys.stderr)
        return EXIT_USAGE
    except StefError as exc:
        print(f"stef: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except BrokenPipeError:
        return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())

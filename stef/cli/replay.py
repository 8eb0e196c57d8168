"""``stef replay FILE``: the service on a file source, with a JSONL sink, a progress bar and a
summary table per app and agent. Results are written in the order they finish."""

from __future__ import annotations

import argparse
import contextlib
import os
import stat
import sys
import threading
from collections import Counter

from stef.cli import integer, number, silence_stdout
from stef.cli.common import (
    add_common,
    every_record_invalid,
    preflight,
    report_error,
    settings_of,
    tell,
)
from stef.cli.inorder import InOrder, OrderedFileSource
from stef.cli.progress import Progress
from stef.errors import StefError
from stef.exits import Exit
from stef.io import Envelope, Sink, Source
from stef.io.discard import DiscardSink
from stef.io.jsonl import JsonlSink, check_source_file
from stef.io.otlp.exports import FORMATS, detect_format
from stef.io.replaced import ReplacingJsonlSink
from stef.pipeline import Processed
from stef.service.loop import Service
from stef.service.wiring import open_file_source
from stef.settings import Settings
from stef.summary import Summary

# What --fail-on can name: result outcomes, dead letters, and the poor tier.
GATES = ("judge_error", "invalid", "internal_error", "skipped_sampling", "poor")


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    r = sub.add_parser(
        "replay",
        help="judge a JSONL agent log and print a summary",
        description="Judge every line of a JSONL agent log through the service's record path. "
        "Exit status: 0 done, 1 an output failed, a record never finished, or a signal "
        "stopped the run before the file's end, 2 usage, "
        "3 the LLM endpoint failed its check before any record was read, or every judged "
        "record is a judge error (or more than --max-judge-error-rate of them), "
        "4 an outcome named by --fail-on occurred.",
    )
    r.add_argument(
        "file",
        help="JSONL file, or - for stdin; also OTLP JSON lines (the Collector's file exporter) "
        "and Langfuse / LangSmith trace exports (JSON lines or .parquet), read through "
        "span_mapping (docs/opentelemetry.md)",
    )
    r.add_argument(
        "--input-format",
        choices=("auto", *FORMATS),
        default="auto",
        help="what the file holds (default: told by the file: a .parquet export's columns, "
        "else its first line)",
    )
    r.add_argument("--output", "-o", help="write results as JSONL here (replaced)")
    r.add_argument("--dead-letters", help="write invalid lines as dead letters (JSONL) here")
    r.add_argument("--concurrency", type=integer(1), help="records judged at once (default 8)")
    r.add_argument("--cache", help="SQLite file caching LLM verdicts across runs (LLM only)")
    r.add_argument("--no-progress", action="store_true", help="no progress bar")
    r.add_argument(
        "--fail-on",
        default="",
        help=f"comma-separated outcomes that make the exit status 4: {', '.join(GATES)}",
    )
    r.add_argument(
        "--max-judge-error-rate",
        type=number(0, 1),
        metavar="RATE",
        help="exit 3 when more than this share (0-1) of the judged records are judge errors "
        "(default: only when every one is)",
    )
    add_common(r)
    r.set_defaults(func=run)


class _Tally:
    """The observer of the replay: the summary, the progress bar, the --fail-on gate."""

    def __init__(self, path: str, progress: Progress, gates: set[str]) -> None:
        self.path = path
        self.summary = Summary()
        self.progress = progress
        self.order = InOrder(progress.message)
        self.gates = gates
        self.tripped: set[str] = set()
        self.invalid_reasons: Counter[str] = Counter()
        self._lock = threading.Lock()

    def __call__(self, envelope: Envelope, processed: Processed) -> None:
        with self._lock:
            result = processed.result
            seen: set[str]
            if result is not None:
                self.summary.add(result)
                seen = {result.outcome, result.tier or ""}
            else:
                self.summary.invalid += 1
                self.invalid_reasons[processed.reason or "unknown"] += 1
                seen = {"invalid", processed.reason or ""}
            self.tripped |= seen & self.gates
            # Counted before anything is written to the terminal: a stderr that fails (closed,
            # full) loses the message, never the summary or the --fail-on gate.
            self.progress.step()
            message = None
            if result is None:
                # A Parquet export's rows have no line.
                at = envelope.position.get("line", envelope.position.get("row"))
                why = f"invalid input ({processed.reason}): {processed.error}"
                message = f"{self.path}:{at}: {why}"
        # Outside the tally's lock: a message waits for the records read before its own.
        self.order.finished(envelope, message)


def _source(args: argparse.Namespace, settings: Settings, order: InOrder) -> Source:
    """The replayed file: STEF's records read in order (so invalid lines are reported in input
    order), or a trace file or export through ``span_mapping``."""
    fmt = args.input_format
    if fmt == "auto" and args.file != "-":
        fmt = detect_format(args.file)
    if fmt in ("auto", "records"):
        return OrderedFileSource(args.file, order, max_line_bytes=settings.limits.max_record_bytes)
    return open_file_source(args.file, settings, fmt)


def run(args: argparse.Namespace) -> int:
    gates = {g.strip() for g in args.fail_on.split(",") if g.strip()}
    refused = _refused(args, gates)
    if refused is not None:
        return refused
    started = _start(args)
    if isinstance(started, int):
        return started
    settings, results, dead = started
    # A trace file's lines or rows are not its records: no total for the progress bar then.
    flat = args.input_format == "records" or (
        args.input_format == "auto" and not args.file.endswith(".parquet")
    )
    total = _count_lines(args.file) if _show_progress(args) and flat else None
    tally = _Tally(args.file, Progress(total, _show_progress(args)), gates)
    try:
        service = Service(
            settings,
            source=_source(args, settings, tally.order),
            results=results,
            dead_letters=dead,
            observer=tally,
            log_dead_letters=False,  # the tally prints each one, with its line and error
        )
    except (StefError, OSError) as exc:
        for sink in (results, dead):
            sink.close()
        return report_error("stef replay", exc)
    service.install_signal_handlers()
    try:
        with tally.progress.above():
            status = service.run()
    except (StefError, OSError) as exc:  # an output that cannot be created: one line
        return report_error("stef replay", exc)
    if status == Exit.OK and not (service.source.exhausted and service.drained):
        # A stop signal (SIGTERM, SIGQUIT) before the file's end, or records abandoned: the
        # output holds part of the file, which exit 0 said was judged whole.
        status = Exit.FAILURE
    tally.order.close()
    tally.progress.close()
    return _conclude(args, settings, tally, service.judge_errors.totals, status)


def _refused(args: argparse.Namespace, gates: set[str]) -> int | None:
    """The exit status of arguments a replay cannot start with (said on stderr), or None."""
    if gates - set(GATES):
        print(
            f"stef replay: --fail-on takes {', '.join(GATES)}; not {sorted(gates - set(GATES))}",
            file=sys.stderr,
        )
        return Exit.USAGE
    if args.file != "-":
        try:
            check_source_file(args.file)
        except FileNotFoundError:
            print(f"stef replay: {args.file}: no such file", file=sys.stderr)
            return Exit.FAILURE
        except StefError as exc:  # a FIFO, a directory, unreadable ...: never a hang
            return report_error("stef replay", exc)
    for flag in ("output", "dead_letters"):
        problem = _output_problem(args, flag)
        if problem is not None:
            print(f"stef replay: {problem}", file=sys.stderr)
            return Exit.USAGE
    return None


def _start(args: argparse.Namespace) -> tuple[Settings, Sink, Sink] | int:
    """The settings (checked by the preflight) and the two sinks; or the exit status."""
    try:
        settings = settings_of(
            args,
            {"concurrency": args.concurrency, "metrics_port": "off", "follow": False},
            cache=args.cache,
        )
        unusable = preflight("stef replay", settings)
        if unusable is not None:
            return unusable
        results = _sink(args.output)
        dead = _sink(args.dead_letters)
    except (StefError, OSError) as exc:
        return report_error("stef replay", exc)
    return settings, results, dead


def _conclude(
    args: argparse.Namespace,
    settings: Settings,
    tally: _Tally,
    reasons: dict[str, tuple[int, str]],
    status: int,
) -> int:
    """The summary table and the judge error details, then the exit status the run earned."""
    # The service loaded the same calibration at start: it cannot fail here but be safe.
    with contextlib.suppress(StefError):
        tally.summary.load_calibration(settings.calibration)
    try:
        if tally.summary.groups:  # no table of zeros when no record was judged
            print(tally.summary.table())
        if reasons:
            print(_reasons_line(reasons, tally.summary.total().judge_errors))
        sys.stdout.flush()
    except OSError as exc:
        # The reader left (`| head`), stdout is full or closed: the exit status is still the
        # run's, gates included (raised, a failed run or a --fail-on gate read as 0 or 1). The
        # interpreter's own last flush then writes nothing.
        if not isinstance(exc, BrokenPipeError):
            tell(f"stef replay: the summary could not be written to stdout: {exc.strerror or exc}")
        silence_stdout()
    if status != Exit.OK:
        tell("stef replay: stopped before every record was written (see the log)")
        return status
    if tally.summary.invalid and not tally.summary.groups:
        common = tally.invalid_reasons.most_common(1)[0][0]
        line = every_record_invalid(
            "stef replay", tally.summary.invalid, common, settings.field_mapping
        )
        tell(line)
        return Exit.FAILURE
    if tally.tripped:
        tell(f"stef replay: --fail-on: {', '.join(sorted(tally.tripped))}")
        return Exit.GATE
    failed = _judge_errors_beyond(
        tally.summary, sum(n for n, _ in reasons.values()), args.max_judge_error_rate
    )
    if failed is not None:
        tell(f"stef replay: {failed}")
        return Exit.JUDGE_ERROR
    return Exit.OK


def _reasons_line(reasons: dict[str, tuple[int, str]], judge_errors: int) -> str:
    """What each judge error reason said last, the most frequent first. The counts are the
    summary's: a record whose judge failed but whose unsafe SQL the safety override scored is
    said apart, so the numbers here and in the table agree."""
    ranked = sorted(reasons.items(), key=lambda item: (-item[1][0], item[0]))
    line = "judge error details: " + "; ".join(
        f"{reason}: {_cut(detail.removeprefix(reason + ': '), 160)}"
        for reason, (_, detail) in ranked
    )
    scored = sum(count for count, _ in reasons.values()) - judge_errors
    if scored > 0:
        line += (
            f"\n{scored} more record{'s' if scored > 1 else ''} had a judge error but "
            "unsafe SQL, scored by the safety override alone (not counted as judge errors)"
        )
    return line


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "\u2026"


def _judge_errors_beyond(summary: Summary, failed: int, rate: float | None) -> str | None:
    """Why the judge errors fail the replay, or None: the judge failed on every judged record,
    or on more than ``rate`` of them. ``failed`` counts the records whose judge failed, those an
    unsafe statement still scored (the safety override) included; sampled-out records are not
    judged and do not count."""
    total = summary.total()
    judged = total.evaluated + total.judge_errors
    if not judged or not failed:
        return None
    share = min(failed, judged) / judged
    if failed >= judged:
        return f"the judge failed on every judged record ({judged}); the details are above"
    if rate is not None and share > rate:
        return (
            f"the judge failed on {failed} of {judged} judged records ({share:.1%}), "
            f"more than --max-judge-error-rate {rate:g}"
        )
    return None


def _show_progress(args: argparse.Namespace) -> bool:
    return sys.stderr.isatty() and not args.no_progress


def _output_problem(args: argparse.Namespace, flag: str) -> str | None:
    """Why an output flag cannot be used, or None; ``file:PATH`` (the form ``stef run`` takes)
    is read as PATH. A replay replaces its outputs before it reads: an output that is the
    input file would empty the log it was asked to judge."""
    value = getattr(args, flag)
    name = "--" + flag.replace("_", "-")
    if not value:
        return None
    if value.startswith("file:") and not value.startswith("file://"):
        value = value.removeprefix("file:")
        setattr(args, flag, value)
    if "://" in value:
        return (
            f"{name} takes a file path (or file:PATH); {value.split('://')[0]}:// is for stef run"
        )
    if args.file != "-" and _same_file(value, args.file):
        return f"{name} {value} is the input file; a replay replaces its outputs and would empty it"
    if args.file == "-" and value != "-" and _is_stdin(value):
        return f"{name} {value} is the file on standard input; a replay replaces its outputs"
    return None


def _same_file(a: str, b: str) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:  # one of them does not exist (yet): not the same file
        return False


def _is_stdin(path: str) -> bool:
    """Whether ``path`` is the file standard input reads (``replay - -o log < log``)."""
    try:
        given, stdin = os.stat(path), os.fstat(0)
    except OSError:  # no such file yet, or no standard input
        return False
    # A device (/dev/null, a terminal) read and written is no file a replay would replace.
    return stat.S_ISREG(given.st_mode) and os.path.samestat(given, stdin)


def _sink(path: str | None) -> Sink:
    if not path:
        return DiscardSink()
    if path == "-" or (os.path.exists(path) and not os.path.isfile(path)):
        return JsonlSink(path)  # stdout, /dev/stdout, a FIFO: written to, never replaced
    # A replay replaces its outputs, but only once the run has started: a start refused by the
    # rules, the source or anything else leaves the existing file as it was.
    return ReplacingJsonlSink(path)


def _count_lines(path: str) -> int | None:
    if path == "-":
        return None
    # In chunks, not line by line: one huge line must not be held whole just to be counted.
    count, blank = 0, True
    with open(path, "rb") as f:
        while chunk := f.read(1 << 16):
            parts = chunk.split(b"\n")
            for part in parts[:-1]:
                count += not (blank and not part.strip())
                blank = True
            blank = blank and not parts[-1].strip()
    return count + (not blank)

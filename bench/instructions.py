"""Bench section ``instructions``: the record path's cost counted in instructions, not timed.

On a shared two-core machine every timed figure of the bench moves by about a tenth between
processes of the same code, so a change of a few percent cannot be seen in CPU time. The number
of instructions a record costs hardly moves at all: :mod:`bench.paired`'s workers run under
valgrind's callgrind (``apt-get install valgrind``), with the counter off through start-up and
switched on only over the measured windows (``callgrind_control``), on a fixed hash seed, the
objects alive before each window frozen out of the collector's reach (``gc.freeze``: a window's
collections then walk only its own garbage, not a heap whose size depends on what the tree loaded
before it). The same folder counts the same within a hundredth of a percent (the LLM path's
two threads hand the interpreter over on a clock: 43 instructions in a million), whatever else
the machine is doing; the same code in two folders within half a percent.

Counted over a fixed sample of the corpus (every ``STRIDE``-th record, cold caches): the sqlglot
parse of each record's SQL and the whole deterministic record path (bytes in, result JSON out),
and their ratio; the LLM path built as ``stef run`` builds it, over the first ``LLM_RECORDS`` of
the sample (dev-set records), one record at a time against a fake endpoint without latency (the
endpoint runs in its own process and is not counted). :func:`compare` counts two trees
(``--against REF``) and gives this tree / REF for each figure a record: 1.03 is three percent
more instructions a record.

Instructions are not time: a cache miss or a system call costs more than its instructions say,
and one record at a time leaves out what concurrency adds (the GIL's hand-offs, contention). So
this is the figure that tells whether the code got cheaper or dearer, and the timed sections stay
the figures to size a deployment by.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TextIO

from bench import paired
from bench.llm import fake_endpoint

ROOT = Path(__file__).resolve().parent.parent
# The sample: every STRIDE-th record of the bench corpus (the dev set's 2,302 and the sample
# log's 100 give 401), and the LLM path's first LLM_RECORDS of it.
STRIDE = 6
LLM_RECORDS = 200
# Under callgrind a record takes about fifty times its native time: a side takes two to three
# minutes.
TIMEOUT_S = 900
_VALGRIND = ("valgrind", "callgrind_control")


class Unavailable(RuntimeError):
    """valgrind (callgrind) is not installed."""


# The workers under the counter now (any thread's): stopped at once when a comparison is
# interrupted or one of its sides fails, rather than waited for.
_LIVE: set[subprocess.Popen[str]] = set()
_LIVE_LOCK = threading.Lock()
_STOPPING = threading.Event()  # set by _stop_all: no worker starts until the comparison ends


def run(corpus: list[dict[str, Any]], args: argparse.Namespace) -> dict[str, Any]:
    """The section: this tree's counts (see the module docstring)."""
    return measure(ROOT, corpus)


def compare(
    trees: dict[str, Path],
    corpus: list[dict[str, Any]],
    known: dict[str, dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """Both trees' counts, and the first's over the second's for each figure a record (above 1:
    the first costs more instructions a record).

    Args:
        trees: the side's name -> its source tree.
        corpus: the bench corpus.
        known: counts already made in this run (the section's, of this tree), by side: not
            made again.

    Raises:
        RuntimeError: a tree's worker failed (:func:`measure`).
    """
    known = known or {}
    # Counts do not move with the machine's load: the sides run side by side.
    with ThreadPoolExecutor(max_workers=2) as pool:
        try:
            counted = {
                n: pool.submit(measure, t, corpus) for n, t in trees.items() if n not in known
            }
            sides = {n: known[n] if n in known else counted[n].result() for n in trees}
        except BaseException:
            _stop_all()
            pool.shutdown(cancel_futures=True)
            raise
        finally:
            _STOPPING.clear()
    first, second = (sides[name] for name in list(trees)[:2])
    return {
        "sides": sides,
        "first_over_second": {
            key: round(first[key] / second[key], 4)
            for key in first
            if key.endswith("_per_record") and second.get(key)
        },
    }


def _stop_all() -> None:
    with _LIVE_LOCK:
        _STOPPING.set()
        for proc in _LIVE:
            proc.kill()


def measure(tree: Path, corpus: list[dict[str, Any]]) -> dict[str, Any]:
    """The instructions a record of ``tree``'s code costs: parse, deterministic path, LLM path.

    Raises:
        Unavailable: valgrind is not installed.
        RuntimeError: a worker failed, ran past :data:`TIMEOUT_S`, or did not get every record
            of the LLM window evaluated.
    """
    missing = [tool for tool in _VALGRIND if shutil.which(tool) is None]
    if missing:
        raise Unavailable(f"{', '.join(missing)} not found (apt-get install valgrind)")
    sample = corpus[::STRIDE]
    # Modules a record imports on first use would be compiled in the window on a tree exported
    # without its bytecode (REF's): both sides' bytecode is written first.
    subprocess.run(
        [sys.executable, "-m", "compileall", "-q", str(tree / "stef")],
        capture_output=True,
        check=False,
    )
    with tempfile.TemporaryDirectory(prefix="stef-bench-instructions-") as tmp:
        path = Path(tmp) / "corpus.jsonl"
        path.write_text("".join(json.dumps(r) + "\n" for r in sample), encoding="utf-8")
        det, counts = count(tree, str(path), str(tree / "rules"))
        with fake_endpoint(0.0) as url:
            llm, llm_counts = count(tree, "--llm", url, "1", str(LLM_RECORDS), str(path))
    if llm["evaluated"] != llm["records"]:
        raise RuntimeError(
            f"{tree}: the LLM path evaluated {llm['evaluated']:g} of {llm['records']:g} records "
            "(judge errors or dead letters): its count is not the path's" + paired._reasons(llm)
        )
    parse, stef = counts["parse"] / det["records"], counts["stef"] / det["records"]
    return {
        "records": det["records"],
        "llm_records": llm["records"],
        "parse_instructions_per_record": round(parse),
        "deterministic_instructions_per_record": round(stef),
        "deterministic_vs_parse_instruction_ratio": round(parse / stef, 4),
        "llm_instructions_per_record": round(llm_counts["llm"] / llm["records"]),
    }


def count(tree: Path, *args: str) -> tuple[dict[str, Any], dict[str, int]]:
    """Run :mod:`bench.paired`'s worker with ``args`` on ``tree``'s code under callgrind, the
    counter on only over its windows.

    Returns:
        The worker's figures, and the instructions of each window it named.

    Raises:
        RuntimeError: the worker failed, ran past :data:`TIMEOUT_S`, or its windows and the
            counter's dumps do not match.
    """
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env.update(PYTHONPATH=str(tree), PYTHONHASHSEED="0", **{paired.GATES_ENV: "1"})
    with tempfile.TemporaryDirectory(prefix="stef-callgrind-") as tmp:
        out, log, err = (Path(tmp) / n for n in ("callgrind.out", "valgrind.log", "stderr"))
        # The control pipes in this folder, not /tmp's (gone with it, even after a kill).
        prefix = f"--vgdb-prefix={tmp}/vgdb"
        command = [
            "valgrind",
            "--tool=callgrind",
            "--instr-atstart=no",
            prefix,
            f"--callgrind-out-file={out}",
            f"--log-file={log}",
            sys.executable,
            str(Path(paired.__file__).resolve()),
            *args,
        ]
        with err.open("w") as stderr, _started(command, tree, env, stderr) as proc:
            windows, last = _follow(proc, prefix)
            code = proc.wait()
        if code != 0:
            tail = (err.read_text(errors="replace") or log.read_text(errors="replace"))[-500:]
            raise RuntimeError(f"counted worker in {tree} failed (exit {code}): {tail.strip()}")
        dumps = sorted(out.parent.glob(out.name + ".*"), key=lambda p: int(p.suffix[1:]))
        if len(dumps) != len(windows):
            raise RuntimeError(
                f"counted worker in {tree}: {len(windows)} windows but {len(dumps)} dumps"
            )
        counts = dict(zip(windows, map(_total, dumps), strict=True))
    idle = [window for window, n in counts.items() if n <= 0]
    if idle:
        raise RuntimeError(f"counted worker in {tree}: no instructions counted in {idle}")
    return paired._figures("counted", tree, last), counts


@contextlib.contextmanager
def _started(
    command: list[str], tree: Path, env: dict[str, str], stderr: TextIO
) -> Iterator[subprocess.Popen[str]]:
    """The worker, stopped (with valgrind) if it runs past :data:`TIMEOUT_S` or on the way out;
    its pipes closed.

    Raises:
        RuntimeError: it ran past :data:`TIMEOUT_S`.
    """
    expired = threading.Event()
    with subprocess.Popen(
        command,
        cwd=tree,
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=stderr,
        text=True,
    ) as proc:
        with _LIVE_LOCK:
            _LIVE.add(proc)
            if _STOPPING.is_set():  # the comparison was stopped while this one started
                proc.kill()

        def stop() -> None:
            expired.set()
            proc.kill()

        timer = threading.Timer(TIMEOUT_S, stop)
        timer.start()
        try:
            yield proc
        finally:
            timer.cancel()
            if proc.poll() is None:
                proc.kill()
            with _LIVE_LOCK:
                _LIVE.discard(proc)
    if expired.is_set():
        raise RuntimeError(f"counted worker in {tree} ran past {TIMEOUT_S} s and was stopped")


def _follow(proc: subprocess.Popen[str], prefix: str) -> tuple[list[str], str]:
    """Switch the counter at each of the worker's gates: on at the first, a dump (which zeroes
    the counter) at each next one, off at ``end``. Returns the windows in order and the
    worker's last other line (its figures)."""
    assert proc.stdout is not None and proc.stdin is not None
    windows: list[str] = []
    last = ""
    for line in proc.stdout:
        line = line.rstrip("\n")
        word, _, window = line.partition(" ")
        if word != paired.GATE:
            last = line
            continue
        _control(proc.pid, "--dump" if windows else "--instr=on", prefix)
        if window == "end":
            _control(proc.pid, "--instr=off", prefix)
        else:
            windows.append(window)
        with contextlib.suppress(BrokenPipeError):
            proc.stdin.write("go\n")
            proc.stdin.flush()
    return windows, last


def _control(pid: int, option: str, prefix: str) -> None:
    """One ``callgrind_control`` command to the worker; its exit code says little (0 on most
    failures): a counter that did not switch on shows as a window of no instructions, a dump
    that was not made as a missing dump (:func:`count`).

    Raises:
        RuntimeError: it failed, or did not answer within two minutes (its own helper, vgdb,
            stopped with it).
    """
    with subprocess.Popen(
        ["callgrind_control", prefix, option, str(pid)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    ) as control:
        try:
            said, _ = control.communicate(timeout=120)
        except subprocess.TimeoutExpired:
            os.killpg(control.pid, signal.SIGKILL)
            control.communicate()
            raise RuntimeError(
                f"callgrind_control {option} {pid} did not answer in 120 s"
            ) from None
    if control.returncode != 0:
        raise RuntimeError(f"callgrind_control {option} {pid} failed: {said[-200:]}")


def _total(dump: Path) -> int:
    """The instructions of one callgrind dump: its ``totals:`` line (``summary:`` in older
    formats), the first event being instructions (callgrind's default)."""
    for line in dump.read_text(errors="replace").splitlines():
        key, _, value = line.partition(":")
        if key in ("totals", "summary"):
            return int(value.split()[0])
    raise RuntimeError(f"{dump.name}: no totals line")

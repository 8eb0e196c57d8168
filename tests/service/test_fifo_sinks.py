"""``stef run`` with a named pipe for its results: one without a reader held start-up in its
open (a SIGTERM recorded but not acted on until a reader came); the wait now honours the stop,
and a reader that comes gets the results, as ``file:/dev/stdout`` on a pipe still does."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.service.conftest import ROOT, ServiceProcess, valid_record

pytestmark = pytest.mark.integration


def _to_fifo(
    tmp_path: Path,
    service_factory: Callable[..., ServiceProcess],
    env: dict[str, str] | None = None,
) -> tuple[ServiceProcess, Path]:
    log, fifo = tmp_path / "agent.jsonl", tmp_path / "results.fifo"
    log.write_text(json.dumps(valid_record(0)) + "\n")
    os.mkfifo(fifo)
    proc = service_factory(
        "--source",
        f"file:{log}",
        "--follow",
        "--results",
        f"file:{fifo}",
        "--dead-letters",
        f"file:{tmp_path / 'dead.jsonl'}",
        env=env,
    )
    proc.wait_for(
        lambda: bool(proc.events("sink_waiting_for_reader")), timeout_s=60, what="the wait"
    )
    return proc, fifo


def test_sigterm_stops_a_run_waiting_for_its_fifos_reader(
    tmp_path: Path, service_factory: Callable[..., ServiceProcess]
) -> None:
    """Stopped before its outputs were open, the run never says it started (it logged
    service_started, and was ready, for the moment between the wait's end and the stop)."""
    proc, _ = _to_fifo(tmp_path, service_factory)
    asked = time.monotonic()
    proc.signal(signal.SIGTERM)
    assert proc.wait(30) == 0
    assert time.monotonic() - asked < 10
    assert proc.events("service_stopped")[0]["received"] == 0
    assert proc.events("signal_received")
    assert not proc.events("service_started")


def test_a_reader_that_comes_gets_the_results(
    tmp_path: Path, service_factory: Callable[..., ServiceProcess]
) -> None:
    proc, fifo = _to_fifo(tmp_path, service_factory)
    lines: list[bytes] = []

    def read() -> None:
        with fifo.open("rb") as f:
            lines.append(f.readline())

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    reader.join(60)
    assert [json.loads(line)["id"] for line in lines] == ["r-000000"]
    proc.signal(signal.SIGTERM)
    assert proc.wait(30) == 0


def test_sigterm_stops_a_run_whose_fifo_reader_went_after_sigusr1(
    tmp_path: Path, service_factory: Callable[..., ServiceProcess]
) -> None:
    """SIGUSR1 closes the FIFO, its reader sees the end and goes, and the next result waits for
    a new reader: SIGTERM then ended the drain (its timeout) but not the run, the shutdown's
    flush waiting for good on that line (still running 25 s after SIGTERM)."""
    proc, fifo = _to_fifo(tmp_path, service_factory, env={"STEF_DRAIN_TIMEOUT_S": "1"})
    with fifo.open("rb") as f:
        assert json.loads(f.readline())["id"] == "r-000000"
        proc.signal(signal.SIGUSR1)
        proc.wait_for(
            lambda: bool(proc.events("outputs_reopen_requested")), timeout_s=30, what="SIGUSR1"
        )
    with (tmp_path / "agent.jsonl").open("a") as log:
        log.write(json.dumps(valid_record(1)) + "\n")
    proc.wait_for(
        lambda: len(proc.events("sink_waiting_for_reader")) == 2, timeout_s=30, what="the wait"
    )
    proc.signal(signal.SIGTERM)
    assert proc.wait(40) == 0  # the 1 s drain, then at most the flush's 10 s
    [stopped] = proc.events("service_stopped")
    assert stopped["drained"] is False


def test_results_to_dev_stdout_on_a_pipe(tmp_path: Path) -> None:
    """Not a FIFO of its own: the pipe has its reader, and the open does not wait."""
    log = tmp_path / "agent.jsonl"
    log.write_text("".join(json.dumps(valid_record(i)) + "\n" for i in range(3)))
    env = {k: v for k, v in os.environ.items() if not k.startswith("STEF_")}
    args = ["--source", f"file:{log}", "--results", "file:/dev/stdout", "--metrics-port", "off"]
    args += ["--dead-letters", f"file:{tmp_path / 'dead.jsonl'}"]
    done = subprocess.run(
        [sys.executable, "-m", "stef.cli", "run", *args],
        cwd=ROOT,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr.decode()[-2000:]
    ids = sorted(json.loads(line)["id"] for line in done.stdout.splitlines())
    assert ids == ["r-000000", "r-000001", "r-000002"]

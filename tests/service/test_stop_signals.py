"""``stef run`` on the signals that have no drain of their own: SIGQUIT stops it at once with
what is written committed, SIGUSR2 is logged and ignored. Both used to end the process by their
default action: status -3 (a core) and -12, no log line, no checkpoint of the results written."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.service.conftest import ROOT, ServiceProcess, follow_log, read_jsonl, valid_record

pytestmark = pytest.mark.integration


def _followed(
    tmp_path: Path, service_factory: Callable[..., ServiceProcess], n: int
) -> tuple[ServiceProcess, Path, Path]:
    log, results = tmp_path / "agent.jsonl", tmp_path / "results.jsonl"
    log.write_bytes(b"".join(json.dumps(valid_record(i)).encode() + b"\n" for i in range(n)))
    checkpoint = tmp_path / "checkpoint"
    dead = tmp_path / "dead.jsonl"
    proc = follow_log(service_factory, log, results, dead, file_checkpoint=str(checkpoint))
    return proc, results, checkpoint


def test_sigquit_stops_at_once_and_commits_only_what_is_written(
    tmp_path: Path, service_factory: Callable[..., ServiceProcess]
) -> None:
    proc, results, checkpoint = _followed(tmp_path, service_factory, 3000)
    proc.wait_for(lambda: bool(read_jsonl(results)), timeout_s=60, what="a first result")
    proc.signal(signal.SIGQUIT)
    assert proc.wait(30) == 0
    [skipped] = proc.events("drain_skipped")
    [stopped] = proc.events("service_stopped")
    assert stopped["drained"] is False
    # The records in flight were not awaited (the first signal came with a full window).
    assert skipped["abandoned"] > 0
    # Whatever the checkpoint claims was written: a restart resumes past nothing unwritten.
    done = json.loads(checkpoint.read_text())["line"]
    written = {r["id"] for r in read_jsonl(results)}
    assert {valid_record(i)["id"] for i in range(done)} <= written
    assert done < 3000


def test_sigusr2_is_logged_and_ignored(
    tmp_path: Path, service_factory: Callable[..., ServiceProcess]
) -> None:
    proc, results, _ = _followed(tmp_path, service_factory, 1)
    proc.wait_for(lambda: len(read_jsonl(results)) == 1, timeout_s=60, what="the result")
    proc.signal(signal.SIGUSR2)
    proc.wait_for(lambda: bool(proc.events("signal_ignored")), timeout_s=30, what="the log line")
    assert proc.alive()
    assert proc.events("signal_ignored")[0]["signal"] == signal.SIGUSR2
    proc.signal(signal.SIGTERM)
    assert proc.wait(30) == 0
    assert proc.events("service_stopped")[0]["drained"] is True


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGQUIT], ids=["SIGTERM", "SIGQUIT"])
def test_a_replay_stopped_before_its_files_end_is_not_done(tmp_path: Path, signum: int) -> None:
    """``stef replay`` stopped by a signal with most of its file unread exited 0 (done, its
    --fail-on gates passed) and put the part it wrote in place of its output, no word of the
    rest (SIGTERM; SIGQUIT too since it stops as SIGTERM does)."""
    log, output = tmp_path / "agent.jsonl", tmp_path / "results.jsonl"
    n = 50_000
    log.write_bytes(b"".join(json.dumps(valid_record(i)).encode() + b"\n" for i in range(n)))
    env = {k: v for k, v in os.environ.items() if not k.startswith("STEF_")}
    proc = subprocess.Popen(
        [sys.executable, "-m", "stef.cli", "replay", str(log), "--output", str(output)],
        cwd=ROOT,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 60
        while not any(p.stat().st_size for p in tmp_path.glob(".results.jsonl.*.partial")):
            assert time.monotonic() < deadline and proc.poll() is None, "no result written"
            time.sleep(0.02)
        proc.send_signal(signum)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert len(read_jsonl(output)) < n  # stopped part-way, as the test means
    assert proc.returncode == 1, err.decode()[-2000:]
    assert b"stopped before every record was written" in err

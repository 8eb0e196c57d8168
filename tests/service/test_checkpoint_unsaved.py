"""A followed file's checkpoint that cannot be saved is loud (issue 32, item 2): the checkpoint
path replaced by a directory while the service runs. Each failed save is logged
(``commit_failed``) and counted (``stef_commit_failures_total{source="file"}``), the records
done since are exported (``stef_uncommitted_records``), and saving is tried again until it
works."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from pathlib import Path

from prometheus_client import CollectorRegistry
from structlog.testing import capture_logs

from stef.judges.heuristic.judge import HeuristicJudge
from stef.service.loop import Service
from tests.service.conftest import file_settings, read_jsonl, valid_log, valid_record


def _wait(condition: Callable[[], object], timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


def test_a_checkpoint_replaced_by_a_directory_is_logged_counted_and_retried(
    tmp_path: Path,
) -> None:
    log = valid_log(tmp_path, 10)
    checkpoint = tmp_path / "state" / "cp"
    registry = CollectorRegistry()
    settings = file_settings(
        tmp_path, log, follow=True, file_checkpoint=str(checkpoint), commit_interval_s=0.05
    )
    service = Service(settings, backend=HeuristicJudge(), registry=registry)

    def value(name: str, **labels: str) -> float:
        return registry.get_sample_value(name, labels) or 0.0

    with capture_logs() as logs:
        thread = threading.Thread(target=service.run, daemon=True)
        thread.start()
        try:
            _wait(lambda: checkpoint.is_file() and json.loads(checkpoint.read_text())["line"] == 10)
            checkpoint.unlink()
            checkpoint.mkdir()  # the checkpoint path is a directory now
            with log.open("a") as f:
                f.writelines(json.dumps(valid_record(i)) + "\n" for i in range(10, 20))
            _wait(lambda: value("stef_commit_failures_total", source="file") >= 3)
            assert len(read_jsonl(tmp_path / "results.jsonl")) == 20  # judging goes on
            assert value("stef_uncommitted_records") == 10
            checkpoint.rmdir()  # repaired: the next save works
            _wait(lambda: value("stef_uncommitted_records") == 0)
            assert json.loads(checkpoint.read_text())["line"] == 20
        finally:
            service.request_stop()
            thread.join(10)
    failed = [e for e in logs if e["event"] == "commit_failed"]
    assert len(failed) >= 3
    assert all(
        e["log_level"] in ("warning", "error") and str(checkpoint) in e["error"] for e in failed
    )

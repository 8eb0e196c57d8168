"""``stef run`` keeps judging through rules edits it cannot read; other apps' edits still apply.

These edits used to raise past the reload (IsADirectoryError, RecursionError, ValueError) and
stop the service with status 1.
"""

from __future__ import annotations

import json
import os
import signal
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.service.conftest import (
    ServiceProcess,
    follow_empty_log,
    read_jsonl,
    valid_record,
)

pytestmark = pytest.mark.integration


def _append(path: Path, *records: dict[str, object]) -> None:
    with path.open("ab") as f:
        for rec in records:
            f.write(json.dumps(rec).encode() + b"\n")


def test_unreadable_edits_keep_the_service_and_the_app_rules(
    tmp_path: Path, service_factory: Callable[..., ServiceProcess]
) -> None:
    rules = tmp_path / "rules"
    rules.mkdir()
    (rules / "default.yaml").write_text("limit_min: 100\n")
    (rules / "sales.yaml").write_text("dialect: snowflake\nsampling_rate: 1.0\n")
    (rules / "support.yaml").write_text("dialect: postgres\nsampling_rate: 1.0\n")
    proc, log, results = follow_empty_log(
        service_factory, tmp_path, "--rules", str(rules), rules_check_interval_s=0.2
    )

    def outcomes(first: int, last: int) -> dict[str, str]:
        by_id = {r["id"]: r for r in read_jsonl(results)}
        ids = [f"r-{i:06d}" for i in range(first, last)]
        if not all(i in by_id for i in ids):
            return {}
        return {by_id[i]["app"]: by_id[i]["outcome"] for i in ids}

    _append(log, valid_record(0, app="sales"), valid_record(1, app="support"))
    proc.wait_for(lambda: bool(outcomes(0, 2)), timeout_s=30, what="the first records")
    assert outcomes(0, 2) == {"sales": "evaluated", "support": "evaluated"}

    # support stops sampling; sales becomes 10,000 nested lists; a directory appears as x.yaml.
    (rules / "support.yaml").write_text("dialect: postgres\nsampling_rate: 0.0\n")
    (rules / "sales.yaml").write_bytes(b"dialect: snowflake\nnotes: " + b"[" * 10_000)
    (rules / "x.yaml").mkdir()

    def rejected_all() -> bool:
        return any(
            len(e["problems"]) == 2 and "x.yaml" in e["problems"][1]
            for e in proc.events("rules_reload_rejected")
        )

    proc.wait_for(rejected_all, timeout_s=30, what="the reload that sees every edit")
    assert proc.total("stef_rules_reload_total", outcome="error") >= 1
    _append(log, valid_record(2, app="sales"), valid_record(3, app="support"))
    proc.wait_for(lambda: bool(outcomes(2, 4)), timeout_s=30, what="records after the edits")
    # sales keeps its last good rules (sampled in); support's edit applied (sampled out).
    assert outcomes(2, 4) == {"sales": "evaluated", "support": "skipped_sampling"}
    last = proc.events("rules_reload_rejected")[-1]
    assert last["problems"] == [
        f"{rules / 'sales.yaml'}:2: nested deeper than 32",
        f"{rules / 'x.yaml'}: is a directory, not a rules file",
    ]
    assert last["kept_last_good"] == ["sales"]
    assert proc.alive()
    proc.signal(signal.SIGTERM)
    assert proc.wait(30) == 0


def test_sighup_checks_the_rules_at_once_and_the_service_goes_on(
    tmp_path: Path, service_factory: Callable[..., ServiceProcess]
) -> None:
    """SIGHUP used to end ``stef run`` (status 129, the default action, nothing committed since
    the last commit). Now it is the rules check a config reload is elsewhere: an edit no stat
    field shows, which the slow hash timer would see only later, applies at once."""
    rules = tmp_path / "rules"
    rules.mkdir()
    sales = rules / "sales.yaml"
    sales.write_text("dialect: snowflake\nsampling_rate: 1.0\n")
    proc, log, results = follow_empty_log(
        service_factory, tmp_path, "--rules", str(rules), rules_check_interval_s=3600
    )

    def outcome(i: int) -> str | None:
        by_id = {r["id"]: r["outcome"] for r in read_jsonl(results)}
        return by_id.get(f"r-{i:06d}")

    _append(log, valid_record(0, app="sales"))
    proc.wait_for(lambda: outcome(0) is not None, timeout_s=30, what="the first record")
    assert outcome(0) == "evaluated"

    # Same file, same size, mtime put back: only the contents differ.
    before = sales.stat()
    sales.write_text("dialect: snowflake\nsampling_rate: 0.0\n")
    os.utime(sales, ns=(before.st_atime_ns, before.st_mtime_ns))
    proc.signal(signal.SIGHUP)
    proc.wait_for(
        lambda: bool(proc.events("rules_reloaded")), timeout_s=30, what="the asked-for reload"
    )
    assert proc.events("rules_check_requested")
    proc.signal(signal.SIGHUP)  # a second one is no second stop signal
    _append(log, valid_record(1, app="sales"))
    proc.wait_for(lambda: outcome(1) is not None, timeout_s=30, what="a record after SIGHUP")
    assert outcome(1) == "skipped_sampling"
    assert proc.alive()
    proc.signal(signal.SIGTERM)
    assert proc.wait(30) == 0


def test_sigusr1_reopens_the_output_files_after_logrotate_renamed_them(
    tmp_path: Path, service_factory: Callable[..., ServiceProcess]
) -> None:
    """SIGUSR1 ended ``stef run`` (status 138, the default action): a logrotate ``postrotate``
    sending it, as for other daemons, restarted the replica. Now the results go on in a new
    file at the path, as after a ``create`` rotation they should."""
    proc, log, results = follow_empty_log(
        service_factory, tmp_path, file_checkpoint=str(tmp_path / "checkpoint")
    )
    _append(log, valid_record(0))
    proc.wait_for(lambda: len(read_jsonl(results)) == 1, timeout_s=30, what="the first result")
    rotated = tmp_path / "results.jsonl.1"
    results.rename(rotated)
    proc.signal(signal.SIGUSR1)
    proc.wait_for(
        lambda: bool(proc.events("outputs_reopen_requested")), timeout_s=30, what="the reopen"
    )
    _append(log, valid_record(1))
    proc.wait_for(lambda: results.exists(), timeout_s=30, what="a result after SIGUSR1")
    proc.wait_for(lambda: len(read_jsonl(results)) == 1, timeout_s=30, what="the second result")
    assert [r["id"] for r in read_jsonl(rotated)] == ["r-000000"]
    assert [r["id"] for r in read_jsonl(results)] == ["r-000001"]
    assert proc.alive()
    proc.signal(signal.SIGTERM)
    assert proc.wait(30) == 0

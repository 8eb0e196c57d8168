"""``stef run`` over a followed JSONL log: appended lines, rotation, rules hot reload."""

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
    follow_log,
    read_jsonl,
    valid_record,
)

pytestmark = pytest.mark.integration


def _edit(path: Path, text: str) -> None:
    """Replace ``path`` whole, as a config tool does (write beside it, rename over it): written in
    place, the watcher could read it emptied, between the truncation and the write, and count
    that as a reload of its own."""
    beside = path.with_name(f".{path.name}.new")
    beside.write_text(text, encoding="utf-8")
    os.replace(beside, path)


def _append(path: Path, *lines: bytes) -> None:
    with path.open("ab") as f:
        for line in lines:
            f.write(line + b"\n")


def _rec(i: int, **extra: str) -> bytes:
    return json.dumps({**valid_record(i), **extra}).encode()


def test_follow_picks_up_appended_lines_and_survives_rotation(
    tmp_path: Path, service_factory: Callable[..., ServiceProcess]
) -> None:
    log = tmp_path / "agent.jsonl"
    results, dead = tmp_path / "results.jsonl", tmp_path / "dead.jsonl"
    _append(log, _rec(0), _rec(1))
    # A short grace for the renamed file's writer (5 s by default): the test stays fast.
    proc = follow_log(
        service_factory, log, results, dead, commit_interval_s=0.1, file_rotate_wait_s=1.0
    )

    def ids() -> set[str]:
        return {r["id"] for r in read_jsonl(results)}

    proc.wait_for(lambda: ids() == {"r-000000", "r-000001"}, timeout_s=30, what="first lines")
    _append(log, _rec(2), b"{broken json")
    proc.wait_for(lambda: "r-000002" in ids() and dead.exists(), timeout_s=30, what="appended")
    _append(log, _rec(3))  # the last line before the rotation
    os.rename(log, tmp_path / "agent.jsonl.1")
    _append(tmp_path / "agent.jsonl.1", _rec(4))  # the writer still holds the old file
    _append(log, _rec(5), _rec(6))  # the new file at the same path
    want = {f"r-{i:06d}" for i in range(7)}
    proc.wait_for(lambda: ids() == want, timeout_s=30, what="the rotated file")
    proc.signal(signal.SIGTERM)
    assert proc.wait(30) == 0
    assert len(read_jsonl(results)) == 7  # each exactly once
    (letter,) = read_jsonl(dead)
    assert letter["reason"] == "not_json"
    assert letter["source"] == {"file": str(log), "line": 4}
    assert letter["payload"] == "{broken json"


def test_rules_edit_takes_effect_and_a_broken_edit_is_rejected(
    tmp_path: Path, service_factory: Callable[..., ServiceProcess]
) -> None:
    rules = tmp_path / "rules"
    rules.mkdir()
    default = rules / "default.yaml"
    default.write_text("sampling_rate: 1.0\n", encoding="utf-8")
    proc, log, results = follow_empty_log(
        service_factory, tmp_path, "--rules", str(rules), rules_check_interval_s=0.2
    )

    def by_id() -> dict[str, dict[str, object]]:
        return {str(r["id"]): r for r in read_jsonl(results)}

    _append(log, *(_rec(i, app="") for i in range(3)))
    proc.wait_for(lambda: len(by_id()) == 3, timeout_s=30, what="the first records")
    first = by_id()
    assert {r["outcome"] for r in first.values()} == {"evaluated"}
    v1 = {r["judge"]["rules_version"] for r in first.values()}  # type: ignore[index]

    # A valid edit: sample nothing from now on.
    _edit(default, "sampling_rate: 0.0\nnotes: [edited]\n")
    proc.wait_for(
        lambda: proc.total("stef_rules_reload_total", outcome="success") == 1,
        timeout_s=30,
        what="the reload",
    )
    _append(log, *(_rec(i, app="") for i in range(3, 6)))
    proc.wait_for(lambda: len(by_id()) == 6, timeout_s=30, what="records after the edit")
    second = [by_id()[f"r-{i:06d}"] for i in range(3, 6)]
    assert {r["outcome"] for r in second} == {"skipped_sampling"}
    v2 = {r["judge"]["rules_version"] for r in second}  # type: ignore[index]
    assert len(v2) == 1 and v2 != v1

    # A broken edit: rejected, counted, logged; the last good rules stay in force.
    _edit(default, "sampling_rate: lots\nunknown_key: 1\n")
    proc.wait_for(
        lambda: proc.total("stef_rules_reload_total", outcome="error") == 1,
        timeout_s=30,
        what="the rejected reload",
    )
    _append(log, *(_rec(i, app="") for i in range(6, 9)))
    proc.wait_for(lambda: len(by_id()) == 9, timeout_s=30, what="records after the bad edit")
    third = [by_id()[f"r-{i:06d}"] for i in range(6, 9)]
    assert {r["outcome"] for r in third} == {"skipped_sampling"}
    assert {r["judge"]["rules_version"] for r in third} == v2  # type: ignore[index]
    (rejected,) = proc.events("rules_reload_rejected")
    assert any("sampling_rate" in p for p in rejected["problems"])
    proc.signal(signal.SIGTERM)
    assert proc.wait(30) == 0

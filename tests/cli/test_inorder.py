"""``stef replay``'s messages in input order (:class:`stef.cli.inorder.InOrder`)."""

from __future__ import annotations

import errno
import io
import subprocess
import sys
from pathlib import Path

from stef.cli.inorder import InOrder
from stef.cli.progress import Progress
from stef.exits import Exit
from stef.io import Envelope
from tests.conftest import ROOT


def _envelopes(n: int) -> list[Envelope]:
    return [Envelope(b"{}", {"line": i + 1}) for i in range(n)]


def test_a_message_waits_for_the_records_read_before_it() -> None:
    said: list[str] = []
    order = InOrder(said.append)
    first, second, third = _envelopes(3)
    order.read([first, second, third])
    order.finished(third, "third")
    order.finished(second, None)
    assert said == []
    order.finished(first, "first")
    assert said == ["first", "third"]


def test_without_an_order_each_message_is_said_when_its_record_finishes() -> None:
    """A trace file's source says no order: its messages were held for ever, never said, and
    every record's entry was kept."""
    said: list[str] = []
    order = InOrder(said.append)
    first, second = _envelopes(2)
    order.finished(second, "second")
    order.finished(first, None)
    assert said == ["second"]
    assert not order._done  # nothing kept


class _Full(io.StringIO):
    """A stderr like ``2>/dev/full``: every write fails."""

    def write(self, text: str) -> int:
        raise OSError(errno.ENOSPC, "No space left on device")


def test_a_failing_stderr_loses_the_messages_not_the_run() -> None:
    """Messages held for earlier records were said at close, after the run, where a full stderr
    raised out of ``stef replay``: exit 1 for a run that wrote every record."""
    order = InOrder(Progress(None, enabled=False, stream=_Full()).message)
    first, second, third = _envelopes(3)
    order.read([first, second, third])
    order.finished(third, "third")
    order.finished(second, "second")
    order.finished(first, "first")
    order.close()
    assert not order._done and not order._read


def test_a_fail_on_gate_survives_a_full_stderr(tmp_path: Path) -> None:
    """``--fail-on invalid`` under ``2>/dev/full``: the gate's exit 4, every record written (it
    was 1: the gate's own line to stderr raised)."""
    out, dead = tmp_path / "out.jsonl", tmp_path / "dead.jsonl"
    log = ROOT / "examples" / "agent_log.jsonl"
    with open("/dev/full", "w") as full:
        proc = subprocess.run(
            [
                sys.executable,
                "-m",
                "stef.cli",
                "replay",
                str(log),
                "--rules",
                str(ROOT / "rules"),
                "--output",
                str(out),
                "--dead-letters",
                str(dead),
                "--fail-on",
                "invalid",
            ],
            stdout=subprocess.DEVNULL,
            stderr=full,
            cwd=ROOT,
            timeout=120,
        )
    assert proc.returncode == Exit.GATE
    lines = [*out.read_text().splitlines(), *dead.read_text().splitlines()]
    assert len(lines) == sum(1 for line in log.read_bytes().splitlines() if line.strip())

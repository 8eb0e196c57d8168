"""``stef replay``'s progress bar is tqdm's: messages print above it, never through it, and
nothing of it is drawn when stderr is not a terminal."""

from __future__ import annotations

import io
import json
import re
from pathlib import Path

import pytest

from stef.cli import main
from stef.cli.progress import Progress as _Progress


def test_a_message_is_a_line_of_its_own_above_the_bar() -> None:
    out = io.StringIO()
    bar = _Progress(total=3, enabled=True, stream=out)
    bar.step()
    bar.message("log.jsonl:2: invalid input (not_json): record is not JSON")
    bar.step()
    bar.step()
    bar.close()
    text = out.getvalue()
    # Split where a terminal would move the cursor: the message is a whole segment, not glued
    # to bar text on either side.
    segments = re.split(r"[\r\n]", text)
    assert "log.jsonl:2: invalid input (not_json): record is not JSON" in segments
    assert "3/3" in segments[-2] or "3/3" in text.rsplit("\r", 1)[-1]
    assert bar.done == 3


def test_disabled_bar_draws_nothing_but_messages() -> None:
    out = io.StringIO()
    bar = _Progress(total=3, enabled=False, stream=out)
    bar.step()
    bar.message("warning")
    bar.step()
    bar.close()
    assert out.getvalue() == "warning\n"


def test_replay_off_a_terminal_prints_warnings_as_plain_lines(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log = tmp_path / "log.jsonl"
    good = json.dumps({"question": "How many orders in 2024?", "sql": "SELECT COUNT(*) FROM o"})
    log.write_text(f"{good}\nnot json\n{good}\n")
    assert main(["replay", str(log)]) == 0  # stderr is captured, not a terminal
    err = capsys.readouterr().err
    assert "\r" not in err and "rec/s" not in err
    assert any(line.startswith(f"{log}:2: invalid input (not_json)") for line in err.splitlines())


def test_log_lines_go_above_the_bar_too() -> None:
    """The service's structlog lines write to sys.stderr: while the bar is drawn they are
    handed to tqdm whole, so they never run into it."""
    import sys

    out = io.StringIO()
    bar = _Progress(total=2, enabled=True, stream=out)
    bar.step()
    with bar.above():
        sys.stderr.write('{"event": "record_dead_lettered", ')
        sys.stderr.write('"reason": "not_json"}\n')
    bar.step()
    bar.close()
    segments = re.split(r"[\r\n]", out.getvalue())
    assert '{"event": "record_dead_lettered", "reason": "not_json"}' in segments


def test_a_total_known_later_and_a_caller_that_counts_for_itself() -> None:
    """The same bar serves stef backfill (the range is resolved after the bar is made) and stef
    calibrate (its judging loop reports how many are done)."""
    out = io.StringIO()
    bar = _Progress(total=None, enabled=True, stream=out)
    bar.total = 4
    bar.update_to(3)
    bar.step()
    bar.close()
    assert bar.done == 4
    assert "4/4" in out.getvalue().rsplit("\r", 1)[-1]

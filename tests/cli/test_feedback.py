"""Results or dead letters written where the source reads would be read back and judged again,
for ever: ``stef run`` and ``stef backfill`` refuse them at start (exit 2, one line)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from stef.cli import main
from stef.exits import Exit
from tests.brokers import Broker
from tests.brokers import kafka_broker as kafka_broker  # the fixture
from tests.conftest import ROOT, run_stef
from tests.service.test_backfill import _produce_singly


def _stef(*argv: str) -> subprocess.CompletedProcess[str]:
    return run_stef(*argv, "--metrics-port", "off", cwd=ROOT, timeout=60)


def _refused(proc: subprocess.CompletedProcess[str], setting: str) -> None:
    assert proc.returncode == Exit.USAGE, proc.stderr[-2000:]
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].split(": ", 1)[1].startswith(f"{setting} ")


def test_run_refuses_results_or_dead_letters_in_the_source_file(tmp_path: Path) -> None:
    log = tmp_path / "agent.jsonl"
    log.write_text('{"question": "How many?", "sql": "SELECT 1"}\n', encoding="utf-8")
    results = _stef(
        "run", "--source", f"file:{log}", "--results", f"file:{tmp_path}/./agent.jsonl",
        "--dead-letters", f"file:{tmp_path / 'dead.jsonl'}",
    )  # fmt: skip
    _refused(results, "results")
    dead = _stef(
        "run", "--source", f"file:{log}", "--results", "-", "--dead-letters", f"file:{log}"
    )
    _refused(dead, "dead_letters")
    assert log.read_text(encoding="utf-8").count("\n") == 1  # nothing was written into it


@pytest.mark.integration
def test_run_and_backfill_refuse_outputs_to_the_source_topic(
    tmp_path: Path, kafka_broker: Broker
) -> None:
    topic = kafka_broker.create_topic()
    _produce_singly(kafka_broker, topic, range(2))
    url = kafka_broker.url(topic)
    dead = f"file:{tmp_path / 'dead.jsonl'}"
    # Before the check, `run` followed its own output for ever (the timeout) and `backfill`
    # wrote into the topic it read.
    _refused(_stef("run", "--source", url, "--results", url, "--dead-letters", dead), "results")
    _refused(_stef("run", "--source", url, "--results", "-", "--dead-letters", url), "dead_letters")
    backfill = _stef(
        "backfill", "--source", url, "--from", "2020-01-01T00:00Z", "--results", url,
        "--dead-letters", dead,
    )  # fmt: skip
    _refused(backfill, "results")


def test_replay_refuses_an_output_that_is_its_input_and_keeps_the_log(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log = tmp_path / "log.jsonl"
    log.write_text('{"question": "q", "sql": "SELECT 1"}\n')
    link = tmp_path / "link.jsonl"
    link.symlink_to(log)
    for flag, target in (("-o", str(log)), ("--dead-letters", str(link)), ("-o", f"file:{log}")):
        assert main(["replay", str(log), flag, target, "--no-progress"]) == Exit.USAGE
        assert "is the input file" in capsys.readouterr().err
    assert log.read_text() == '{"question": "q", "sql": "SELECT 1"}\n'


def test_replay_takes_file_urls_as_paths_and_refuses_kafka(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log = tmp_path / "log.jsonl"
    log.write_text('{"question": "q", "sql": "SELECT 1"}\n{not json\n')
    dead = tmp_path / "dead.jsonl"
    assert main(["replay", str(log), "--dead-letters", f"file:{dead}", "--no-progress"]) == 0
    assert len(dead.read_text().splitlines()) == 1
    capsys.readouterr()
    argv = ["replay", str(log), "-o", "kafka://127.0.0.1:9/results", "--no-progress"]
    assert main(argv) == Exit.USAGE
    assert "kafka:// is for stef run" in capsys.readouterr().err

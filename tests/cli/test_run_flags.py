"""``stef run`` flags for the source and sink settings that were config/env only: the file
checkpoint (a path, or ``off``), ``--auto-offset-reset``, ``--start-from`` and
``--kafka-compression``. A flag wins over ``STEF_*``, which wins over the config file; each flag
is then seen doing its work on a real file or the real broker."""

from __future__ import annotations

import json
import os
import signal
import time
import uuid
from collections import Counter
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

import pytest

from stef.cli import parser
from stef.cli.common import settings_of
from stef.cli.run import _overrides
from stef.errors import ConfigError
from stef.settings import Settings
from tests.brokers import FAST_GROUP, Broker
from tests.brokers import kafka_broker as kafka_broker  # the fixture
from tests.service.conftest import ServiceProcess, caught_up, read_jsonl, valid_record
from tests.service.conftest import service_factory as service_factory  # the fixture
from tests.service.test_backfill import _produce_singly
from tests.service.test_kafka_codecs import decoded as decoded  # the fixture


def _settings(*argv: str) -> Settings:
    args = parser().parse_args(["run", *argv])
    return settings_of(args, _overrides(args))


def test_flags_win_over_env_which_wins_over_the_config_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in [k for k in os.environ if k.startswith("STEF_")]:
        monkeypatch.delenv(name)
    config = tmp_path / "stef.yaml"
    config.write_text(
        "file_checkpoint: /from/config\nauto_offset_reset: earliest\n"
        "start_from: 2026-01-01T00:00:00Z\nkafka_compression: gzip\n",
        encoding="utf-8",
    )
    base = ("--config", str(config), "--source", "file:agent.jsonl", "--follow")
    from_file = _settings(*base)
    assert (from_file.file_checkpoint, from_file.auto_offset_reset) == ("/from/config", "earliest")
    assert from_file.start_from == datetime(2026, 1, 1, tzinfo=UTC)
    assert from_file.kafka_compression == "gzip"

    monkeypatch.setenv("STEF_FILE_CHECKPOINT", "/from/env")
    monkeypatch.setenv("STEF_AUTO_OFFSET_RESET", "latest")
    monkeypatch.setenv("STEF_START_FROM", "2026-02-01T00:00:00Z")
    monkeypatch.setenv("STEF_KAFKA_COMPRESSION", "snappy")
    from_env = _settings(*base)
    assert (from_env.file_checkpoint, from_env.auto_offset_reset) == ("/from/env", "latest")
    assert from_env.start_from == datetime(2026, 2, 1, tzinfo=UTC)
    assert from_env.kafka_compression == "snappy"

    flags = _settings(
        *base,
        "--file-checkpoint", "/from/flag",
        "--auto-offset-reset", "earliest",
        "--start-from", "2026-11-01T00:00Z",
        "--kafka-compression", "zstd",
    )  # fmt: skip
    assert (flags.file_checkpoint, flags.auto_offset_reset) == ("/from/flag", "earliest")
    assert flags.start_from == datetime(2026, 11, 1, tzinfo=UTC)
    assert flags.kafka_compression == "zstd"
    assert flags.checkpoint_path == "/from/flag"
    assert _settings(*base, "--file-checkpoint", "off").checkpoint_path is None


def test_bad_flag_values_are_usage_errors(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(ConfigError, match="start_from needs a timezone"):
        _settings("--start-from", "2026-11-01T00:00")
    with pytest.raises(ConfigError, match="start_from"):  # Kafka timestamps start at 1970
        _settings("--start-from", "1969-12-31T23:59Z")
    with pytest.raises(SystemExit) as exc:
        parser().parse_args(["run", "--kafka-compression", "brotli"])
    assert exc.value.code == 2
    assert "invalid choice: 'brotli'" in capsys.readouterr().err


def _append(path: Path, *ids: int) -> None:
    with path.open("ab") as f:
        for i in ids:
            f.write(json.dumps(valid_record(i)).encode() + b"\n")


def _sidecar(
    factory: Callable[..., ServiceProcess], tmp_path: Path, log: Path, results: Path, where: str
) -> ServiceProcess:
    proc = factory(
        "--source", f"file:{log}", "--follow",
        "--results", f"file:{results}",
        "--dead-letters", f"file:{tmp_path / 'dead.jsonl'}",
        "--file-checkpoint", where,
        config={"commit_interval_s": 0.1},
    )  # fmt: skip
    proc.wait_ready()
    return proc


def _stop(proc: ServiceProcess) -> None:
    proc.signal(signal.SIGTERM)
    assert proc.wait(30) == 0


@pytest.mark.integration
def test_file_checkpoint_flag_moves_the_checkpoint_or_turns_it_off(
    tmp_path: Path, service_factory: Callable[..., ServiceProcess]
) -> None:
    log, results = tmp_path / "agent.jsonl", tmp_path / "results.jsonl"
    default = tmp_path / ".results.jsonl.stef-checkpoint"
    chosen = tmp_path / "state" / "agent.checkpoint"
    chosen.parent.mkdir()
    _append(log, *range(3))

    def judged(n: int) -> Callable[[], bool]:
        return lambda: len(read_jsonl(results)) >= n

    first = _sidecar(service_factory, tmp_path, log, results, str(chosen))
    first.wait_for(judged(3), timeout_s=30, what="three results")
    _stop(first)
    assert json.loads(chosen.read_text())["line"] == 3 and not default.exists()
    again = _sidecar(service_factory, tmp_path, log, results, str(chosen))
    again.wait_for(lambda: bool(again.events("checkpoint_resumed")), what="the resume")
    _stop(again)
    assert len(read_jsonl(results)) == 3  # resumed at the flag's checkpoint: nothing re-judged

    # off: no checkpoint anywhere, so every start reads the log from its beginning.
    off = _sidecar(service_factory, tmp_path, log, results, "off")
    off.wait_for(judged(6), timeout_s=30, what="the log judged again")
    _stop(off)
    assert not default.exists() and json.loads(chosen.read_text())["line"] == 3
    assert Counter(r["id"] for r in read_jsonl(results)) == {f"r-{i:06d}": 2 for i in range(3)}


@pytest.mark.integration
def test_start_from_and_compression_flags_on_the_real_broker(
    tmp_path: Path,
    kafka_broker: Broker,
    service_factory: Callable[..., ServiceProcess],
    decoded: dict[str, int],
) -> None:
    tag = uuid.uuid4().hex[:8]
    source = kafka_broker.create_topic(f"flags-in-{tag}", 1)
    results = kafka_broker.create_topic(f"flags-out-{tag}", 1)
    _produce_singly(kafka_broker, source, range(3))
    time.sleep(1.1)  # record timestamps are milliseconds: keep the two batches apart
    since = datetime.now(UTC)
    time.sleep(0.1)
    _produce_singly(kafka_broker, source, range(3, 6))
    proc = service_factory(
        "--source", kafka_broker.url(source, f"flags-{tag}"),
        "--results", kafka_broker.url(results),
        "--dead-letters", f"file:{tmp_path / 'dead.jsonl'}",
        "--auto-offset-reset", "latest",
        "--start-from", since.isoformat(),
        "--kafka-compression", "gzip",
        config={"kafka_consumer": dict(FAST_GROUP)},
    )  # fmt: skip
    proc.wait_ready()
    proc.wait_for(lambda: caught_up(proc, 1), timeout_s=60, what="the topic judged")
    _stop(proc)
    before = decoded["gzip"]
    out = kafka_broker.consume_all(results, expect=3)
    # Only the records at or after --start-from, written gzip-compressed.
    assert sorted(json.loads(m.value)["id"] for m in out) == [f"r-{i:06d}" for i in range(3, 6)]
    assert decoded["gzip"] > before
    assert all(n == 0 for c, n in decoded.items() if c != "gzip")


def test_an_llm_budget_beyond_the_record_timeout_exits_2_with_one_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from stef.cli import main

    for name in [n for n in os.environ if n.startswith("STEF_")]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("STEF_LLM_BASE_URL", "http://127.0.0.1:9/v1")
    monkeypatch.setenv("STEF_LLM_MODEL", "m")
    monkeypatch.setenv("STEF_LLM_SAMPLES", "3")
    monkeypatch.setenv("STEF_RECORD_TIMEOUT_S", "600")
    assert main(["run", "--source", "-", "--metrics-port", "off"]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err
    assert "record_timeout_s" in err and "samples" in err

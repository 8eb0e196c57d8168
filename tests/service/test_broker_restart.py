"""``stef run`` when its broker goes away: a broker that comes back empty (Tansu's memory storage;
a log truncated or recreated) is recovered from, and a broker that does not come back fails
``/readyz`` and then stops the service with exit 1 after ``source_unreachable_timeout_s``."""

from __future__ import annotations

import contextlib
import json
import uuid
import warnings
from collections.abc import Callable
from pathlib import Path

import pytest

from stef.exits import Exit
from tests.brokers import tansu_broker
from tests.service.conftest import ServiceProcess, caught_up, kafka_config, read_jsonl, valid_record

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka.errors import TopicAlreadyExistsError

pytestmark = pytest.mark.integration


def _args(url: str, tmp_path: Path) -> list[str]:
    return [
        "--source", url,
        "--results", f"file:{tmp_path / 'results.jsonl'}",
        "--dead-letters", f"file:{tmp_path / 'dead.jsonl'}",
    ]  # fmt: skip


def _ids(tmp_path: Path) -> set[str]:
    return {r["id"] for r in read_jsonl(tmp_path / "results.jsonl")}


def test_a_broker_back_empty_is_recovered_from(
    tmp_path: Path, service_factory: Callable[..., ServiceProcess]
) -> None:
    with tansu_broker() as broker:
        topic = broker.create_topic("agent-logs", 1)
        broker.produce(topic, [json.dumps(valid_record(i)).encode() for i in range(30)])
        proc = service_factory(
            *_args(broker.url(topic, f"g-{uuid.uuid4().hex[:8]}"), tmp_path),
            config=kafka_config(),
        )
        proc.wait_ready()
        proc.wait_for(lambda: caught_up(proc, 1), timeout_s=90, what="the first 30 records")
        port = broker.port
    # The same address, nothing stored: the consumer's position (30) is past the new log's end.
    with tansu_broker(port=port) as again:
        # The consumer's metadata request may have created it first.
        with contextlib.suppress(TopicAlreadyExistsError):
            again.create_topic(topic, 1)
        again.produce(topic, [json.dumps(valid_record(i)).encode() for i in range(100, 105)])
        new = {f"r-{i:06d}" for i in range(100, 105)}
        # Before the fix the consumer waited at offset 30 for ever, /readyz 200.
        proc.wait_for(lambda: new <= _ids(tmp_path), timeout_s=90, what="the records after")
        assert proc.events("partition_reset_past_end")
        assert proc.get("/readyz")[0] == 200


def test_a_broker_that_stays_away_fails_readyz_then_exits_1(
    tmp_path: Path, service_factory: Callable[..., ServiceProcess]
) -> None:
    with tansu_broker() as broker:
        topic = broker.create_topic("agent-logs", 1)
        broker.produce(topic, [json.dumps(valid_record(i)).encode() for i in range(5)])
        proc = service_factory(
            *_args(broker.url(topic, f"g-{uuid.uuid4().hex[:8]}"), tmp_path),
            config=kafka_config(source_unreachable_timeout_s=5),
        )
        proc.wait_ready()
        proc.wait_for(lambda: caught_up(proc, 1), timeout_s=90, what="the records")
    proc.wait_for(lambda: proc.get("/readyz")[0] == 503, timeout_s=30, what="/readyz to fail")
    # Before the fix the service stayed up for ever, waiting for the broker.
    assert proc.wait(90) == Exit.FAILURE
    assert "stef run: source agent-logs: no bootstrap server" in proc.log_text()

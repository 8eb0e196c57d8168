"""Source and sink URLs."""

from __future__ import annotations

from pathlib import Path

import pytest

from stef.errors import ConfigError
from stef.io.urls import parse_endpoint, same_place


@pytest.mark.parametrize(
    ("url", "kind", "bootstrap", "topic", "group", "path"),
    [
        ("kafka://k:9092/logs?group=stef", "kafka", ("k:9092",), "logs", "stef", None),
        ("kafka://a:1,b:2/logs", "kafka", ("a:1", "b:2"), "logs", None, None),
        ("file:out/results.jsonl", "file", (), None, None, "out/results.jsonl"),
        ("file:///var/log/agent.jsonl", "file", (), None, None, "/var/log/agent.jsonl"),
        ("-", "std", (), None, None, None),
    ],
)
def test_parse(
    url: str,
    kind: str,
    bootstrap: tuple[str, ...],
    topic: str | None,
    group: str | None,
    path: str | None,
) -> None:
    e = parse_endpoint(url)
    assert (e.kind, e.bootstrap, e.topic, e.group, e.path) == (kind, bootstrap, topic, group, path)


@pytest.mark.parametrize(
    "url",
    ["kafka://k:9092", "kafka:///logs", "kafka://k/logs", "kafka://k:1/a/b", "http://x", "file:"],
)
def test_rejects(url: str) -> None:
    with pytest.raises(ConfigError):
        parse_endpoint(url)


def test_group_only_on_sources() -> None:
    with pytest.raises(ConfigError, match="group"):
        parse_endpoint("kafka://k:1/out?group=g", what="results")


@pytest.mark.parametrize(
    ("source", "sink", "same"),
    [
        ("kafka://k:9092/logs?group=g", "kafka://k:9092/logs", True),
        ("kafka://a:1,K:9092/logs", "kafka://k:9092/logs", True),  # one shared server
        ("kafka://k:9092/logs", "kafka://k:9092/results", False),
        ("kafka://k:9092/logs", "kafka://mirror:9092/logs", False),  # another cluster
        ("-", "-", False),  # stdin and stdout
        ("file:agent.jsonl", "kafka://k:9092/agent.jsonl", False),
    ],
)
def test_same_place(source: str, sink: str, same: bool) -> None:
    assert same_place(parse_endpoint(source), parse_endpoint(sink, what="sink")) is same


def test_same_place_for_files_by_path_and_by_identity(tmp_path: Path) -> None:
    log = tmp_path / "agent.jsonl"
    log.write_text("", encoding="utf-8")
    (tmp_path / "sub").mkdir()
    (tmp_path / "link.jsonl").hardlink_to(log)
    source = parse_endpoint(f"file:{log}")
    for same in (f"file:{tmp_path}/sub/../agent.jsonl", f"file:{tmp_path}/link.jsonl"):
        assert same_place(source, parse_endpoint(same, what="sink"))
    assert not same_place(source, parse_endpoint(f"file:{tmp_path}/other.jsonl", what="sink"))

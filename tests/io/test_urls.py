"""Source and sink URLs."""

from __future__ import annotations

import pytest

from stef.errors import ConfigError
from stef.io.urls import parse_endpoint


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

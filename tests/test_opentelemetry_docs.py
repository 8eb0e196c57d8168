"""docs/opentelemetry.md is true: its Collector config is a Collector config whose Kafka exporter
writes what its STEF settings read (topic, encoding, traces partitioned by id), those settings
load, its custom picks validate, and its presets table names every preset."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml

from stef.io.otlp.mapping import PRESETS, SpanMapping
from stef.settings import load_settings
from tests.conftest import ROOT

PAGE = ROOT / "docs" / "opentelemetry.md"


def _blocks() -> list[dict[str, Any]]:
    text = PAGE.read_text(encoding="utf-8")
    return [yaml.safe_load(b) for b in re.findall(r"```yaml\n(.*?)```", text, re.S)]


def test_the_collector_writes_what_stef_reads(tmp_path: Path) -> None:
    collector, stef = _blocks()[:2]
    assert set(collector["receivers"]["otlp"]["protocols"]) == {"grpc", "http"}
    kafka = collector["exporters"]["kafka"]
    assert kafka["partition_traces_by_id"] is True
    pipeline = collector["service"]["pipelines"]["traces"]
    assert pipeline["receivers"] == ["otlp"] and "kafka" in pipeline["exporters"]
    assert set(pipeline["processors"]) <= set(collector["processors"])
    config = tmp_path / "stef.yaml"
    config.write_text(yaml.safe_dump(stef))
    settings = load_settings(config, env={})
    source = settings.source_endpoint
    assert source.kind == "otlp+kafka"
    assert source.topic == kafka["traces"]["topic"]
    assert source.option("encoding", "otlp_proto") == kafka["traces"]["encoding"]
    assert source.bootstrap == tuple(kafka["brokers"])
    assert settings.results_endpoint.kind == "otlp+http"
    assert settings.span_mapping.preset == "all"


def test_the_custom_picks_and_the_presets_table() -> None:
    picks = _blocks()[2]["span_mapping"]
    mapping = SpanMapping.model_validate(picks)
    assert [p.attribute for p in mapping.picks("sql")] == [
        "gen_ai.tool.call.arguments",
        "gen_ai.output.messages",
    ]
    text = PAGE.read_text(encoding="utf-8")
    table = {m for m in re.findall(r"^\| `([a-z]+)`", text, re.M)}
    assert set(PRESETS) - {"none"} <= table
    logs = _blocks()[3]["service"]["pipelines"]["logs"]
    assert logs["receivers"] == ["otlp"]

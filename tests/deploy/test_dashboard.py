"""The Grafana dashboard: valid against Grafana's dashboard schema (generated from npm
@grafana/schema), the panels the issue asks for, and every query parses (promtool)."""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path
from typing import Any

import jsonschema
import yaml

from tests.deploy.conftest import (
    DASHBOARD_SCHEMA,
    ROOT,
    Query,
    dashboard_panels,
    dashboard_queries,
    load_dashboard,
    metric_names,
    recorded_names,
    rule_queries,
    run,
    variable_queries,
)


def validator() -> jsonschema.Draft7Validator:
    schema = json.loads(DASHBOARD_SCHEMA.read_text(encoding="utf-8"))
    jsonschema.Draft7Validator.check_schema(schema)
    return jsonschema.Draft7Validator(schema)


def test_dashboard_validates_against_grafana_schema(deploy_tools: Path) -> None:
    errors = [f"{e.json_path}: {e.message}" for e in validator().iter_errors(load_dashboard())]
    assert errors == []


def test_schema_rejects_broken_dashboards(deploy_tools: Path) -> None:
    # The generated schema is strict enough to matter: each of these mutations must fail.
    v = validator()
    good = load_dashboard()
    broken: list[dict[str, Any]] = []
    d = copy.deepcopy(good)
    del d["schemaVersion"]
    broken.append(d)
    d = copy.deepcopy(good)
    d["panels"][1]["gridPos"] = {"w": 8}
    broken.append(d)
    d = copy.deepcopy(good)
    d["templating"]["list"][1]["type"] = "dropdown"
    broken.append(d)
    d = copy.deepcopy(good)
    d["panels"][1]["titel"] = "typo"
    broken.append(d)
    for case in broken:
        assert not v.is_valid(case)


def test_template_variables_app_and_agent() -> None:
    variables = {v["name"]: v for v in load_dashboard()["templating"]["list"]}
    for name in ("app", "agent"):
        var = variables[name]
        assert var["type"] == "query" and var["multi"] and var["includeAll"]
        assert var["allValue"] == ".*"
    assert "$app" in variables["agent"]["query"]["query"]


def test_panels_the_issue_asks_for() -> None:
    titles = " | ".join(p["title"].lower() for p in dashboard_panels(load_dashboard()))
    for words in (
        "score distribution", "mean score", "p90 and p10 score", "tier shares", "coverage",
        "filter status", "verdicts", "enrichment drift", "top issue labels", "unsafe sql",
        "judge errors", "llm latency", "llm tokens", "llm cost", "cache hit rate",
        "consumer lag", "p10", "freshness", "dead letters by reason", "judge errors by reason",
        "cpu", "resident memory", "open files", "judge disagreement share", "split sample votes",
        "reported model and model changes", "canary agreement", "judge repairs by kind",
        "estimated agent accuracy", "needs review share", "cascade",
    ):  # fmt: skip
        assert words in titles, words


def test_runbook_links_use_the_configurable_base() -> None:
    dashboard = load_dashboard()
    variables = {v["name"]: v for v in dashboard["templating"]["list"]}
    assert variables["runbook_base"]["type"] == "textbox"
    readme = (ROOT / "deploy" / "README.md").read_text(encoding="utf-8")
    anchors = {
        re.sub(r"[^a-z0-9 -]", "", h.strip().lower()).replace(" ", "-")
        for h in re.findall(r"^#+ (.+)$", readme, flags=re.MULTILINE)
    }
    links = [link for p in dashboard_panels(dashboard) for link in p.get("links", [])]
    links += dashboard["links"]
    assert len(links) >= 8
    for link in links:
        base, _, anchor = link["url"].partition("/deploy/README.md#")
        assert base == "${runbook_base}", link
        assert anchor in anchors, link


def test_panels_are_well_formed() -> None:
    panels = dashboard_panels(load_dashboard())
    ids = [p["id"] for p in load_dashboard()["panels"]]
    assert len(ids) == len(set(ids))
    for p in panels:
        assert p["targets"], p["title"]
        assert p["description"], p["title"]
        for t in p["targets"]:
            assert t["datasource"] == {"type": "prometheus", "uid": "${datasource}"}
    # Panels per app/agent filter by the variables; the LLM and service panels have no app label.
    app_filtered = [
        q for q in dashboard_queries() if "stef_records" in q.expr or "stef_score" in q.expr
    ]
    assert app_filtered and all('app=~"$app"' in q.expr for q in app_filtered)


def test_every_query_parses(promtool: str, tmp_path: Path) -> None:
    """promtool parses each query (as the expression of a recording rule) or names the bad one."""
    queries = dashboard_queries() + variable_queries() + rule_queries()
    assert len(queries) > 40
    group = {
        "name": "parse",
        "rules": [{"record": f"parse:q{i}", "expr": q.concrete()} for i, q in enumerate(queries)],
    }
    path = tmp_path / "queries.yml"
    path.write_text(yaml.safe_dump({"groups": [group]}, sort_keys=False), encoding="utf-8")
    result = run([promtool, "check", "rules", str(path)])
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"SUCCESS: {len(queries)} rules found" in result.stdout


def test_parse_check_rejects_a_bad_query(promtool: str, tmp_path: Path) -> None:
    bad = Query("bad", 'sum by (app) (rate(stef_records_total{app=~"$app"}[$__rate_interval])')
    path = tmp_path / "bad.yml"
    rule = {"record": "parse:bad", "expr": bad.concrete()}
    path.write_text(yaml.safe_dump({"groups": [{"name": "p", "rules": [rule]}]}), encoding="utf-8")
    result = run([promtool, "check", "rules", str(path)])
    assert result.returncode != 0


def test_recorded_series_the_dashboard_reads_are_recorded() -> None:
    used = set().union(*(metric_names(q.expr) for q in dashboard_queries()))
    recorded = {n for n in used if ":" in n}
    assert recorded, "the dashboard reads the shared recording rules"
    assert recorded <= recorded_names()


def test_metric_name_extraction() -> None:
    expr = (
        'histogram_quantile(0.9, sum by (app, le) (rate(stef_score_bucket{app=~"$app",le="0.65"}'
        "[5m]))) / ignoring (tier) group_left app:stef_score:mean1d offset 1d"
        ' or 0 * up{job="stef"}'
    )
    assert metric_names(expr) == {"stef_score_bucket", "app:stef_score:mean1d", "up"}

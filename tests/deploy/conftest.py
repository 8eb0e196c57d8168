"""Fixtures of the deploy tests: the tools they run, each required (a missing tool fails the test
with the command that installs it, never skips), and the PromQL of the dashboard and the rules."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
DASHBOARD = DEPLOY / "grafana" / "stef.json"
PROM_DIR = DEPLOY / "prometheus"
RULE_FILES = (PROM_DIR / "recording.rules.yml", PROM_DIR / "alerts.rules.yml")
K8S = DEPLOY / "k8s"
COMPOSE = DEPLOY / "compose" / "docker-compose.yml"
TOOLS = ROOT / "build" / "deploy-tools"
DASHBOARD_SCHEMA = TOOLS / "grafana-dashboard.schema.json"
VENV_BIN = ROOT / ".venv" / "bin"

INSTALL_SERVICES = "run `make services` (scripts/install-services.sh)"

# What Grafana substitutes in a query before it reaches Prometheus; the tests substitute the same
# kinds of values (a regex for multi-value variables, durations for the interval macros).
GRAFANA_MACROS = {
    "$__rate_interval": "1m",
    "$__interval": "15s",
    "$__range": "10m",
}


def require_tool(name: str, path: Path | None = None, how: str = INSTALL_SERVICES) -> str:
    """The path of a tool the test needs; fails the test (not skips) when it is missing."""
    found = str(path) if path is not None and path.exists() else shutil.which(name)
    if not found:
        pytest.fail(f"{name} is not installed ({path or 'not on PATH'}): {how}", pytrace=False)
    return found


def run(cmd: list[str], **kwargs: Any) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=False, **kwargs)


@pytest.fixture(scope="session")
def promtool() -> str:
    return require_tool("promtool")


@pytest.fixture(scope="session")
def prometheus_bin() -> str:
    return require_tool("prometheus")


@pytest.fixture(scope="session")
def node() -> str:
    return require_tool("node", how="apt-get install nodejs npm, then " + INSTALL_SERVICES)


@pytest.fixture(scope="session")
def deploy_tools() -> Path:
    """build/deploy-tools/ with the npm packages of scripts/install-deploy-tools.sh."""
    if not DASHBOARD_SCHEMA.exists():
        pytest.fail(
            f"{DASHBOARD_SCHEMA.relative_to(ROOT)} is missing: run scripts/install-deploy-tools.sh",
            pytrace=False,
        )
    return TOOLS


# ------------------------------------------------------------------------------------ queries


@dataclass(frozen=True)
class Query:
    """One PromQL expression of the dashboard or the rules, and where it comes from."""

    where: str
    expr: str

    def concrete(self) -> str:
        """The expression as Prometheus receives it: template variables and macros filled in."""
        out = self.expr
        for macro, value in GRAFANA_MACROS.items():
            out = out.replace(macro, value)
        # Multi-value variables with "All" selected become the allValue regex.
        return re.sub(r"\$\{?(app|agent)\}?", ".*", out)


def load_dashboard() -> dict[str, Any]:
    return json.loads(DASHBOARD.read_text(encoding="utf-8"))


def dashboard_panels(dashboard: dict[str, Any]) -> list[dict[str, Any]]:
    """Every panel that queries data (rows, and panels nested in collapsed rows, included)."""
    out: list[dict[str, Any]] = []
    for panel in dashboard.get("panels", []):
        out.extend(panel.get("panels", []))
        if panel.get("type") != "row":
            out.append(panel)
    return out


def dashboard_queries() -> list[Query]:
    queries = []
    for panel in dashboard_panels(load_dashboard()):
        for target in panel.get("targets", []):
            queries.append(Query(f"panel {panel['title']!r} {target['refId']}", target["expr"]))
    return queries


def variable_queries() -> list[Query]:
    """The selectors inside the template variables' label_values(SELECTOR, LABEL)."""
    out = []
    for var in load_dashboard()["templating"]["list"]:
        if var["type"] != "query":
            continue
        text = var["query"]["query"] if isinstance(var["query"], dict) else var["query"]
        m = re.fullmatch(r"label_values\((.+),\s*(\w+)\)", text.strip())
        assert m, f"variable {var['name']}: unexpected query {text!r}"
        out.append(Query(f"variable {var['name']}", m.group(1)))
    return out


def rules() -> list[dict[str, Any]]:
    out = []
    for path in RULE_FILES:
        for group in yaml.safe_load(path.read_text(encoding="utf-8"))["groups"]:
            out.extend(group["rules"])
    return out


def rule_queries() -> list[Query]:
    return [Query(f"rule {r.get('record') or r.get('alert')}", r["expr"]) for r in rules()]


def recorded_names() -> set[str]:
    return {r["record"] for r in rules() if "record" in r}


# Metric-name tokens of a PromQL text: identifiers not followed by "(" (functions), not label names
# (followed by =, !=, =~), not keywords. Good enough for our own expressions, which the parse test
# checks with promtool first.
_KEYWORDS = {
    "by", "without", "on", "ignoring", "group_left", "group_right", "and", "or", "unless",
    "offset", "bool", "inf", "nan",
}  # fmt: skip
_TOKEN = re.compile(r"(?<![\w:.\"$])([a-zA-Z_:][\w:]*)(?![\w:])(\s*(?:\(|=~|!=|!~|=(?!=)))?")


def metric_names(expr: str) -> set[str]:
    text = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)  # drop label values
    text = re.sub(r"\[[^\]]*\]", "", text)  # drop range durations
    text = re.sub(r"(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", "", text)
    names = set()
    for m in _TOKEN.finditer(text):
        name, follower = m.group(1), m.group(2)
        if follower or name.lower() in _KEYWORDS:
            continue
        names.add(name)
    return names

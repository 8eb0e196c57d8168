"""Secrets read from files (issue 25 §8): ``STEF_LLM_API_KEY_FILE`` and the Kafka
``sasl_plain_password_file`` / ``ssl_password_file`` options, so a password need not sit in an
environment variable; a bad secret file is one line naming it, never its content; the Kafka
client options are checked by name at start."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest

from stef.cli import main
from stef.errors import ConfigError
from stef.exits import Exit
from stef.settings import load_settings
from stef.testing.fake_server import FakeLlmServer

KEY = "sk-from-a-file-0123456789"


def test_the_api_key_is_read_from_a_file_and_sent(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    secret = tmp_path / "llm-key"
    secret.write_text(KEY + "\n")  # the newline an editor leaves is dropped
    log = tmp_path / "log.jsonl"
    log.write_text(json.dumps({"question": "How many orders?", "sql": "SELECT 1"}) + "\n")
    for name in list(os.environ):
        if name.startswith("STEF_"):
            monkeypatch.delenv(name)
    with FakeLlmServer(api_key=KEY) as server:  # any other key gets a 401
        monkeypatch.setenv("STEF_LLM_BASE_URL", server.base_url)
        monkeypatch.setenv("STEF_LLM_MODEL", "fake-model")
        monkeypatch.setenv("STEF_LLM_API_KEY_FILE", str(secret))
        assert main(["replay", str(log), "--no-progress"]) == Exit.OK
        (sent,) = server.chat_requests()
    assert sent.headers["authorization"] == f"Bearer {KEY}"
    assert KEY not in capsys.readouterr().err


@pytest.mark.parametrize(
    ("make", "says"),
    [
        (lambda p: None, "No such file"),
        (lambda p: p.mkdir(), "not a regular file"),
        (lambda p: os.mkfifo(p), "not a regular file"),  # must not block the start
        (lambda p: p.write_text("\n \n"), "empty"),
        (lambda p: p.write_bytes(b"\xff\xfe"), "not UTF-8"),
    ],
)
def test_a_bad_secret_file_is_one_line_naming_it(make: object, says: str, tmp_path: Path) -> None:
    path = tmp_path / "secret"
    make(path)  # type: ignore[operator]
    env = {"STEF_LLM_API_KEY_FILE": str(path), "STEF_LLM_MODEL": "m"}
    with pytest.raises(ConfigError, match="STEF_LLM_API_KEY_FILE") as exc:
        load_settings(env=env)
    assert str(path) in str(exc.value) and says in str(exc.value)


def test_a_key_and_a_key_file_together_are_refused(tmp_path: Path) -> None:
    path = tmp_path / "secret"
    path.write_text(KEY)
    env = {"STEF_LLM_API_KEY_FILE": str(path), "STEF_LLM_API_KEY": KEY, "STEF_LLM_MODEL": "m"}
    with pytest.raises(ConfigError, match="not both"):
        load_settings(env=env)


def test_kafka_passwords_are_read_from_files(tmp_path: Path) -> None:
    password = tmp_path / "kafka-password"
    password.write_text("scram-secret-0123\n")
    key_password = tmp_path / "key-password"
    key_password.write_text("pem-secret-4567")
    config = tmp_path / "stef.yaml"
    config.write_text(
        "kafka_consumer:\n"
        "  security_protocol: SASL_SSL\n"
        "  sasl_mechanism: SCRAM-SHA-512\n"
        "  sasl_plain_username: stef\n"
        f"  sasl_plain_password_file: {password}\n"
        "kafka_producer:\n"
        "  security_protocol: SSL\n"
        f"  ssl_password_file: {key_password}\n"
    )
    settings = load_settings(config, env={})
    assert settings.kafka_consumer["sasl_plain_password"] == "scram-secret-0123"
    assert "sasl_plain_password_file" not in settings.kafka_consumer
    assert settings.kafka_producer["ssl_password"] == "pem-secret-4567"


@pytest.mark.parametrize(
    ("options", "says"),
    [
        ("{sasl_mechansim: PLAIN}", "did you mean sasl_mechanism"),
        ("{bootstrap_servers: 'x:9092'}", "set by STEF"),
        ("{sasl_plain_password_file: /nonexistent/stef-secret}", "/nonexistent/stef-secret"),
    ],
)
def test_kafka_options_are_checked_at_start(
    options: str, says: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    for name in list(os.environ):
        if name.startswith("STEF_"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("STEF_KAFKA_CONSUMER", options)
    assert main(["check"]) == Exit.USAGE
    err = capsys.readouterr().err
    assert says in err and "kafka_consumer" in err and "Traceback" not in err


def test_the_kafka_doc_examples_are_valid_settings(tmp_path: Path) -> None:
    doc = (Path(__file__).resolve().parent.parent / "docs" / "kafka.md").read_text()
    blocks = [b for b in re.findall(r"```yaml\n(.*?)```", doc, re.S) if "kafka_consumer" in b]
    assert len(blocks) == 2  # SASL_SSL with SCRAM, mTLS
    secrets = tmp_path / "secrets"
    secrets.mkdir()
    for name in ("kafka-password", "stef-client.key-password"):
        (secrets / name).write_text(f"{name}-value\n")
    for i, block in enumerate(blocks):
        config = tmp_path / f"stef-{i}.yaml"
        config.write_text(block.replace("/run/secrets/", f"{secrets}/"))
        settings = load_settings(config, env={})
        assert settings.kafka_producer == settings.kafka_consumer  # the anchor is followed
        secret = settings.kafka_consumer.get("sasl_plain_password") or settings.kafka_consumer.get(
            "ssl_password"
        )
        assert str(secret).endswith("-value")

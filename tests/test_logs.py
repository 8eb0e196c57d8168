"""Logging: one level name checked at start, JSON lines written to whatever ``sys.stderr`` is
when a line is logged (tests and tools swap it after configuration)."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator
from typing import Any

import pytest
import structlog

from stef.logs import LEVELS, configure_logging


@pytest.fixture
def stderr(monkeypatch: pytest.MonkeyPatch) -> Iterator[io.StringIO]:
    """A buffer for ``sys.stderr`` (each test installs it after configuring), with no
    ``STEF_LOG_LEVEL`` from the environment and no bound context left behind."""
    monkeypatch.delenv("STEF_LOG_LEVEL", raising=False)
    buffer = io.StringIO()
    yield buffer
    structlog.contextvars.clear_contextvars()


def _lines(buffer: io.StringIO) -> list[dict[str, Any]]:
    return [json.loads(line) for line in buffer.getvalue().splitlines()]


@pytest.mark.parametrize("level", ["bogus", "verbose", "warn", "10"])
def test_an_unknown_level_is_a_value_error(level: str) -> None:
    with pytest.raises(ValueError, match="log level must be one of debug, info"):
        configure_logging(level)


def test_an_unknown_level_from_the_environment_is_a_value_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("STEF_LOG_LEVEL", "loud")
    with pytest.raises(ValueError, match="'loud'"):
        configure_logging()


@pytest.mark.parametrize("level", [*LEVELS, "INFO", "Warning"])
def test_every_listed_level_is_accepted_in_any_case(
    level: str, stderr: io.StringIO, monkeypatch: pytest.MonkeyPatch
) -> None:
    configure_logging(level)
    monkeypatch.setattr("sys.stderr", stderr)
    log = structlog.get_logger()
    for name in LEVELS:
        getattr(log, name)(name)
    written = [line["event"] for line in _lines(stderr)]
    assert written == list(LEVELS[LEVELS.index(level.lower()) :])


def test_lines_go_to_the_stderr_of_the_moment_as_json(
    stderr: io.StringIO, monkeypatch: pytest.MonkeyPatch
) -> None:
    configure_logging("info")
    log = structlog.get_logger("stef.test")
    monkeypatch.setattr("sys.stderr", stderr)  # swapped after configuration
    log.info("record_judged", record_id="r-1", score=87.5)
    later = io.StringIO()
    monkeypatch.setattr("sys.stderr", later)
    log.warning("sink_slow", seconds=2)
    [first] = _lines(stderr)
    assert first["event"] == "record_judged" and first["level"] == "info"
    assert (first["record_id"], first["score"]) == ("r-1", 87.5)
    assert first["timestamp"].endswith("Z")  # ISO 8601, UTC
    assert [line["event"] for line in _lines(later)] == ["sink_slow"]


def test_lines_below_the_level_are_dropped(
    stderr: io.StringIO, monkeypatch: pytest.MonkeyPatch
) -> None:
    configure_logging("warning")
    monkeypatch.setattr("sys.stderr", stderr)
    log = structlog.get_logger()
    log.debug("d")
    log.info("i")
    log.warning("w")
    log.error("e")
    assert [line["event"] for line in _lines(stderr)] == ["w", "e"]


def test_the_default_is_warning(stderr: io.StringIO, monkeypatch: pytest.MonkeyPatch) -> None:
    configure_logging()
    monkeypatch.setattr("sys.stderr", stderr)
    structlog.get_logger().info("quiet")
    structlog.get_logger().warning("loud")
    assert [line["event"] for line in _lines(stderr)] == ["loud"]


def test_the_environment_sets_the_level_and_an_argument_overrides_it(
    stderr: io.StringIO, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("STEF_LOG_LEVEL", "error")
    configure_logging()
    monkeypatch.setattr("sys.stderr", stderr)
    structlog.get_logger().warning("hidden")
    configure_logging("debug")
    structlog.get_logger().debug("shown")
    assert [line["event"] for line in _lines(stderr)] == ["shown"]


def test_bound_context_and_exceptions_stay_on_one_line(
    stderr: io.StringIO, monkeypatch: pytest.MonkeyPatch
) -> None:
    configure_logging("info")
    monkeypatch.setattr("sys.stderr", stderr)
    structlog.contextvars.bind_contextvars(record_id="r-9")
    try:
        1 / 0  # noqa: B018 (the exception to log)
    except ZeroDivisionError:
        structlog.get_logger().exception("record_failed")
    [line] = _lines(stderr)
    assert line["record_id"] == "r-9" and line["level"] == "error"
    assert "ZeroDivisionError" in line["exception"]


def test_sqlglot_warnings_are_silenced() -> None:
    configure_logging("debug")
    assert logging.getLogger("sqlglot").getEffectiveLevel() == logging.ERROR


def test_a_registered_secret_is_redacted_from_every_line_in_every_form(
    stderr: io.StringIO, monkeypatch: pytest.MonkeyPatch
) -> None:
    from stef.redact import register_secret

    secret = "sk-logs-test-first-line\nsecond-line-0123456789"
    register_secret(secret)
    configure_logging("debug", deps_level="debug")  # the clients' debug lines too
    monkeypatch.setattr("sys.stderr", stderr)
    # Every line on STEF's stderr stream, structlog's and the standard library's, in any form.
    structlog.get_logger().debug("llm_request", headers={"Authorization": f"Bearer {secret}"})
    # What httpcore logs at debug for a header it refuses: the repr, newline escaped.
    header = f"Bearer {secret}".encode()
    logging.getLogger("httpcore.http11").debug("send_request_headers.failed %r", header)
    try:
        raise ValueError(f"Illegal header value {header!r}")
    except ValueError:
        logging.getLogger("httpx").exception("request failed")
    text = stderr.getvalue()
    assert text.count("[REDACTED]") >= 3
    for part in ("sk-logs-test-first-line", "second-line-0123456789"):
        assert part not in text


class _FullStream(io.StringIO):
    """A stderr on a full disk: every write fails."""

    def write(self, text: str) -> int:
        raise OSError(28, "No space left on device")


def test_a_log_line_stderr_refuses_is_dropped_and_counted(monkeypatch: pytest.MonkeyPatch) -> None:
    """Before: the OSError reached the worker that logged, which died with its record's slot."""
    from prometheus_client import CollectorRegistry

    from stef.logs import dropped_lines
    from stef.metrics import Metrics

    configure_logging("info")
    registry = CollectorRegistry()
    Metrics(registry)
    before = dropped_lines()
    monkeypatch.setattr("sys.stderr", _FullStream())
    structlog.get_logger("t").warning("record_dead_lettered", reason="not_json")
    monkeypatch.setattr("sys.stderr", io.StringIO())
    structlog.get_logger("t").warning("written")
    assert dropped_lines() == before + 1
    assert registry.get_sample_value("stef_log_lines_dropped_total") == before + 1


# ------------------------------------------------------------- one stream (issue 25 section 6)


def test_a_dependency_record_is_one_json_line_with_stefs_keys(
    stderr: io.StringIO, monkeypatch: pytest.MonkeyPatch
) -> None:
    configure_logging("info")  # stderr is not a terminal: JSON lines
    monkeypatch.setattr("sys.stderr", stderr)
    structlog.get_logger("stef.io.kafka").warning("source_poll_failed", error="gone")
    logging.getLogger("kafka.conn").warning("<BrokerConnection node_id=%s>: timed out", 1)
    logging.getLogger("httpx2").warning("HTTP Request: %s %s", "POST", "http://x/v1")
    own, kafka, http = _lines(stderr)
    assert set(kafka) == set(http) == set(own) - {"error"}
    assert (kafka["level"], kafka["logger"]) == ("warning", "kafka.conn")
    assert kafka["event"] == "<BrokerConnection node_id=1>: timed out"
    assert (http["level"], http["logger"]) == ("warning", "httpx2")
    assert own["logger"] == "stef.io.kafka"


def test_debug_keeps_the_http_clients_internals_at_warning(
    stderr: io.StringIO, monkeypatch: pytest.MonkeyPatch
) -> None:
    configure_logging("debug")
    monkeypatch.setattr("sys.stderr", stderr)
    structlog.get_logger("stef.pipeline").debug("record_judged")
    for name in ("httpcore2.connection", "httpcore.http11", "openai._base_client", "kafka.conn"):
        logging.getLogger(name).debug("internal detail")
        logging.getLogger(name).info("internal detail")
    logging.getLogger("httpx2").warning("retrying")
    assert [(line["logger"], line["event"]) for line in _lines(stderr)] == [
        ("stef.pipeline", "record_judged"),
        ("httpx2", "retrying"),
    ]


def test_the_dependencies_level_lets_their_lines_through_when_asked(
    stderr: io.StringIO, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("STEF_LOG_DEPS_LEVEL", "debug")
    configure_logging("warning")
    monkeypatch.setattr("sys.stderr", stderr)
    structlog.get_logger("stef.pipeline").info("hidden")
    logging.getLogger("httpcore2.connection").debug("connect_tcp.started")
    assert [line["logger"] for line in _lines(stderr)] == ["httpcore2.connection"]


def test_console_format_is_text_without_colours_off_a_terminal(
    stderr: io.StringIO, monkeypatch: pytest.MonkeyPatch
) -> None:
    configure_logging("info", "console")
    monkeypatch.setattr("sys.stderr", stderr)
    structlog.get_logger("stef.service.loop").info("service_started", source="-")
    logging.getLogger("kafka.conn").warning("broker down")
    own, kafka = stderr.getvalue().splitlines()
    assert "service_started" in own and "source=-" in own and "[info" in own
    assert "broker down" in kafka and "[warning" in kafka
    assert "\x1b[" not in stderr.getvalue()  # no colour codes in a file
    with pytest.raises(json.JSONDecodeError):
        json.loads(own)


def test_an_unknown_format_is_a_value_error() -> None:
    with pytest.raises(ValueError, match="log format must be one of auto, json, console"):
        configure_logging("info", "yaml")

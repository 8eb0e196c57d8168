"""Credentials an endpoint echoes back never reach a result, an exception or a log line."""

from __future__ import annotations

import json
import logging
import traceback
from collections.abc import Callable
from typing import Any

import pytest
import structlog

from stef.errors import JudgeError, LlmTransportError
from stef.judges.llm.client import DETAIL_LIMIT, redact
from stef.judges.llm.judge import LlmJudge
from stef.pipeline import Pipeline
from stef.rules import RuleSet
from stef.stages.validate import validate
from stef.testing.fake_server import Error, FakeLlmServer, Raw, Received, Step
from tests.judges.llm.conftest import API_KEY, RECORD, request_for

Make = Callable[..., LlmJudge]
ServerFactory = Callable[..., FakeLlmServer]

# A key in no recognisable format: only the literal-value rule can catch it.
PLAIN_KEY = "local-token-7f3a9c41e2"

# ------------------------------------------------------------------------------------ redact()


@pytest.mark.parametrize(
    ("text", "secrets", "kept", "gone"),
    [
        pytest.param(
            "Invalid header Bearer abc.DEF-123_xyz", (), "Bearer [REDACTED]", "abc.DEF", id="bearer"
        ),
        pytest.param(
            "Incorrect API key provided: sk-proj-AbCdEf123456. Check it.",
            (),
            "provided: [REDACTED]. Check it.",
            "AbCdEf123456",
            id="sk-key",
        ),
        pytest.param(
            "key local-token-7f3a9c41e2 was revoked (local-token-7f3a9c41e2)",
            (PLAIN_KEY,),
            "key [REDACTED] was revoked ([REDACTED])",
            PLAIN_KEY,
            id="configured-key-anywhere",
        ),
        pytest.param(
            '{"headers": {"Authorization": "Basic dXNlcjpwYXNz", "Host": "x"}}',
            (),
            '"Authorization": "[REDACTED]", "Host": "x"',
            "dXNlcjpwYXNz",
            id="authorization-json",
        ),
        pytest.param(
            "got Authorization: Token t0ps3cret\nfrom 10.0.0.1",
            (),
            "Authorization: [REDACTED] from 10.0.0.1",
            "t0ps3cret",
            id="authorization-header-line",
        ),
        pytest.param(
            "api-key: 0123abcd is not valid for this deployment",
            (),
            "api-key: [REDACTED] is not",
            "0123abcd",
            id="api-key",
        ),
        pytest.param(
            "{'x-api-key': 'zz9plural'}",
            (),
            "'x-api-key': '[REDACTED]'",
            "zz9plural",
            id="x-api-key",
        ),
        pytest.param(
            "GET /v1/models?key=AIzaSyQ-123&alt=json",
            (),
            "?key=[REDACTED]&alt=json",
            "AIzaSyQ-123",
            id="key-query-parameter",
        ),
        pytest.param(
            "<html>\n  <body>\tBad   Gateway</body>\n</html>",
            (),
            "<html> <body> Bad Gateway</body> </html>",
            "\n",
            id="whitespace-folded",
        ),
    ],
)
def test_redact(text: str, secrets: tuple[str, ...], kept: str, gone: str) -> None:
    out = redact(text, secrets)
    assert kept in out
    assert gone not in out


def test_redact_caps_after_redacting() -> None:
    text = "x" * 290 + " Bearer " + "s" * 40 + " tail" * 100
    out = redact(text)
    assert len(out) == DETAIL_LIMIT
    assert out.endswith("\u2026")
    assert "ssss" not in out
    assert len(redact("y" * 10_000, limit=None)) == 10_000


def test_redact_ignores_empty_secrets() -> None:
    assert redact("nothing to hide", ("",)) == "nothing to hide"


# --------------------------------------------------------------------- echoing endpoints, e2e


def echo_401(received: Received) -> Step:
    sent = received.headers.get("authorization", "")
    return Error(401, f"Invalid Authorization: {sent}. Your key {sent.split()[-1]} is revoked.")


def echo_401_plain(received: Received) -> Step:
    sent = received.headers.get("authorization", "")
    return Raw(401, f"Unauthorized\nAuthorization: {sent}\n".encode(), content_type="text/plain")


def echo_401_headers(received: Received) -> Step:
    body = {"error": {"message": f"bad credentials {received.headers.get('authorization')}"}}
    body["request"] = {"headers": dict(received.headers)}
    return Raw(401, json.dumps(body).encode())


def echo_503(received: Received) -> Step:
    return Error(503, f"backend saw api-key={received.headers['authorization'].split()[-1]}")


def echo_400(received: Received) -> Step:
    # A 400 to json_schema falls back to json_object (logged with the message), then fails.
    return Error(400, f"bad request from {received.headers['authorization']}")


def echo_200_html(received: Received) -> Step:
    page = f"<html><pre>{received.headers['authorization']}</pre></html>"
    return Raw(200, page.encode(), content_type="text/html")


# (answer, reason, the event that carries the endpoint's text to the log, if any)
ECHOES = [
    pytest.param(echo_401, "http_401", None, id="401-json-message"),
    pytest.param(echo_401_plain, "http_401", None, id="401-plain-text"),
    pytest.param(echo_401_headers, "http_401", None, id="401-headers-dump"),
    pytest.param(echo_503, "http_503", "llm_retry", id="503-retried"),
    pytest.param(echo_400, "http_400", "llm_json_schema_rejected", id="400-after-fallback"),
    pytest.param(echo_200_html, "bad_response", "llm_retry", id="200-html"),
]


def _leaks(key: str, exc: BaseException) -> list[str]:
    """Every place of ``exc`` (its chain and traceback text included) that shows ``key``."""
    found = []
    text = "".join(traceback.format_exception(exc))
    if key in text:
        found.append("traceback")
    for name, value in vars(exc).items():
        if key in str(value):
            found.append(name)
    return found


@pytest.mark.parametrize("key", [API_KEY, PLAIN_KEY])
@pytest.mark.parametrize(("answer", "reason", "logged"), ECHOES)
def test_an_echoed_key_never_leaves_the_backend(
    server_factory: ServerFactory,
    judge_factory: Make,
    rules: RuleSet,
    capsys: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
    answer: Callable[[Received], Step],
    reason: str,
    logged: str | None,
    key: str,
) -> None:
    caplog.set_level(logging.DEBUG)
    srv = server_factory(default=answer)
    judge = judge_factory(srv, api_key=key, max_retries=1)

    with structlog.testing.capture_logs() as logs, pytest.raises(JudgeError) as info:
        judge.judge(request_for(RECORD))
    exc = info.value
    assert isinstance(exc, LlmTransportError)
    assert exc.reason == reason
    assert "[REDACTED]" in exc.detail
    assert _leaks(key, exc) == []
    if logged is not None:
        assert logged in [e["event"] for e in logs]
    assert key not in repr(logs)

    result = Pipeline(rules, judge).judge_record(validate(RECORD))
    assert result.outcome == "judge_error" and result.score is None
    assert result.error is not None and result.error.startswith(f"{reason}: ")
    assert key not in result.model_dump_json()

    # The endpoint did receive the key: the redaction is real, not an absent header.
    assert srv.chat_requests()[0].headers["authorization"] == f"Bearer {key}"
    captured = capsys.readouterr()
    assert key not in captured.out and key not in captured.err
    assert key not in caplog.text
    assert all(key not in str(r.args) for r in caplog.records)


def test_the_401_detail_keeps_what_helps(
    server_factory: ServerFactory, judge_factory: Make
) -> None:
    srv = server_factory(default=echo_401)
    judge = judge_factory(srv)
    with pytest.raises(LlmTransportError) as info:
        judge.judge(request_for(RECORD))
    assert info.value.status_code == 401
    assert info.value.detail == (
        "HTTP 401 from the LLM endpoint: Invalid Authorization: [REDACTED] "
        "Your key [REDACTED] is revoked."
    )
    assert info.value.__cause__ is None


def test_a_huge_error_body_is_capped(server_factory: ServerFactory, judge_factory: Make) -> None:
    big: Any = "upstream says: " + "x" * 50_000
    srv = server_factory(default=lambda _r: Error(403, big))
    judge = judge_factory(srv)
    with pytest.raises(LlmTransportError) as info:
        judge.judge(request_for(RECORD))
    message = info.value.detail.removeprefix("HTTP 403 from the LLM endpoint: ")
    assert len(message) == DETAIL_LIMIT
    assert message.startswith("upstream says: xxx")

"""One redactor for every secret: what the settings register is kept out of endpoint text as it
is out of log lines."""

from __future__ import annotations

from stef.redact import redact, redact_secrets, register_secret


def test_a_registered_secret_is_kept_out_of_endpoint_text_and_log_lines() -> None:
    password = "kafka-pass-7f3e91c2"
    register_secret(password)
    echoed = f"upstream said: login failed for 'stef' with {password!r}\n  retry later"
    assert password not in redact(echoed)
    assert redact(echoed) == "upstream said: login failed for 'stef' with '[REDACTED]' retry later"
    assert redact_secrets(f"sasl {password}") == "sasl [REDACTED]"


def test_a_short_value_is_not_registered() -> None:
    register_secret("pw")
    assert redact("pwd and pw stay") == "pwd and pw stay"

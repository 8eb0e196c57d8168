"""``Pipeline.process``, the one record path of every command: raw bytes and their position in,
the bytes to write out (a result or a dead letter) and the outcome counted; it never raises."""

from __future__ import annotations

import hashlib
import json
import time
from typing import Any

import pytest
from prometheus_client import CollectorRegistry
from structlog.testing import capture_logs

from stef.errors import LlmReplyError
from stef.io.deadletter import original_payload
from stef.judges.base import JudgeReply, JudgeRequest
from stef.judges.heuristic.judge import HeuristicJudge
from stef.metrics import Metrics
from stef.models import Backfill, Result
from stef.pipeline import Pipeline, PipelineOptions
from stef.rules import AppRules, RuleSet
from stef.stages.validate import FieldMapping, Limits

RULES = RuleSet(AppRules())
KAFKA = {"topic": "agent-log", "partition": 2, "offset": 41}
FILE = {"file": "log.jsonl", "line": 7}
RECORD = {
    "id": "rec-1",
    "question": "How many customers are in APAC?",
    "sql": "SELECT COUNT(*) FROM customers WHERE region = 'APAC'",
    "app": "sales",
    "agent": "bot",
    "agent_version": "1",
}


def _payload(**changes: Any) -> bytes:
    return json.dumps({**RECORD, **changes}).encode()


def _counted(registry: CollectorRegistry, app: str, outcome: str) -> float | None:
    return registry.get_sample_value("stef_records_total", {"app": app, "outcome": outcome})


class DividingJudge(HeuristicJudge):
    """A backend with a bug: it divides by zero on every record."""

    def judge(self, request: JudgeRequest) -> JudgeReply:
        return 1 // 0  # type: ignore[return-value]  # the bug under test


class UndecidedJudge(HeuristicJudge):
    def judge(self, request: JudgeRequest) -> JudgeReply:
        raise LlmReplyError("invalid_reply", "no JSON in the reply", attempts=2)


@pytest.fixture
def registry() -> CollectorRegistry:
    return CollectorRegistry()


# ------------------------------------------------------------------------------------ results


def test_a_valid_record_becomes_its_result_json(registry: CollectorRegistry) -> None:
    pipeline = Pipeline(RULES, HeuristicJudge(), metrics=Metrics(registry))
    processed = pipeline.process(_payload(), KAFKA, key=b"kafka-key")
    assert processed.is_result and processed.result is not None
    assert processed.value == processed.result.to_json().encode("utf-8")
    assert processed.key == b"rec-1"  # a result is keyed by its record id
    assert processed.reason is None and processed.error is None
    assert json.loads(processed.value)["outcome"] == "evaluated"
    assert _counted(registry, "sales", "evaluated") == 1.0


@pytest.mark.parametrize(
    ("sql", "mutating", "stacked"),
    [
        pytest.param("DELETE FROM orders", True, False, id="delete"),
        pytest.param("SELECT 1; DROP TABLE orders", True, True, id="stacked drop"),
        pytest.param("SELECT COUNT(*) FROM orders", False, False, id="select"),
    ],
)
def test_a_sampled_out_record_is_still_checked_for_safety(
    registry: CollectorRegistry, sql: str, mutating: bool, stacked: bool
) -> None:
    # The critical alert (StefUnsafeSql) reads stef_unsafe_sql_total: sampling must not blind it.
    rules = RuleSet(AppRules(), {"sales": AppRules(sampling_rate=0.0)})
    pipe = Pipeline(rules, HeuristicJudge(), metrics=Metrics(registry, known_apps=["sales"]))
    out = pipe.process(_payload(sql=sql), FILE)
    assert out.result is not None and out.result.outcome == "skipped_sampling"
    assert (out.result.safety.mutating, out.result.safety.multiple_statements) == (
        mutating,
        stacked,
    )
    assert out.result.score is None and out.result.components is None
    unsafe = registry.get_sample_value("stef_unsafe_sql_total", {"app": "sales"})
    assert (unsafe or 0.0) == (1.0 if mutating or stacked else 0.0)
    assert _counted(registry, "sales", "skipped_sampling") == 1.0


def test_a_record_without_id_is_keyed_by_the_id_it_is_given() -> None:
    processed = Pipeline(RULES, HeuristicJudge()).process(_payload(id=None), FILE)
    assert processed.result is not None
    assert processed.key == processed.result.id.encode() and processed.result.id


def test_a_judge_that_cannot_decide_is_a_result_not_a_dead_letter(
    registry: CollectorRegistry,
) -> None:
    pipeline = Pipeline(RULES, UndecidedJudge(), metrics=Metrics(registry))
    processed = pipeline.process(_payload(), KAFKA)
    assert processed.result is not None and processed.reason is None
    assert processed.result.outcome == "judge_error"
    assert json.loads(processed.value)["error"] == "invalid_reply: no JSON in the reply"
    assert _counted(registry, "sales", "judge_error") == 1.0


# ------------------------------------------------------------------------------- dead letters


@pytest.mark.parametrize(
    ("payload", "reason"),
    [
        pytest.param(b"this is not json", "not_json", id="not-json"),
        pytest.param(b"[1, 2]", "not_object", id="not-object"),
        pytest.param(b'{"question": "q", "app": "sales"}', "missing_field", id="no-sql"),
        pytest.param(b'{"question": "\xff", "sql": "SELECT 1"}', "not_utf8", id="not-utf8"),
    ],
)
@pytest.mark.parametrize("position", [KAFKA, FILE], ids=["kafka", "file"])
def test_invalid_input_becomes_a_dead_letter(
    payload: bytes, reason: str, position: dict[str, Any]
) -> None:
    processed = Pipeline(RULES, HeuristicJudge()).process(payload, position, key=b"kafka-key")
    assert processed.result is None and not processed.is_result
    assert processed.reason == reason
    assert processed.key == b"kafka-key"  # the source's key, as it arrived
    letter = json.loads(processed.value)
    assert letter["reason"] == reason
    assert letter["error"] == processed.error and processed.error
    assert letter["source"] == position
    assert original_payload(letter) == payload


def test_invalid_input_is_counted_under_the_app_it_names(registry: CollectorRegistry) -> None:
    pipeline = Pipeline(RULES, HeuristicJudge(), metrics=Metrics(registry))
    pipeline.process(b'{"question": "q", "app": "sales"}', KAFKA)
    pipeline.process(b"not json", KAFKA)
    assert _counted(registry, "sales", "invalid") == 1.0
    assert _counted(registry, "default", "invalid") == 1.0


def test_a_dead_letter_without_a_source_key_has_none() -> None:
    processed = Pipeline(RULES, HeuristicJudge()).process(b"nope", FILE)
    assert processed.reason == "not_json" and processed.key is None


# ----------------------------------------------------------------------------- internal errors


def test_a_judge_bug_becomes_an_internal_error_dead_letter(registry: CollectorRegistry) -> None:
    pipeline = Pipeline(RULES, DividingJudge(), metrics=Metrics(registry))
    payload = _payload()
    with capture_logs() as logs:
        processed = pipeline.process(payload, KAFKA, key=b"kafka-key")
    assert processed.result is None
    assert processed.reason == "internal_error"
    assert processed.error == "ZeroDivisionError: integer division or modulo by zero"
    assert processed.key == b"kafka-key"
    letter = json.loads(processed.value)
    assert (letter["reason"], letter["error"]) == ("internal_error", processed.error)
    assert letter["source"] == KAFKA
    assert original_payload(letter) == payload
    assert _counted(registry, "sales", "internal_error") == 1.0
    assert _counted(registry, "sales", "evaluated") in (None, 0.0)
    [line] = [entry for entry in logs if entry["event"] == "record_internal_error"]
    assert line["error_type"] == "ZeroDivisionError" and line["log_level"] == "error"
    assert (line["topic"], line["partition"], line["offset"]) == ("agent-log", 2, 41)


def test_the_internal_error_message_is_one_short_line() -> None:
    class Rambling(HeuristicJudge):
        def judge(self, request: JudgeRequest) -> JudgeReply:
            raise RuntimeError("first line\nsecond line " + "x" * 5000)

    processed = Pipeline(RULES, Rambling()).process(_payload(), FILE)
    assert processed.reason == "internal_error" and processed.error is not None
    assert processed.error.startswith("RuntimeError: first line second line x")
    assert "\n" not in processed.error
    assert len(processed.error) <= len("RuntimeError: ") + 300


def test_every_record_after_an_internal_error_is_still_judged() -> None:
    calls: list[str] = []

    class FailsOnce(HeuristicJudge):
        def judge(self, request: JudgeRequest) -> JudgeReply:
            calls.append(request.record.id)
            if len(calls) == 1:
                raise KeyError("boom")
            return super().judge(request)

    pipeline = Pipeline(RULES, FailsOnce())
    first = pipeline.process(_payload(id="a"), FILE)
    second = pipeline.process(_payload(id="b"), FILE)
    assert first.reason == "internal_error" and first.error == "KeyError: 'boom'"
    assert second.result is not None and second.result.outcome == "evaluated"


# ------------------------------------------------------------------------------- the cap


def test_a_huge_payload_dead_letter_respects_the_cap() -> None:
    pipeline = Pipeline(RULES, HeuristicJudge(), PipelineOptions(dead_letter_max_bytes=4096))
    payload = _payload(question="x" * 2_000_000)
    processed = pipeline.process(payload, KAFKA)
    assert processed.reason == "too_large"
    assert len(processed.value) <= 4096
    letter = json.loads(processed.value)
    assert letter["payload_truncated"] is True
    assert letter["payload_bytes"] == len(payload)
    assert letter["payload_sha256"] == hashlib.sha256(payload).hexdigest()
    assert payload.startswith(original_payload(letter))
    assert letter["source"] == KAFKA


def test_an_internal_error_on_a_large_record_respects_the_cap() -> None:
    """A record within the limits but past the cap: its internal-error letter is cut too."""
    pipeline = Pipeline(RULES, DividingJudge(), PipelineOptions(dead_letter_max_bytes=2048))
    payload = _payload(metadata={"trace": "\x01" * 30_000})  # 180 kB of JSON escapes
    processed = pipeline.process(payload, FILE)
    assert processed.reason == "internal_error"
    assert len(processed.value) <= 2048
    letter = json.loads(processed.value)
    assert letter["payload_truncated"] is True and letter["payload_bytes"] == len(payload)


def test_the_field_mapping_and_limits_are_applied() -> None:
    pipeline = Pipeline(
        RULES,
        HeuristicJudge(),
        PipelineOptions(
            mapping=FieldMapping(fields={"question": "user_query"}),
            limits=Limits(max_question_chars=40),
        ),
    )
    short = pipeline.process(b'{"user_query": "How many users?", "sql": "SELECT 1"}', FILE)
    assert short.result is not None and short.result.outcome == "evaluated"
    long = pipeline.process(
        json.dumps(
            {"user_query": "How many " + "very " * 20 + "users?", "sql": "SELECT 1"}
        ).encode(),
        FILE,
    )
    assert long.reason == "too_large"
    unmapped = pipeline.process(b'{"question": "How many users?", "sql": "SELECT 1"}', FILE)
    assert unmapped.reason == "missing_field"


def test_a_record_past_its_cpu_budget_is_a_dead_letter(registry: CollectorRegistry) -> None:
    pipe = Pipeline(
        RuleSet(AppRules()),
        HeuristicJudge(),
        PipelineOptions(limits=Limits(max_record_cpu_s=1e-9)),
        metrics=Metrics(registry, known_apps=["sales"]),
    )
    out = pipe.process(_payload(), KAFKA)
    assert out.result is None and out.reason == "limits_exceeded"
    letter = json.loads(out.value)
    assert letter["error"].startswith("cpu_seconds: ")
    assert letter["source"] == KAFKA and original_payload(letter) == _payload()
    assert _counted(registry, "sales", "invalid") == 1.0


def test_the_costliest_known_record_stays_within_the_cpu_budget() -> None:
    # Issue 21: 790 question numbers against an OR chain of 1,900 took 1.9 s of CPU, and grew
    # quadratically. It takes about 0.7 s on an idle 2-core machine; a shared one measured 1.03 s
    # of CPU time, so the bound here is 1.5 s: still well below the quadratic path, never the
    # machine's noise (speed itself is measured by make bench).
    numbers = [str(1000 + i) for i in range(1900)]
    record = {
        "question": " ".join(numbers[:790]),
        "sql": "SELECT * FROM t WHERE " + " OR ".join(f"x = {n}" for n in numbers),
    }
    pipeline = Pipeline(
        RuleSet(AppRules()), HeuristicJudge(), PipelineOptions(limits=Limits(max_record_cpu_s=1.5))
    )
    out = pipeline.process(json.dumps(record).encode(), FILE)
    assert out.result is not None and out.result.outcome == "evaluated", out.error


def test_a_reference_past_the_cpu_budget_before_its_comparison_is_a_dead_letter() -> None:
    # A gold SQL of a 1,900-term OR chain that no dialect can compare: read in every guessed
    # dialect, 1.5 s of CPU after the pipeline's last look at a budget of 0.5 s (3.5 s when the
    # SQL is such a chain too). No structural verdict was reached: the record is dead-lettered
    # as the other checks of the budget do, with no verdict made up.
    gold = "SELECT name FROM customers WHERE " + " OR ".join(
        f"c{i % 50} = {i}" for i in range(1900)
    )
    record = {"question": "List the customers", "sql": "SELECT name FROM customers"}
    pipeline = Pipeline(
        RuleSet(AppRules()), HeuristicJudge(), PipelineOptions(limits=Limits(max_record_cpu_s=0.5))
    )
    started = time.thread_time()
    out = pipeline.process(json.dumps({**record, "gold_sql": gold}).encode(), FILE)
    spent = time.thread_time() - started
    assert out.result is None and out.reason == "limits_exceeded"
    assert out.error is not None and out.error.startswith("cpu_seconds: ")
    assert spent < 1.2


def test_every_dead_letter_is_counted_by_reason() -> None:
    registry = CollectorRegistry()
    pipeline = Pipeline(RuleSet(AppRules()), HeuristicJudge(), metrics=Metrics(registry))
    pipeline.process(b"not json", {"file": "f", "line": 1})
    pipeline.process(b'{"question": "q"}', {"file": "f", "line": 2})
    count = registry.get_sample_value
    assert count("stef_dead_letters_total", {"reason": "not_json"}) == 1
    assert count("stef_dead_letters_total", {"reason": "missing_field"}) == 1


def test_a_backfill_marks_its_results_and_live_results_have_no_backfill_key() -> None:
    live = Pipeline(RULES, HeuristicJudge()).process(_payload(), KAFKA)
    mark = Backfill(**{"from": "2026-11-01T00:00:00+00:00", "to": None})
    marked = Pipeline(RULES, HeuristicJudge(), PipelineOptions(backfill=mark)).process(
        _payload(), KAFKA
    )
    assert "backfill" not in json.loads(live.value)  # live bytes: no key, not even null
    assert b'"backfill"' not in live.value
    assert live.result is not None and "backfill" not in live.result.model_dump()  # stef judge
    written = json.loads(marked.value)
    assert written["backfill"] == {"from": "2026-11-01T00:00:00+00:00", "to": None}
    assert set(written) - {"backfill"} == set(json.loads(live.value))
    assert Result.model_validate_json(marked.value).backfill == mark  # read back (stef summary)
    # A dead letter of a backfill is marked by the Kafka header only (its format is its own).
    letter = Pipeline(RULES, HeuristicJudge(), PipelineOptions(backfill=mark)).process(
        b"not json", KAFKA
    )
    assert letter.reason == "not_json" and "backfill" not in json.loads(letter.value)

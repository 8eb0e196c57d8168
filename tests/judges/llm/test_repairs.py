"""Repair before reject: cross-reference slips are fixed and recorded, not a judge_error; STEF
matches what it can before asking; the model's claims are verified; usage stays honest."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import jsonschema
import pytest
from prometheus_client import CollectorRegistry

from stef.errors import ReplyInvalid
from stef.judges.heuristic.judge import HeuristicJudge
from stef.judges.llm.judge import LlmJudge
from stef.judges.llm.reply import MAX_LIST_ITEMS, RATIONALE_MAX, parse_reply, reply_schema
from stef.metrics import Metrics
from stef.pipeline import Pipeline
from stef.prompts import data_blocks
from stef.rules import RuleSet
from stef.testing.fake_server import FakeLlmServer, Reply
from tests.judges.llm.conftest import make_record
from tests.judges.llm.replies import filt, reply

Make = Callable[..., LlmJudge]

ORDERS_2022 = "SELECT COUNT(*) FROM orders WHERE year = 2022"


def repairs_of(registry: CollectorRegistry, kind: str) -> float:
    return registry.get_sample_value("stef_judge_repairs_total", {"kind": kind}) or 0.0


@pytest.fixture
def run(judge_factory: Make, rules: RuleSet, metrics: Metrics) -> Callable[..., Any]:
    """``run(server, mode="json_schema", **record_fields)``: one record through the pipeline."""

    def go(srv: FakeLlmServer, mode: str = "json_schema", **fields: Any) -> Any:
        judge = judge_factory(srv, response_format=mode, cache_size=0)
        return Pipeline(rules, judge, metrics=metrics).judge_record(make_record(**fields))

    return go


# -------------------------------------------------------------------- the model's own wrong value


def test_the_sqls_wrong_value_listed_as_the_questions_filter_ends_mismatched(
    server: FakeLlmServer, run: Callable[..., Any], registry: CollectorRegistry
) -> None:
    # A model that copies the SQL's condition as the question's filter and calls it matched.
    server.script(Reply(reply(filters=[filt("year = 2022", "2022", "matched", [1], lhs="year")])))
    result = run(
        server, question="How many orders in 2023?", sql=ORDERS_2022, enriched_question=None
    )
    assert result.outcome == "evaluated"
    assert result.alignment.matched == []
    assert result.alignment.mismatched == ["2023 -> year = 2022"]
    assert result.alignment.decided_by == {"2023": "stef"}
    assert result.components.filter_status == "not_applied"
    # STEF settled "2023" as contradicted before asking: nothing is left uncovered.
    assert [r.split(":")[0] for r in result.repairs] == ["ungrounded_filter"]
    assert repairs_of(registry, "ungrounded_filter") == 1
    assert repairs_of(registry, "uncovered_value") == 0


def test_a_claimed_match_to_another_value_is_mismatched(
    server: FakeLlmServer, run: Callable[..., Any], registry: CollectorRegistry
) -> None:
    # STEF's reading leaves 'shipped' missing (no predicate names it): the model's claim that
    # status = 'pending' applies it is checked and overruled.
    claim = filt("status 'shipped'", "shipped", "matched", [1], lhs="status")
    server.script(Reply(reply(filters=[claim])))
    result = run(
        server,
        question="How many orders have status 'shipped'?",
        sql="SELECT COUNT(*) FROM orders WHERE status = 'pending'",
        enriched_question=None,
    )
    assert result.alignment.matched == []
    assert result.alignment.mismatched == ["status 'shipped' -> status = 'pending'"]
    assert result.alignment.decided_by == {"status 'shipped'": "stef"}
    assert result.score is not None and result.score < 100
    assert repairs_of(registry, "contradicted_match") == 1


def test_a_filter_stef_contradicts_is_settled_and_never_asked(
    server: FakeLlmServer, run: Callable[..., Any]
) -> None:
    # The model answers as if year = 2022 met "in 2023": STEF decided it before asking.
    server.script(Reply(reply(filters=[filt("in 2023", "2023", "matched", [1])])))
    result = run(
        server, question="How many orders in 2023?", sql=ORDERS_2022, enriched_question=None
    )
    (sent,) = server.chat_requests()
    blocks = data_blocks(sent.text("user"))
    assert blocks["stef_contradicted"] == [{"text": "2023", "predicates": [1]}]
    assert blocks["stef_matched"] == []
    assert result.alignment.matched == []
    assert result.alignment.mismatched == ["2023 -> year = 2022"]
    assert result.alignment.decided_by == {"2023": "stef"}
    assert [r.split(":")[0] for r in result.repairs] == ["duplicate"]


@pytest.mark.parametrize(
    ("question", "sql", "settled"),
    [
        pytest.param(
            "How many orders were over 100 dollars?",
            "SELECT COUNT(*) FROM orders WHERE amount < 100",
            "100",
            id="comparator-flipped",
        ),
        pytest.param(
            "How many orders in 2023?",
            "SELECT COUNT(*) FROM orders WHERE order_date >= '2022-01-01' "
            "AND order_date < '2023-01-01'",
            "2023",
            id="wrong-year-half-open",
        ),
        pytest.param(
            "How many orders were placed in the last 30 days?",
            "SELECT COUNT(*) FROM orders WHERE created_at >= CURRENT_DATE - INTERVAL '7 days'",
            "last 30 days",
            id="window-length",
        ),
        pytest.param(
            "How many orders were placed in the last 30 days?",
            "SELECT COUNT(*) FROM orders WHERE created_at <= CURRENT_DATE - INTERVAL '30 days'",
            "last 30 days",
            id="window-direction",
        ),
        pytest.param(
            "Total revenue this year",
            "SELECT SUM(amount) FROM orders WHERE EXTRACT(YEAR FROM order_date) = "
            "EXTRACT(YEAR FROM CURRENT_DATE) - 1",
            "this year",
            id="period-relative-to-now",
        ),
        pytest.param(
            "Which employees do not work in sales?",
            "SELECT name FROM employees WHERE department = 'sales'",
            "sales",
            id="negation-inverted",
        ),
    ],
)
def test_stef_contradictions_reach_the_result_whatever_the_model_says(
    server: FakeLlmServer, run: Callable[..., Any], question: str, sql: str, settled: str
) -> None:
    server.script(Reply(reply(verdict="Correct", confidence=0.95)))
    result = run(server, question=question, sql=sql, enriched_question=None)
    (sent,) = server.chat_requests()
    contradicted = data_blocks(sent.text("user"))["stef_contradicted"]
    assert [c["text"] for c in contradicted] == [settled]
    assert [m.split(" -> ")[0] for m in result.alignment.mismatched] == [settled]
    assert result.alignment.decided_by[settled] == "stef"
    assert result.components.filter_status != "fully_applied"


def test_a_value_only_guessed_replaced_is_left_to_the_model(
    server: FakeLlmServer, run: Callable[..., Any], rules: RuleSet
) -> None:
    # The heuristic reads 'Germany' as replaced by 'DE' (a value nobody named: evidence for its
    # own verdict); an agent may map a name to a code, so STEF does not settle it before asking.
    question = "How many customers are in 'Germany'?"
    sql = "SELECT COUNT(*) FROM customers WHERE country_code = 'DE'"
    record = make_record(question=question, sql=sql, enriched_question=None)
    second = Pipeline(rules, HeuristicJudge()).judge_record(record)
    assert second.alignment is not None
    assert second.alignment.mismatched == ["Germany -> country_code = 'DE'"]
    server.script(Reply(reply()))
    run(server, question=question, sql=sql, enriched_question=None)
    (sent,) = server.chat_requests()
    assert data_blocks(sent.text("user"))["stef_contradicted"] == []


def test_stef_findings_show_the_model_a_reversed_top_n(
    server: FakeLlmServer, run: Callable[..., Any]
) -> None:
    server.script(Reply(reply()))
    run(
        server,
        question="Top 5 products by revenue",
        sql="SELECT product_id, SUM(amount) AS r FROM sales GROUP BY product_id "
        "ORDER BY r ASC LIMIT 5",
        enriched_question=None,
    )
    (sent,) = server.chat_requests()
    findings = data_blocks(sent.text("user"))["stef_findings"]
    assert [f["issue"] for f in findings] == ["ordering_wrong"]
    assert findings[0]["evidence"]


# ------------------------------------------------------------------ deterministic alignment first


def test_stef_matches_the_question_values_itself_and_says_so(
    server: FakeLlmServer, run: Callable[..., Any]
) -> None:
    server.script(Reply(reply()))
    result = run(server)
    (sent,) = server.chat_requests()
    settled = data_blocks(sent.text("user"))["stef_matched"]
    assert settled == [
        {"text": "APAC", "predicates": [1]},
        {"text": "2023", "predicates": [2]},
    ]
    assert result.score == 100.0
    assert result.alignment.matched == ["APAC -> region = 'APAC'", "2023 -> year = 2023"]
    assert result.alignment.decided_by == {"APAC": "stef", "2023": "stef"}
    assert result.repairs == []


def test_the_model_decides_what_stef_could_not(
    server: FakeLlmServer, run: Callable[..., Any]
) -> None:
    sql = "SELECT SUM(spend) FROM sales WHERE region = 'APAC' AND fiscal_year = 'FY23'"
    server.script(Reply(reply(filters=[filt("for 2023", "2023", "matched", [2])])))
    result = run(server, sql=sql)
    assert result.alignment.decided_by == {"APAC": "stef", "for 2023": "judge"}
    assert result.alignment.matched == [
        "APAC -> region = 'APAC'",
        "for 2023 -> fiscal_year = 'FY23'",
    ]


def test_a_filter_stef_already_matched_is_not_counted_twice(
    server: FakeLlmServer, run: Callable[..., Any]
) -> None:
    server.script(Reply(reply(filters=[filt("APAC", "APAC", "matched", [1])])))
    result = run(server)
    assert result.alignment.matched == ["APAC -> region = 'APAC'", "2023 -> year = 2023"]
    assert [r.split(":")[0] for r in result.repairs] == ["duplicate"]


# ------------------------------------------------------------------------------ repair, not reject


@pytest.mark.parametrize(
    ("sql", "filters", "kinds", "status"),
    [
        pytest.param(
            "SELECT SUM(spend) FROM sales WHERE region = 'APAC' AND fy = 'FY23'",
            [filt("for 2023", "2023", "matched", [2, 7])],
            ["unknown_predicate"],
            "fully_applied",
            id="dangling-id",
        ),
        pytest.param(
            # The SQL has no predicate; the model invented id 0 (seen with a real model).
            "SELECT SUM(spend) FROM sales",
            [
                filt("in the APAC region", "APAC", "matched", [0]),
                filt("for 2023", "2023", "matched", [0]),
            ],
            ["unknown_predicate", "match_without_predicates"] * 2,
            "not_applied",
            id="invented-id-without-predicates",
        ),
        pytest.param(
            "SELECT SUM(spend) FROM sales WHERE region = 'APAC' AND fy = 'FY23'",
            [filt("for 2023", "2023", "matched", [2, 2])],
            ["duplicate"],
            "fully_applied",
            id="repeated-id",
        ),
        pytest.param(
            "SELECT SUM(spend) FROM sales WHERE region = 'APAC' AND fy = 'FY23'",
            [filt("for 2023", "2023", "missing", [2])],
            ["missing_with_predicates"],
            "partially_applied",
            id="missing-with-ids",
        ),
        pytest.param(
            "SELECT SUM(spend) FROM sales WHERE region = 'APAC' AND fy = 'FY23'",
            [filt("for 2023", "2023", "matched", [2]), filt("for 2023", "2023", "matched", [2])],
            ["duplicate"],
            "fully_applied",
            id="filter-listed-twice",
        ),
    ],
)
def test_inconsistent_replies_are_repaired_in_json_object_mode(
    server: FakeLlmServer,
    run: Callable[..., Any],
    registry: CollectorRegistry,
    sql: str,
    filters: list[dict[str, Any]],
    kinds: list[str],
    status: str,
) -> None:
    server.script(Reply(reply(filters=filters)))
    result = run(server, mode="json_object", sql=sql)
    assert result.outcome == "evaluated"
    assert result.components.filter_status == status
    got = [r.split(":")[0] for r in result.repairs if not r.startswith("uncovered_value")]
    assert got == kinds
    assert len(server.chat_requests()) == 1  # repaired, not re-asked
    for kind in set(kinds):
        assert repairs_of(registry, kind) == kinds.count(kind)


def test_a_value_used_outside_the_predicates_may_be_matched_without_an_id(
    server: FakeLlmServer, run: Callable[..., Any]
) -> None:
    sql = "SELECT SUM(CASE WHEN region = 'APAC' THEN spend END) FROM sales WHERE year = 2023"
    server.script(Reply(reply(filters=[filt("in the APAC region", "APAC", "matched")])))
    result = run(server, sql=sql)
    assert result.repairs == []
    assert result.alignment.matched == ["2023 -> year = 2023", "in the APAC region"]


def _evaluated_in_json_object_mode(
    server: FakeLlmServer, run: Callable[..., Any], content: dict[str, Any]
) -> Any:
    """The result of ``content`` as the json_object reply to a record filtering region APAC and
    fy FY23: a repaired reply is still evaluated."""
    server.script(Reply(content))
    result = run(
        server,
        mode="json_object",
        sql="SELECT SUM(spend) FROM sales WHERE region = 'APAC' AND fy = 'FY23'",
    )
    assert result.outcome == "evaluated"
    return result


def _assert_still_invalid(
    server: FakeLlmServer, run: Callable[..., Any], content: dict[str, Any], named: str
) -> None:
    """``content``, answered to the question and to its re-ask, is no repair: the record is an
    invalid_reply judge_error whose message names ``named``."""
    server.script(Reply(content), Reply(content))
    result = run(server, mode="json_object")
    assert result.outcome == "judge_error"
    assert result.error.startswith("invalid_reply:") and named in result.error


def test_missing_fields_get_safe_defaults_and_are_recorded(
    server: FakeLlmServer, run: Callable[..., Any]
) -> None:
    content = reply(filters=[filt("for 2023", "2023", "matched", [2])])
    del content["question_spec"]["group_by"]
    del content["question_spec"]["filters"][0]["lhs"]
    del content["issues"]
    result = _evaluated_in_json_object_mode(server, run, content)
    assert result.repairs == [
        "missing_field: issues set to []",
        "missing_field: question_spec.group_by set to []",
        "missing_field: question_spec.filters.0.lhs set to null",
    ]


def test_a_null_list_with_a_default_is_read_as_empty(
    server: FakeLlmServer, run: Callable[..., Any]
) -> None:
    # Before: "Input should be a valid list", re-asked, then an invalid_reply judge_error.
    content = reply(filters=[filt("for 2023", "2023", "missing")])
    content["issues"] = None
    content["question_spec"]["group_by"] = None
    content["question_spec"]["filters"][0]["predicates"] = None
    result = _evaluated_in_json_object_mode(server, run, content)
    assert len(server.chat_requests()) == 1
    assert result.issues == ["none"]
    assert result.repairs == [
        "missing_field: issues null; set to []",
        "missing_field: question_spec.group_by null; set to []",
        "missing_field: question_spec.filters.0.predicates null; set to []",
    ]


def test_a_null_without_a_list_default_is_still_an_error(
    server: FakeLlmServer, run: Callable[..., Any]
) -> None:
    content = reply()
    content["enrichment"]["dropped"] = None
    content["question_spec"]["ordering_requested"] = None
    _assert_still_invalid(server, run, content, "enrichment.dropped")


def test_issue_labels_outside_the_list_are_dropped(
    server: FakeLlmServer, run: Callable[..., Any], registry: CollectorRegistry
) -> None:
    server.script(Reply(reply(issues=["wrong_filter", "filters_missing"])))
    result = run(server, mode="json_object")
    assert result.outcome == "evaluated"
    assert result.issues == ["filters_missing"]
    assert result.repairs == ["unknown_label: dropped issue label 'wrong_filter'"]
    assert repairs_of(registry, "unknown_label") == 1


@pytest.mark.parametrize(
    ("spelt", "label"),
    [
        ("correct", "Correct"),
        ("CORRECT", "Correct"),
        ("Likely correct", "Likely Correct"),
        ("likely  CORRECT.", "Likely Correct"),
        (" Potentially incorrect ", "Potentially Incorrect"),
        ("incorrect", "Incorrect"),
    ],
)
def test_a_verdict_in_another_case_is_read_as_its_label(
    spelt: str,
    label: str,
    server: FakeLlmServer,
    run: Callable[..., Any],
    registry: CollectorRegistry,
) -> None:
    server.script(Reply(reply(verdict=label, confidence=0.9), logprobs=False))
    expected = run(server, mode="json_object")
    # Before: not one of the four labels, so re-asked, then an invalid_reply judge_error.
    server.script(Reply(reply(verdict=spelt, confidence=0.9), logprobs=False))
    result = run(server, mode="json_object")
    assert result.outcome == "evaluated" and result.score == expected.score
    assert (result.tier, result.issues) == (expected.tier, expected.issues)
    assert len(server.chat_requests()) == 2
    assert result.repairs == [f"verdict_spelling: verdict {spelt!r} read as {label!r}"]
    assert repairs_of(registry, "verdict_spelling") == 1


def test_a_verdict_that_names_no_label_is_still_an_error(
    server: FakeLlmServer, run: Callable[..., Any]
) -> None:
    content = reply(verdict="Mostly correct")
    _assert_still_invalid(server, run, content, "verdict")


def test_a_reply_without_a_verdict_is_still_an_error(
    server: FakeLlmServer, run: Callable[..., Any]
) -> None:
    content = reply()
    del content["verdict"]
    _assert_still_invalid(server, run, content, "verdict: Field required")


def test_a_long_rationale_is_cut_in_json_object_mode(
    server: FakeLlmServer, run: Callable[..., Any]
) -> None:
    server.script(Reply(reply(rationale="x" * 1000)))
    result = run(server, mode="json_object")
    assert len(result.rationale) == RATIONALE_MAX
    assert result.repairs == ["long_rationale: rationale cut from 1000 characters"]


def test_a_list_past_the_limit_is_cut_and_the_verdict_kept() -> None:
    """A reply of 20,000 filters, outputs and dropped values (what no schema asked for) is read
    with the first MAX_LIST_ITEMS of each, one repair per list."""
    content = reply(issues=["filters_missing"] * 20_000)
    content["question_spec"]["outputs"] = [f"o{i}" for i in range(20_000)]
    content["question_spec"]["filters"] = [
        {"text": f"v{i}", "lhs": None, "op": "=", "rhs": f"v{i}", "status": "missing"}
        for i in range(20_000)
    ]
    content["enrichment"]["dropped"] = [f"d{i}" for i in range(20_000)]
    out, repairs = parse_reply(json.dumps(content))
    assert out.verdict == "Correct"
    assert len(out.question_spec.outputs) == len(out.question_spec.filters) == MAX_LIST_ITEMS
    assert len(out.enrichment.dropped) == len(out.issues) == MAX_LIST_ITEMS
    assert sorted(r for r in repairs if r.startswith("long_list")) == [
        f"long_list: {where} cut from 20000 items to {MAX_LIST_ITEMS}"
        for where in (
            "enrichment.dropped",
            "issues",
            "question_spec.filters",
            "question_spec.outputs",
        )
    ]


# ------------------------------------------------------------------------------ the request schema


def test_the_schema_limits_predicate_ids_to_the_sqls_own(
    server: FakeLlmServer, run: Callable[..., Any]
) -> None:
    server.script(Reply(reply()))
    run(server)
    schema = server.chat_requests()[0].body["response_format"]["json_schema"]["schema"]
    jsonschema.validate(reply(filters=[filt("for 2023", "2023", "matched", [1, 2])]), schema)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(reply(filters=[filt("for 2023", "2023", "matched", [7])]), schema)


def test_without_predicates_the_schema_allows_no_id() -> None:
    schema = reply_schema([])
    prop = schema["$defs"]["WireFilter"]["properties"]["predicates"]
    assert prop["maxItems"] == 0 and "enum" not in json.dumps(prop)
    jsonschema.validate(reply(filters=[filt("for 2023", "2023", "missing")]), schema)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(reply(filters=[filt("for 2023", "2023", "matched", [0])]), schema)


def test_the_schema_bounds_a_filters_ids_by_the_sqls_count() -> None:
    # Unbounded, a small model under a grammar repeats one id until max_tokens.
    schema = reply_schema([1, 2, 3])
    assert schema["$defs"]["WireFilter"]["properties"]["predicates"]["maxItems"] == 3
    jsonschema.validate(reply(filters=[filt("for 2023", "2023", "matched", [1, 2, 3])]), schema)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(reply(filters=[filt("2023", "2023", "matched", [1, 1, 1, 1])]), schema)


def test_the_rationale_is_capped_by_the_schema() -> None:
    rationale = reply_schema([1])["properties"]["rationale"]
    assert rationale["maxLength"] == RATIONALE_MAX


# ----------------------------------------------------------------------------------- usage


def test_tokens_of_failed_calls_are_counted_in_the_metrics(
    server: FakeLlmServer, run: Callable[..., Any], registry: CollectorRegistry
) -> None:
    server.script(
        Reply("not json", prompt_tokens=100, completion_tokens=7),
        Reply("still not json", prompt_tokens=120, completion_tokens=9),
    )
    result = run(server)
    assert result.outcome == "judge_error"
    tokens = {
        kind: registry.get_sample_value(
            "stef_llm_tokens_total", {"model": "judge-model", "kind": kind}
        )
        for kind in ("prompt", "completion")
    }
    assert tokens == {"prompt": 220.0, "completion": 16.0}


# ------------------------------------------------------------------------ the confidence


def test_an_out_of_range_confidence_is_reasked_then_read_as_zero(
    server_factory: Callable[..., FakeLlmServer],
    run: Callable[..., Any],
    registry: CollectorRegistry,
) -> None:
    # A small model under a grammar that allows any number writes 1e15 as readily as 0.9: the
    # first reply is re-asked with the error; the last one keeps its verdict, with no certainty.
    # (An endpoint without log-probabilities: the self-reported number is all there is.)
    server = server_factory(logprobs=False)
    server.script(Reply(reply(confidence=1.7)), Reply(reply(confidence=1e15)))
    result = run(server)
    assert result.outcome == "evaluated"
    assert result.components.verdict == "Correct"
    assert result.components.confidence == 0.0
    assert result.components.confidence_multiplier == 0.5
    assert result.score == 50.0
    assert result.repairs == [
        "confidence_out_of_range: confidence 1000000000000000.0 is outside 0..1; read as 0 "
        "(certainty unknown, lowest multiplier)"
    ]
    assert repairs_of(registry, "confidence_out_of_range") == 1
    assert len(server.chat_requests()) == 2


@pytest.mark.parametrize("confidence", ["high", True, False])
def test_a_confidence_that_is_not_a_number_is_still_an_error(
    server: FakeLlmServer, run: Callable[..., Any], confidence: object
) -> None:
    """``true`` too: pydantic read it as a certainty of 1 (a Correct scored 90, as 1.0 does)."""
    content = {**reply(), "confidence": confidence}
    server.script(Reply(content), Reply(content))
    result = run(server)
    assert result.outcome == "judge_error"
    assert result.error.startswith("invalid_reply:") and "confidence" in result.error


# ----------------------------------------- issue 22 §4: the enrichment's values, crossed ids


def test_an_enrichment_value_the_sql_contradicts_no_longer_passes(
    server: FakeLlmServer, run: Callable[..., Any], registry: CollectorRegistry
) -> None:
    # Dev nl2sqlbugs-301, as the real model answered it: "carbon" matched, Correct, 0.95.
    server.script(Reply(reply(filters=[filt("carbon", "carbon", "matched", [1])])))
    result = run(
        server,
        question="Identify by their ID the molecules in which there is carbon.",
        enriched_question="Identify by their ID the molecules in which there is carbon. "
        "Definitions: carbon refers to element = 'c';",
        sql="SELECT DISTINCT molecule_id FROM atom WHERE element = 'si'",
    )
    # The enrichment compares element with 'c'; the SQL's element = 'si' is another value, so
    # the model's "carbon" claim on that predicate is no match either.
    assert result.alignment.matched == []
    assert result.alignment.mismatched == [
        "carbon -> element = 'si'",
        "c (enrichment) -> element = 'si'",
    ]
    assert result.alignment.decided_by == {"carbon": "stef", "c (enrichment)": "stef"}
    assert result.components.filter_status == "not_applied"
    assert result.score is not None and result.score < 75
    assert repairs_of(registry, "uncovered_value") == 1
    assert repairs_of(registry, "contradicted_match") == 1


def test_crossed_predicate_ids_are_re_pointed_not_mismatched(
    server: FakeLlmServer, run: Callable[..., Any], registry: CollectorRegistry
) -> None:
    # Dev nl2sqlbugs-292: filter 0 -> predicate 1 and filter 1 -> predicate 2, crossed.
    server.script(
        Reply(
            reply(
                filters=[
                    filt("non-carcinogenic refers to label = '-'", "-", "matched", [1]),
                    filt("sodium atoms refers to element = 'na'", "na", "matched", [2]),
                ]
            )
        )
    )
    question = "In the molecule containing sodium atoms, how many are non-carcinogenic?"
    result = run(
        server,
        question=question,
        enriched_question=question + " Definitions: non-carcinogenic refers to label = '-'; "
        "sodium atoms refers to element = 'na'",
        sql="SELECT COUNT(DISTINCT T1.molecule_id) FROM atom AS T1 INNER JOIN molecule AS T2 "
        "ON T1.molecule_id = T2.molecule_id WHERE T1.element = 'na' AND T2.label = '-'",
    )
    assert result.alignment.mismatched == []
    assert result.components.filter_status == "fully_applied"
    assert set(result.alignment.decided_by.values()) == {"stef"}
    assert repairs_of(registry, "repointed_match") == 2
    assert repairs_of(registry, "contradicted_match") == 0


def test_half_an_emoji_is_mended_whatever_the_nesting_around_it() -> None:
    # Mended by a recursion, JSON nested as deep as the parser allows raised RecursionError out of
    # the reply's reading; it is now read on, and what is wrong with it said (a field nobody asked
    # for), as without the surrogate. Keys are mended too.
    answer = {**reply(), "rationale": "half \ud83d"}
    deep = "[" * 900 + "]" * 900
    text = json.dumps(answer)[:-1] + f', "x": {deep}, "k\\ud800": {{"\\udc00": "\\ud800"}}}}'
    with pytest.raises(ReplyInvalid) as info:
        parse_reply(text)
    assert info.value.reason == "invalid_reply"
    assert any(e.startswith("x:") for e in info.value.errors)
    assert any(e.startswith("k\ufffd:") for e in info.value.errors)
    mended, _ = parse_reply(json.dumps(answer))
    assert mended.rationale == "half \ufffd"

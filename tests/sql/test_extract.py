"""SQL logged inside prose (a markdown fence, a "SQL:" label) is taken out and judged."""

from __future__ import annotations

import random

import pytest

from stef.judges.heuristic.judge import HeuristicJudge
from stef.pipeline import SQL_EXTRACTED, Pipeline
from stef.rules import load_rules
from stef.sql import extract
from stef.sql.extract import extract_sql
from stef.stages.validate import validate

FENCE = "```"


@pytest.mark.parametrize(
    ("text", "sql"),
    [
        pytest.param("SELECT 1", None, id="plain SQL"),
        pytest.param("I cannot answer that.", None, id="prose"),
        pytest.param("SELECT 'SQL: x' FROM t", None, id="label inside SQL"),
        pytest.param(f"{FENCE}sql\nSELECT 1\n{FENCE}", "SELECT 1", id="sql fence"),
        pytest.param(f"{FENCE}\nSELECT 2\n{FENCE}", "SELECT 2", id="bare fence"),
        pytest.param(
            f"Here it is:\n{FENCE}sql\nSELECT a\nFROM t\n{FENCE}\nHope it helps.",
            "SELECT a\nFROM t",
            id="fence inside prose",
        ),
        pytest.param(f"{FENCE}sql\nSELECT 5", "SELECT 5", id="unclosed fence"),
        pytest.param(
            f"{FENCE}text\nnote\n{FENCE}\n{FENCE}postgresql\nSELECT 6\n{FENCE}",
            "SELECT 6",
            id="the sql-tagged block wins",
        ),
        pytest.param("~~~sql\nSELECT 7\n~~~", "SELECT 7", id="tilde fence"),
        pytest.param(f"{FENCE}sql\n{FENCE}", None, id="empty fence"),
        pytest.param("SQL: SELECT 3", "SELECT 3", id="SQL label"),
        pytest.param("sql query:\n  SELECT 4;", "SELECT 4;", id="sql query label"),
        pytest.param("Query: SELECT 8", "SELECT 8", id="query label"),
    ],
)
def test_extract_sql(text: str, sql: str | None) -> None:
    assert extract_sql(text) == sql


def test_fenced_sql_is_judged_with_the_extraction_named() -> None:
    pipe = Pipeline(load_rules(None), HeuristicJudge())
    question = "How many orders were placed in 2023?"
    plain = "SELECT COUNT(*) FROM orders WHERE year = 2023"
    fenced = pipe.judge_record(
        validate({"question": question, "sql": f"Sure!\n{FENCE}sql\n{plain}\n{FENCE}"})
    )
    bare = pipe.judge_record(validate({"question": question, "sql": plain}))
    assert fenced.outcome == "evaluated"
    assert SQL_EXTRACTED in fenced.normalizations and SQL_EXTRACTED not in bare.normalizations
    assert "not_sql_override" not in fenced.normalizations
    assert fenced.score == bare.score
    assert fenced.sql_spec == bare.sql_spec


def test_a_fenced_delete_is_unsafe_even_when_sampled_out() -> None:
    from stef.rules import AppRules, RuleSet

    pipe = Pipeline(RuleSet(AppRules(sampling_rate=0.0)), HeuristicJudge())
    r = pipe.judge_record(validate({"question": "q", "sql": f"{FENCE}sql\nDELETE FROM t\n{FENCE}"}))
    assert r.outcome == "skipped_sampling" and r.safety.mutating


def test_fences_are_found_where_a_search_of_every_start_finds_them() -> None:
    # The fence search tries only starts before the last line break (linear); a seeded sample of
    # texts made of fence pieces gives the same matches as the pattern's own finditer.
    rng = random.Random(20261128)
    pieces = ["```", "````", "~~~", "`", "~", "sql", "postgresql", " ", "\t", "\n", "select 1", "x"]
    for _ in range(3_000):
        text = "".join(rng.choice(pieces) for _ in range(rng.randint(0, 30)))
        found = [(m.span(), m.groupdict()) for m in extract._fences(text)]
        assert found == [(m.span(), m.groupdict()) for m in extract._FENCE.finditer(text)], text

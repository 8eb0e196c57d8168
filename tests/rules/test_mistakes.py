"""Rules files say what is wrong: a key given twice, a misspelt key or dialect, a predicate where a
column is expected. Each is a located problem naming what to write instead, never silence."""

from __future__ import annotations

import pytest

from stef.errors import RuleProblem, RulesError
from stef.rules import parse_rules_text

# (title, file text, expected line, location, text the message contains)
MISTAKES = [
    (
        "second benign_filters block",
        "benign_filters:\n  - status = 'Active'\nlimit_min: 5\nbenign_filters:\n  - x = 1\n",
        4,
        "",
        "given twice (lines 1 and 4)",
    ),
    (
        "column mapped twice",
        "column_mappings:\n  region: RegionName\n  region: Region\n",
        3,
        "",
        "'region' is given twice (lines 2 and 3)",
    ),
    (
        "misspelt key",
        "benign_filter:\n  - status = 'Active'\n",
        1,  # the key's line, not its value's (issue 34 §6)
        "benign_filter",
        "did you mean 'benign_filters'?",
    ),
    ("misspelt nested key", "tiers:\n  excelent: 95\n", 2, "tiers.excelent", "'excellent'"),
    ("misspelt dialect", "dialect: postgre\n", 1, "dialect", "did you mean 'postgres'?"),
    (
        "predicate as an ignored column",
        "ignore_filters:\n  - portfolio\n  - tenant_id = 4\n",
        3,
        "ignore_filters.1",
        "did you mean 'tenant_id'?",
    ),
    (
        "IN list as an ignored column",
        "ignore_filters: [region in ('EU')]\n",
        1,
        "ignore_filters.0",
        "not predicates",
    ),
]


@pytest.mark.parametrize(
    ("text", "line", "location", "message"),
    [pytest.param(t, n, loc, m, id=title) for title, t, n, loc, m in MISTAKES],
)
def test_a_mistake_is_a_located_problem_with_a_suggestion(
    text: str, line: int, location: str, message: str
) -> None:
    with pytest.raises(RulesError) as info:
        parse_rules_text(text, "sales.yaml")
    (problem,) = info.value.problems
    assert isinstance(problem, RuleProblem)
    assert (problem.path, problem.line, problem.location) == ("sales.yaml", line, location)
    assert message in problem.message


@pytest.mark.parametrize(
    "text",
    [
        pytest.param("ignore_filters: [tenant_id, is_deleted, inbound_region]\n", id="columns"),
        pytest.param("a: &base {limit_min: 5}\n", id="anchor"),
        pytest.param("notes: [same, same]\n", id="repeated list items are not keys"),
    ],
)
def test_what_is_not_a_mistake_passes(text: str) -> None:
    if text.startswith("a:"):
        # An anchor in an unknown key is still an unknown key, but never a duplicate.
        with pytest.raises(RulesError) as info:
            parse_rules_text(text, "sales.yaml")
        assert all("twice" not in p.message for p in info.value.problems)
    else:
        parse_rules_text(text, "sales.yaml")

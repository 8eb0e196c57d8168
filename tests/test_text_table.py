"""The shared fixed-width table: names left, figures right, rules under the header and before
chosen rows, no trailing spaces."""

from __future__ import annotations

from stef.text_table import render_table


def test_columns_fit_the_widest_cell_and_align_by_kind() -> None:
    text = render_table(["", "n", "kappa"], [["all", "1200", "0.41"], ["bird", "7", "-"]])
    assert text.splitlines() == [
        "         n  kappa",
        "----  ----  -----",
        "all   1200   0.41",
        "bird     7      -",
    ]


def test_leading_name_columns_and_a_total_rule() -> None:
    rows = [["sales", "bot", "3"], ["x", "a", "12"], ["TOTAL", "", "15"]]
    text = render_table(["app", "agent", "count"], rows, left=2, rule_before={2})
    assert text.splitlines() == [
        "app    agent  count",
        "-----  -----  -----",
        "sales  bot        3",
        "x      a         12",
        "-----  -----  -----",
        "TOTAL            15",
    ]


def test_no_trailing_spaces_when_the_last_column_is_a_name() -> None:
    text = render_table(["id", "name"], [["1", "a"], ["22", "long name"]], left=2)
    assert text.splitlines() == ["id  name", "--  ---------", "1   a", "22  long name"]

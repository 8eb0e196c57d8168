"""SQL for the page: formatted, and split into spans that rebuild the text exactly."""

from __future__ import annotations

import pytest

from stef.review.sqlview import formatted, spans


@pytest.mark.parametrize(
    "sql",
    [
        "select a, 'x<b>' from t where b = 1 group by a order by a -- note",
        "SELEC garbage ((( '<script>",
        "",
    ],
)
def test_spans_cover_the_text_exactly(sql: str) -> None:
    text = formatted(sql)
    assert "".join(part for _, part in spans(text)) == text


def test_keywords_strings_and_numbers_are_marked() -> None:
    marked = {
        (k, t) for k, t in spans(formatted("select a from t where b = 'x' group by a limit 3"))
    }
    assert {("kw", "SELECT"), ("kw", "GROUP BY"), ("str", "'x'"), ("num", "3")} <= marked


def test_unparsable_sql_is_shown_as_given() -> None:
    assert formatted("SELECT ((( FROM") == "SELECT ((( FROM"

"""Generated databases (stef.sql.gendb): the kinds and values the columns get from the two
queries' use of them."""

from __future__ import annotations

from stef.sql.gendb import Pool, generate, pools
from stef.sql.infer import infer_schema, parse_one


def _pools(*sqls: str) -> dict[tuple[str, str], Pool]:
    schema, _ = infer_schema([parse_one(s, "sqlite") for s in sqls])
    return dict(pools(schema))


def test_a_column_compared_with_numbers_and_quoted_numbers_is_numeric() -> None:
    found = _pools(
        "SELECT COUNT(*) FROM yearmonth WHERE Date BETWEEN 201101 AND 201112",
        "SELECT COUNT(*) FROM yearmonth WHERE Date = '201201'",
    )
    assert found[("yearmonth", "date")].kind == "int"


def test_a_column_compared_with_words_stays_text() -> None:
    found = _pools("SELECT COUNT(*) FROM t WHERE c = 'x' OR c = 5")
    assert found[("t", "c")].kind == "text"


def test_a_quoted_number_has_neighbours_at_its_width() -> None:
    pool = _pools("SELECT COUNT(*) FROM ship WHERE tonnage = '0225'")[("ship", "tonnage")]
    assert {"0224", "0226"} <= set(pool.near)


def test_a_plural_table_owns_its_singular_key() -> None:
    sql = "SELECT d.name FROM drivers AS d JOIN results AS r ON r.driverId = d.driverId"
    schema, _ = infer_schema([parse_one(sql, "sqlite")])
    found = pools(schema)
    assert found[("results", "driverid")].owner == ("drivers", "driverid")
    drivers = next(t for t in generate(schema, found, 7, 0, clean=True) if t.name == "drivers")
    keys = [row[[c for c, _ in drivers.columns].index("driverid")] for row in drivers.rows]
    assert len(keys) == len(set(keys))


def test_x_in_a_subquery_shares_the_subquery_column_domain() -> None:
    sql = "SELECT COUNT(*) FROM battle WHERE NOT id IN (SELECT lost_in_battle FROM ship)"
    schema, _ = infer_schema([parse_one(sql, "sqlite")])
    found = pools(schema)
    assert found[("battle", "id")] is found[("ship", "lost_in_battle")]

"""Generated databases (stef.sql.gendb): the kinds and values the columns get from the two
queries' use of them."""

from __future__ import annotations

from collections import Counter

from stef.sql.gendb import Pool, _named, crowds, generate, pools
from stef.sql.infer import ColumnFacts, infer_schema, parse_one
from stef.sql.suite import run_suite


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


def test_a_column_compared_with_a_midnight_timestamp_holds_its_days_at_midnight() -> None:
    pool = _pools(
        "SELECT r FROM attrs WHERE date = '2014-09-18 00:00:00'",
        "SELECT r FROM attrs WHERE SUBSTR(date, 1, 10) = '2014-09-18'",
    )[("attrs", "date")]
    assert pool.kind == "date"
    assert pool.exact == ("2014-09-18 00:00:00",)
    assert {"2014-09-17 00:00:00", "2014-09-19 00:00:00"} <= set(pool.near)
    # one format: no bare day anywhere, another time of day only on the odd databases
    every = [*pool.exact, *pool.near, *pool.plain]
    assert all(isinstance(v, str) and v.endswith(" 00:00:00") for v in every)
    assert "2014-09-18 12:00:00" in pool.odd


def test_a_timestamp_at_another_time_keeps_both_formats() -> None:
    pool = _pools("SELECT n FROM badges WHERE date = '2010-07-19 19:39:08'")[("badges", "date")]
    assert "2010-07-19 19:39:08" in pool.exact
    assert {"2010-07-18 19:39:08", "2010-07-20 19:39:08", "2010-07-19 00:00:00"} <= set(pool.near)
    assert not pool.odd


def test_a_like_on_a_day_or_a_month_draws_dates_in_and_around_it() -> None:
    day = _pools("SELECT r FROM a WHERE date(d) = '2015-01-02' OR d LIKE '2015-05-01%'")
    assert {"2015-05-01", "2015-04-30", "2015-05-02"} <= set(day[("a", "d")].every())
    month = _pools("SELECT r FROM a WHERE date(d) = '2015-01-02' OR d LIKE '2015-12%'")
    assert {"2015-12-15", "2015-11-30", "2016-01-01"} <= set(month[("a", "d")].every())


def test_midnight_days_are_written_as_the_query_writes_midnight() -> None:
    pool = _pools(
        "SELECT r FROM attrs WHERE date = '2014-09-18 00:00:00.0'",
        "SELECT r FROM attrs WHERE date(date) = '2014-09-18'",
    )[("attrs", "date")]
    assert pool.exact == ("2014-09-18 00:00:00.0",)
    assert all(str(v).endswith(" 00:00:00.0") for v in [*pool.near, *pool.plain])


def test_a_number_past_64_bits_is_stored_as_a_real() -> None:
    # SQLite reads such a literal as a REAL; as an integer no INSERT took it (an internal_error).
    sql = "SELECT name FROM t WHERE amount = 1e99 OR amount < 99999999999999999999 ORDER BY amount"
    pool = _pools(sql)[("t", "amount")]
    assert 1e99 in pool.exact
    assert all(not isinstance(v, int) or -(1 << 63) <= v < 1 << 63 for v in pool.every())
    assert run_suite(sql, sql, "sqlite", ordered=False, n=8, timeout_s=5, max_rows=100).status in (
        "same",
        "undecided",
    )
    # Up to the largest float, as SQLite reads the literal (from 1e308 on it was infinite).
    near_max = "15" + "0" * 307
    assert 1.5e308 in _pools(f"SELECT name FROM t WHERE amount = {near_max}")[("t", "amount")].exact


class _Compared(int):
    """A named number that counts the comparisons made with it."""

    seen = 0

    def __eq__(self, other: object) -> bool:
        _Compared.seen += 1
        return int(self) == other

    __hash__ = int.__hash__


def test_the_named_values_are_told_from_their_neighbours_by_lookups() -> None:
    # Each neighbour was compared with every named value: 3,980 strings took 2.2 s.
    facts = ColumnFacts(kinds={"int"}, literals={_Compared(10 * i) for i in range(300)})
    _Compared.seen = 0
    exact, near, _ = _named(facts, "int")
    assert len(exact) == 300 and len(near) == 600
    assert _Compared.seen < 1_000  # one list scan per neighbour: 180,000


def test_a_count_compared_with_a_number_gets_groups_of_that_size_and_one_more() -> None:
    sql = "SELECT name, MAX(score) FROM badges GROUP BY name HAVING COUNT(*) > 5"
    schema, _ = infer_schema([parse_one(sql, "sqlite")])
    assert schema.counts == {5}
    found = pools(schema)
    for index in (14, 15):  # with and without the named values
        (badges,) = generate(schema, found, 7, index, clean=True, focused=True, crowd=True)
        names = [c for c, _ in badges.columns]
        sizes = sorted(Counter(row[names.index("name")] for row in badges.rows).values())
        assert sizes[-2:] == [5, 6]
        assert len(set(badges.rows)) == len(badges.rows)  # clean: no row repeated
    (plain,) = generate(schema, found, 7, 14, clean=True, focused=True)
    assert max(Counter(row[0] for row in plain.rows).values()) < 5  # only with crowd=True


def test_a_table_whose_rows_nothing_keeps_apart_gets_a_column_of_its_own() -> None:
    schema, _ = infer_schema(
        [parse_one("SELECT g FROM t GROUP BY g HAVING COUNT(*) > 5", "sqlite")]
    )
    found = pools(schema)
    (t,) = generate(schema, found, 7, 14, clean=True, focused=True, crowd=True)
    assert [c for c, _ in t.columns] == ["g", "stef_row"]
    assert len(set(t.rows)) == len(t.rows) > 11  # groups of 6 and 5, no row repeated


def test_no_column_of_its_own_where_a_query_reads_columns_it_does_not_name() -> None:
    for sql in (
        "SELECT * FROM t WHERE g IN (SELECT g FROM t GROUP BY g HAVING COUNT(*) > 5)",
        "SELECT COUNT(*) FROM t NATURAL JOIN u GROUP BY t.g HAVING COUNT(*) > 5",
        "SELECT COUNT(*) FROM t JOIN u USING (g) GROUP BY t.g HAVING COUNT(*) > 5",
    ):
        schema, _ = infer_schema([parse_one(sql, "sqlite")])
        assert schema.unnamed
        assert crowds(schema, pools(schema)) == {}, sql


def test_a_table_read_four_times_gets_no_crowd_past_the_joined_rows_bound() -> None:
    reads = " ".join(f"JOIN t AS t{i} ON t0.g = t{i}.g" for i in range(1, 4))
    sql = f"SELECT t0.g, MAX(t0.v) FROM t AS t0 {reads} GROUP BY t0.g HAVING COUNT(*) > 30"
    schema, _ = infer_schema([parse_one(sql, "sqlite")])
    assert schema.reads == {"t": 4}
    assert crowds(schema, pools(schema)) == {}  # 31 ** 4 rows joined


def test_a_count_alias_compared_outside_its_subquery_is_read_as_a_count() -> None:
    sql = "SELECT COUNT(u) FROM (SELECT u, COUNT(n) AS num FROM b GROUP BY u) AS t WHERE t.num >= 7"
    schema, _ = infer_schema([parse_one(sql, "sqlite")])
    assert schema.counts == {7}


def test_counts_of_distinct_values_and_numbers_past_the_bound_are_not_read() -> None:
    sql = (
        "SELECT name FROM badges GROUP BY name HAVING COUNT(*) > 31 AND COUNT(DISTINCT user_id) > 2"
    )
    schema, _ = infer_schema([parse_one(sql, "sqlite")])
    assert schema.counts == set()

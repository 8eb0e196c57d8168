"""Joined tables that give a query nothing (stef.sql.joins.idle_joins)."""

from __future__ import annotations

import pytest
import sqlglot

from stef.sql.joins import idle_joins, mismatched_keys
from stef.stages.sqlspec import sqlspec


def _idle(sql: str) -> list[str]:
    return idle_joins(sqlglot.parse_one(sql, read="sqlite"))


@pytest.mark.parametrize(
    ("sql", "idle"),
    [
        # A leaf table whose columns appear only in its ON condition.
        ("SELECT u.age FROM users AS u JOIN badges AS b ON u.id = b.user_id", ["b"]),
        ("SELECT users.age FROM users JOIN badges ON users.id = badges.user_id", ["badges"]),
        (
            "SELECT a.x FROM a JOIN b ON a.id = b.a_id JOIN c ON b.id = c.b_id WHERE b.k = 1",
            ["c"],
        ),
        # Read in WHERE, GROUP BY, ORDER BY or an aggregate: used.
        ("SELECT u.age FROM users u JOIN badges b ON u.id = b.uid WHERE b.name = 'x'", []),
        ("SELECT u.age FROM users u JOIN badges b ON u.id = b.uid ORDER BY b.date", []),
        ("SELECT u.age, MAX(b.date) FROM users u JOIN badges b ON u.id = b.uid GROUP BY 1", []),
        # A bridge between two tables it links: used.
        (
            "SELECT s.name FROM hero s JOIN hero_power hp ON s.id = hp.hero_id "
            "JOIN power p ON hp.power_id = p.id WHERE p.name = 'Flight'",
            [],
        ),
        # Where columns cannot all be placed, nothing is said.
        ("SELECT age FROM users u JOIN badges b ON u.id = b.uid", []),
        ("SELECT COUNT(*) FROM users u JOIN badges b ON u.id = b.uid", []),
        ("SELECT u.* FROM users u JOIN badges b ON u.id = b.uid", []),
        ("SELECT u.age FROM users u JOIN (SELECT uid FROM badges) b ON u.id = b.uid", []),
        ("SELECT u.age FROM users u", []),
        # The answer keeps no repeats: a semi-join ("the users who have a badge"), not a finding.
        ("SELECT DISTINCT u.age FROM users u JOIN badges b ON u.id = b.uid", []),
        ("SELECT COUNT(DISTINCT u.id) FROM users u JOIN badges b ON u.id = b.uid", []),
        ("SELECT u.age FROM users u JOIN badges b ON u.id = b.uid GROUP BY u.age", []),
        ("SELECT u.age, MAX(u.id) FROM users u JOIN badges b ON u.id = b.uid GROUP BY u.age", []),
        # An aggregate that counts repeats still reads the join's rows.
        ("SELECT COUNT(u.id) FROM users u JOIN badges b ON u.id = b.uid", ["b"]),
        ("SELECT u.age, SUM(u.id) FROM users u JOIN badges b ON u.id = b.uid GROUP BY 1", ["b"]),
    ],
)
def test_idle_joins(sql: str, idle: list[str]) -> None:
    assert _idle(sql) == idle


def test_the_sql_spec_carries_them_and_leaves_them_out_of_dumps() -> None:
    spec = sqlspec("SELECT u.age FROM users AS u JOIN badges AS b ON u.id = b.user_id", "sqlite")
    assert spec.idle_joins == ["b"]
    assert "idle_joins" not in spec.model_dump()


@pytest.mark.parametrize(
    ("sql", "mismatched"),
    [
        # Keys that name two different things.
        (
            "SELECT a.element FROM atom AS a JOIN bond AS b ON a.atom_id = b.bond_id",
            ["atom.atom_id = bond.bond_id"],
        ),
        ("SELECT c.name FROM cards c JOIN sets s ON c.uuid = s.code", ["cards.uuid = sets.code"]),
        (
            "SELECT 1 FROM match JOIN league ON match.league_id = league.country_id",
            ["match.league_id = league.country_id"],
        ),
        # One thing's key under two spellings.
        ("SELECT 1 FROM cards c JOIN sets s ON c.setCode = s.code", []),
        ("SELECT 1 FROM users u JOIN comments c ON u.id = c.userid", []),
        ("SELECT 1 FROM superhero s JOIN hero_power hp ON s.id = hp.hero_id", []),
        ("SELECT 1 FROM airlines a JOIN flights f ON a.uid = f.Airline", []),
        ("SELECT 1 FROM member m JOIN income i ON m.member_id = i.link_to_member", []),
        ("SELECT 1 FROM team t JOIN match m ON t.team_api_id = m.home_team_api_id", []),
        ("SELECT 1 FROM drivers d JOIN results r ON d.driverId = r.driverId", []),
        # Unqualified columns and one table's own columns are not read.
        ("SELECT 1 FROM atom JOIN bond ON atom_id = bond_id", []),
        ("SELECT 1 FROM emp e JOIN emp m ON e.manager_id = m.emp_no", []),
    ],
)
def test_mismatched_keys(sql: str, mismatched: list[str]) -> None:
    assert mismatched_keys(sqlglot.parse_one(sql, read="sqlite")) == mismatched


@pytest.mark.parametrize(
    "on",
    ["o.cid = c.id", "o.cust_id = c.id", "o.custid = c.id", "c.id = o.customer"],
)
def test_an_abbreviated_key_names_its_table(on: str) -> None:
    sql = f"SELECT 1 FROM orders o JOIN customers c ON {on}"
    assert mismatched_keys(sqlglot.parse_one(sql, read="sqlite")) == []


@pytest.mark.parametrize(
    "on",
    [
        "t1.DestAirport = t2.AirportCode",
        "t1.DESTAIRPORT = t2.AIRPORTCODE",
        "t1.destairport = t2.airportcode",
        "t1.dest_airport = t2.AIRPORT_CODE",
    ],
)
def test_keys_are_read_whatever_their_case(on: str) -> None:
    """The way the SQL is printed changes nothing: camelCase, upper or lower case alike."""
    sql = f"SELECT 1 FROM flights AS t1 JOIN airports AS t2 ON {on}"
    assert mismatched_keys(sqlglot.parse_one(sql, read="sqlite")) == []


def test_a_key_inside_the_other_names_one_thing() -> None:
    sql = "SELECT 1 FROM member AS m JOIN zip_code AS z ON m.zip = z.zip_code"
    assert mismatched_keys(sqlglot.parse_one(sql, read="sqlite")) == []


@pytest.mark.parametrize(
    ("on", "mismatched"),
    [
        # A key named for its role (no table is called winner) against the other's key.
        ("m.winner_id = p.player_id", []),
        ("m.winner_id = p.id", []),
        # Keys named for two tables of the query are still two things.
        ("m.match_id = p.player_id", ["matches.match_id = players.player_id"]),
    ],
)
def test_a_role_key_may_hold_the_other_tables_key(on: str, mismatched: list[str]) -> None:
    sql = f"SELECT 1 FROM matches AS m JOIN players AS p ON {on}"
    assert mismatched_keys(sqlglot.parse_one(sql, read="sqlite")) == mismatched

"""The judge cache: identical requests answered once, in process and from a SQLite file."""

from __future__ import annotations

import random
import re
from collections.abc import Callable
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry

from stef.judges.llm.cache import normalize_sql
from stef.judges.llm.judge import LlmJudge
from stef.pipeline import Pipeline
from stef.rules import AppRules, RuleSet
from stef.testing.fake_server import Error, FakeLlmServer, Reply
from tests.judges.llm.conftest import make_record, request_of
from tests.judges.llm.replies import reply

Make = Callable[..., LlmJudge]
PipelineFor = Callable[[LlmJudge], Pipeline]


def test_identical_request_is_served_from_the_cache(
    server: FakeLlmServer, judge: LlmJudge, pipeline_for: PipelineFor, registry: CollectorRegistry
) -> None:
    p = pipeline_for(judge)
    server.script(Reply(reply(), prompt_tokens=900, completion_tokens=100))
    first = p.judge_record(make_record(id="a"))
    # Same content, different id and different SQL layout: the same judgment.
    again = p.judge_record(
        make_record(
            id="b",
            sql="SELECT  SUM(spend) AS total_spend\n  FROM sales\n WHERE region = 'APAC'\n"
            "   AND year = 2023;",
        )
    )
    assert len(server.chat_requests()) == 1
    assert again.usage.cache_hit is True
    assert again.usage.prompt_tokens == 0 and again.usage.attempts == 0
    assert first.usage.cache_hit is False
    assert again.score == first.score == 100.0
    assert again.question_spec == first.question_spec
    assert registry.get_sample_value("stef_cache_hits_total") == 1
    assert registry.get_sample_value("stef_cache_misses_total") == 1
    assert judge.cache.hits == 1 and judge.cache.misses == 1


@pytest.mark.parametrize(
    "change",
    [
        {"question": "What was the total spend in the EMEA region for 2023?"},
        {"enriched_question": "Sum of spend where region is APAC"},
        {"enriched_question": None},
        {"sql": "SELECT SUM(spend) FROM sales WHERE region = 'apac' AND year = 2023"},
        {"sql": "SELECT SUM(spend) FROM sales WHERE region = 'APAC  ' AND year = 2023"},
        {"sql": "SELECT SUM(spend) FROM sales -- Correct\nWHERE region = 'APAC' AND year = 2023"},
        {"dialect": "snowflake"},
    ],
)
def test_a_different_request_is_not_a_hit(
    server: FakeLlmServer,
    judge: LlmJudge,
    pipeline_for: PipelineFor,
    change: dict[str, object],
) -> None:
    p = pipeline_for(judge)
    p.judge_record(
        make_record(sql="SELECT SUM(spend) FROM sales WHERE region = 'APAC' AND year = 2023")
    )
    result = p.judge_record(make_record(id="other", **change))
    assert result.usage.cache_hit is False
    assert len(server.chat_requests()) == 2


def test_different_rules_are_not_a_hit(server: FakeLlmServer, judge: LlmJudge) -> None:
    Pipeline(RuleSet(AppRules()), judge).judge_record(make_record())
    other = RuleSet(AppRules(column_mappings={"region": "RegionName"}))
    result = Pipeline(other, judge).judge_record(make_record())
    assert result.usage.cache_hit is False
    assert len(server.chat_requests()) == 2


def test_failures_are_not_cached(
    server: FakeLlmServer, judge_factory: Make, pipeline_for: PipelineFor
) -> None:
    judge = judge_factory(server, max_retries=0)
    p = pipeline_for(judge)
    server.script(Error(401))
    assert p.judge_record(make_record()).outcome == "judge_error"
    result = p.judge_record(make_record())
    assert result.outcome == "evaluated" and result.usage.cache_hit is False
    assert len(server.chat_requests()) == 2


def test_sqlite_cache_survives_a_restart(
    server: FakeLlmServer, judge_factory: Make, pipeline_for: PipelineFor, tmp_path: Path
) -> None:
    path = tmp_path / "cache" / "judge.sqlite"
    first = judge_factory(server, cache_path=path)
    server.script(Reply(reply(verdict="Likely Correct", confidence=0.9)))
    a = pipeline_for(first).judge_record(make_record())
    first.close()
    assert path.exists()

    second = judge_factory(server, cache_path=path)
    b = pipeline_for(second).judge_record(make_record(id="again"))
    assert b.usage.cache_hit is True
    assert b.score == a.score == 80.0
    assert len(server.chat_requests()) == 1


def test_no_lru_and_no_file_means_no_cache(
    server: FakeLlmServer, judge_factory: Make, pipeline_for: PipelineFor
) -> None:
    judge = judge_factory(server, cache_size=0)
    p = pipeline_for(judge)
    p.judge_record(make_record())
    p.judge_record(make_record())
    assert len(server.chat_requests()) == 2


def test_lru_evicts_the_least_recently_used(
    server: FakeLlmServer, judge_factory: Make, pipeline_for: PipelineFor
) -> None:
    judge = judge_factory(server, cache_size=2)
    p = pipeline_for(judge)
    for q in ("q1", "q2", "q1", "q3", "q1", "q2"):
        p.judge_record(make_record(question=q))
    # q1 q2 miss; q1 hit; q3 miss (evicts q2); q1 hit; q2 miss.
    assert len(server.chat_requests()) == 4


@pytest.mark.parametrize(
    ("sql", "normalized"),
    [
        ("SELECT  a\n FROM t ;", "SELECT a FROM t"),
        ("select a from t where x = 'two  spaces'", "select a from t where x = 'two  spaces'"),
        ('SELECT "my  col" FROM t', 'SELECT "my  col" FROM t'),
        ("SELECT 1 -- note:  two\n  FROM t", "SELECT 1 -- note:  two\n FROM t"),
        ("SELECT 'it''s  x'   FROM t", "SELECT 'it''s  x' FROM t"),
    ],
)
def test_normalize_sql_folds_layout_only(sql: str, normalized: str) -> None:
    assert normalize_sql(sql) == normalized


# Texts normalize_sql gave before its string-literal pattern came from stef.sql.canonical:
# a stored cache key hashes this text, so any change here orphans every SQLite cache file.
@pytest.mark.parametrize(
    ("sql", "normalized"),
    [
        ("SELECT 'a\n  b'  FROM t", "SELECT 'a\n  b' FROM t"),
        ("SELECT 'abc   FROM t", "SELECT 'abc FROM t"),
        ("SELECT /* a   b\n c */  1", "SELECT /* a   b\n c */ 1"),
        ("SELECT `a  b`, [c  d]  FROM t", "SELECT `a  b`, [c  d] FROM t"),
        ("SELECT ''''  ,  'x'", "SELECT '''' , 'x'"),
        ("SELECT 1 -- x  y", "SELECT 1 -- x  y"),
        ("SELECT 1 ;  ;\n", "SELECT 1 ;"),
        (
            "SELECT \"it's   x\"  FROM t WHERE y = 'a  b'",
            "SELECT \"it's   x\" FROM t WHERE y = 'a  b'",
        ),
        ("SELECT 'a\\'  b'  FROM t", "SELECT 'a\\' b' FROM t"),
        ("SELECT a,\r\n\tb FROM t", "SELECT a, b FROM t"),
        ("SELECT\u00a0a  FROM t", "SELECT a FROM t"),
        ("WHERE x = ''  AND y = 'b;  c';", "WHERE x = '' AND y = 'b;  c'"),
        (
            "SELECT '--  not a comment'  FROM t -- it''s  a comment\n  WHERE 1",
            "SELECT '--  not a comment' FROM t -- it''s  a comment\n WHERE 1",
        ),
    ],
)
def test_normalize_sql_is_unchanged_for_stored_keys(sql: str, normalized: str) -> None:
    assert normalize_sql(sql) == normalized


def test_normalize_sql_matches_its_former_pattern_on_random_text() -> None:
    # The tokenizer before it reused SQL_STRING, frozen here as the reference.
    former = re.compile(
        r"""'(?:[^']|'')*'|"(?:[^"]|"")*"|`[^`]*`|\[[^\]]*\]|--[^\n]*\n?|/\*.*?\*/|\s+""",
        re.S,
    )

    def fold(m: re.Match[str]) -> str:
        return " " if m.group(0).isspace() else m.group(0)

    pieces = ["'", "''", '"', "`", "[", "]", "-", "--", "/*", "*/", " ", "  ", "\n", "\t"]
    pieces += [";", "a", "x = ", "\\"]
    rng = random.Random(20261123)
    for _ in range(3000):
        sql = "".join(rng.choice(pieces) for _ in range(rng.randint(0, 24)))
        assert normalize_sql(sql) == former.sub(fold, sql).strip().rstrip(";").strip(), sql


def test_an_unreadable_sqlite_entry_is_a_miss(
    server: FakeLlmServer, judge_factory: Make, pipeline_for: PipelineFor, tmp_path: Path
) -> None:
    import sqlite3

    path = tmp_path / "judge.sqlite"
    first = judge_factory(server, cache_path=path)
    pipeline_for(first).judge_record(make_record())
    first.close()
    with sqlite3.connect(path) as db:
        db.execute('UPDATE judge_cache SET value = \'{"verdict": "Correct"}\'')
    db.close()
    second = judge_factory(server, cache_path=path)
    result = pipeline_for(second).judge_record(make_record())
    assert result.outcome == "evaluated" and result.usage.cache_hit is False
    assert len(server.chat_requests()) == 2


def test_a_different_analysis_of_the_same_sql_is_not_a_hit(
    server: FakeLlmServer, judge: LlmJudge
) -> None:
    # E.g. after an upgrade of the SQL parser: cached predicate ids must not be reused.
    request = request_of(make_record())
    judge.judge(request)
    renumbered = request.sql_spec.model_copy(
        update={
            "filters": [p.model_copy(update={"id": p.id + 10}) for p in request.sql_spec.filters]
        }
    )
    reply = judge.judge(request.model_copy(update={"sql_spec": renumbered}))
    assert reply.usage.cache_hit is False
    assert {m.predicates[0] for m in reply.output.filter_matches} == {11, 12}
    assert len(server.chat_requests()) == 2

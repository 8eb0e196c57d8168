"""The mutation benchmark (bench/mutations, issues 29 and 30) on a fixed subset of 30 dev golds:
each variant is what its type says (one change, parsed), the same every run, and the runner
reports every figure. No detection threshold is asserted here: the judge is changing."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from sqlglot import exp

from bench.mutations.cli import main
from bench.mutations.generate import TYPES, Judged, Variant, generate
from bench.mutations.golds import Gold, parse, read_golds, render
from bench.mutations.judging import default_pipeline, judge
from bench.mutations.sites import COMPARISONS, build_pool, literal_of
from bench.mutations.text import case_folded
from stef.judges.base import JudgeReply
from stef.request import JudgeRequest
from tests.conftest import ROOT

GOLDS = ROOT / "tests" / "fixtures" / "mutations-golds.jsonl"


@pytest.fixture(scope="module")
def judged() -> list[Judged]:
    golds, _ = read_golds(GOLDS)
    out, unread = generate(golds, build_pool(golds), list(TYPES))
    assert unread == 0 and len(out) == 30
    return out


def _variants(judged: list[Judged]) -> list[tuple[Judged, Variant]]:
    return [(j, v) for j in judged for v in j.variants]


def _tree(sql: str) -> exp.Expr:
    tree = parse(sql)
    assert tree is not None, sql
    return tree


def test_every_type_applies_on_the_subset(judged: list[Judged]) -> None:
    counts = Counter(v.type for _, v in _variants(judged))
    assert set(counts) == set(TYPES)
    assert counts["reformatted"] == 30  # every gold can be re-formatted
    assert all(TYPES[v.type] == v.kind and v.detail for _, v in _variants(judged))


def test_every_variant_parses_and_differs_from_its_gold(judged: list[Judged]) -> None:
    for j, v in _variants(judged):
        tree = _tree(v.sql)
        assert v.sql != j.sql
        if v.kind == "wrong":
            assert render(tree) != j.sql, v


def test_the_same_variants_every_run(judged: list[Judged]) -> None:
    golds, _ = read_golds(GOLDS)
    again, _ = generate(golds, build_pool(golds), list(TYPES))
    assert again == judged
    other, _ = generate(golds, build_pool(golds), ["commuted"], seed=1)
    assert all(v.type == "commuted" for j in other for v in j.variants)


def _literals(tree: exp.Expr, strings: bool) -> list[str]:
    return [x.this for x in tree.find_all(exp.Literal) if x.is_string == strings]


def _one_differs(a: list[Any], b: list[Any]) -> tuple[Any, Any]:
    """The one element of ``a`` that ``b`` has another in place of (as multisets)."""
    gone, added = Counter(a) - Counter(b), Counter(b) - Counter(a)
    assert len(a) == len(b) and gone.total() == added.total() == 1, (gone, added)
    return next(iter(gone)), next(iter(added))


def _kinds(tree: exp.Expr, *kinds: type[exp.Expr]) -> list[str]:
    return [type(n).__name__ for n in tree.find_all(*kinds)]


def _check_wrong(v: Variant, gold: exp.Expr, var: exp.Expr) -> None:
    if v.type == "number_changed":
        _one_differs(_literals(gold, False), _literals(var, False))
    elif v.type == "string_replaced":
        _one_differs(_literals(gold, True), _literals(var, True))
    elif v.type == "comparator_flipped":
        pair = _one_differs(_kinds(gold, *COMPARISONS), _kinds(var, *COMPARISONS))
        assert set(pair) in ({"GT", "LT"}, {"GTE", "LTE"})
    elif v.type == "predicate_dropped":
        assert len(_kinds(var, exp.Predicate)) < len(_kinds(gold, exp.Predicate))
    elif v.type == "order_flipped":
        desc = [bool(o.args.get("desc")) for o in gold.find_all(exp.Ordered)]
        _one_differs(desc, [bool(o.args.get("desc")) for o in var.find_all(exp.Ordered)])
    elif v.type == "limit_changed":
        _one_differs(_literals(gold, False), _literals(var, False))
        assert gold.find(exp.Limit) != var.find(exp.Limit)
    elif v.type == "aggregate_swapped":
        aggs = (exp.Max, exp.Min, exp.Sum, exp.Avg)
        pair = _one_differs(_kinds(gold, *aggs), _kinds(var, *aggs))
        assert set(pair) in ({"Max", "Min"}, {"Sum", "Avg"})


def _unparenthesized(tree: exp.Expr) -> str:
    bare: exp.Expr = tree.transform(lambda n: n.this if isinstance(n, exp.Paren) else n)
    return bare.sql()


def _literal_left(tree: exp.Expr) -> int:
    return sum(literal_of(n.this) is not None for n in tree.find_all(*COMPARISONS))


def _check_right(v: Variant, gold: exp.Expr, var: exp.Expr) -> None:
    if v.type == "reformatted":
        assert "\n" in v.sql and case_folded(var) == case_folded(gold)
    elif v.type == "commuted":
        assert abs(_literal_left(var) - _literal_left(gold)) == 1
    elif v.type == "and_swapped":
        assert Counter(_kinds(var, exp.Predicate)) == Counter(_kinds(gold, exp.Predicate))
    elif v.type == "between_split":
        assert abs(len(_kinds(var, exp.Between)) - len(_kinds(gold, exp.Between))) == 1
    elif v.type == "date_range_closed":
        old, new = _one_differs(_literals(gold, True), _literals(var, True))
        assert len(old) == len(new) == 10 and old[:4].isdigit() and new[:4].isdigit()
    elif v.type == "alias_renamed":
        names = [i.this for i in gold.find_all(exp.Identifier)]
        renamed = [i.this for i in var.find_all(exp.Identifier)]
        changed = {(a, b) for a, b in zip(names, renamed, strict=True) if a != b}
        assert len({a.lower() for a, _ in changed}) == 1  # one name, renamed everywhere
        assert not {b.lower() for _, b in changed} & {n.lower() for n in names}
    elif v.type == "order_by_alias":
        order = [o.sql() for o in gold.find_all(exp.Order)]
        assert order != [o.sql() for o in var.find_all(exp.Order)]
    elif v.type == "parenthesized":
        assert len(_kinds(var, exp.Paren)) == len(_kinds(gold, exp.Paren)) + 1
        assert _unparenthesized(var) == _unparenthesized(gold)


def test_each_type_changes_what_it_names(judged: list[Judged]) -> None:
    for j, v in _variants(judged):
        gold, var = _tree(j.sql), _tree(v.sql)
        (_check_wrong if v.kind == "wrong" else _check_right)(v, gold, var)


def test_a_wrong_string_is_another_value_of_the_same_column() -> None:
    golds = [
        Gold(
            "a",
            "How many users are active?",
            None,
            "SELECT COUNT(*) FROM u WHERE status = 'active'",
            "d",
        ),
        Gold("b", "Blocked users?", None, "SELECT id FROM u WHERE status = 'blocked'", "d"),
    ]
    out, _ = generate(golds, build_pool(golds), ["string_replaced", "predicate_dropped"])
    by_type = {v.type: v.sql for v in out[0].variants}
    assert by_type["string_replaced"] == "SELECT COUNT(*) FROM u WHERE status = 'blocked'"
    assert by_type["predicate_dropped"] == "SELECT COUNT(*) FROM u"


class _Spy:
    """The default backend, with every request it was shown kept."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.requests: list[JudgeRequest] = []

    @property
    def info(self) -> Any:
        return self.inner.info

    def judge(self, request: JudgeRequest) -> JudgeReply:
        self.requests.append(request)
        reply: JudgeReply = self.inner.judge(request)
        return reply

    def close(self) -> None:
        self.inner.close()


def test_the_judge_never_sees_the_gold(judged: list[Judged]) -> None:
    pipeline = default_pipeline()
    spy = _Spy(pipeline.backend)
    pipeline.backend = spy
    j = judged[0]
    plain = judge(pipeline, "x", j, j.variants[0].sql, reference=False)
    referenced = judge(pipeline, "y", j, j.variants[0].sql, reference=True)
    assert plain.reference_verdict is None and referenced.reference_verdict is not None
    assert len(spy.requests) == 2
    assert all(r.record.gold_sql is None for r in spy.requests)


def _run(tmp_path: Path, *flags: str) -> dict[str, Any]:
    assert main(["--labels", str(GOLDS), "--out", str(tmp_path), *flags]) == 0
    name = "mutations-reference" if "--reference" in flags else "mutations"
    assert (tmp_path / f"{name}.md").read_text().count("\n| ") >= len(TYPES) + 2
    data: dict[str, Any] = json.loads((tmp_path / f"{name}.json").read_text())
    assert data["golds"] == {"read": 30, "judged": 30, "unparsed": 0, "without_gold_sql": 0}
    assert data["seconds"]["judging"] > 0 and data["judgments"] > 30
    assert {"gold_id", "type", "kind", "sql", "detail", "gold_score", "score"} <= set(
        data["rows"][0]
    )
    return data


def test_the_report_has_every_figure(tmp_path: Path) -> None:
    data = _run(tmp_path)
    types = data["figures"]["types"]
    assert list(types) == list(TYPES)
    for name, f in types.items():
        assert f["n"] > 0 and 0 <= f["share"] <= 1
        assert f["lower"] + f["equal"] + f["higher"] + f["unscored"] == f["n"]
        assert f["measure"] == ("detection" if TYPES[name] == "wrong" else "invariance")
    overall = data["figures"]["overall"]
    assert overall["wrong"]["n"] == sum(f["n"] for f in types.values() if f["kind"] == "wrong")
    assert all(r["score"] is not None and r["gold_score"] is not None for r in data["rows"])


def test_reference_mode(tmp_path: Path) -> None:
    data = _run(tmp_path, "--reference", "--types", "predicate_dropped,commuted", "reformatted")
    types = data["figures"]["types"]
    assert types["identity"]["n"] == 30
    assert sum(types["identity"]["verdicts"].values()) == 30  # the gold against itself
    for name in ("predicate_dropped", "commuted", "reformatted"):
        f = types[name]
        assert f["n"] > 0 and sum(f["verdicts"].values()) == f["n"]
        want = "Incorrect" if TYPES[name] == "wrong" else "Correct"
        assert f["measure"] == f"share {want}"
        assert f["share"] == round(f["verdicts"].get(want, 0) / f["n"], 4)
    assert types["number_changed"]["n"] == 0


def test_bad_usage_is_one_line_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["--labels", str(GOLDS), "--types", "nonsense", "--out", str(tmp_path)]) == 2
    assert main(["--labels", str(tmp_path / "absent.jsonl"), "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 2 and all(line.startswith("bench.mutations: ") for line in err)
    assert "nonsense" in err[0] and "absent.jsonl" in err[1]

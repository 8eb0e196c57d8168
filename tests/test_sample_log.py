"""The bundled sample agent log: reproducible, a realistic mix, invalid lines on purpose."""

from __future__ import annotations

import importlib.util
import json
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path
from types import ModuleType

import pytest
import sqlglot

from stef.errors import InvalidInput
from stef.models import InputRecord
from stef.rules import load_rules
from stef.stages.validate import validate
from tests.conftest import ROOT

LOG = ROOT / "examples" / "agent_log.jsonl"
SCRIPT = ROOT / "scripts" / "make_sample_log.py"


def _generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location("make_sample_log", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["make_sample_log"] = module  # dataclasses resolve their module by name
    spec.loader.exec_module(module)
    return module


def _read() -> tuple[list[InputRecord], Counter[str]]:
    valid: list[InputRecord] = []
    reasons: Counter[str] = Counter()
    for line in LOG.read_text(encoding="utf-8").splitlines():
        try:
            valid.append(validate(line))
        except InvalidInput as exc:
            reasons[exc.reason] += 1
    return valid, reasons


def test_generator_reproduces_the_committed_file(tmp_path: Path) -> None:
    out = tmp_path / "log.jsonl"
    subprocess.run(
        [sys.executable, str(SCRIPT), "--out", str(out)], check=True, capture_output=True
    )
    assert out.read_bytes() == LOG.read_bytes()


def test_size_and_invalid_share() -> None:
    valid, reasons = _read()
    assert LOG.stat().st_size < 400_000
    assert len(valid) == 400
    invalid = sum(reasons.values())
    assert 0.03 <= invalid / (invalid + len(valid)) <= 0.05
    # Every way a line can be invalid input appears at least once.
    assert set(reasons) == {"not_json", "not_object", "missing_field", "wrong_type", "too_large"}


def test_apps_versions_and_fields() -> None:
    valid, _ = _read()
    assert Counter(r.app for r in valid).keys() == {"sales", "support"}
    assert Counter(r.agent_version for r in valid).keys() == {"2.0", "2.1"}
    assert {r.agent for r in valid} == {"sql-agent"}
    assert len({r.id for r in valid}) == len(valid)
    assert all(r.timestamp and r.timestamp.startswith("2025-06-03T") for r in valid)
    assert all(r.metadata and set(r.metadata) >= {"latency_ms", "user"} for r in valid)
    missing = sum(r.enriched_question is None for r in valid)
    assert 0 < missing < len(valid) // 10
    stamps = [r.timestamp for r in valid]
    assert stamps == sorted(stamps)


def test_sql_parses_in_the_app_dialect() -> None:
    valid, _ = _read()
    dialects = {
        app: load_rules(ROOT / "rules").for_app(app).dialect for app in ("sales", "support")
    }
    assert dialects == {"sales": "snowflake", "support": "postgres"}
    for record in valid:
        assert record.app is not None
        assert sqlglot.parse(record.sql, read=dialects[record.app]), record.id


def test_mix_of_mistakes_and_release_2_1_regresses_on_year_questions() -> None:
    """2.1 is the better release on every kind of question but one: it drops the year filter of
    sales questions that name a year -- the regression the sample is built to show."""
    gen = _generator()
    lines = gen.generate()
    by_version: dict[str, Counter[str]] = {"2.0": Counter(), "2.1": Counter()}
    by_kind: dict[tuple[str, bool], Counter[str]] = {}
    drifts: Counter[str] = Counter()
    decorations: Counter[str] = Counter()
    for text, truth in lines:
        if truth is None:
            continue
        record = json.loads(text)
        version = record["agent_version"]
        by_version[version][truth.defect] += 1
        year_question = "YEAR(" in record["sql"] or (
            record["app"] == "sales" and re.search(r"\b20\d\d\b", record["question"]) is not None
        )
        by_kind.setdefault((version, year_question), Counter())[truth.defect] += 1
        drifts[truth.drift] += 1
        decorations.update(truth.decorations)
    ok = {k: c["none"] / sum(c.values()) for k, c in by_kind.items()}
    assert 0.45 < ok[("2.0", False)] < ok[("2.1", False)] < 0.9
    assert ok[("2.1", True)] < 0.2 < ok[("2.0", True)]
    assert by_kind[("2.1", True)]["missing_filter"] > by_kind[("2.0", True)]["missing_filter"]
    defects = by_version["2.0"] + by_version["2.1"]
    expected = {"missing_filter", "wrong_value", "extra_filter", "small_limit", "unsafe"}
    assert expected <= set(defects)
    assert {"faithful", "dropped", "added", "absent"} == set(drifts)
    assert {"benign_filter", "tenant_filter", "safety_limit"} == set(decorations)


@pytest.mark.parametrize(
    ("needle", "app"),
    [
        ("QUALIFY", "sales"),
        ("ILIKE", "sales"),
        ("DATEADD", "sales"),
        ("IFF(", "sales"),
        ("WITH ", "sales"),
        ("date_trunc", "support"),
        ("interval", "support"),
        ("::date", "support"),
        ("OVER (", "support"),
        ("tenant_id = 42", "sales"),
        ("is_deleted = false", "sales"),
        ("is_spam = false", "support"),
        ("LIMIT 10000", "sales"),
    ],
)
def test_dialect_features_and_decorations_appear(needle: str, app: str) -> None:
    valid, _ = _read()
    assert any(needle in r.sql for r in valid if r.app == app)


def test_unsafe_statements_are_there() -> None:
    valid, _ = _read()
    sqls = [r.sql for r in valid]
    assert any(s.startswith("DELETE ") for s in sqls)
    assert any(s.startswith("UPDATE ") for s in sqls)
    assert sum("; " in s for s in sqls) == 1


def test_labelled_sample_is_reproduced_and_drawn_from_the_log(tmp_path: Path) -> None:
    """examples/judge-sample.jsonl: the generator's truth as labels, records of the log itself."""
    labels = tmp_path / "labels.jsonl"
    subprocess.run(
        [
            sys.executable,
            str(SCRIPT),
            "--out",
            str(tmp_path / "log.jsonl"),
            "--labels",
            str(labels),
        ],
        check=True,
        capture_output=True,
    )
    shipped = ROOT / "examples" / "judge-sample.jsonl"
    assert labels.read_bytes() == shipped.read_bytes()
    rows = [json.loads(line) for line in shipped.read_text(encoding="utf-8").splitlines()]
    assert len(rows) == 40
    assert sum(r["label"] for r in rows) == 20
    assert all(r["error_types"] == [] for r in rows if r["label"])
    assert all(len(r["error_types"]) == 1 for r in rows if not r["label"])
    valid, _ = _read()
    log = {record.id: record for record in valid}
    for r in rows:
        original = log[r["id"]]
        assert (original.question, original.sql, original.app, original.agent_version) == (
            r["question"],
            r["sql"],
            r["app"],
            r["agent_version"],
        )


def test_references_are_the_generator_s_and_cover_every_safe_question(tmp_path: Path) -> None:
    """examples/references.jsonl, the golden set of reference mode: regenerated byte for byte,
    one line per question, every valid request's question in it but the unsafe ones'."""
    refs = tmp_path / "refs.jsonl"
    out = tmp_path / "log.jsonl"
    subprocess.run(
        [sys.executable, str(SCRIPT), "--out", str(out), "--references", str(refs)],
        check=True,
        capture_output=True,
    )
    committed = ROOT / "examples" / "references.jsonl"
    assert refs.read_bytes() == committed.read_bytes()
    rows = [json.loads(line) for line in committed.read_text(encoding="utf-8").splitlines()]
    assert all(set(r) == {"question", "gold_sql"} for r in rows)
    golden = {r["question"] for r in rows}
    assert len(golden) == len(rows)
    valid, _ = _read()
    unsafe = {r.question for r in valid if re.search(r"\b(UPDATE|DROP|DELETE|INSERT)\b", r.sql)}
    assert unsafe and not unsafe & golden
    assert {r.question for r in valid} - unsafe == golden

"""What the review page says about a result in words: who decided its verdict, the second
opinion, and why the record stands where it does in the queue. Results are read as plain JSON
objects (any STEF version): every field is read with a default, and a missing value is None,
which the page shows as a dash, never as the word "none"."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from stef.review import records as R
from stef.sql.extract import extract_sql


def judged_sql(rec: Mapping[str, Any]) -> tuple[str, bool]:
    """The SQL STEF judged (taken out of a markdown fence or a ``SQL:`` label, as the record
    path does), and whether it was taken out."""
    given = _mapping(rec.get("input"))
    sql: str = given["sql"] if isinstance(given.get("sql"), str) else ""
    inner = extract_sql(sql) if sql else None
    if inner:
        return inner, True
    return sql, False


def verdict(rec: Mapping[str, Any]) -> str | None:
    """The record's verdict: the reference's when a reference decided, else the judge's."""
    value = _mapping(rec.get("reference")).get("verdict")
    if not isinstance(value, str):
        value = _mapping(rec.get("components")).get("verdict")
    return value if isinstance(value, str) else None


def decider(rec: Mapping[str, Any]) -> str | None:
    """Who decided: ``STEF`` (its safety override), ``reference`` (compared with the reference
    SQL), ``LLM`` (with its model and verdict mode) or ``heuristic``."""
    if rec.get("outcome") != "evaluated":
        return None
    normalizations = rec.get("normalizations")
    if isinstance(normalizations, list) and "safety_override" in normalizations:
        return "STEF (safety override: unsafe SQL scores 0)"
    ref = _mapping(rec.get("reference"))
    if isinstance(ref.get("verdict"), str):
        return f"reference (the reference SQL's comparison says {ref['verdict']})"
    judge = _mapping(rec.get("judge"))
    backend = judge.get("backend")
    if backend == "llm":
        about = [str(judge[k]) for k in ("model", "mode") if isinstance(judge.get(k), str)]
        return "LLM" + (f" ({', '.join(about)})" if about else "")
    if backend == "heuristic":
        return "heuristic (STEF's deterministic judge)"
    return str(backend) if isinstance(backend, str) else None


def second_opinion(rec: Mapping[str, Any]) -> str | None:
    second = _mapping(_mapping(rec.get("judge")).get("second_opinion"))
    if not isinstance(second.get("verdict"), str):
        return None
    confidence = second.get("confidence")
    said = f"{second.get('backend') or 'another judge'}: {second['verdict']}"
    if isinstance(confidence, int | float):
        said += f" (confidence {confidence:.2f})"
    agrees = second.get("agrees")
    if isinstance(agrees, bool):
        said += ", agrees" if agrees else ", disagrees"
    return said


def queue_reason(rec: Mapping[str, Any], order: str) -> str:
    """Why the record is where it is in the queue (the teaching order's keys, first to last)."""
    if order == "random":
        return "random order: a fixed random sample, the labels stef estimate uses"
    p = R.p_correct(rec)
    reasons = []
    if rec.get("needs_review") is True:
        reasons.append("flagged for review: the judge's confidence is below review_below")
    if p is not None and abs(p - 0.5) <= 0.2:
        reasons.append(f"P(correct) {p:.2f} is near a coin toss: a label teaches most here")
    if R.second_opinion_disagrees(rec):
        reasons.append("the second opinion disagrees with the verdict")
    if R.unsafe(rec):
        reasons.append("the SQL is unsafe (it writes, or stacks statements)")
    if R.judge_error(rec):
        reasons.append("the judge could not decide (judge error)")
    if not reasons:
        return "nothing flags it: the judge was sure, so it comes after the doubtful ones"
    return "; ".join(reasons)


def when(rec: Mapping[str, Any]) -> str | None:
    value = rec.get("timestamp")
    return value if isinstance(value, str) else None


def agent(rec: Mapping[str, Any]) -> str | None:
    name, version = rec.get("agent"), rec.get("agent_version")
    if not isinstance(name, str):
        return f"version {version}" if isinstance(version, str) else None
    return f"{name}@{version}" if isinstance(version, str) else name


def _mapping(value: object) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def reference(rec: Mapping[str, Any]) -> str | None:
    """The reference comparison in words: its verdict, what decided it, and why the databases
    could not when they could not; None without a reference."""
    ref = _mapping(rec.get("reference"))
    if not isinstance(ref.get("verdict"), str):
        return None
    run = _mapping(ref.get("execution"))
    said = f"{ref['verdict']}, decided by {ref.get('decided_by') or 'structure'}"
    if run.get("source") == "generated" and isinstance(run.get("databases"), int):
        said += (
            f" (rows {run.get('status')} on generated databases: {run['databases']} run, "
            f"{run.get('informative') or 0} could tell)"
        )
        detail = run.get("detail")
        if run.get("status") == "different" and isinstance(detail, str) and detail:
            said += f": {detail}"  # why rows that differ still pass
    elif run.get("source") == "generated" and isinstance(run.get("status"), str):
        said += f" ({run['status']} on generated databases)"  # none ran: the error says why
    elif isinstance(run.get("status"), str):
        said += f" (rows {run['status']} on the configured database)"
    first = _mapping(ref.get("database")).get("status")
    if isinstance(first, str):
        said += f", after the configured database told nothing ({first})"
    if isinstance(ref.get("error"), str):
        said += f"; {ref['error']}"
    return said


def differences(rec: Mapping[str, Any]) -> list[str]:
    """Each component in which the SQL differs from the reference, as ``component: generated
    vs reference``."""
    found = _mapping(rec.get("reference")).get("differences")
    out = []
    for d in found if isinstance(found, list) else []:
        d = _mapping(d)
        out.append(
            f"{d.get('component')}: {d.get('generated') or '—'} vs {d.get('reference') or '—'}"
        )
    return out


def counterexample(rec: Mapping[str, Any]) -> dict[str, Any] | None:
    """The generated database on which the SQL and its reference differ, as the page and the
    report show it: ``tables`` (each ``{name, columns, rows}``), ``generated`` and
    ``reference`` (their rows), every cell as text (``NULL`` for a null). None without one."""
    example = _mapping(
        _mapping(_mapping(rec.get("reference")).get("execution")).get("counterexample")
    )
    tables, columns = _mapping(example.get("tables")), _mapping(example.get("columns"))
    if not tables:
        return None
    return {
        "tables": [
            {"name": str(name), "columns": _cells(columns.get(name)), "rows": _rows(rows)}
            for name, rows in tables.items()
        ],
        "generated": _rows(example.get("generated")),
        "reference": _rows(example.get("reference")),
    }


def _rows(value: object) -> list[list[str]]:
    return [_cells(row) for row in value] if isinstance(value, list) else []


def _cells(value: object) -> list[str]:
    if not isinstance(value, list):
        return []
    return ["NULL" if v is None else str(v) for v in value]

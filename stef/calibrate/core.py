"""``stef calibrate``: how often the judge agrees with human labels (SPEC §5, issue 6).

Every labelled record goes through the same pipeline as production traffic; the judge predicts
"correct" when the score is at or above the pass threshold. The positive class is **correct**
(label ``true``): sensitivity is the share of correct SQL the judge passes, specificity the share
of wrong SQL it fails.

A record the judge could not score -- outcome ``judge_error``, or a line that is invalid input --
is a wrong prediction, never dropped: a judge error on a correct item is a false negative, on a
wrong item a false positive. Dropping them would flatter a judge that fails on the hard cases.

Cohen's κ is reported only where both label classes occur: with one class, κ is 0 or undefined
whatever the judge does (per error type, every item is wrong), so it says nothing; read
specificity there instead.
"""

from __future__ import annotations

import json
import math
import random
from collections import deque
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import sqlglot
from sqlglot.errors import SqlglotError

from stef.models import Result
from stef.pipeline import Pipeline
from stef.rules import RuleSet
from stef.stages.validate import FIELDS

POSITIVE = "correct"
DEFAULT_THRESHOLD = 75.0
MIN_RESAMPLES = 2000
DIMENSIONS = ("source", "app", "complexity", "error_type", "verdict")
EXIT_OK, EXIT_FAIL, EXIT_USAGE = 0, 1, 2

# ------------------------------------------------------------------------------- statistics


@dataclass(frozen=True)
class Confusion:
    """Counts of (prediction, label) pairs; the positive class is "correct"."""

    tp: int = 0
    fp: int = 0
    tn: int = 0
    fn: int = 0

    @property
    def n(self) -> int:
        return self.tp + self.fp + self.tn + self.fn

    def as_dict(self) -> dict[str, int]:
        return {"tp": self.tp, "fp": self.fp, "tn": self.tn, "fn": self.fn}


def confusion(labels: Sequence[bool], predicted: Sequence[bool | None]) -> Confusion:
    """Count the pairs. ``None`` is a judge error and counts as the wrong prediction."""
    if len(labels) != len(predicted):
        raise ValueError("labels and predictions differ in length")
    tp = fp = tn = fn = 0
    for label, pred in zip(labels, predicted, strict=True):
        if pred is None:
            pred = not label
        if pred and label:
            tp += 1
        elif pred:
            fp += 1
        elif label:
            fn += 1
        else:
            tn += 1
    return Confusion(tp, fp, tn, fn)


def _ratio(num: int, den: int) -> float | None:
    return num / den if den else None


def accuracy(c: Confusion) -> float | None:
    return _ratio(c.tp + c.tn, c.n)


def sensitivity(c: Confusion) -> float | None:
    """Recall of the positive class (correct SQL passed); ``None`` without positives."""
    return _ratio(c.tp, c.tp + c.fn)


def specificity(c: Confusion) -> float | None:
    """Recall of the negative class (wrong SQL failed); ``None`` without negatives."""
    return _ratio(c.tn, c.tn + c.fp)


def balanced_accuracy(c: Confusion) -> float | None:
    sens, spec = sensitivity(c), specificity(c)
    return None if sens is None or spec is None else (sens + spec) / 2


def kappa(c: Confusion) -> float | None:
    """Cohen's κ between judge and labels; ``None`` unless both label classes occur."""
    n = c.n
    if n == 0 or c.tp + c.fn == 0 or c.tn + c.fp == 0:
        return None
    observed = (c.tp + c.tn) / n
    expected = ((c.tp + c.fn) * (c.tp + c.fp) + (c.tn + c.fp) * (c.tn + c.fn)) / (n * n)
    return (observed - expected) / (1 - expected)


def _percentile(sorted_values: Sequence[float], q: float) -> float:
    """Linear interpolation between closest ranks (numpy's default method)."""
    pos = q * (len(sorted_values) - 1)
    lo = int(pos)
    hi = min(lo + 1, len(sorted_values) - 1)
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * (pos - lo)


def kappa_ci(
    c: Confusion, *, resamples: int = MIN_RESAMPLES, seed: int = 0, level: float = 0.95
) -> tuple[float, float] | None:
    """Percentile bootstrap CI of κ: resample the items with replacement ``resamples`` times.

    κ depends only on the four counts, so resampling items is drawing the counts from a
    multinomial over the cells (exact, and O(1) per resample instead of O(n)); resamples where
    κ is undefined (one label class drawn) are skipped. ``None`` when κ itself is undefined.
    """
    if kappa(c) is None:
        return None
    rng = random.Random(seed)
    cells = (c.tp, c.fp, c.tn, c.fn)
    values: list[float] = []
    for _ in range(resamples):
        k = kappa(Confusion(*_multinomial(rng, c.n, cells)))
        if k is not None:
            values.append(k)
    if not values:
        return None
    values.sort()
    alpha = (1 - level) / 2
    return _percentile(values, alpha), _percentile(values, 1 - alpha)


def _multinomial(rng: random.Random, n: int, weights: Sequence[int]) -> list[int]:
    """Counts of ``n`` draws over cells with probabilities proportional to ``weights``."""
    out: list[int] = []
    left, rest = n, sum(weights)
    for w in weights[:-1]:
        x = binomial(rng, left, w / rest) if rest and left else 0
        out.append(x)
        left -= x
        rest -= w
    out.append(left)
    return out


def binomial(rng: random.Random, n: int, p: float) -> int:
    """One Binomial(n, p) draw, exact (CPython 3.12's ``binomialvariate``, BTRS by Hörmann 1993).

    Kept here rather than taken from ``random`` so a seed gives the same CI on every Python.
    """
    if p <= 0.0:
        return 0
    if p >= 1.0:
        return n
    if p > 0.5:
        return n - binomial(rng, n, 1.0 - p)
    if n * p < 10.0:
        # Count geometric gaps between successes.
        x = y = 0
        c = math.log(1.0 - p)
        if not c:
            return x
        while True:
            y += math.floor(math.log(1.0 - rng.random()) / c) + 1
            if y > n:
                return x
            x += 1
    spq = math.sqrt(n * p * (1.0 - p))
    b = 1.15 + 2.53 * spq
    a = -0.0873 + 0.0248 * b + 0.01 * p
    c = n * p + 0.5
    vr = 0.92 - 4.2 / b
    alpha = (2.83 + 5.1 / b) * spq
    lpq = math.log(p / (1.0 - p))
    m = math.floor((n + 1) * p)
    h = math.lgamma(m + 1) + math.lgamma(n - m + 1)
    while True:
        u = rng.random() - 0.5
        us = 0.5 - abs(u)
        k = math.floor((2.0 * a / us + b) * u + c)
        if k < 0 or k > n:
            continue
        v = rng.random()
        if us >= 0.07 and v <= vr:
            return k
        v *= alpha / (a / (us * us) + b)
        if v > 0 and math.log(v) <= h - math.lgamma(k + 1) - math.lgamma(n - k + 1) + (k - m) * lpq:
            return k


@dataclass(frozen=True)
class Item:
    """One labelled record and what the judge made of it (``score`` None: judge error)."""

    label: bool
    score: float | None
    source: str | None = None
    app: str | None = None
    complexity: str | None = None
    error_types: tuple[str, ...] = ()
    verdict: str | None = None

    def predicted(self, threshold: float) -> bool | None:
        return None if self.score is None else self.score >= threshold


def confusion_at(items: Sequence[Item], threshold: float) -> Confusion:
    return confusion([i.label for i in items], [i.predicted(threshold) for i in items])


@dataclass(frozen=True)
class Threshold:
    value: float
    kappa: float | None
    balanced_accuracy: float | None


def best_threshold(items: Sequence[Item], default: float = DEFAULT_THRESHOLD) -> Threshold | None:
    """The pass threshold that maximises κ, among the scores that occur (ties: nearest default).

    Predicting "correct" at ``score >= t`` only changes when ``t`` crosses a score that occurs,
    so those scores (and one above the highest: pass nothing) are every distinct choice.
    """
    scores = sorted({i.score for i in items if i.score is not None})
    if not scores:
        return None
    best: Threshold | None = None
    best_key: tuple[float, float] | None = None
    for t in [*scores, scores[-1] + 1]:
        c = confusion_at(items, t)
        k = kappa(c)
        if k is None:
            continue
        key = (k, -abs(t - default))
        if best_key is None or key > best_key:
            best, best_key = Threshold(t, k, balanced_accuracy(c)), key
    return best


def metrics(
    items: Sequence[Item], threshold: float, *, resamples: int = MIN_RESAMPLES, seed: int = 0
) -> dict[str, Any]:
    """The agreement figures of ``items`` (the keys of ``--json`` but ``breakdown``)."""
    c = confusion_at(items, threshold)
    ci = kappa_ci(c, resamples=resamples, seed=seed)
    return {
        "n": c.n,
        "accuracy": _round(accuracy(c)),
        "kappa": _round(kappa(c)),
        "kappa_ci": None if ci is None else [_round(ci[0]), _round(ci[1])],
        "balanced_accuracy": _round(balanced_accuracy(c)),
        "sensitivity": _round(sensitivity(c)),
        "specificity": _round(specificity(c)),
        "confusion": c.as_dict(),
        "judge_errors": sum(1 for i in items if i.score is None),
    }


def _round(x: float | None) -> float | None:
    return None if x is None else round(x, 4)


def _groups(items: Sequence[Item], dimension: str) -> dict[str, list[Item]]:
    groups: dict[str, list[Item]] = {}
    for item in items:
        if dimension == "error_type":
            keys: Sequence[str] = item.error_types  # an item counts under each of its types
        else:
            value = getattr(item, dimension)
            keys = (
                ["judge_error" if dimension == "verdict" else "unknown"]
                if value is None
                else [value]
            )
        for key in keys:
            groups.setdefault(key, []).append(item)
    return dict(sorted(groups.items(), key=lambda kv: (-len(kv[1]), kv[0])))


def report(
    items: Sequence[Item], threshold: float, *, resamples: int = MIN_RESAMPLES, seed: int = 0
) -> dict[str, Any]:
    """The ``--json`` object: the overall figures plus ``breakdown`` by dimension and value."""
    out = metrics(items, threshold, resamples=resamples, seed=seed)
    out["breakdown"] = {
        dim: {
            value: metrics(group, threshold, resamples=resamples, seed=seed)
            for value, group in _groups(items, dim).items()
        }
        for dim in DIMENSIONS
    }
    return out


# ---------------------------------------------------------------------------------- judging


def reformat_sql(sql: str, dialect: str | None) -> str:
    """Re-print ``sql`` through sqlglot (upper-case keywords, one line); unchanged if unparsable.

    Agreement on re-formatted SQL shows whether the judge leans on formatting (the dev set's
    lower-case ``select`` is mostly wrong SQL from one generator).
    """
    try:
        statements = sqlglot.transpile(sql, read=dialect, write=dialect, pretty=False)
    except (SqlglotError, RecursionError, ValueError):
        return sql
    text = "; ".join(s for s in statements if s.strip())
    return text or sql


@dataclass(frozen=True)
class Labelled:
    """One line of the labels file: the judge's input (never ``gold_sql``) and the annotations."""

    line: int
    payload: dict[str, Any]
    label: bool
    source: str | None
    error_types: tuple[str, ...]


def read_labels(path: Path, limit: int | None = None) -> list[Labelled]:
    """Parse the labels file.

    Raises:
        ValueError: a line that is not a JSON object with a boolean ``label`` (with its number).
    """
    out: list[Labelled] = []
    with path.open(encoding="utf-8") as f:
        for n, line in enumerate(f, start=1):
            if not line.strip():
                continue
            if limit is not None and len(out) >= limit:
                break
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as exc:
                raise ValueError(f"{path}:{n}: not JSON: {exc}") from exc
            if not isinstance(obj, dict) or not isinstance(obj.get("label"), bool):
                raise ValueError(f"{path}:{n}: not a JSON object with a boolean 'label'")
            types = obj.get("error_types") or []
            if not isinstance(types, list) or not all(isinstance(t, str) for t in types):
                raise ValueError(f"{path}:{n}: 'error_types' must be a list of strings")
            source = obj.get("source")
            out.append(
                Labelled(
                    line=n,
                    # Only the judge's own input fields: gold_sql, label and the annotations
                    # never reach the judge.
                    payload={k: v for k, v in obj.items() if k in FIELDS},
                    label=obj["label"],
                    source=source if isinstance(source, str) else None,
                    error_types=tuple(dict.fromkeys(types)),
                )
            )
    return out


def without_sampling(rules: RuleSet) -> RuleSet:
    """The same rules judging every record: calibration must not lose items to sampling."""
    return RuleSet(
        rules.default.model_copy(update={"sampling_rate": 1.0}),
        {app: r.model_copy(update={"sampling_rate": 1.0}) for app, r in rules.apps.items()},
        source=rules.source,
        single_file=rules.single_file,
    )


def judge_all(
    pipeline: Pipeline,
    records: Sequence[Labelled],
    *,
    concurrency: int = 8,
    reformat: bool = False,
    on_progress: Callable[[int], None] | None = None,
) -> list[Item]:
    """Judge every record, at most ``concurrency`` in flight, results in input order."""

    def one(rec: Labelled) -> Result | None:
        payload = rec.payload
        if reformat and isinstance(payload.get("sql"), str):
            app = payload.get("app")
            dialect = (
                payload.get("dialect")
                or pipeline.rules.for_app(app if isinstance(app, str) else None).dialect
            )
            payload = {**payload, "sql": reformat_sql(payload["sql"], dialect)}
        raw = json.dumps(payload, ensure_ascii=False).encode("utf-8", "surrogatepass")
        # The one record path; a dead letter (invalid input) has no score: a judge error.
        return pipeline.process(raw, {"file": "labels", "line": rec.line}).result

    results: list[Result | None] = []
    with ThreadPoolExecutor(max_workers=concurrency) as pool:
        window: deque[Future[Result | None]] = deque()
        for rec in records:
            if len(window) >= concurrency * 2:
                results.append(window.popleft().result())
                if on_progress:
                    on_progress(len(results))
            window.append(pool.submit(one, rec))
        while window:
            results.append(window.popleft().result())
            if on_progress:
                on_progress(len(results))
    return [_item(rec, res) for rec, res in zip(records, results, strict=True)]


def _item(rec: Labelled, result: Result | None) -> Item:
    app = rec.payload.get("app")
    if result is None or result.outcome != "evaluated" or result.score is None:
        score, verdict = None, None
    else:
        score = result.score
        verdict = str(result.components.verdict) if result.components else None
    return Item(
        label=rec.label,
        score=score,
        source=rec.source,
        app=app if isinstance(app, str) else None,
        complexity=result.complexity if result is not None else None,
        error_types=rec.error_types,
        verdict=verdict,
    )


# ------------------------------------------------------------------------------------ table


def _fmt(x: float | None, pct: bool = True) -> str:
    if x is None:
        return "-"
    return f"{100 * x:.1f}%" if pct else f"{x:.3f}"


def _row(name: str, m: dict[str, Any]) -> list[str]:
    c = m["confusion"]
    ci = m["kappa_ci"]
    return [
        name,
        str(m["n"]),
        _fmt(m["accuracy"]),
        _fmt(m["kappa"], pct=False),
        "-" if ci is None else f"[{ci[0]:.3f}, {ci[1]:.3f}]",
        _fmt(m["balanced_accuracy"]),
        _fmt(m["sensitivity"]),
        _fmt(m["specificity"]),
        str(c["tp"]),
        str(c["fp"]),
        str(c["tn"]),
        str(c["fn"]),
        str(m["judge_errors"]),
    ]


_HEADER = ["", "n", "accuracy", "kappa", "kappa 95% CI", "bal.acc", "sens", "spec"]
_HEADER += ["tp", "fp", "tn", "fn", "errors"]


def _table(rows: list[list[str]]) -> str:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = []
    for k, r in enumerate(rows):
        cells = [r[0].ljust(widths[0])] + [
            v.rjust(w) for v, w in zip(r[1:], widths[1:], strict=True)
        ]
        lines.append("  ".join(cells).rstrip())
        if k == 0:
            lines.append("  ".join("-" * w for w in widths))
    return "\n".join(lines)


def render(
    rep: dict[str, Any],
    *,
    threshold: float,
    best: Threshold | None,
    backend: str,
    resamples: int,
    reformatted: bool,
) -> str:
    """The readable report: the overall row, the threshold search, one table per dimension."""
    sql = "re-formatted by sqlglot" if reformatted else "as logged"
    out = [
        f"judge: {backend}   pass threshold: score >= {threshold:g}   "
        f"positive class: {POSITIVE} (label true)   sql: {sql}",
        f"kappa CI: percentile bootstrap, {resamples} resamples; judge errors count as wrong "
        "predictions (on a correct item a false negative, on a wrong item a false positive)",
        "",
        _table([_HEADER, _row("all", rep)]),
        "",
    ]
    if best is not None:
        out.append(
            f"kappa-maximising threshold: score >= {best.value:g} "
            f"(kappa {_fmt(best.kappa, False)}, "
            f"balanced accuracy {_fmt(best.balanced_accuracy)}) "
            f"-- beside the default {threshold:g} (kappa {_fmt(rep['kappa'], False)}), not instead"
        )
    for dim in DIMENSIONS:
        groups = rep["breakdown"][dim]
        if not groups:
            continue
        out += ["", f"by {dim.replace('_', ' ')}"]
        out.append(_table([_HEADER, *(_row(v, m) for v, m in groups.items())]))
    return "\n".join(out)

"""Per-app/agent summary of results, the paper's Table 4: mean score, P10/P50/P90, coverage,
tiers; what the judging cost (tokens, cache hits, cost where priced), why the judge failed, and
the worst records.

Coverage and sampled-out are reported apart, as deploy/README defines them: *coverage* is the
share of the group's records that got a score (judge errors and sampled-out records count against
it); *sampled out* is the share the app's ``sampling_rate`` chose not to judge. A 50%-sampled app
with no failures reads coverage 50%, sampled out 50%.
"""

from __future__ import annotations

import csv
import heapq
import io
import json
import math
import re
from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Literal

from stef.accuracy import Z95, Interval
from stef.calibration import Calibration, calibration_for
from stef.models import JudgeInfo, Result
from stef.stats import quantile
from stef.text_table import render_table

TIERS = ("excellent", "good", "marginal", "poor")
# What the judge could tell, whatever its tiers: it found an error, the SQL looks right, or it
# cannot tell (a weak judge's "poor" is mostly the last).
MIX = ("error", "looks_right", "undecided")
_MIX_OF = {
    "Incorrect": "error",
    "Potentially Incorrect": "undecided",
    "Likely Correct": "looks_right",
    "Correct": "looks_right",
}


def verdict_class(verdict: str | None, filter_status: str | None = None) -> str | None:
    """``error``, ``looks_right`` or ``undecided`` for a verdict (None without one): an error
    is an Incorrect verdict, or a question filter STEF found not applied (whatever the verdict;
    the alert StefDetectedErrorShareHigh reads the same)."""
    if verdict is None:
        return None
    return "error" if filter_status == "not_applied" else _MIX_OF.get(verdict)


FORMATS = ("text", "json", "csv", "markdown")
Format = Literal["text", "json", "csv", "markdown"]

# The text table is read in a terminal: it must fit this many columns whatever the names.
TEXT_WIDTH = 120


def error_reason(error: object) -> str:
    """The reason of a judge error: the text before its first colon (``timeout: ...``)."""
    text = error if isinstance(error, str) and error else "unknown"
    return text.split(":", 1)[0].strip() or "unknown"


@dataclass(frozen=True, slots=True)
class Counted:
    """What the per-group figures count of one result. ``stef summary`` reads results as
    models (:meth:`of`), ``stef report`` as plain objects (:func:`stef.report.figures.counted`);
    both count them here, one way."""

    id: str
    outcome: str
    score: float | None = None
    tier: str | None = None
    p_correct: float | None = None
    referenced: bool = False  # the probability is a reference verdict's (reference mode)
    verdict_class: str | None = None
    issues: tuple[str, ...] = ()
    error: str | None = None
    needs_review: bool = False
    unsafe: bool = False
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cache_hit: bool = False
    cost_usd: float | None = None

    @classmethod
    def of(cls, result: Result) -> Counted:
        c, usage, ref = result.components, result.usage, result.reference
        return cls(
            id=result.id,
            outcome=result.outcome,
            score=result.score,
            tier=result.tier,
            p_correct=result.judge.p_correct,
            referenced=ref is not None and ref.p_correct is not None,
            verdict_class=None
            if c is None
            else verdict_class(c.verdict.value, c.filter_status.value),
            issues=tuple(result.issues),
            error=result.error,
            needs_review=result.needs_review,
            unsafe=result.safety.mutating or result.safety.multiple_statements,
            prompt_tokens=usage.prompt_tokens,
            completion_tokens=usage.completion_tokens,
            cache_hit=usage.cache_hit,
            cost_usd=usage.cost_usd,
        )


@dataclass
class Group:
    """Counters of one (app, agent, version) group."""

    received: int = 0
    evaluated: int = 0
    judge_errors: int = 0
    skipped: int = 0
    scores: list[float] = field(default_factory=list)
    tiers: dict[str, int] = field(default_factory=lambda: dict.fromkeys(TIERS, 0))
    mix: dict[str, int] = field(default_factory=lambda: dict.fromkeys(MIX, 0))
    issues: Counter[str] = field(default_factory=Counter)
    p_correct: list[float] = field(default_factory=list)
    referenced: int = 0  # of p_correct, those a reference verdict gave (reference mode)
    needs_review: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cache_hits: int = 0
    cost_usd: float = 0.0
    priced: int = 0  # results whose usage carried a cost (a price table is configured)
    judge_error_reasons: Counter[str] = field(default_factory=Counter)
    unsafe: int = 0  # results whose SQL mutates data or holds several statements

    def add(self, result: Result) -> None:
        self.count(Counted.of(result))

    def count(self, c: Counted) -> None:
        """Count one result, whichever way it was read (:class:`Counted`)."""
        self.received += 1
        self.prompt_tokens += c.prompt_tokens
        self.completion_tokens += c.completion_tokens
        self.cache_hits += c.cache_hit
        if c.cost_usd is not None:
            self.cost_usd += c.cost_usd
            self.priced += 1
        self.needs_review += c.needs_review
        self.unsafe += c.unsafe
        if c.outcome == "evaluated":
            if c.p_correct is not None:
                self.p_correct.append(c.p_correct)
                self.referenced += c.referenced
            self.evaluated += 1
            if c.score is not None:
                self.scores.append(c.score)
            if c.tier is not None:
                self.tiers[c.tier] = self.tiers.get(c.tier, 0) + 1
            if c.verdict_class is not None:
                self.mix[c.verdict_class] += 1
            self.issues.update(i for i in c.issues if i != "none")
        elif c.outcome == "judge_error":
            self.judge_errors += 1
            self.judge_error_reasons[error_reason(c.error)] += 1
        elif c.outcome == "skipped_sampling":
            self.skipped += 1

    @property
    def mean(self) -> float | None:
        return sum(self.scores) / len(self.scores) if self.scores else None

    @property
    def p90(self) -> float | None:
        # Nearest rank: the P90 is a score some record got.
        return quantile(self.scores, 0.9, "nearest_rank") if self.scores else None

    @property
    def p10(self) -> float | None:
        """The quantile that moves when a release goes wrong: its worst tenth."""
        return quantile(self.scores, 0.1, "nearest_rank") if self.scores else None

    @property
    def p50(self) -> float | None:
        return quantile(self.scores, 0.5, "nearest_rank") if self.scores else None

    def merge(self, other: Group) -> None:
        """Add ``other``'s counters to this group's (the TOTAL row)."""
        self.received += other.received
        self.evaluated += other.evaluated
        self.judge_errors += other.judge_errors
        self.skipped += other.skipped
        self.scores.extend(other.scores)
        self.p_correct.extend(other.p_correct)
        self.referenced += other.referenced
        self.needs_review += other.needs_review
        for k, v in other.tiers.items():
            self.tiers[k] += v
        for k, v in other.mix.items():
            self.mix[k] += v
        self.issues.update(other.issues)
        self.prompt_tokens += other.prompt_tokens
        self.completion_tokens += other.completion_tokens
        self.cache_hits += other.cache_hits
        self.cost_usd += other.cost_usd
        self.priced += other.priced
        self.judge_error_reasons.update(other.judge_error_reasons)
        self.unsafe += other.unsafe

    @property
    def coverage(self) -> float:
        """Evaluated / received: sampled-out records and judge errors count against it."""
        return self.evaluated / self.received if self.received else 0.0

    @property
    def sampled_out(self) -> float:
        """Skipped by sampling / received."""
        return self.skipped / self.received if self.received else 0.0

    def tier_share(self, tier: str) -> float:
        """Share of the evaluated records in ``tier``."""
        return self.tiers[tier] / self.evaluated if self.evaluated else 0.0

    def share(self, count: int) -> float:
        """``count`` as a share of the evaluated records."""
        return count / self.evaluated if self.evaluated else 0.0

    def top_issues(self, n: int = 3) -> list[tuple[str, float]]:
        """The ``n`` commonest issues with their share of the evaluated records."""
        return [(k, self.share(v)) for k, v in self.issues.most_common(n)]


@dataclass
class Summary:
    """Results grouped by (app, agent, version), plus what the whole run saw."""

    groups: dict[tuple[str, str, str], Group] = field(default_factory=lambda: defaultdict(Group))
    invalid: int = 0
    invalid_known: bool = True
    backends: set[str] = field(default_factory=set)
    calibration: Calibration | None = None
    sources: dict[str, int] = field(default_factory=dict)
    judge: JudgeInfo | None = None
    by_backend: dict[str, int] = field(default_factory=dict)
    llm_tokens: int = 0
    worst_n: int = 0  # keep this many lowest-scored evaluated records (stef summary --worst)
    # (-score, id, arrival, row): the arrival breaks a tie of score and id (a record judged
    # twice, at least once), which compared the rows (dicts) and raised.
    _worst: list[tuple[float, str, int, dict[str, Any]]] = field(default_factory=list)
    _arrived: int = 0

    def add(self, result: Result) -> None:
        key = (
            _shown(result.app or "-"),
            _shown(result.agent or "-"),
            _shown(result.agent_version or ""),
        )
        self.groups[key].add(result)
        self.backends.add(result.judge.backend)
        if self.worst_n and result.outcome == "evaluated" and result.score is not None:
            self._keep_worst(result)
        self.judge = self.judge or result.judge
        if result.outcome != "skipped_sampling":
            backend = result.judge.backend
            self.by_backend[backend] = self.by_backend.get(backend, 0) + 1
            if backend != "heuristic":
                self.llm_tokens += result.usage.prompt_tokens + result.usage.completion_tokens
        if result.components is not None and result.components.confidence_source:
            source = result.components.confidence_source
            self.sources[source] = self.sources.get(source, 0) + 1

    def _keep_worst(self, result: Result) -> None:
        # A max-heap of the N lowest (scores negated): memory bounded by N, not by the file.
        row = {
            "id": result.id,
            "app": result.app,
            "score": result.score,
            "tier": result.tier,
            "issues": list(result.issues),
            "question": result.input.question if result.input is not None else None,
        }
        self._arrived += 1
        entry = (-(result.score or 0.0), result.id, self._arrived, row)
        if len(self._worst) < self.worst_n:
            heapq.heappush(self._worst, entry)
        elif entry[0] > self._worst[0][0]:
            heapq.heapreplace(self._worst, entry)

    def worst(self) -> list[dict[str, Any]]:
        """The kept lowest-scored records, lowest first (ties by id)."""
        return [row for *_, row in sorted(self._worst, key=lambda e: (-e[0], e[1], e[2]))]

    def extend(self, results: Iterable[Result]) -> Summary:
        for r in results:
            self.add(r)
        return self

    def total(self) -> Group:
        t = Group()
        for g in self.groups.values():
            t.merge(g)
        return t

    def _items(self) -> list[tuple[tuple[str, str, str], Group]]:
        return [*sorted(self.groups.items()), (("TOTAL", "", ""), self.total())]

    # ------------------------------------------------------------------------------- formats

    def render(self, fmt: Format = "text") -> str:
        """The summary as ``text`` (one screen), ``json``, ``csv`` or ``markdown`` (full)."""
        if fmt == "json":
            return json.dumps(self.as_dict(), indent=2)
        if fmt == "csv":
            return self._csv()
        if fmt == "markdown":
            return self._markdown()
        return self.table()

    def as_dict(self) -> dict[str, Any]:
        """Every figure of every group, untruncated; null where a group has no score."""
        rows = [_row(app, agent, version, g) for (app, agent, version), g in self._items()]
        for row, (_, g) in zip(rows, self._items(), strict=True):
            row.update(self._estimate(g))
        return {
            "groups": rows[:-1],
            "total": rows[-1],
            "invalid": self.invalid if self.invalid_known else None,
            "judge_backends": sorted(self.backends),
            "confidence": self.confidence_line(),
            "cascade": self.cascade(),
            **({"worst": self.worst()} if self.worst_n else {}),
        }

    def cascade(self) -> dict[str, Any] | None:
        """With ``llm.verdict: cascade`` (results of the heuristic and of an LLM together): how
        many records the LLM judged, how many calls the heuristic saved, and their tokens at the
        LLM's mean per record. None when one backend judged every record."""
        heuristic = self.by_backend.get("heuristic", 0)
        llm = sum(n for b, n in self.by_backend.items() if b != "heuristic")
        if not heuristic or not llm:
            return None
        per_record = self.llm_tokens / llm
        return {
            "llm_records": llm,
            "heuristic_records": heuristic,
            "llm_share": round(llm / (llm + heuristic), 4),
            "calls_saved": heuristic,
            "tokens_per_llm_record": round(per_record, 1),
            "tokens_saved_estimate": round(heuristic * per_record),
        }

    def cascade_line(self) -> str | None:
        c = self.cascade()
        if c is None:
            return None
        # Short enough for the 120-column text summary whatever the counts.
        return (
            f"cascade: LLM judged {c['llm_records']:,} of "
            f"{c['llm_records'] + c['heuristic_records']:,} ({c['llm_share']:.0%}); "
            f"{c['calls_saved']:,} LLM calls saved (~{c['tokens_saved_estimate']:,} tokens)"
        )

    def load_calibration(self, setting: str | None) -> None:
        """Load the calibration the results were judged with (``setting`` as the settings'
        ``calibration``), when they carry calibrated confidences.

        Raises:
            ConfigError: the file is bad or was fitted for another judge.
        """
        if self.judge is not None and self.sources.get("calibrated"):
            self.calibration = calibration_for(setting, self.judge)

    def confidence_line(self) -> str:
        """Which confidence the results carry: calibrated (by what), token probabilities, or the
        judge's own word (not a probability)."""
        if not self.sources:
            return "confidence: no evaluated result"
        parts = []
        for source, n in sorted(self.sources.items(), key=lambda kv: -kv[1]):
            if source == "calibrated":
                what = (
                    self.calibration.describe()
                    if self.calibration is not None
                    else "a calibration file"
                )
                parts.append(f"calibrated ({what})")
            elif source == "token_probability":
                parts.append("the model's token probabilities, uncalibrated")
            else:
                parts.append("self-reported by the judge, not a probability (no calibration)")
            if len(self.sources) > 1:
                parts[-1] += f" on {n:,} results"
        return "confidence: " + "; ".join(parts)

    def _estimate(self, g: Group) -> dict[str, Any]:
        """The group's label-free accuracy (:mod:`stef.accuracy`), or null with the reason."""
        cal = self.calibration
        interval = None
        if not g.p_correct:
            note: str | None = "no calibrated p_correct in these results"
        elif g.referenced == len(g.p_correct):
            interval, note = _referenced_accuracy(g.p_correct), None
        elif cal is None:
            note = "the calibration that gave p_correct is not loaded (setting calibration)"
        else:
            squares = sum(p * p for p in g.p_correct)
            est = cal.label_free(len(g.p_correct), sum(g.p_correct), squares)
            interval, note = est.interval, est.reason
        return {
            "needs_review": g.needs_review,
            "estimated_accuracy": None
            if interval is None
            else {"value": interval.estimate, "low": interval.low, "high": interval.high},
            "estimated_accuracy_note": note,
        }

    def table(self) -> str:
        """A fixed-width text table no wider than :data:`TEXT_WIDTH`, one row per group and a
        total row, then a legend."""
        # Short headers keep a 40-character agent within 120 columns; the legend spells them out.
        head = ["app", "agent@version", "records", "mean", "p10", "coverage", "sampled"]
        head += ["error", "undec.", "review", "excel.", "good", "marg.", "poor"]
        figures = [_text_figures(g) for _, g in self._items()]
        names = [
            [app, f"{agent}@{version}" if version else agent]
            for (app, agent, version), _ in self._items()
        ]
        names[-1] = ["TOTAL", ""]
        # Long names shrink, the widest first, until the table fits; figures never do.
        caps = [max(len(n[i]) for n in [head[:2], *names]) for i in (0, 1)]
        fixed = sum(max(len(r[i]) for r in [head[2:], *figures]) for i in range(len(head) - 2))
        while fixed + sum(caps) + 2 * (len(head) - 1) > TEXT_WIDTH and max(caps) > 12:
            caps[caps.index(max(caps))] -= 1
        rows = [
            [_cut(a, caps[0]), _cut(b, caps[1]), *f]
            for (a, b), f in zip(names, figures, strict=True)
        ]
        lines = [self.confidence_line()]
        cascade = self.cascade_line()
        if cascade is not None:
            lines.append(cascade)
        lines.append(render_table(head, rows, left=2, rule_before={len(rows) - 1}))
        backend = ", ".join(sorted(self.backends)) or "-"
        invalid = self.invalid if self.invalid_known else "not counted (pass --dead-letters)"
        errors = self.total().judge_errors
        lines.append(
            f"judge: {backend}; judge errors: {errors}; invalid input lines (dead letters): "
            f"{invalid}"
        )
        total = self.total()
        if total.judge_error_reasons:
            lines.append(_cut("judge error reasons: " + _reasons(total), TEXT_WIDTH))
        lines.append(_cut(_cost_line(total), TEXT_WIDTH))
        lines.extend(self._legend())
        for row in self.worst():
            issues = ",".join(row["issues"])
            question = f" {row['question']!r}" if row["question"] else ""
            lines.append(
                _cut(
                    f"worst: {row['score']:5.1f} {row['tier'] or '-':<9} {row['id']} "
                    f"[{row['app'] or '-'}] {issues}{question}",
                    TEXT_WIDTH,
                )
            )
        return "\n".join(lines)

    def _legend(self) -> list[str]:
        """The lines under the table: what the columns mean, what this judge can tell, each
        release's top issues and the estimate."""
        out: list[str] = []
        total = self.total()
        out.append(
            "p10: the score a tenth of the evaluated records fall below (it moves first when a "
            "release goes wrong)"
        )
        out.append(
            "coverage: evaluated / records (sampled-out records and judge errors count against "
            "it); sampled: share sampled out"
        )
        out.append(
            "error: an error was found; undec.: the judge could not tell; review: needs_review; "
            "shares of evaluated"
        )
        out.extend(self._judge_lines())
        for (app, agent, version), g in self._items()[:-1]:
            top = ", ".join(f"{k} {v:.0%}" for k, v in g.top_issues())
            who = f"{agent}@{version}" if version else agent
            out.append(_cut(f"issues {app} {who}: {top or 'none'}", TEXT_WIDTH))
        est = self._estimate(total)
        found = est["estimated_accuracy"]
        accuracy = (
            f"{found['value']:.1%} [{found['low']:.1%}, {found['high']:.1%}] (95% CI)"
            if found is not None
            else f"no estimate: {est['estimated_accuracy_note']}"
        )
        out.append(_cut(f"accuracy without labels: {accuracy}", TEXT_WIDTH))
        out.append("every figure: stef summary --format json|csv|markdown")
        return out

    def _judge_lines(self) -> list[str]:
        """What this judge's figures can mean: which judge, and what its tiers say."""
        total = self.total()
        lines = [
            "excel./good/marg./poor: tiers rank the judge's confidence that the SQL is right; "
            "wrong SQL it found is error"
        ]
        if total.evaluated and not total.tiers["excellent"] + total.tiers["good"]:
            lines.append(
                "no record reached good: with this judge poor mostly means it could not tell "
                f"({total.share(total.mix['undecided']):.0%} undecided, "
                f"{total.share(total.mix['error']):.0%} error)"
            )
        return lines

    def _csv(self) -> str:
        out = io.StringIO()
        rows = self.as_dict()
        flat = [_flat(r) for r in [*rows["groups"], rows["total"]]]
        writer = csv.DictWriter(out, fieldnames=list(flat[0]), lineterminator="\n")
        writer.writeheader()
        writer.writerows({k: _inert(v) for k, v in row.items()} for row in flat)
        return out.getvalue().rstrip("\n")

    def _markdown(self) -> str:
        """A pull-request comment: ten columns at most, every other figure in ``--format json``."""
        rows = self.as_dict()
        head = ["app", "agent@version", "records", "mean", "error", "undecided"]
        head += ["needs review", "poor", "accuracy (95% CI)", "top issues"]
        lines = ["| " + " | ".join(head) + " |", "|" + "|".join("---" for _ in head) + "|"]
        for r in [*rows["groups"], rows["total"]]:
            who = f"{r['agent']}@{r['version']}" if r["version"] else r["agent"]
            mix = r["verdict_mix"]
            cells = [
                r["app"], who, str(r["records"]),
                "" if r["mean"] is None else f"{r['mean']:.1f}",
                f"{mix['error']:.0%}", f"{mix['undecided']:.0%}",
                f"{r['needs_review_share']:.0%}", f"{r['tier_shares']['poor']:.0%}",
                _markdown_estimate(r),
                ", ".join(f"{k} {v:.0%}" for k, v in list(r["issue_shares"].items())[:3]),
            ]  # fmt: skip
            lines.append("| " + " | ".join(_md_cell(str(c)) for c in cells) + " |")
        invalid = rows["invalid"] if rows["invalid"] is not None else "not counted"
        lines.append("")
        lines.append(
            f"Judge: {', '.join(rows['judge_backends']) or '-'}; error: an error was found; "
            f"undecided: it could not tell; invalid input lines (dead letters): {invalid}. "
            "Every figure: `stef summary --format json`."
        )
        return "\n".join(lines)


def _inert(value: Any) -> Any:
    """A CSV cell a spreadsheet shows rather than runs: text starting with ``=``, ``+``,
    ``-``, ``@`` (an app named ``=HYPERLINK(...)``) gets a leading ``'``; numbers as they are."""
    if isinstance(value, str) and value[:1] in ("=", "+", "-", "@", "\t", "\r"):
        return "'" + value
    return value


# Markdown that would turn an app's name into a link, an image, emphasis or HTML.
_MD_SPECIAL = re.compile(r"([\\`*_\[\]<>!|])")


def _md_cell(text: str) -> str:
    """A markdown table cell that reads as the text: ``![](url)`` in an app's name is no image
    in a pull-request comment, ``|`` no column."""
    return _MD_SPECIAL.sub(r"\\\1", text)


def _markdown_estimate(row: dict[str, Any]) -> str:
    est = row.get("estimated_accuracy")
    if est is None:
        return "no estimate"
    return f"{est['value']:.1%} [{est['low']:.1%}, {est['high']:.1%}]"


def _row(app: str, agent: str, version: str, g: Group) -> dict[str, Any]:
    return {
        "app": app,
        "agent": agent,
        "version": version or None,
        "records": g.received,
        "evaluated": g.evaluated,
        "judge_errors": g.judge_errors,
        "skipped_sampling": g.skipped,
        "mean": round(g.mean, 2) if g.mean is not None else None,
        "p10": g.p10,
        "p50": g.p50,
        "p90": g.p90,
        "coverage": round(g.coverage, 4),
        "sampled_out": round(g.sampled_out, 4),
        "tier_counts": dict(g.tiers),
        "tier_shares": {t: round(g.tier_share(t), 4) for t in TIERS},
        "verdict_mix": {k: round(g.share(v), 4) for k, v in g.mix.items()},
        "needs_review_share": round(g.share(g.needs_review), 4),
        "issue_shares": {k: round(g.share(v), 4) for k, v in g.issues.most_common()},
        "prompt_tokens": g.prompt_tokens,
        "completion_tokens": g.completion_tokens,
        "cache_hits": g.cache_hits,
        "cost_usd": round(g.cost_usd, 6) if g.priced else None,
        "judge_error_reasons": dict(g.judge_error_reasons.most_common()),
    }


def _reasons(g: Group) -> str:
    return ", ".join(f"{reason} x{n}" for reason, n in g.judge_error_reasons.most_common())


def _cost_line(g: Group) -> str:
    cost = f"${g.cost_usd:,.4f}" if g.priced else "unknown (no price table)"
    return (
        f"cost: {g.prompt_tokens:,} prompt + {g.completion_tokens:,} completion tokens; "
        f"cache hits: {g.cache_hits:,}; cost: {cost}"
    )


def _flat(row: dict[str, Any]) -> dict[str, Any]:
    skip: tuple[str, ...] = (
        "tier_counts",
        "tier_shares",
        "estimated_accuracy",
        "judge_error_reasons",
    )
    skip += ("verdict_mix", "issue_shares")
    flat = {k: v for k, v in row.items() if k not in skip}
    est = row.get("estimated_accuracy")
    for key in ("value", "low", "high"):
        flat[f"estimated_accuracy_{key}"] = None if est is None else est[key]
    for t in TIERS:
        flat[t] = row["tier_counts"][t]
    for t in TIERS:
        flat[f"{t}_share"] = row["tier_shares"][t]
    for k in MIX:
        flat[f"{k}_share"] = row["verdict_mix"][k]
    return flat


def _text_figures(g: Group) -> list[str]:
    mean, p10 = g.mean, g.p10
    return [
        str(g.received),
        f"{mean:.1f}" if mean is not None else "-",
        f"{p10:.1f}" if p10 is not None else "-",
        f"{g.coverage:.1%}",
        f"{g.sampled_out:.1%}",
        *[f"{g.share(g.mix[k]):.0%}" for k in MIX if k != "looks_right"],
        f"{g.share(g.needs_review):.0%}",
        *[f"{g.tier_share(t):.0%}" for t in TIERS],
    ]


# Apps and agents come from the records: a 10,000-character name must not widen the table.
_MAX_NAME = 40


def _shown(name: str) -> str:
    name = " ".join(name.split())  # no newline or tab may break a row
    # A name is the agent's to choose: a control or format character (ESC[2J clears the
    # screen, U+202E reverses the line) is shown escaped, never sent to the terminal.
    if not name.isprintable():
        name = "".join(c if c.isprintable() else ascii(c)[1:-1] for c in name)
    return _cut(name, _MAX_NAME)


def _cut(name: str, width: int) -> str:
    return name if len(name) <= width else name[: width - 1] + "…"


def _referenced_accuracy(p_correct: list[float]) -> Interval:
    """The accuracy of records every one of which a reference decided: the mean of the
    reference verdicts' P(correct) (each its verdict's rate on the labelled dev set,
    docs/reference.md), with the 95% interval of its sampling."""
    n = len(p_correct)
    mean = sum(p_correct) / n
    sd = math.sqrt(sum((p - mean) ** 2 for p in p_correct) / max(n - 1, 1))
    half = Z95 * sd / math.sqrt(n)
    return Interval(
        round(mean, 4), round(max(0.0, mean - half), 4), round(min(1.0, mean + half), 4)
    )

"""Per-app/agent summary of results, the paper's Table 4: mean score, P90, coverage, tiers."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field

from stef.models import Result
from stef.stats import quantile
from stef.text_table import render_table

TIERS = ("excellent", "good", "marginal", "poor")


@dataclass
class Group:
    """Counters of one (app, agent) group."""

    received: int = 0
    evaluated: int = 0
    judge_errors: int = 0
    skipped: int = 0
    scores: list[float] = field(default_factory=list)
    tiers: dict[str, int] = field(default_factory=lambda: dict.fromkeys(TIERS, 0))

    def add(self, result: Result) -> None:
        self.received += 1
        if result.outcome == "evaluated":
            self.evaluated += 1
            if result.score is not None:
                self.scores.append(result.score)
            if result.tier is not None:
                self.tiers[result.tier] += 1
        elif result.outcome == "judge_error":
            self.judge_errors += 1
        else:
            self.skipped += 1

    @property
    def mean(self) -> float | None:
        return sum(self.scores) / len(self.scores) if self.scores else None

    @property
    def coverage(self) -> float:
        """Share of the records meant to be judged that got a score: sampled-out records are left
        out (sampling is a choice), judge errors count against coverage."""
        wanted = self.received - self.skipped
        return self.evaluated / wanted if wanted else 0.0

    @property
    def sampled_out(self) -> float:
        return self.skipped / self.received if self.received else 0.0


@dataclass
class Summary:
    groups: dict[tuple[str, str], Group] = field(default_factory=lambda: defaultdict(Group))
    invalid: int = 0
    invalid_known: bool = True
    backends: set[str] = field(default_factory=set)

    def add(self, result: Result) -> None:
        agent = result.agent or "-"
        if result.agent_version:
            agent = f"{agent}@{result.agent_version}"
        self.groups[(_shown(result.app or "-"), _shown(agent))].add(result)
        self.backends.add(result.judge.backend)

    def extend(self, results: Iterable[Result]) -> Summary:
        for r in results:
            self.add(r)
        return self

    def total(self) -> Group:
        t = Group()
        for g in self.groups.values():
            t.received += g.received
            t.evaluated += g.evaluated
            t.judge_errors += g.judge_errors
            t.skipped += g.skipped
            t.scores.extend(g.scores)
            for k, v in g.tiers.items():
                t.tiers[k] += v
        return t

    def table(self) -> str:
        """A fixed-width text table, one row per app/agent and a total row."""
        head = ["app", "agent", "count", "mean", "p90", "coverage", "sampled out", *TIERS, "errors"]
        rows = []
        items = sorted(self.groups.items())
        for (app, agent), g in [*items, (("TOTAL", ""), self.total())]:
            n = g.evaluated or 1
            mean = g.mean
            # Nearest rank: the P90 is a score some record got.
            p90 = quantile(g.scores, 0.9, "nearest_rank") if g.scores else None
            rows.append(
                [
                    app,
                    agent,
                    str(g.received),
                    f"{mean:.1f}" if mean is not None else "-",
                    f"{p90:.1f}" if p90 is not None else "-",
                    f"{g.coverage:.1%}",
                    f"{g.sampled_out:.1%}",
                    *[f"{g.tiers[t] / n:.1%}" for t in TIERS],
                    str(g.judge_errors),
                ]
            )
        lines = [render_table(head, rows, left=2, rule_before={len(rows) - 1})]
        backend = ", ".join(sorted(self.backends)) or "-"
        invalid = self.invalid if self.invalid_known else "not counted (pass --dead-letters)"
        lines.append(
            f"judge: {backend}; invalid input lines (dead letters): {invalid}; tier shares are of "
            "evaluated records; coverage leaves sampled-out records out"
        )
        return "\n".join(lines)


# Apps and agents come from the records: a 10,000-character name must not widen the table.
_MAX_NAME = 40


def _shown(name: str) -> str:
    name = " ".join(name.split())  # no newline or tab may break a row
    return name if len(name) <= _MAX_NAME else name[: _MAX_NAME - 1] + "…"

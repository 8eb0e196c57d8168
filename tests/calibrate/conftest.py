"""Helpers of the calibration tests: the report's keys, a recording judge, a small labels file."""

from __future__ import annotations

import json
from pathlib import Path

from stef.errors import JudgeError
from stef.judges.base import JudgeReply, JudgeRequest
from stef.judges.heuristic.judge import HeuristicJudge
from stef.models import JudgeInfo

KEYS = {
    "n",
    "accuracy",
    "kappa",
    "kappa_ci",
    "balanced_accuracy",
    "sensitivity",
    "specificity",
    "confusion",
    "judge_errors",
    "auc",
    "auc_ci",
    "brier",
    "ece",
    "breakdown",
}
# The keys only the overall report has: the probability figures of issue 22.
OVERALL_KEYS = {
    "reliability",
    "per_source",
    "per_source_dimension",
    "mean_over_sources",
    "resolution",
    "resolution_ci",
    "window",
    "min_drop",
    "min_drop_ci",
}


class Recording:
    """Wraps the heuristic judge: records what the judge saw; fails on a marked question."""

    def __init__(self) -> None:
        self.inner = HeuristicJudge()
        self.seen: list[JudgeRequest] = []

    @property
    def info(self) -> JudgeInfo:
        return self.inner.info

    def judge(self, request: JudgeRequest) -> JudgeReply:
        self.seen.append(request)
        if "FAIL" in request.record.question:
            raise JudgeError("timeout", "the fake endpoint timed out")
        return self.inner.judge(request)


def labels_file(tmp_path: Path) -> Path:
    """Four labelled records: a correct one, a wrong one with gold SQL, one the judge fails on
    (``FAIL``) and one that is invalid input (the question is a number)."""
    rows = [
        {"id": "a", "question": "How many singers are there?", "sql": "SELECT COUNT(*) FROM singer",
         "label": True, "source": "S1", "gold_sql": "SELECT COUNT(*) FROM gold_secret_table"},
        {"id": "b", "question": "Names of singers from France", "app": "bird",
         "sql": "select name from singer where country = 'Germany'", "label": False,
         "source": "S1", "error_types": ["Value Mismatch"],
         "gold_sql": "SELECT name FROM gold_secret_table WHERE country = 'France'"},
        {"id": "c", "question": "FAIL please", "sql": "SELECT 1", "label": True, "source": "S2"},
        {"id": "d", "question": 7, "sql": "SELECT 1", "label": False, "source": "S2"},
    ]  # fmt: skip
    path = tmp_path / "labels.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows) + "\n", encoding="utf-8")
    return path

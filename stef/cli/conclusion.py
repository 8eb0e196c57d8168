"""``stef calibrate``'s conclusion in plain words: how far the judge agrees with the labels, in a
few sentences a team reads before the tables (the figures are the report's own)."""

from __future__ import annotations

from typing import Any

# Landis and Koch's words for kappa, the usual reading of agreement beyond chance.
_KAPPA_WORDS = (
    (0.8, "almost perfectly"),
    (0.6, "substantially"),
    (0.4, "moderately"),
    (0.2, "fairly"),
    (0.0, "slightly"),
)
# Below this many labels the intervals are too wide to act on.
FEW_LABELS = 100


def conclusion(rep: dict[str, Any]) -> str:
    """The report ``rep`` (:func:`stef.calibrate.report.report`) in plain words."""
    n, kappa = rep.get("n") or 0, rep.get("kappa")
    if not n or kappa is None:
        return "In short: no labelled record was judged, so there is nothing to conclude yet."
    low, high = (rep.get("kappa_ci") or [None, None])[:2]
    ci = f", 95% interval {low:.2f} to {high:.2f}" if low is not None else ""
    words = next((w for bound, w in _KAPPA_WORDS if kappa >= bound), None)
    if words is None:  # below 0: less agreement than chance would give
        agrees = "agrees with people less often than chance would"
    else:
        agrees = f"agrees with people {words} beyond chance"
    lines = [f"In short: on {n} labelled records the judge {agrees} (kappa {kappa:.2f}{ci})."]
    if high is not None and high < 0:
        lines.append("That interval lies below 0: the judge's verdicts run against the labels.")
    elif low is not None and low <= 0:
        lines.append("That interval reaches 0: it is not yet shown to beat chance.")
    sens, spec = rep.get("sensitivity"), rep.get("specificity")
    if sens is not None and spec is not None:
        lines.append(
            f"It passes {sens:.0%} of the correct SQL and catches {spec:.0%} of the wrong SQL."
        )
    auc = rep.get("auc")
    if auc is not None:
        lines.append(
            f"Given one correct and one wrong record, it scores the correct one higher "
            f"{auc:.0%} of the time (AUC)."
        )
    ece = rep.get("ece")
    if ece is not None:
        lines.append(
            f"Its probabilities are off by {ece:.2f} on average (ECE): "
            + (
                "read them as probabilities."
                if ece <= 0.05
                else "read them as a ranking; "
                "fit a calibration on your own labels (--fit) before reading them as chances."
            )
        )
    if n < FEW_LABELS:
        lines.append(
            f"With fewer than {FEW_LABELS} labels the intervals are wide: label more "
            "(stef review --order random) before trusting these figures."
        )
    return " ".join(lines)

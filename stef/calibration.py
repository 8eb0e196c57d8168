"""Calibration: the judge's raw signal mapped to P(the SQL answers the question), and what that
probability tells about a window of records (issue 22).

A judge's self-reported confidence is not a probability of anything (the heuristic says 0.85 on
every parsed SQL; a small model says 1.0 on almost everything). A calibration file, fitted by
``stef calibrate LABELS --fit FILE`` against human labels, holds a monotone map from the judge's
*raw signal* to ``p_correct``:

- the heuristic: its uncalibrated score / 100;
- an LLM with token probabilities (probability mode, or structured mode when the endpoint returns
  log-probabilities): P(Yes) / (P(Yes) + P(No));
- an LLM without them: its verdict and self-reported confidence on one axis,
  ``0.5 + 0.5 × side × confidence`` (side +1 Correct, +0.5 Likely Correct, -0.5 Potentially
  Incorrect, -1 Incorrect), so the map can at least order the four verdicts.

The record's ``confidence`` is then the confidence in its verdict: ``p_correct`` for a passing
verdict (Correct, Likely Correct), ``1 - p_correct`` otherwise, and Γ is taken from it.

The file names the judge it was fitted for (backend, model, prompt version, mode): a raw signal
means nothing for another judge, so applying it to one is refused at start.

The estimate of an agent's accuracy without labels (:meth:`Calibration.label_free`, computed
in :mod:`stef.accuracy`) corrects the window's mean p_correct by how far apart the judge puts
correct and wrong SQL on the labels, and widens its interval by how far those averages move from
one labelled source to another (the file's ``transfer``, format 2).
"""

from __future__ import annotations

import json
import math
from importlib import resources
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from stef.accuracy import LabelFree, Transfer, label_free
from stef.errors import ConfigError, FileError
from stef.files import read_bounded, utf8_text
from stef.models import JudgeInfo, JudgeOutput, Verdict

FORMAT_VERSION = 2
# Format 1 files (no ``transfer``) still load: their label-free estimate declines.
READABLE_FORMATS = (1, 2)
ConfidenceSource = Literal["calibrated", "token_probability", "self_reported"]

# Where each verdict sits on the structured mode's one axis (see the module docstring).
_SIDE = {
    Verdict.CORRECT: 1.0,
    Verdict.LIKELY_CORRECT: 0.5,
    Verdict.POTENTIALLY_INCORRECT: -0.5,
    Verdict.INCORRECT: -1.0,
}
# A calibrated probability never reaches 0 or 1: a finite labelled set cannot say "certain".
P_FLOOR = 0.01
# A fitted file is a few KB (the shipped one 4 KB); a larger one is not read into memory.
MAX_FILE_BYTES = 16 * 1024 * 1024
# A raw signal and a probability are both in 0-1: a point outside is no fitted map.
Unit = Annotated[float, Field(ge=0, le=1)]

# Results carry p_correct to 4 decimals; the pass threshold is chosen among the values they carry
# (a threshold of 0.54775 would fail the 0.5477 that a p of 0.54775 is written as).
P_DIGITS = 4


def published(p: float) -> float:
    """p_correct as a result carries it."""
    return round(p, P_DIGITS)


class Judged(BaseModel):
    """The judge a calibration was fitted for: each field must match the judge it is applied to."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    backend: str
    model: str | None = None
    prompt_version: str | None = None
    mode: str | None = None


class MonotoneMap(BaseModel):
    """raw signal (0-1) -> p_correct: ``platt`` (``1 / (1 + exp(-(a x + b)))``) or ``isotonic``
    (non-decreasing steps at ``x`` with values ``y``, interpolated linearly between them).
    Every number is finite, and ``x`` and ``y`` are in 0-1: a NaN passes any order check and
    every p_correct it touches came out as the floor or the ceiling."""

    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)

    kind: Literal["platt", "isotonic"]
    a: float = 0.0
    b: float = 0.0
    x: list[Unit] = Field(default_factory=list)
    y: list[Unit] = Field(default_factory=list)

    @model_validator(mode="after")
    def _shape(self) -> MonotoneMap:
        if self.kind == "isotonic":
            if not self.x or len(self.x) != len(self.y):
                raise ValueError("isotonic: x and y must be non-empty and of the same length")
            if any(b < a for a, b in zip(self.x, self.x[1:], strict=False)) or any(
                b < a for a, b in zip(self.y, self.y[1:], strict=False)
            ):
                raise ValueError("isotonic: x and y must be non-decreasing")
        elif self.a < 0:
            raise ValueError("platt: slope a must be >= 0 (the map is non-decreasing)")
        return self

    def __call__(self, raw: float) -> float:
        if self.kind == "platt":
            z = self.a * raw + self.b
            p = 1 / (1 + math.exp(-z)) if z >= 0 else math.exp(z) / (1 + math.exp(z))
        else:
            p = _interpolate(self.x, self.y, raw)
        return min(1 - P_FLOOR, max(P_FLOOR, p))


def _interpolate(xs: list[float], ys: list[float], x: float) -> float:
    if x <= xs[0]:
        return ys[0]
    if x >= xs[-1]:
        return ys[-1]
    lo, hi = 0, len(xs) - 1
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if xs[mid] <= x:
            lo = mid
        else:
            hi = mid
    x0, x1, y0, y1 = xs[lo], xs[hi], ys[lo], ys[hi]
    return y0 if x1 == x0 else y0 + (y1 - y0) * (x - x0) / (x1 - x0)


class SourceMeans(BaseModel):
    """One labelled source's class averages of p_correct under the fitted map (None for a class
    with fewer than two records in the source)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    n: int = Field(ge=0)
    mean_p_correct: Unit | None = None
    mean_p_wrong: Unit | None = None


class TransferSpread(BaseModel):
    """How the class averages move between the calibration's sources: their mean and standard
    deviation over the sources that have the class (each source counted once)."""

    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)

    sources: dict[str, SourceMeans]
    mean_p_correct: Unit
    mean_p_wrong: Unit
    sd_p_correct: float = Field(ge=0)
    sd_p_wrong: float = Field(ge=0)
    n_sources: int = Field(ge=0, description="sources that have both classes' averages")

    def spread(self) -> Transfer:
        return Transfer(
            self.mean_p_correct,
            self.mean_p_wrong,
            self.sd_p_correct,
            self.sd_p_wrong,
            self.n_sources,
        )


# The fitted figures a calibration file carries, and their ranges.
_FIGURE_RANGES = {"auc": (0, 1), "brier": (0, 1), "ece": (0, 1), "kappa": (-1, 1)}


class Calibration(BaseModel):
    """A calibration file (written by ``stef calibrate --fit``).

    Attributes:
        format: the file format's version.
        judge: the judge it was fitted for.
        map: the raw signal -> p_correct map.
        threshold: the pass threshold on p_correct that maximised Cohen's kappa on the labels.
        labels: how many labelled records it was fitted on.
        labels_file: the labels file's name.
        mean_p_correct: E[p_correct | correct] on the labels (cross-source predictions).
        mean_p_wrong: E[p_correct | wrong] on the labels (cross-source predictions).
        metrics: the fitted figures (AUC, Brier, ECE, kappa, cross-source and in-sample).
        transfer: the class averages per source and their spread (None in format 1 files).
        fitted_at: when (UTC, ISO 8601).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    format: int = FORMAT_VERSION
    judge: Judged
    map: MonotoneMap
    threshold: float = Field(ge=0, le=1)
    labels: int = Field(ge=1)
    labels_file: str | None = None
    mean_p_correct: float = Field(ge=0, le=1)
    mean_p_wrong: float = Field(ge=0, le=1)
    metrics: dict[str, Any] = Field(default_factory=dict)
    transfer: TransferSpread | None = None
    fitted_at: str | None = None

    @field_validator("metrics")
    @classmethod
    def _figures_in_range(cls, metrics: dict[str, Any]) -> dict[str, Any]:
        """The figures a run prints (AUC beside the confidence line) are numbers in their
        range: a 401-digit AUC stopped the end of every replay and summary (OverflowError)."""
        for name, (low, high) in _FIGURE_RANGES.items():
            value = metrics.get(name)
            if value is None:
                continue
            if not (isinstance(value, int | float) and not isinstance(value, bool)) or not (
                low <= value <= high  # False for NaN; an integer of any size compares
            ):
                raise ValueError(f"metrics.{name} must be a number from {low} to {high}")
        return metrics

    @property
    def resolution(self) -> float:
        """E[p | correct] - E[p | wrong]: how far apart the judge puts correct and wrong SQL."""
        return self.mean_p_correct - self.mean_p_wrong

    def label_free(self, n: int, total: float, squares: float) -> LabelFree:
        """The label-free estimate of ``n`` p_correct values (their sum and sum of squares)."""
        spread = None if self.transfer is None else self.transfer.spread()
        return label_free(n, total, squares, self.mean_p_correct, self.mean_p_wrong, spread)

    def describe(self) -> str:
        """One line for people: ``heuristic, calibrated on 2,002 labels, AUC 0.61``."""
        who = self.judge.backend + (f" {self.judge.model}" if self.judge.model else "")
        if self.judge.mode:
            who += f" ({self.judge.mode})"
        auc = self.metrics.get("auc")
        tail = f", AUC {auc:.2f}" if isinstance(auc, int | float) else ""
        return f"{who}, calibrated on {self.labels:,} labels{tail}"

    def check(self, info: JudgeInfo) -> None:
        """Refuse a calibration fitted for another judge.

        Raises:
            ConfigError: one line naming the field that differs.
        """
        current = judged_of(info)
        for field in ("backend", "model", "prompt_version", "mode"):
            want, have = getattr(self.judge, field), getattr(current, field)
            if want != have:
                raise ConfigError(
                    f"calibration was fitted for {field} {want!r}, this judge has {have!r}: "
                    "fit one for this judge (stef calibrate LABELS --fit FILE) or set "
                    "calibration: none"
                )


def judged_of(info: JudgeInfo) -> Judged:
    """The identity of a judge as a calibration file records it."""
    # ``mode`` is the LLM verdict mode (structured, probability, cascade); absent before it exists.
    mode = getattr(info, "mode", None)
    return Judged(
        backend=info.backend,
        model=info.model,
        prompt_version=info.prompt_version,
        mode=mode if isinstance(mode, str) else None,
    )


def token_probability(output: JudgeOutput) -> float | None:
    """P(Yes) / (P(Yes) + P(No)) from the endpoint's log-probabilities, when it gave them."""
    p = getattr(output, "token_probability", None)
    return float(p) if isinstance(p, int | float) else None


def raw_signal(
    backend: str, verdict: Verdict, confidence: float, score: float, token_p: float | None
) -> float:
    """The judge's raw signal in 0-1 (see the module docstring)."""
    if token_p is not None:
        return token_p
    if backend == "heuristic":
        return round(score / 100, 6)
    return round(0.5 + 0.5 * _SIDE[verdict] * confidence, 6)


def default_path(backend: str) -> Path | None:
    """The calibration shipped with the package for ``backend`` (only the heuristic has one)."""
    if backend != "heuristic":
        return None
    path = Path(str(resources.files("stef") / "calibrations" / "heuristic.json"))
    return path if path.is_file() else None


def load_calibration(path: str | Path) -> Calibration:
    """Read a calibration file.

    Raises:
        ConfigError: unreadable, not a regular file (a FIFO blocked the start, deaf to SIGTERM;
            /dev/zero filled the memory), larger than :data:`MAX_FILE_BYTES`, not UTF-8, not
            JSON, or not a calibration (one line).
    """
    try:
        text = utf8_text(read_bounded(path, MAX_FILE_BYTES, kind="calibration file"), path)
    except FileError as exc:
        raise ConfigError(f"calibration {exc}") from exc
    try:
        data = json.loads(text)
    except ValueError as exc:  # an integer past the interpreter's digit limit is one too
        raise ConfigError(f"calibration {path}: not JSON: {exc}") from exc
    except RecursionError:
        raise ConfigError(f"calibration {path}: not JSON: nested too deeply") from None
    if isinstance(data, dict) and data.get("format") not in (None, *READABLE_FORMATS):
        raise ConfigError(
            f"calibration {path}: format {data.get('format')!r}, this STEF reads "
            f"{' and '.join(map(str, READABLE_FORMATS))}"
        )
    try:
        return Calibration.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "file"
        raise ConfigError(f"calibration {path}: {where}: {first['msg']}") from exc


def calibration_for(setting: str | None, info: JudgeInfo) -> Calibration | None:
    """The calibration a judge runs with: ``setting`` None is the package's default for the
    backend (the heuristic's; none for an LLM), ``none`` is none, anything else a file, checked
    against the judge.

    Raises:
        ConfigError: the file is bad or was fitted for another judge.
    """
    if setting is not None and setting.strip().lower() in ("none", "off", ""):
        return None
    if setting is None:
        path = default_path(info.backend)
        if path is None:
            return None
        cal = load_calibration(path)
    else:
        cal = load_calibration(setting)
    cal.check(info)
    return cal


def confidence_in(verdict_passes: bool, p_correct: float) -> float:
    """The confidence in a verdict: p_correct for a passing verdict, 1 - p_correct otherwise."""
    return round(p_correct if verdict_passes else 1 - p_correct, 4)

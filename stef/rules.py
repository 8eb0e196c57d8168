"""App rules: the per-app YAML the app's owners edit; loaded, validated, versioned, hot-reloaded.

A rules *path* is either one YAML file (its rules apply to every record) or a directory holding
``default.yaml`` and one ``<app>.yaml`` per app. Every problem is reported with its file and line.
"""

from __future__ import annotations

import hashlib
import json
import threading
from pathlib import Path
from typing import Any

import structlog
import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from stef.errors import RuleProblem, RulesError
from stef.sql.predicates import parse_condition

log = structlog.get_logger(__name__)


class TierBounds(BaseModel):
    """Lower score bounds of the tiers (SPEC §2): excellent ≥ 90, good ≥ 75, marginal ≥ 50."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    excellent: float = Field(90.0, ge=0, le=100)
    good: float = Field(75.0, ge=0, le=100)
    marginal: float = Field(50.0, ge=0, le=100)

    @model_validator(mode="after")
    def _ordered(self) -> TierBounds:
        if not self.excellent >= self.good >= self.marginal:
            raise ValueError("tier bounds must satisfy excellent >= good >= marginal")
        return self


class ConfidenceThresholds(BaseModel):
    """Confidence γ cut-offs of the multiplier Γ: 1.0 at ≥ high, 0.8 at ≥ medium, else 0.5."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    high: float = Field(0.85, ge=0, le=1)
    medium: float = Field(0.65, ge=0, le=1)

    @model_validator(mode="after")
    def _ordered(self) -> ConfidenceThresholds:
        if self.high < self.medium:
            raise ValueError("confidence thresholds must satisfy high >= medium")
        return self


class AppRules(BaseModel):
    """The rules of one app (SPEC §2 "App rules"). Unknown keys are errors, not ignored."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    app: str | None = Field(None, description="App name; defaults to the file name.")
    dialect: str | None = Field(None, description="sqlglot dialect of this app's SQL.")
    column_mappings: dict[str, str] = Field(
        default_factory=dict, description="Question term -> physical column (region: RegionName)."
    )
    benign_filters: list[str] = Field(
        default_factory=list, description="SQL predicates that are acceptable defaults."
    )
    ignore_filters: list[str] = Field(
        default_factory=list, description="Columns whose predicates are left out of alignment."
    )
    limit_min: int = Field(1000, ge=1, description="LIMIT at or above this is a safety limit.")
    tiers: TierBounds = Field(default_factory=TierBounds)
    confidence: ConfidenceThresholds = Field(default_factory=ConfidenceThresholds)
    sampling_rate: float = Field(1.0, ge=0, le=1, description="Share of records judged.")
    notes: list[str] = Field(
        default_factory=list, description="Domain conventions for the judge, as plain text."
    )

    def merged(self, fragment: dict[str, Any]) -> AppRules:
        """These rules with the keys of ``fragment`` replaced (validated like a file)."""
        return AppRules.model_validate({**self.model_dump(), **fragment})


class RuleSet:
    """The rules in force: one per known app plus the default; immutable once built."""

    def __init__(
        self,
        default: AppRules,
        apps: dict[str, AppRules] | None = None,
        *,
        source: str = "<built-in>",
        single_file: bool = False,
    ) -> None:
        self.default = default
        self.apps = dict(apps or {})
        self.source = source
        self.single_file = single_file
        canonical = json.dumps(
            {
                "default": default.model_dump(mode="json"),
                "apps": {k: v.model_dump(mode="json") for k, v in sorted(self.apps.items())},
            },
            sort_keys=True,
        )
        self.version = hashlib.sha256(canonical.encode()).hexdigest()[:12]

    def for_app(self, app: str | None) -> AppRules:
        """The rules of ``app``; absent or unknown apps get the default (SPEC §1)."""
        if app is not None and app in self.apps:
            return self.apps[app]
        return self.default

    @property
    def known_apps(self) -> list[str]:
        return sorted(self.apps)


# ------------------------------------------------------------------------------------- loading


def _line_of(node: yaml.Node | None, loc: tuple[int | str, ...]) -> int | None:
    """The 1-based line of the YAML node at pydantic location ``loc``, or of its nearest parent."""
    line = node.start_mark.line + 1 if node is not None else None
    for part in loc:
        if isinstance(node, yaml.MappingNode):
            nxt = next((v for k, v in node.value if getattr(k, "value", None) == part), None)
            if nxt is None:
                key = next((k for k, _ in node.value if getattr(k, "value", None) == part), None)
                return key.start_mark.line + 1 if key is not None else line
            node = nxt
        elif (
            isinstance(node, yaml.SequenceNode) and isinstance(part, int) and part < len(node.value)
        ):
            node = node.value[part]
        else:
            return line
        line = node.start_mark.line + 1
    return line


def parse_rules_text(text: str, path: str, *, app: str | None = None) -> AppRules:
    """Parse and validate one rules document.

    Raises:
        RulesError: with one :class:`RuleProblem` per problem, located by line.
    """
    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = mark.line + 1 if mark is not None else None
        raise RulesError([RuleProblem(path, line, "", f"not valid YAML: {exc}")]) from exc
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise RulesError([RuleProblem(path, 1, "", "top level must be a mapping of rule keys")])
    if app is not None and data.get("app") is None:
        data["app"] = app
    semantic = _check_semantics(data, path, node)
    try:
        rules = AppRules.model_validate(data)
    except ValidationError as exc:
        problems = [
            RuleProblem(
                path,
                _line_of(node, tuple(err["loc"])),
                ".".join(str(p) for p in err["loc"]),
                err["msg"] if err["type"] != "extra_forbidden" else "unknown key",
            )
            for err in exc.errors()
        ]
        raise RulesError(sorted([*problems, *semantic], key=lambda p: p.line or 0)) from exc
    if semantic:
        raise RulesError(semantic)
    return rules


def _check_semantics(data: dict[str, Any], path: str, node: yaml.Node | None) -> list[RuleProblem]:
    """Checks pydantic cannot express: benign filters must parse as SQL predicates."""
    problems = []
    dialect = data.get("dialect") if isinstance(data.get("dialect"), str) else None
    if dialect is not None:
        import sqlglot

        try:
            sqlglot.Dialect.get_or_raise(dialect)
        except ValueError:
            problems.append(
                RuleProblem(
                    path,
                    _line_of(node, ("dialect",)),
                    "dialect",
                    f"unknown sqlglot dialect {dialect!r}",
                )
            )
            dialect = None  # still check the filters, in the generic dialect
    benign = data.get("benign_filters")
    for i, text in enumerate(benign if isinstance(benign, list) else []):
        if isinstance(text, str) and parse_condition(text, dialect) is None:
            problems.append(
                RuleProblem(
                    path,
                    _line_of(node, ("benign_filters", i)),
                    f"benign_filters.{i}",
                    f"not a SQL predicate: {text!r}",
                )
            )
    return problems


def load_rules(path: str | Path | None) -> RuleSet:
    """Load a rules file or directory; ``None`` gives the built-in defaults.

    Raises:
        RulesError: every problem of every file, not just the first.
    """
    if path is None:
        return RuleSet(AppRules())
    p = Path(path)
    if p.is_dir():
        problems: list[RuleProblem] = []
        apps: dict[str, AppRules] = {}
        default = AppRules()
        files = sorted([*p.glob("*.yaml"), *p.glob("*.yml")])
        for f in files:
            try:
                rules = parse_rules_text(f.read_text(encoding="utf-8"), str(f), app=f.stem)
            except RulesError as exc:
                problems.extend(exc.problems)
                continue
            if f.stem == "default":
                default = rules.model_copy(update={"app": None})
            else:
                apps[f.stem] = rules
        if problems:
            raise RulesError(problems)
        return RuleSet(default, apps, source=str(p))
    if p.is_file():
        rules = parse_rules_text(p.read_text(encoding="utf-8"), str(p))
        return RuleSet(rules, {}, source=str(p), single_file=True)
    raise RulesError([RuleProblem(str(p), None, "", "no such rules file or directory")])


def rules_schema() -> dict[str, Any]:
    """The JSON schema of one rules file, for editors (``rules/schema.json``)."""
    schema = AppRules.model_json_schema()
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = "STEF app rules"
    return schema


class RulesWatcher:
    """Hot reload: re-reads the rules path when a file changes; keeps the last good rules."""

    def __init__(self, path: str | Path | None, on_reload: Any = None) -> None:
        self.path = Path(path) if path is not None else None
        self._lock = threading.Lock()
        self._rules = load_rules(self.path)
        self._stamp = self._fingerprint()
        self._on_reload = on_reload

    @property
    def rules(self) -> RuleSet:
        with self._lock:
            return self._rules

    def _fingerprint(self) -> tuple[tuple[str, float, int], ...]:
        if self.path is None:
            return ()
        files = sorted(self.path.glob("*.y*ml")) if self.path.is_dir() else [self.path]
        out = []
        for f in files:
            try:
                st = f.stat()
            except OSError:
                continue
            out.append((str(f), st.st_mtime, st.st_size))
        return tuple(out)

    def check(self) -> str | None:
        """Reload if anything changed. Returns ``"success"``, ``"error"`` or None (no change)."""
        stamp = self._fingerprint()
        if stamp == self._stamp:
            return None
        self._stamp = stamp
        try:
            rules = load_rules(self.path)
        except RulesError as exc:
            log.error(
                "rules_reload_rejected",
                path=str(self.path),
                problems=[str(p) for p in exc.problems],
            )
            outcome = "error"
        else:
            with self._lock:
                self._rules = rules
            log.info("rules_reloaded", path=str(self.path), rules_version=rules.version)
            outcome = "success"
        if self._on_reload is not None:
            self._on_reload(outcome)
        return outcome

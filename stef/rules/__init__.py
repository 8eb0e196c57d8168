"""App rules: the per-app YAML the app's owners edit; loaded, validated, versioned, hot-reloaded.

A rules *path* is either one YAML file (its rules apply to every record) or a directory holding
``default.yaml`` and one ``<app>.yaml`` per app (hidden files, such as editor lock files, are
skipped). Every problem is reported with its file and, when known, its line: a rules edit is
written by people while the service runs, so no edit may crash the loader, whatever its bytes.

:mod:`stef.rules.safe_yaml` reads the YAML within caps; :mod:`stef.rules.watch` hot-reloads.
"""

from __future__ import annotations

import difflib
import hashlib
import json
import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import cached_property, lru_cache
from pathlib import Path
from typing import Any, Self

import structlog
import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    model_validator,
)

from stef.errors import FileError, RuleProblem, RulesError
from stef.files import read_bounded, utf8_text
from stef.rules.safe_yaml import MAX_RULES_BYTES, line_of, load_yaml, yaml_problem
from stef.sql.dialects import dialect_names, dialect_of
from stef.sql.nesting import MAX_CALL_NESTING, call_nesting
from stef.sql.predicates import parse_condition, parsed_condition_keys

log = structlog.get_logger(__name__)

#: Past this many problems in one file the rest is noise (a pasted list of 10,000 numbers).
MAX_PROBLEMS_PER_FILE = 20

PredicateKey = tuple[str, str, str]
_BOOL_EQUIV = {"true": "1", "false": "0"}


def fold_key(key: PredicateKey) -> PredicateKey:
    """A predicate key with TRUE/FALSE read as 1/0, as SQL engines compare them."""
    lhs, op, rhs = key
    return lhs, op, _BOOL_EQUIV.get(rhs, rhs)


@lru_cache(maxsize=64)
def _read_benign(
    filters: tuple[str, ...], dialect: str | None
) -> tuple[frozenset[PredicateKey], tuple[int, ...]]:
    """The folded keys of the benign filters, and the indices of those that are no SQL
    predicate. Cached, so the load's check and the model it builds parse each filter once: a
    parse is most of a filter's cost (40,000 filters took 16 s to load, each parsed twice)."""
    keys: set[PredicateKey] = set()
    bad: list[int] = []
    for i, text in enumerate(filters):
        node = parse_condition(text, dialect)
        if node is None:
            bad.append(i)
        else:
            keys.update(fold_key(k) for k in parsed_condition_keys(node, dialect))
    return frozenset(keys), tuple(bad)


def _benign_keys(filters: tuple[str, ...], dialect: str | None) -> frozenset[PredicateKey]:
    return _read_benign(filters, dialect)[0]


class TierBounds(BaseModel):
    """Lower score bounds of the tiers: excellent ≥ 90, good ≥ 75, marginal ≥ 50."""

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
    """The rules of one app (README, "Rules"). Unknown keys are errors, not ignored."""

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

    @cached_property
    def _own_benign_keys(self) -> frozenset[PredicateKey]:
        # In __dict__, not a pydantic private attribute: those are read through a slow
        # __getattr__ (2 µs against 0.1 µs, on every predicate of every record).
        return _benign_keys(tuple(self.benign_filters), self.dialect)

    @cached_property
    def justification(self) -> str:
        """The benign filters and the notes as one case-folded text: what may justify a value
        the enriched question adds. Built once: joined for each record with an enriched
        question, 40,000 filters and 2,000 notes cost 3 ms a record."""
        return " ".join([*self.benign_filters, *self.notes]).casefold()

    def model_post_init(self, context: Any, /) -> None:
        # Parsed here, at load, so matching a record's predicate is a set lookup.
        _ = self._own_benign_keys
        _ = self.justification

    def model_copy(self, *, update: Mapping[str, Any] | None = None, deep: bool = False) -> Self:
        """A copy, its benign keys re-parsed when ``update`` changes what they derive from."""
        copy = super().model_copy(update=update, deep=deep)
        if update is not None and {"benign_filters", "dialect"} & update.keys():
            copy.__dict__.pop("_own_benign_keys", None)  # copied from self: from the old values
            _ = copy._own_benign_keys
        if update is not None and {"benign_filters", "notes"} & update.keys():
            copy.__dict__.pop("justification", None)
            _ = copy.justification
        return copy

    def benign_keys(self, dialect: str | None) -> frozenset[PredicateKey]:
        """The folded (lhs, op, rhs) keys of the benign filters, read in ``dialect``."""
        if dialect == self.dialect:
            return self._own_benign_keys
        # A record naming its own dialect: rare, and the small cache bounds the parses.
        return _benign_keys(tuple(self.benign_filters), dialect)

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
        """The rules of ``app``; absent or unknown apps get the default."""
        if app is not None and app in self.apps:
            return self.apps[app]
        return self.default

    @property
    def known_apps(self) -> list[str]:
        return sorted(self.apps)


# ------------------------------------------------------------------------------------- parsing


def _capped(path: str, problems: list[RuleProblem]) -> list[RuleProblem]:
    if len(problems) <= MAX_PROBLEMS_PER_FILE:
        return problems
    rest = len(problems) - MAX_PROBLEMS_PER_FILE
    more = RuleProblem(path, None, "", f"... and {rest} more problem(s) in this file")
    return [*problems[:MAX_PROBLEMS_PER_FILE], more]


def parse_rules_text(text: str, path: str, *, app: str | None = None) -> AppRules:
    """Parse and validate one rules document.

    Raises:
        RulesError: with one :class:`RuleProblem` per problem, located by line; never anything
            else, whatever ``text`` holds.
    """
    try:
        return _parse(text, path, app)
    except RulesError as exc:
        raise RulesError(_capped(path, exc.problems)) from exc
    except Exception as exc:  # last guard: a rules edit must not stop the service (module doc)
        detail = str(exc)[:200]
        message = f"could not be loaded: {type(exc).__name__}: {detail}"
        raise RulesError([RuleProblem(path, None, "", message)]) from exc


def _parse(text: str, path: str, app: str | None) -> AppRules:
    if len(text) > MAX_RULES_BYTES:
        raise RulesError([RuleProblem(path, None, "", "larger than 1 MiB")])
    try:
        node, data = load_yaml(text, path)
    except yaml.YAMLError as exc:
        raise RulesError([yaml_problem(exc, path)]) from exc
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise RulesError([RuleProblem(path, 1, "", "top level must be a mapping of rule keys")])
    named = data.get("app")
    if app is not None and named is None:
        data["app"] = app
    semantic = _check_semantics(data, path, node)
    if app is not None and named is not None and named != app:
        # A file's rules apply to the app it is named for: another name here looks like rules
        # for that app and applies to none of its records. Said, not refused: a directory that
        # loaded before an upgrade must not stop a replica at its restart.
        log.warning(
            "rules_app_not_the_files",
            path=path,
            line=line_of(node, ("app",)),
            app=named,
            applies_to=app,
            hint=f"the rules apply to records of app {app!r}; rename the file {named}.yaml",
        )
    try:
        rules = AppRules.model_validate(data)
    except ValidationError as exc:
        problems = [
            RuleProblem(
                path,
                line_of(node, tuple(err["loc"])),
                ".".join(str(p) for p in err["loc"]),
                err["msg"] if err["type"] != "extra_forbidden" else _unknown_key(err["loc"]),
            )
            for err in exc.errors()
        ]
        raise RulesError(sorted([*problems, *semantic], key=lambda p: p.line or 0)) from exc
    if semantic:
        raise RulesError(semantic)
    return rules


def _did_you_mean(word: str, choices: Iterable[str]) -> str:
    """`` (did you mean 'x'?)`` for the nearest of ``choices``, or nothing when none is near."""
    near = difflib.get_close_matches(word.lower(), list(choices), n=1, cutoff=0.6)
    return f" (did you mean {near[0]!r}?)" if near else ""


def _unknown_key(loc: tuple[int | str, ...]) -> str:
    """The message for a key no rules model has, with the nearest key of its own mapping."""
    model: type[BaseModel] = AppRules
    for part in loc[:-1]:
        annotation = (
            model.model_fields[str(part)].annotation if str(part) in model.model_fields else None
        )
        if not (isinstance(annotation, type) and issubclass(annotation, BaseModel)):
            return "unknown key"
        model = annotation
    return "unknown key" + _did_you_mean(str(loc[-1]), model.model_fields)


# A predicate where a column is expected: a comparison operator, or IN/LIKE/BETWEEN/IS.
_PREDICATE_IN_COLUMN = re.compile(
    r"\s*(?:[=<>!]|\b(?:not\s+)?(?:in|like|ilike|between|is)\b)", re.I
)


def _check_semantics(data: dict[str, Any], path: str, node: yaml.Node | None) -> list[RuleProblem]:
    """Checks pydantic cannot express: a known dialect, benign filters that parse as SQL
    predicates, ignore filters that name columns (not predicates)."""
    problems = []
    dialect = data.get("dialect") if isinstance(data.get("dialect"), str) else None
    if dialect is not None:
        try:
            dialect_of(dialect)
        except ValueError:
            problems.append(
                RuleProblem(
                    path,
                    line_of(node, ("dialect",)),
                    "dialect",
                    f"unknown sqlglot dialect {dialect!r}"
                    + _did_you_mean(dialect, dialect_names()),
                )
            )
            dialect = None  # still check the filters, in the generic dialect
    benign = data.get("benign_filters")
    texts = [
        (i, t)
        for i, t in enumerate(benign if isinstance(benign, list) else [])
        if isinstance(t, str)
    ]
    # The filters as the model will hold them (when all are strings): parsed once for both.
    for j in _read_benign(tuple(t for _, t in texts), dialect)[1]:
        i, text = texts[j]
        calls = call_nesting(text)
        problems.append(
            RuleProblem(
                path,
                line_of(node, ("benign_filters", i)),
                f"benign_filters.{i}",
                f"nests function calls {calls} deep, more than {MAX_CALL_NESTING}: {text[:80]!r}"
                if calls > MAX_CALL_NESTING
                else f"not a SQL predicate: {text!r}",
            )
        )
    ignore = data.get("ignore_filters")
    for i, text in enumerate(ignore if isinstance(ignore, list) else []):
        if not isinstance(text, str):
            continue
        operator = _PREDICATE_IN_COLUMN.search(text)
        if operator is not None and operator.start() > 0:
            column = text[: operator.start()].strip()
            problems.append(
                RuleProblem(
                    path,
                    line_of(node, ("ignore_filters", i)),
                    f"ignore_filters.{i}",
                    f"takes column names, not predicates: {text[:80]!r} (did you mean "
                    f"{column[:80]!r}? a fixed predicate belongs in benign_filters)",
                )
            )
    return problems


# ------------------------------------------------------------------------------------- loading


def _problem(path: Path | str, message: str, line: int | None = None) -> RuleProblem:
    return RuleProblem(str(path), line, "", message)


def _read_rules_file(path: Path) -> str:
    """The text of one rules file.

    Raises:
        RulesError: unreadable (permissions, a directory or FIFO named ``*.yaml``, gone since
            it was listed), larger than the cap, or not UTF-8 (located at the bad byte).
    """
    try:
        return utf8_text(read_bounded(path, MAX_RULES_BYTES, kind="rules file"), path)
    except FileError as exc:
        raise RulesError([_problem(path, exc.problem, exc.line)]) from exc


def _load_file(path: Path, app: str | None) -> AppRules:
    """Read and parse one file; raises only RulesError."""
    return parse_rules_text(_read_rules_file(path), str(path), app=app)


def rules_files(directory: Path) -> list[Path]:
    """The ``*.yaml`` / ``*.yml`` entries of a rules directory, hidden ones left out, sorted.

    Raises:
        OSError: the directory cannot be listed.
    """
    with os.scandir(directory) as entries:
        names = [
            e.name
            for e in entries
            if not e.name.startswith(".") and e.name.endswith((".yaml", ".yml"))
        ]
    return [directory / n for n in sorted(names)]


@dataclass(frozen=True)
class RulesScan:
    """One read of a rules path: the files that loaded and the problems of the others.

    Attributes:
        source: the rules path.
        single_file: the path is one file whose rules apply to every app.
        good: app -> rules, for every file that loaded (``default`` for ``default.yaml`` and
            for a single file).
        broken: app -> the problems of its file, for every file that did not.
        fatal: problems of the path itself (missing, unreadable): nothing is known of any app.
    """

    source: str
    single_file: bool = False
    good: dict[str, AppRules] = field(default_factory=dict)
    broken: dict[str, list[RuleProblem]] = field(default_factory=dict)
    fatal: list[RuleProblem] = field(default_factory=list)

    @property
    def problems(self) -> list[RuleProblem]:
        return [*self.fatal, *(p for ps in self.broken.values() for p in ps)]

    def ruleset(self) -> RuleSet:
        """The rules of the good files (call only without problems)."""
        default = self.good.get("default", AppRules())
        if self.single_file:
            return RuleSet(default, {}, source=self.source, single_file=True)
        apps = {app: rules for app, rules in self.good.items() if app != "default"}
        return RuleSet(default.model_copy(update={"app": None}), apps, source=self.source)


def scan_rules(path: str | Path) -> RulesScan:
    """Read every file of a rules path, collecting problems per file instead of stopping.

    Never raises: every failure is a :class:`RuleProblem` of the scan.
    """
    p = Path(path)
    source = str(p)
    try:
        is_dir, exists = p.is_dir(), p.exists()
    except (OSError, ValueError) as exc:  # EACCES on a parent; a NUL byte in the name
        return RulesScan(source, fatal=[_problem(p, f"cannot be read: {exc}")])
    if not exists:
        return RulesScan(source, fatal=[_problem(p, "no such rules file or directory")])
    if not is_dir:
        try:
            return RulesScan(source, single_file=True, good={"default": _load_file(p, None)})
        except RulesError as exc:
            return RulesScan(source, single_file=True, broken={"default": exc.problems})
    try:
        files = rules_files(p)
    except OSError as exc:
        return RulesScan(source, fatal=[_problem(p, f"cannot be listed: {exc.strerror or exc}")])
    good: dict[str, AppRules] = {}
    broken: dict[str, list[RuleProblem]] = {}
    seen: dict[str, Path] = {}
    for f in files:
        app = f.stem
        if app in seen:
            message = f"a second rules file for app {app!r} (the first is {seen[app].name})"
            good.pop(app, None)
            broken.setdefault(app, []).append(_problem(f, message))
            continue
        seen[app] = f
        try:
            good[app] = _load_file(f, app)
        except RulesError as exc:
            broken[app] = exc.problems
    return RulesScan(source, good=good, broken=broken)


def load_rules(path: str | Path | None) -> RuleSet:
    """Load a rules file or directory; ``None`` gives the built-in defaults.

    Raises:
        RulesError: every problem of every file, not just the first; never anything else.
    """
    if path is None:
        return RuleSet(AppRules())
    scan = scan_rules(path)
    if scan.problems:
        raise RulesError(scan.problems)
    return scan.ruleset()


def rules_schema() -> dict[str, Any]:
    """The JSON schema of one rules file, for editors (``rules/schema.json``)."""
    schema = AppRules.model_json_schema()
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = "STEF app rules"
    return schema

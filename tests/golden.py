"""Golden YAML cases: one titled case per list entry, every ``*.yaml`` of a fixture folder."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml


def checked_expect(
    source: str,
    case: Any,
    *,
    keys: set[str],
    fields: set[str],
    texts: tuple[str, ...] = ("sql",),
) -> tuple[str, dict[str, Any]]:
    """The checks every golden case shares, failing loudly on a malformed fixture rather than
    letting it pass vacuously: a mapping of ``keys`` with a title, each of ``texts`` a string,
    and a non-empty ``expect`` of ``fields``. Returns where the case is (for messages) and its
    ``expect``, for the checks of its own kind.
    """
    where = f"{source}: {case.get('title') if isinstance(case, dict) else case!r}"
    assert isinstance(case, dict), f"{where}: a case is a mapping"
    assert set(case) <= keys, f"{where}: unknown keys {set(case) - keys}"
    assert isinstance(case.get("title"), str) and case["title"], f"{where}: needs a title"
    for key in texts:
        assert isinstance(case.get(key), str), f"{where}: {key} must be a string"
    expect = case.get("expect")
    assert isinstance(expect, dict) and expect, f"{where}: needs expect"
    assert set(expect) <= fields, f"{where}: unknown expect fields {set(expect) - fields}"
    return where, expect


def load_golden(folder: Path, check: Callable[[str, Any], None]) -> list[Any]:
    """Every case of every fixture file, as pytest params with the titles as ids.

    Args:
        folder: the fixture folder.
        check: validates one case (file name, case) before it runs; a bad case fails collection.
    """
    params = []
    titles: set[str] = set()
    files = sorted(folder.glob("*.yaml"))
    assert files, f"no fixtures in {folder}"
    for path in files:
        cases = yaml.safe_load(path.read_text(encoding="utf-8"))
        assert isinstance(cases, list), f"{path.name}: a list of cases"
        for case in cases:
            check(path.name, case)
            assert case["title"] not in titles, f"{path.name}: duplicate {case['title']!r}"
            titles.add(case["title"])
            marks = (
                [pytest.mark.xfail(strict=True, reason=" ".join(str(case["xfail"]).split()))]
                if case.get("xfail")
                else []
            )
            params.append(pytest.param(case, id=case["title"], marks=marks))
    return params

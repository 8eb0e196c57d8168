"""Golden YAML cases: one titled case per list entry, every ``*.yaml`` of a fixture folder."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml


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

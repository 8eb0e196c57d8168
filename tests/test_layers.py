"""The floors of the house (STYLE: a module imports only from floors below it): the stages and
the ground floor (SQL helpers, the question reader, the models, the judge's request) never import
a judge, the service or the CLI. Issue 21 §7: verify used to read the heuristic's question module.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tests.conftest import ROOT

LOW = [
    *sorted((ROOT / "stef" / "stages").glob("*.py")),
    *sorted((ROOT / "stef" / "sql").glob("*.py")),
    ROOT / "stef" / "question.py",
    ROOT / "stef" / "request.py",
    ROOT / "stef" / "models.py",
]
ABOVE = ("stef.judges", "stef.service", "stef.cli", "stef.pipeline", "stef.calibrate")


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
        elif isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
    return names


@pytest.mark.parametrize("path", LOW, ids=lambda p: str(p.relative_to(ROOT)))
def test_a_low_floor_imports_nothing_above_it(path: Path) -> None:
    upward = sorted(m for m in _imports(path) if m.startswith(ABOVE))
    assert upward == []

"""Functions stay under 60 lines (STYLE; issue 36 §7): every function and method in ``stef/``,
counted from its ``def`` line to its last line, docstring included.

The functions still over the limit are listed below with their length today, each in a module
another piece of work owns; an entry may only shrink: a listed function that grows fails, and one
back under the limit must leave the list.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

from tests.conftest import ROOT

MAX_LINES = 60

# "module path::qualified name" -> its length when it was listed. Nothing new goes here.
ALLOWED: dict[str, int] = {}


def _functions(node: ast.AST, prefix: str) -> Iterator[tuple[str, int]]:
    for child in ast.iter_child_nodes(node):
        if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
            name = f"{prefix}{child.name}"
            yield name, (child.end_lineno or child.lineno) - child.lineno + 1
            yield from _functions(child, f"{name}.")
        elif isinstance(child, ast.ClassDef):
            yield from _functions(child, f"{prefix}{child.name}.")


def function_lengths(root: Path = ROOT) -> dict[str, int]:
    """Every function under ``stef/`` keyed ``path::Class.method`` with its length in lines."""
    lengths = {}
    for path in sorted((root / "stef").rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        module = path.relative_to(root).as_posix()
        for name, lines in _functions(tree, ""):
            lengths[f"{module}::{name}"] = lines
    return lengths


def test_no_function_is_over_60_lines_but_the_listed_ones() -> None:
    lengths = function_lengths()
    too_long = {k: n for k, n in lengths.items() if n > MAX_LINES and k not in ALLOWED}
    assert too_long == {}, f"split these into helpers of at most {MAX_LINES} lines"


def test_a_listed_function_only_shrinks() -> None:
    lengths = function_lengths()
    grown = {k: (lengths[k], n) for k, n in ALLOWED.items() if lengths.get(k, 0) > n}
    assert grown == {}, "(now, listed): a listed function grew; split it instead"


def test_a_function_back_under_the_limit_leaves_the_list() -> None:
    lengths = function_lengths()
    stale = sorted(k for k in ALLOWED if lengths.get(k, 0) <= MAX_LINES)
    assert stale == [], "these are at most 60 lines now (or gone): remove them from ALLOWED"


def test_the_count_sees_methods_and_nested_functions(tmp_path: Path) -> None:
    (tmp_path / "stef").mkdir()
    body = "\n".join(f"        x{i} = {i}" for i in range(60))
    (tmp_path / "stef" / "m.py").write_text(
        f"class C:\n    def long(self):\n        def inner():\n            pass\n{body}\n",
        encoding="utf-8",
    )
    assert function_lengths(tmp_path) == {"stef/m.py::C.long": 63, "stef/m.py::C.long.inner": 2}

"""The floors of the house (STYLE: a module imports only from floors below it), declared as
import-linter contracts in pyproject.toml (issue 36 §3) and checked here: the floors, top to
bottom, and no I/O in the stages and the ground floor. Issue 21 §7: verify used to read the
heuristic's question module; issue 36 §3: the reference stage imported stef.io's database and
stef.io the stage's ``question_key``.
"""

from __future__ import annotations

import re
import subprocess
import sys
import tomllib
from pathlib import Path

from tests.conftest import ROOT


def _contracts() -> list[dict[str, object]]:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    contracts: list[dict[str, object]] = config["tool"]["importlinter"]["contracts"]
    return contracts


def test_every_import_keeps_the_declared_floors() -> None:
    lint = Path(sys.executable).with_name("lint-imports")
    done = subprocess.run(
        [str(lint), "--no-cache", "--config", str(ROOT / "pyproject.toml")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    kept = re.search(r"Contracts: (\d+) kept, 0 broken", done.stdout)
    assert kept is not None and int(kept.group(1)) == len(_contracts()), done.stdout


def test_every_top_level_module_has_its_floor() -> None:
    (floors,) = [c["layers"] for c in _contracts() if c["type"] == "layers"]
    assert isinstance(floors, list)
    declared = {name.strip() for floor in floors for name in floor.split("|")}
    package = ROOT / "stef"
    modules = {f"stef.{p.stem}" for p in package.glob("*.py") if p.stem != "__init__"}
    modules |= {f"stef.{p.parent.name}" for p in package.glob("*/__init__.py")}
    assert sorted(modules - declared) == []
    assert sorted(declared - modules) == []

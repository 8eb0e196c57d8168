"""Installs come from the committed lock (requirements/): every package pinned and hashed, every
dependency of pyproject.toml in it, and the virtualenv running the suite installed from it.

A package released after the lock must not change what a fresh clone installs: the PyYAML
release that reworded its nesting error turned a clean clone red before the lock existed.
"""

from __future__ import annotations

import re
import tomllib
from importlib import metadata
from typing import Any

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from tests.conftest import ROOT

LOCKS = ROOT / "requirements"
# One requirement of a pip lock: "name==version \" then its hashes, continuation lines.
_ENTRY = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([^ ;\\]+)(?: ;[^\\]*)?\s*\\$", re.M)


def _locked(name: str) -> dict[str, tuple[str, list[str]]]:
    """name -> (version, hashes) of one lock file."""
    text = (LOCKS / name).read_text()
    entries: dict[str, tuple[str, list[str]]] = {}
    blocks = re.split(r"\n(?=\S)", text)
    for block in blocks:
        if block.startswith("#") or not block.strip():
            continue
        match = _ENTRY.match(block)
        assert match, f"{name}: not a pinned, hashed requirement: {block.splitlines()[0]}"
        hashes = re.findall(r"--hash=sha256:([0-9a-f]{64})", block)
        entries[canonicalize_name(match[1])] = (match[2], hashes)
    return entries


def _project() -> dict[str, Any]:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]


@pytest.mark.parametrize("name", ["build.txt", "run.txt", "fast.txt", "test.txt"])
def test_every_locked_package_is_pinned_and_hashed(name: str) -> None:
    entries = _locked(name)
    assert entries, f"{name} locks nothing"
    unhashed = [pkg for pkg, (_, hashes) in entries.items() if not hashes]
    assert unhashed == []


def test_the_locks_cover_pyproject() -> None:
    project = _project()
    extras = project["optional-dependencies"]
    wanted = {
        "run.txt": [Requirement(r) for r in project["dependencies"]],
        "test.txt": [Requirement(r) for r in [*project["dependencies"], *extras["test"]]],
    }
    for lock, requirements in wanted.items():
        entries = _locked(lock)
        for req in requirements:
            pkg = canonicalize_name(req.name)
            assert pkg in entries, f"{req.name} is missing from requirements/{lock}: make lock"
            assert req.specifier.contains(entries[pkg][0], prereleases=True), (
                f"requirements/{lock} has {req.name}=={entries[pkg][0]}, outside {req.specifier}"
            )
    build = _locked("build.txt")
    assert {"pip", "setuptools"} <= build.keys()


def test_the_fast_lock_is_the_compiled_parser_of_the_locked_sqlglot() -> None:
    """fast.txt holds sqlglotc alone, at run.txt's sqlglot version (sqlglot[c] pins them equal),
    and is the sqlglotc the suite runs on (test.txt): production parses as the tests do."""
    fast = _locked("fast.txt")
    assert list(fast) == ["sqlglotc"]
    assert len(re.findall(r"^sqlglotc==", (LOCKS / "fast.txt").read_text(), re.M)) == 1
    assert fast["sqlglotc"][0] == _locked("run.txt")["sqlglot"][0]
    assert fast["sqlglotc"] == _locked("test.txt")["sqlglotc"]
    assert "sqlglot[c]" in _project()["optional-dependencies"]["fast"]


def test_the_suite_runs_on_the_locked_versions() -> None:
    # The virtualenv running this test was installed by scripts/setup.sh from test.txt.
    differ = {}
    for pkg, (version, _) in _locked("test.txt").items():
        try:
            installed = metadata.version(pkg)
        except metadata.PackageNotFoundError:
            continue  # a package for another platform (colorama on Windows ...)
        if installed != version:
            differ[pkg] = (installed, version)
    assert differ == {}, "installed (left) differs from the lock (right): run make setup"


def test_every_install_reads_the_lock() -> None:
    setup = (ROOT / "scripts" / "setup.sh").read_text()
    assert "--require-hashes" in setup
    assert "--no-build-isolation" in setup
    dockerfile = (ROOT / "Dockerfile").read_text()
    assert "--require-hashes --no-deps -r requirements/run.txt" in dockerfile
    # sqlglot's compiled parser: from the lock, a wheel or nothing (the pure parser), never built,
    # its failure tolerated.
    install = r"--require-hashes --no-deps --only-binary=:all:\s+-r requirements/fast\.txt"
    joined = setup.replace("\\\n", " ")
    assert re.search(r'if \[ "\$what" = run \] && ! "\$\{pip\[@\]\}" ' + install + ";", joined)
    joined = dockerfile.replace("\\\n", " ")
    assert re.search(
        r"\{ pip install --no-cache-dir " + install + r"\s+\|\| echo [^;]+; \}", joined
    )
    assert "--no-build-isolation" in dockerfile
    wheel_check = (ROOT / "scripts" / "check-wheel.sh").read_text()
    assert "--require-hashes" in wheel_check
    assert "npm ci" in (ROOT / "scripts" / "install-deploy-tools.sh").read_text()
    assert (ROOT / "deploy" / "tools" / "package-lock.json").is_file()

"""Shared fixtures: paths to the repository, the shared data and the example files; a JSONL
file written the one way (:func:`write_jsonl`); ``stef`` run in a fresh interpreter the one way
(:func:`run_stef`, the fixture ``stef_cli``); whether a record is valid (:func:`valid_record`)."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
import structlog

from stef.errors import InvalidInput
from stef.logs import DEPENDENCY_LOGGERS
from stef.stages.validate import validate

ROOT = Path(__file__).resolve().parent.parent
SHARED_DATA = ROOT.parent / "shared" / "data"
FIXTURES = Path(__file__).resolve().parent / "fixtures"
STEF = (sys.executable, "-m", "stef.cli")


@pytest.fixture
def root() -> Path:
    return ROOT


def write_jsonl(path: Path, rows: Iterable[Any]) -> Path:
    """``rows`` one a line at ``path`` (UTF-8): a string as it is (a raw, maybe broken, line),
    anything else as JSON; ``path`` back."""
    lines = (row if isinstance(row, str) else json.dumps(row) for row in rows)
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return path


def valid_record(record: dict[str, Any]) -> bool:
    """Whether ``record`` passes the record path's validation (is judged, not a dead letter)."""
    try:
        validate(record)
    except InvalidInput:
        return False
    return True


def run_stef(
    *args: str,
    stdin: str | None = None,
    cwd: Path | None = None,
    timeout: float = 120,
    prefix: Sequence[str] = (),
    **env: str,
) -> subprocess.CompletedProcess[str]:
    """``stef ARGS`` in a fresh interpreter (behind ``prefix``, a command such as setpriv), in
    the test process's environment without its ``STEF_*`` settings, plus ``env``; its exit
    status, stdout and stderr as text (a non-zero status is the caller's to assert)."""
    base = {k: v for k, v in os.environ.items() if not k.startswith("STEF_")}
    return subprocess.run(
        [*prefix, *STEF, *args],
        input=stdin,
        cwd=cwd,
        env={**base, **env},
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def last_json_of_child(code: str, *args: str) -> Any:
    """The JSON of the last line ``python -c CODE ARGS`` prints, run in a fresh interpreter
    importing this checkout's ``stef`` (a child that bounds its own memory, say)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    child = subprocess.run(
        [sys.executable, "-c", code, *args],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        check=True,
    )
    return json.loads(child.stdout.splitlines()[-1])


@pytest.fixture
def stef_cli() -> Callable[..., subprocess.CompletedProcess[str]]:
    """:func:`run_stef`, for a test that takes it as a fixture."""
    return run_stef


@pytest.fixture(autouse=True, scope="session")
def _state_dir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """What STEF writes by default (a run's dead letters) goes to this test run's temporary
    folder, never to the state directory of whoever runs the tests; subprocesses inherit it."""
    patch = pytest.MonkeyPatch()
    patch.setenv("XDG_STATE_HOME", str(tmp_path_factory.mktemp("xdg-state")))
    yield
    patch.undo()


@pytest.fixture(autouse=True)
def _fresh_logging() -> Iterator[None]:
    """Each test starts from structlog's defaults: a test that ran the CLI (which configures
    logging at its own level) must not hide log lines from the next one."""
    structlog.reset_defaults()
    yield
    structlog.reset_defaults()
    # configure_logging also sets the standard library's loggers: leave none of it behind.
    root = logging.getLogger()
    for handler in [h for h in root.handlers if type(h).__module__ == "stef.logs"]:
        root.removeHandler(handler)
    root.setLevel(logging.WARNING)
    for name in ("stef", *DEPENDENCY_LOGGERS):
        logging.getLogger(name).setLevel(logging.NOTSET)


# The longest test files, started first: `make test` runs files on two workers
# (scripts/run-tests.sh), and a long file started last would hold the suite up alone. The real
# model's run is most of the suite's time but one CPU thread of llama-server; the other worker
# runs the rest of the suite beside it.
_FIRST = ("tests/judges/llm/test_real_model.py",)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The files of ``_FIRST`` before every other, the order within each kept."""
    first = {ROOT / name for name in _FIRST}
    items.sort(key=lambda item: item.path not in first)

"""Shared fixtures: paths to the repository, the shared data and the example files."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import structlog

ROOT = Path(__file__).resolve().parent.parent
SHARED_DATA = ROOT.parent / "shared" / "data"
FIXTURES = Path(__file__).resolve().parent / "fixtures"


@pytest.fixture
def root() -> Path:
    return ROOT


@pytest.fixture(autouse=True)
def _fresh_logging() -> Iterator[None]:
    """Each test starts from structlog's defaults: a test that ran the CLI (which configures
    logging at its own level) must not hide log lines from the next one."""
    structlog.reset_defaults()
    yield
    structlog.reset_defaults()

"""Exit statuses: one code per meaning, 0 to 4, the same table in the module and the README."""

from __future__ import annotations

import argparse
import re

import pytest

from stef import exits
from stef.exits import Exit
from tests.conftest import ROOT


def test_the_codes_are_distinct_and_exactly_0_to_4() -> None:
    codes = [member.value for member in Exit]
    assert len(codes) == len(set(codes))  # no alias: each name its own status
    assert sorted(codes) == [0, 1, 2, 3, 4]


def test_each_name_has_its_status() -> None:
    assert (Exit.OK, Exit.FAILURE, Exit.USAGE, Exit.JUDGE_ERROR, Exit.GATE) == (0, 1, 2, 3, 4)


def test_argparse_usage_errors_share_the_usage_status(capsys: pytest.CaptureFixture[str]) -> None:
    """argparse exits on bad flags by itself: USAGE must be that same status."""
    with pytest.raises(SystemExit) as exited:
        argparse.ArgumentParser(prog="stef").parse_args(["--no-such-flag"])
    assert exited.value.code == int(Exit.USAGE)
    assert "unrecognized arguments" in capsys.readouterr().err


def test_the_module_docstring_documents_every_code() -> None:
    doc = exits.__doc__ or ""
    documented = {int(m.group(1)) for m in re.finditer(r"^(\d)\s{2,}\S", doc, re.M)}
    assert documented == {member.value for member in Exit}


def test_the_readme_table_documents_every_code() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    documented = {int(m.group(1)) for m in re.finditer(r"^\| (\d) \| \S", readme, re.M)}
    assert documented == {member.value for member in Exit}

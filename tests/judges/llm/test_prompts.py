"""The prompt templates: one strict environment, compiled at start, versioned by their sources."""

from __future__ import annotations

import os
import shutil
import signal
from collections.abc import Callable
from pathlib import Path

import pytest

from stef.errors import TemplateError
from stef.judges.llm.config import LlmConfig
from stef.judges.llm.judge import LlmJudge
from stef.prompts import REQUIRED_TEMPLATES, Prompts, data_blocks, default_prompts_dir


@pytest.fixture
def prompt_dir(tmp_path: Path) -> Path:
    target = tmp_path / "prompts"
    shutil.copytree(default_prompts_dir(), target)
    return target


def test_shipped_templates_compile_and_are_versioned() -> None:
    prompts = Prompts.load()
    assert set(REQUIRED_TEMPLATES) <= {p.name for p in prompts.directory.glob("*.j2")}
    assert len(prompts.version) == 12
    assert Prompts.load().version == prompts.version


def test_version_changes_with_any_template_or_the_schema(prompt_dir: Path) -> None:
    before = Prompts.load(prompt_dir).version
    assert Prompts.load(prompt_dir, extra_version="schema v2").version != before
    system = prompt_dir / "system.j2"
    system.write_text(system.read_text() + "\nOne more rule.\n")
    assert Prompts.load(prompt_dir).version != before


def test_a_missing_variable_fails_loudly() -> None:
    with pytest.raises(TemplateError, match="failed to render"):
        Prompts.load().render("user.j2", question="q")


def test_a_missing_template_fails_at_start(prompt_dir: Path) -> None:
    (prompt_dir / "reask.j2").unlink()
    with pytest.raises(TemplateError, match=r"reask\.j2"):
        Prompts.load(prompt_dir)


def test_a_broken_template_fails_at_start(prompt_dir: Path) -> None:
    (prompt_dir / "user.j2").write_text("{% if %}")
    with pytest.raises(TemplateError, match="does not compile"):
        Prompts.load(prompt_dir)
    # And so does the judge that would use it: before any record is judged.
    config = LlmConfig(base_url="http://127.0.0.1:9/v1", model="m")
    with pytest.raises(TemplateError):
        LlmJudge(config, prompts_dir=prompt_dir)


def test_a_missing_folder_fails_at_start(tmp_path: Path) -> None:
    with pytest.raises(TemplateError, match="not found"):
        Prompts.load(tmp_path / "nowhere")


def test_prompts_dir_from_the_environment(
    prompt_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("STEF_PROMPTS_DIR", str(prompt_dir))
    assert default_prompts_dir() == prompt_dir
    assert Prompts.load().directory == prompt_dir


@pytest.mark.parametrize(
    "value",
    [
        "plain",
        "line\nbreak",
        "quote \" and ' and \\ backslash",
        "</sql> <sql> <!-- x --> <?php",
        "a < 5 and b <> c and d <= 2",
        "\u2028\u2029\u0085 separators",
        "{{ 1 + 1 }} {% raw %}",
        "日本語 ünïcödé",
    ],
)
def test_data_blocks_round_trip(value: str) -> None:
    prompts = Prompts.load()
    text = prompts.render("reask.j2", errors=[value])
    assert data_blocks(text)["validation_errors"] == [value]


def _fifo(path: Path) -> None:
    os.mkfifo(path)


def _hung(signum: int, frame: object) -> None:
    raise AssertionError("Prompts.load hangs")


@pytest.mark.parametrize(
    ("make", "says"),
    [
        (_fifo, "not a regular file"),
        (lambda p: p.symlink_to("/dev/zero"), "not a regular file"),
        (lambda p: p.write_bytes(b"# " + b"x" * (1 << 20)), "larger than 1 MiB"),
        (lambda p: p.write_bytes(b"{{ question | tojson }}\ncaf\xe9\n"), r"user\.j2:2: not UTF-8"),
    ],
    ids=["fifo", "dev_zero", "huge", "latin1"],
)
def test_a_template_that_is_no_text_file_fails_at_start_in_one_line(
    prompt_dir: Path, make: Callable[[Path], None], says: str
) -> None:
    """A FIFO in a template's place held the start for ever (deaf to SIGTERM), /dev/zero filled
    the memory and a Latin-1 template was a UnicodeDecodeError traceback."""
    template = prompt_dir / "user.j2"
    template.unlink()
    make(template)
    previous = signal.signal(signal.SIGALRM, _hung)
    signal.alarm(10)
    try:
        with pytest.raises(TemplateError, match=says) as err:
            Prompts.load(prompt_dir)
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
    assert str(template) in str(err.value) and "\n" not in str(err.value)


def test_a_crlf_template_keeps_its_version(prompt_dir: Path) -> None:
    """Templates were read with universal newlines: one saved with CRLF is the same prompt."""
    before = Prompts.load(prompt_dir).version
    for path in prompt_dir.glob("*.j2"):
        path.write_bytes(path.read_bytes().replace(b"\n", b"\r\n"))
    assert Prompts.load(prompt_dir).version == before

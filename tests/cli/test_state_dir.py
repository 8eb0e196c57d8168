"""Defaults that work in the image (issue 25 section 7): default outputs go under a state
directory, never the working directory; nothing is created before the source is open; and the
image's default command runs as an unprivileged user in a root-owned, read-only folder."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from stef.exits import Exit
from stef.settings import load_settings

ROOT = Path(__file__).resolve().parents[2]
STEF = [sys.executable, "-m", "stef.cli"]
GOOD = {"id": "r-1", "question": "How many orders?", "sql": "SELECT COUNT(*) FROM orders"}
NOBODY = 65534
DOCKERFILE = ROOT / "Dockerfile"


def _dockerfile(instruction: str) -> str:
    """The argument of the runtime stage's last ``instruction`` (CMD, VOLUME ...)."""
    lines = DOCKERFILE.read_text(encoding="utf-8").splitlines()
    return [line.split(" ", 1)[1] for line in lines if line.startswith(f"{instruction} ")][-1]


def test_the_image_keeps_its_state_in_a_volume_named_by_stef_state_dir() -> None:
    [volume] = json.loads(_dockerfile("VOLUME"))
    assert f"STEF_STATE_DIR={volume}" in DOCKERFILE.read_text(encoding="utf-8")


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("STEF_", "XDG_"))}
    return {**env, **extra}


def test_the_default_dead_letters_live_in_the_state_directory() -> None:
    assert load_settings(env={"STEF_STATE_DIR": "/var/lib/stef", "HOME": "/h"}).dead_letters == (
        "file:/var/lib/stef/dead_letters.jsonl"
    )
    assert load_settings(env={"XDG_STATE_HOME": "/s", "HOME": "/h"}).dead_letters == (
        "file:/s/stef/dead_letters.jsonl"
    )
    assert load_settings(env={"HOME": "/h"}).dead_letters == (
        "file:/h/.local/state/stef/dead_letters.jsonl"
    )
    given = {"STEF_STATE_DIR": "/v", "STEF_DEAD_LETTERS": "file:/elsewhere.jsonl"}
    assert load_settings(env=given).dead_letters == "file:/elsewhere.jsonl"


def test_run_creates_nothing_when_the_source_cannot_be_opened(tmp_path: Path) -> None:
    state = tmp_path / "state"
    proc = subprocess.run(
        [*STEF, "run", "--source", "file:missing.jsonl", "--metrics-port", "off"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env=_env(STEF_STATE_DIR=str(state)),
        timeout=120,
    )
    assert proc.returncode == Exit.USAGE, proc.stderr
    assert "missing.jsonl" in proc.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == []  # no dead_letters.jsonl, no state


def test_run_writes_its_dead_letters_under_the_state_directory(tmp_path: Path) -> None:
    log = tmp_path / "agent.jsonl"
    log.write_text(json.dumps(GOOD) + "\nnot json\n", encoding="utf-8")
    state = tmp_path / "xdg"
    proc = subprocess.run(
        [*STEF, "run", "--source", f"file:{log}", "--metrics-port", "off"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env=_env(XDG_STATE_HOME=str(state)),
        timeout=120,
    )
    assert proc.returncode == Exit.OK, proc.stderr
    assert [json.loads(line)["id"] for line in proc.stdout.splitlines()] == ["r-1"]
    [letter] = (state / "stef" / "dead_letters.jsonl").read_text(encoding="utf-8").splitlines()
    assert json.loads(letter)["reason"] == "not_json"
    assert not (tmp_path / "dead_letters.jsonl").exists()


def test_a_run_that_opened_its_source_leaves_its_dead_letters_file_even_if_empty(
    tmp_path: Path,
) -> None:
    log = tmp_path / "agent.jsonl"
    log.write_text(json.dumps(GOOD) + "\n", encoding="utf-8")
    proc = subprocess.run(
        [*STEF, "run", "--source", f"file:{log}", "--metrics-port", "off"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env=_env(STEF_STATE_DIR=str(tmp_path / "state")),
        timeout=120,
    )
    assert proc.returncode == Exit.OK, proc.stderr
    assert (tmp_path / "state" / "dead_letters.jsonl").read_bytes() == b""  # none, and it says so


def _as_nobody(
    args: list[str], cwd: Path, stdin: str, **env: str
) -> subprocess.CompletedProcess[str]:
    """Run ``args`` as the unprivileged user nobody. It keeps CAP_DAC_READ_SEARCH only, so it can
    read the interpreter (under root's home here) but writes nothing root owns."""
    setpriv = [
        "setpriv",
        f"--reuid={NOBODY}",
        f"--regid={NOBODY}",
        "--clear-groups",
        "--inh-caps=-all,+dac_read_search",
        "--ambient-caps=+dac_read_search",
    ]
    return subprocess.run(
        [*setpriv, *args],
        cwd=cwd,
        input=stdin,
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )


@pytest.fixture
def app(tmp_path: Path) -> Path:
    """The image's /app: root-owned, read-only, holding the rules."""
    if os.geteuid() != 0 or shutil.which("setpriv") is None:
        pytest.skip("needs root and setpriv to run a command as another user")
    folder = tmp_path / "app"
    shutil.copytree(ROOT / "rules", folder / "rules")
    for path in [folder, *folder.rglob("*")]:
        path.chmod(0o555 if path.is_dir() else 0o444)
    tmp_path.chmod(0o755)
    return folder


def _image_env(app: Path, **extra: str) -> dict[str, str]:
    """The image's environment (Dockerfile ENV), on loopback and without a metrics port."""
    return {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": "/nonexistent",
        "PYTHONPATH": str(ROOT),
        "PYTHONDONTWRITEBYTECODE": "1",
        "STEF_RULES": str(app / "rules"),
        "STEF_METRICS_HOST": "127.0.0.1",
        "STEF_METRICS_PORT": "off",
        "STEF_LOG_LEVEL": "info",
        **extra,
    }


def test_the_image_default_command_runs_as_an_unprivileged_user(app: Path, tmp_path: Path) -> None:
    state = tmp_path / "state"  # the image's VOLUME /var/lib/stef, owned by its user
    state.mkdir()
    os.chown(state, NOBODY, NOBODY)
    image_cmd = json.loads(_dockerfile("CMD"))  # its rules at /app/rules: here, in app
    command = [*STEF, *(str(app / "rules") if a == "/app/rules" else a for a in image_cmd)]
    proc = _as_nobody(
        command,
        app,
        json.dumps(GOOD) + "\nnot json\n",
        **_image_env(app, STEF_STATE_DIR=str(state)),
    )
    assert proc.returncode == Exit.OK, proc.stderr
    assert "Permission denied" not in proc.stderr
    assert [json.loads(line)["id"] for line in proc.stdout.splitlines()] == ["r-1"]
    [letter] = (state / "dead_letters.jsonl").read_text(encoding="utf-8").splitlines()
    assert json.loads(letter)["reason"] == "not_json"
    assert sorted(p.name for p in app.iterdir()) == ["rules"]


def test_an_unwritable_state_directory_fails_at_start_in_one_line(
    app: Path, tmp_path: Path
) -> None:
    state = tmp_path / "state"  # root's, and the user cannot write it
    state.mkdir(mode=0o755)
    command = [*STEF, "run", "--source", "-", "--results", "-"]
    proc = _as_nobody(
        command, app, json.dumps(GOOD) + "\n", **_image_env(app, STEF_STATE_DIR=str(state))
    )
    assert proc.returncode == Exit.FAILURE
    assert "Traceback" not in proc.stderr
    assert str(state / "dead_letters.jsonl") in proc.stderr
    assert proc.stdout == ""  # nothing was judged before the failure was known

"""A real OpenAI-compatible server for the real-model tests: llama.cpp's ``llama-server`` serving
SmolLM2-135M-Instruct (Q4_1 GGUF) on 127.0.0.1, on CPU.

``make services`` builds the binary (``scripts/build-llama-server.sh``) and fetches the model
(``scripts/fetch-smollm.sh``) into ``build/``. When either is missing the tests fail, so CI cannot
pass without running them; ``STEF_SKIP_REAL_MODEL=1`` skips them instead.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import ROOT

LLAMA_SERVER = ROOT / "build" / "llama-server" / "bin" / "llama-server"
MODEL = ROOT / "build" / "models" / "SmolLM2-135M-Instruct.Q4_1.gguf"
ALIAS = "smollm2"
SKIP_ENV = "STEF_SKIP_REAL_MODEL"
# Ready in about 2 s on 2 cores; the bound leaves room for a loaded machine.
_READY_TIMEOUT_S = 60.0
_STOP_TIMEOUT_S = 10.0


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _missing() -> list[Path]:
    return [path for path in (LLAMA_SERVER, MODEL) if not path.is_file()]


def _models_ready(base_url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{base_url}/models", timeout=2) as reply:
            return reply.status == 200 and ALIAS.encode() in reply.read()
    except (urllib.error.URLError, OSError):
        # Refused while the server binds, 503 while it loads the model: not ready yet.
        return False


def _die_with_parent() -> None:
    """In the child, before exec: SIGTERM when the test process dies, so a killed test run
    (CI's time limit, Ctrl-C twice) leaves no server behind. Linux only; elsewhere a no-op."""
    if sys.platform != "linux":
        return
    pr_set_pdeathsig = 1
    ctypes.CDLL(None, use_errno=True).prctl(pr_set_pdeathsig, signal.SIGTERM, 0, 0, 0)


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is not None:
        return
    os.kill(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=_STOP_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=_STOP_TIMEOUT_S)


@contextlib.contextmanager
def llama_server(threads: int = 1) -> Iterator[str]:
    """Start ``llama-server`` on a free loopback port; yield its base URL (``.../v1``).

    The server is stopped by its PID on exit; its log is printed when it fails to start.

    Args:
        threads: CPU threads of the server (``-t``). One: ggml's threads wait for each other
            by spinning, so on a machine busy with other work two threads collapse (measured on
            2 cores at load 7: 1.9 tokens/s with ``-t 2``, 30 tokens/s with ``-t 1``).
    """
    if os.environ.get(SKIP_ENV) == "1":
        pytest.skip(f"{SKIP_ENV}=1: the real-model tests are skipped")
    missing = _missing()
    if missing:
        pytest.fail(
            "the real-model tests need llama-server and the SmolLM2 GGUF, missing: "
            + ", ".join(str(p.relative_to(ROOT)) for p in missing)
            + ". Run `make services` (it runs scripts/build-llama-server.sh and "
            f"scripts/fetch-smollm.sh), or set {SKIP_ENV}=1 to skip these tests.",
            pytrace=False,
        )
    port = _free_port()
    base_url = f"http://127.0.0.1:{port}/v1"
    command = [
        str(LLAMA_SERVER),
        "-m",
        str(MODEL),
        "--alias",
        ALIAS,
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "-c",
        "8192",
        "-t",
        str(threads),
        "-np",
        "1",
        "--no-webui",
    ]
    with tempfile.TemporaryFile() as log:
        # The log goes to a file, not a pipe: nobody reads a pipe while the tests run, and a
        # full pipe would block the server.
        proc = subprocess.Popen(
            command, stdout=log, stderr=subprocess.STDOUT, preexec_fn=_die_with_parent
        )
        try:
            deadline = time.monotonic() + _READY_TIMEOUT_S
            while not _models_ready(base_url):
                if proc.poll() is not None or time.monotonic() > deadline:
                    log.seek(0)
                    tail = log.read().decode("utf-8", "replace")[-3000:]
                    state = (
                        f"exited with {proc.returncode}"
                        if proc.poll() is not None
                        else f"not ready after {_READY_TIMEOUT_S:.0f} s"
                    )
                    pytest.fail(f"llama-server {state}; its log ends:\n{tail}", pytrace=False)
                time.sleep(0.2)
            yield base_url
        finally:
            _stop(proc)

"""A single 200 MB line: ``stef replay`` dead-letters it as too large (with its length and sha256)
and judges the next line, while its peak memory stays under 300 MB (it was 862 MB: the line was
held whole, and copied)."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

from tests.service.conftest import valid_record

_SIZE = 200 * 1000 * 1000

# Runs stef in a child of its own, so the peak RSS of its children is stef's alone.
_MEASURE = """
import resource, subprocess, sys
rc = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL).returncode
print(rc, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
"""


def test_a_200_mb_line_is_dead_lettered_in_bounded_memory(tmp_path: Path) -> None:
    log, dead, out = tmp_path / "big.jsonl", tmp_path / "dead.jsonl", tmp_path / "out.jsonl"
    sha = hashlib.sha256()
    with log.open("wb") as f:
        head = b'{"id": "big", "app": "sales", "question": "'
        body = b"q" * (1 << 20)
        tail = b'", "sql": "SELECT 1"}'
        size = len(head) + len(tail)
        for part in [head, *[body] * ((_SIZE - size) // len(body)), tail]:
            f.write(part)
            sha.update(part)
        big_size = f.tell()
        f.write(b"\n" + json.dumps(valid_record(1)).encode() + b"\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("STEF_")}
    stef = [sys.executable, "-m", "stef.cli", "replay", str(log)]
    proc = subprocess.run(
        [sys.executable, "-c", _MEASURE, *stef, "--output", str(out), "--dead-letters", str(dead)],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    rc, peak_kib = map(int, proc.stdout.split())
    assert rc == 0, proc.stderr
    assert peak_kib < 300 * 1024, f"peak RSS {peak_kib // 1024} MiB"
    (letter,) = [json.loads(line) for line in dead.read_text().splitlines()]
    assert letter["reason"] == "too_large"
    assert letter["source"] == {"file": str(log), "line": 1}
    assert letter["payload_bytes"] == big_size
    assert letter["payload_sha256"] == sha.hexdigest()
    assert [json.loads(line)["id"] for line in out.read_text().splitlines()] == ["r-000001"]

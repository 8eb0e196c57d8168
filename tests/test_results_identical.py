"""Results stay byte-identical across changes to the analysis (issue 15: the analysis cost cut).

Every line of ``examples/agent_log.jsonl`` and of the shared dev set
(``../shared/data/judge-dev.jsonl``) goes through the record path ``stef replay`` builds with the
default settings (heuristic backend, built-in rules), and the bytes it writes (result or dead
letter) are compared with the stored ones. The one volatile field, ``usage.latency_ms`` (wall
time), is blanked in the raw bytes; nothing else is normalized, so key order, float formatting and
every list order count.

The fixture keeps, per line, the sha256 of those bytes, and the bytes themselves for every line of
the example log and every ``_KEEP_EVERY``-th line of the dev set, so a failure shows a readable
diff. Regenerate it (only when a change of results is intended, and say so in the commit) with::

    PYTHONPATH=$PWD .venv/bin/python -m tests.test_results_identical --write
"""

from __future__ import annotations

import difflib
import gzip
import hashlib
import json
import re
import sys
from pathlib import Path

import pytest

from stef.pipeline import Pipeline
from stef.rules import load_rules
from stef.service.wiring import build_backend, build_pipeline
from stef.settings import Settings
from tests.conftest import ROOT, SHARED_DATA

FIXTURE = ROOT / "tests" / "fixtures" / "results" / "results.jsonl.gz"
EXAMPLE = ROOT / "examples" / "agent_log.jsonl"
DEV = SHARED_DATA / "judge-dev.jsonl"
# Full text of one dev line in this many: enough readable diffs, a small fixture.
_KEEP_EVERY = 7
# Wall time: the only field that differs between two runs on the same input.
_VOLATILE = re.compile(rb'"latency_ms":[-+0-9.eE]+')


def _pipeline() -> Pipeline:
    """The record path as ``stef replay`` builds it with the default settings."""
    settings = Settings()
    return build_pipeline(settings, load_rules(settings.rules), build_backend(settings))


def _outputs(pipeline: Pipeline, path: Path) -> dict[str, bytes]:
    """``name:line`` -> the bytes the record path writes for that line, latency blanked."""
    out = {}
    for line, payload in enumerate(path.read_bytes().splitlines(), start=1):
        processed = pipeline.process(payload, {"file": path.name, "line": line})
        out[f"{path.name}:{line}"] = _VOLATILE.sub(b'"latency_ms":null', processed.value)
    return out


def _digest(value: bytes) -> str:
    return hashlib.sha256(value).hexdigest()


def _load() -> dict[str, dict[str, str]]:
    with gzip.open(FIXTURE, "rt", encoding="utf-8") as fh:
        rows = [json.loads(line) for line in fh]
    return {row["key"]: row for row in rows}


def _compare(path: Path) -> None:
    stored = {k: v for k, v in _load().items() if k.startswith(f"{path.name}:")}
    assert stored, f"the fixture has nothing for {path.name}"
    now = _outputs(_pipeline(), path)
    assert sorted(now) == sorted(stored), f"{path.name}: other lines than when stored"
    changed = [k for k, v in now.items() if _digest(v) != stored[k]["sha256"]]
    if not changed:
        return
    shown = next((k for k in changed if "value" in stored[k]), None)
    diff = ""
    if shown is not None:
        diff = "\n".join(
            difflib.unified_diff(
                _pretty(stored[shown]["value"]), _pretty(now[shown].decode()), lineterm=""
            )
        )
    pytest.fail(
        f"{len(changed)} of {len(now)} results of {path.name} changed "
        f"(first: {', '.join(changed[:5])})" + (f"\n{shown}:\n{diff}" if diff else "")
    )


def _pretty(value: str) -> list[str]:
    return json.dumps(json.loads(value), indent=1).splitlines()


def test_example_log_results_unchanged() -> None:
    _compare(EXAMPLE)


@pytest.mark.skipif(not DEV.exists(), reason=f"the shared dev set is absent ({DEV})")
def test_dev_set_results_unchanged() -> None:
    _compare(DEV)


def _write() -> None:
    """Store the current results of both files (the dev set must be present)."""
    assert DEV.exists(), f"the dev set is needed to write the fixture: {DEV}"
    pipeline = _pipeline()
    rows = []
    for path, keep in ((EXAMPLE, 1), (DEV, _KEEP_EVERY)):
        for i, (key, value) in enumerate(_outputs(pipeline, path).items()):
            row = {"key": key, "sha256": _digest(value)}
            if i % keep == 0:
                row["value"] = value.decode()
            rows.append(row)
    FIXTURE.parent.mkdir(parents=True, exist_ok=True)
    with gzip.GzipFile(FIXTURE, "wb", mtime=0) as fh:
        fh.write("".join(json.dumps(r) + "\n" for r in rows).encode())
    print(f"wrote {len(rows)} results to {FIXTURE}")


if __name__ == "__main__":
    if sys.argv[1:] != ["--write"]:
        sys.exit("usage: python -m tests.test_results_identical --write")
    _write()

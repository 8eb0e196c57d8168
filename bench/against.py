"""`make bench --against REF`: the same sections on another commit's code, same machine, same run.

REF's tree is exported (``git archive``, nothing registered in the repository) into a temporary
folder, and its own ``bench.run`` runs there with this interpreter, the same corpus and the same
options, so a change that costs throughput shows beside the figures of the tree under test.
Only the LLM and deterministic sections are run on REF (the ones a change of the record path
moves); each side's ratios are against the baseline measured in that side's own window. The
paired rounds (:mod:`bench.paired`) and the instruction counts (:mod:`bench.instructions`) run
both sides' code with this tree's workers, the side's ``stef`` first on the path.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import subprocess
import sys
import tarfile
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench import instructions, paired

# The sections REF runs too, when this run runs them.
SECTIONS = ("deterministic", "llm")
# The figures set side by side in the report: the throughputs and their ratios.
_KEYS = ("_per_s_", "_ratio_")


class AgainstError(SystemExit):
    """REF cannot be exported or its bench failed: one line, exit 2."""

    def __init__(self, message: str) -> None:
        super().__init__(2)
        self.message = message


def resolve(root: Path, ref: str) -> str:
    """The commit REF names.

    Raises:
        AgainstError: REF is not a commit of the repository at ``root``.
    """
    out = subprocess.run(
        ["git", "-C", str(root), "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}"],
        capture_output=True,
        text=True,
        check=False,
    )
    if out.returncode != 0:
        raise AgainstError(f"bench: --against {ref!r} is not a commit of {root}")
    return out.stdout.strip()


def _export(root: Path, commit: str, into: Path) -> None:
    archive = subprocess.run(
        ["git", "-C", str(root), "archive", "--format=tar", commit],
        capture_output=True,
        check=False,
    )
    if archive.returncode != 0:
        raise AgainstError(f"bench: git archive {commit} failed: {archive.stderr.decode()[:300]}")
    with tarfile.open(fileobj=io.BytesIO(archive.stdout)) as tar:
        tar.extractall(into, filter="data")


def run_against(
    root: Path,
    ref: str,
    commit: str,
    sections: list[str],
    args: argparse.Namespace,
    corpus: Path,
    records: list[dict[str, Any]],
    ours: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """REF's report of ``sections`` (those of :data:`SECTIONS` among them), run on REF's code
    (``commit``, from :func:`resolve`); with the deterministic section, both sides' record path
    in alternating rounds too, and with the LLM section both sides' LLM path
    (:mod:`bench.paired`, over ``records``; a failure of theirs is reported, not raised); with
    the instructions section, both sides' counts (:mod:`bench.instructions`; this tree's are
    the section's own, in ``ours``, this run's sections, when it counted them).

    Raises:
        AgainstError: REF cannot be exported, or its bench failed.
    """
    chosen = [s for s in SECTIONS if s in sections]
    with tempfile.TemporaryDirectory(prefix="stef-bench-against-") as tmp:
        tree, out = Path(tmp) / "tree", Path(tmp) / "out"
        tree.mkdir()
        _export(root, commit, tree)
        trees = {"this tree": root, ref: tree}
        against: dict[str, Any] = {"ref": ref, "commit": commit, "sections": {}}
        if chosen:  # REF's own bench, on its own sections (none asked: none run)
            against["sections"] = _their_sections(tree, out, ref, commit, chosen, args, corpus)
        if "deterministic" in chosen:
            against["paired"] = _rounds("deterministic", lambda: paired.run_rounds(trees, records))
        if "llm" in chosen:
            against["paired_llm"] = _rounds(
                "llm",
                lambda: paired.run_llm_rounds(
                    trees,
                    records,
                    concurrency=args.llm_concurrency,
                    latency_ms=args.llm_latency_ms,
                ),
            )
        if "instructions" in sections:
            mine = (ours or {}).get("instructions", {})
            known = {} if "error" in mine or not mine else {"this tree": mine}
            against["instructions"] = _rounds(
                "instructions", lambda: instructions.compare(trees, records, known), "counted"
            )
    return against


def _their_sections(
    tree: Path,
    out: Path,
    ref: str,
    commit: str,
    chosen: list[str],
    args: argparse.Namespace,
    corpus: Path,
) -> dict[str, Any]:
    """REF's own ``bench.run`` over ``chosen``, in its exported ``tree``: its report's sections.

    Raises:
        AgainstError: its bench failed.
    """
    command = [sys.executable, "-m", "bench.run", "--out", str(out)]
    command += [f"--only={s}" for s in chosen]
    command += [f"--llm-latency-ms={args.llm_latency_ms}"]
    command += [f"--llm-concurrency={args.llm_concurrency}", f"--backlog={args.backlog}"]
    print(f"bench: against {ref} ({commit[:12]}) ...", file=sys.stderr, flush=True)
    done = subprocess.run(
        command,
        cwd=tree,
        env={**_env(), "BENCH_CORPUS": str(corpus)},
        stdout=subprocess.DEVNULL,
        check=False,
    )
    if done.returncode != 0 or not (out / "report.json").exists():
        raise AgainstError(f"bench: the bench of {ref} ({commit[:12]}) failed")
    theirs: dict[str, Any] = json.loads((out / "report.json").read_text())
    return dict(theirs.get("sections", {}))


def _rounds(
    section: str, measure: Callable[[], dict[str, Any]], how: str = "in alternating rounds"
) -> dict[str, Any]:
    """Both sides' ``section`` measured ``how``; a side whose worker fails (a REF too old for
    it, valgrind missing) leaves ``{"error": ...}`` in the report, as a failed section does, and
    the rest of the comparison stands."""
    print(f"bench: {section}, both sides {how} ...", file=sys.stderr)
    try:
        return measure()
    except Exception as exc:  # whatever a side's failure is, the rest of the report stands
        said = str(exc) if isinstance(exc, RuntimeError) else f"{type(exc).__name__}: {exc}"
        print(f"bench: {section}, both sides {how}: {said}", file=sys.stderr)
        return {"error": said}


def _env() -> dict[str, str]:
    # REF's own tree must come first on the path, not this one's (an editable install).
    return {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}


def side_by_side(ours: dict[str, Any], against: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per throughput or ratio both sides report: this tree, REF, and this / REF."""
    rows = []
    for section in SECTIONS:
        mine, theirs = ours.get(section, {}), against["sections"].get(section, {})
        for key, value in mine.items():
            other = theirs.get(key)
            if key.startswith("littles_law") or not any(k in f"{key}_" for k in _KEYS):
                continue
            if not isinstance(value, int | float) or not isinstance(other, int | float):
                continue
            rows.append(
                {
                    "figure": f"{section}.{key}",
                    "this tree": value,
                    against["ref"]: other,
                    "this / ref": round(value / other, 3) if other else "-",
                }
            )
    return rows

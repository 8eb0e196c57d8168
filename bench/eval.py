"""`make eval`: the judge measured against human labels the same way every time (issue 22 §5).

Judges the labelled dev set (``../shared/data/judge-dev.jsonl``, or ``EVAL_LABELS``) through the one
record path, as ``stef calibrate`` does (every record judged, the dev rules of
``examples/rules-judge-dev``), with:

- the heuristic judge, on every record (and ``stef calibrate --json`` on the same file, kept
  verbatim in the report);
- a real model in probability mode and in structured mode, on the fixed stratified sample of
  ``bench/eval-sample.json`` (equal per source and label as far as each source has records;
  ``--write-sample`` draws it again, seed 22). By default Qwen2.5-Coder-1.5B on a local
  llama-server started here (``scripts/build-llama-server.sh``, ``scripts/fetch-qwen.sh``), or
  any OpenAI-compatible endpoint given as ``EVAL_BASE_URL``, ``EVAL_MODEL``, ``EVAL_API_KEY``.

- the same model in probability mode with few-shot from corrections (``llm.few_shot: k``,
  ``--few-shot K``), on the same sample records, against k = 0 (the probability mode above). The
  examples are the dev records outside the sample (same ``app``; none whose question a sample
  record also asks), each with the heuristic's verdict as "what the judge said when it was
  reviewed" (the heuristic's mistakes come first) and the record's error types as the reviewer's
  note; written to ``build/eval/few-shot-examples.jsonl``.

Each judge gives a raw signal in [0, 1]: the score / 100 for the heuristic, P(Yes) in probability
mode, and in structured mode the verdict token's probability (``token``) and the self-reported
confidence read as P(correct) (``self``: the confidence for a passing verdict, one minus it for a
failing one). Per mode and per source the report gives AUC, Brier score, ECE (10 equal-width bins)
and Cohen's kappa (a judge error counts as the wrong prediction, as in ``stef calibrate``), the
judge errors, and tokens and seconds per record. It writes ``build/eval/report.json`` and
``build/eval/report.md``. Not part of ``make test``: a real model on CPU takes many minutes.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import random
import socket
import statistics
import subprocess
import sys
import time
import urllib.request
from collections import defaultdict
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from stef.accuracy import auc  # noqa: E402
from stef.calibrate.agreement import confusion, kappa  # noqa: E402
from stef.calibrate.labels import without_sampling  # noqa: E402
from stef.judges.base import Judge, JudgeReply, JudgeRequest  # noqa: E402
from stef.judges.heuristic.judge import HeuristicJudge  # noqa: E402
from stef.judges.llm import build_llm_judge  # noqa: E402
from stef.judges.llm.config import LlmConfig  # noqa: E402
from stef.judges.llm.examples import folded  # noqa: E402
from stef.labels_file import LabelledRecord, read_labels  # noqa: E402
from stef.models import PASSING_VERDICTS, JudgeInfo, Result, Verdict  # noqa: E402
from stef.pipeline import Pipeline  # noqa: E402
from stef.rules import load_rules  # noqa: E402

DEV_SET = ROOT.parent / "shared" / "data" / "judge-dev.jsonl"
LABELS = Path(os.environ.get("EVAL_LABELS") or str(DEV_SET))
SAMPLE = ROOT / "bench" / "eval-sample.json"
RULES = ROOT / "examples" / "rules-judge-dev"
OUT = ROOT / "build" / "eval"
SERVER = ROOT / "build" / "llama-server" / "bin" / "llama-server"
MODEL_FILE = ROOT / "build" / "models" / "qwen2.5-coder-1.5b-q4_k_m.gguf"
MODEL_NAME = "qwen2.5-coder-1.5b-instruct-q4_k_m"
SEED = 22
SAMPLE_SIZE = 150
# The heuristic passes at score >= 75 (stef calibrate's default); a probability at >= 0.5.
HEURISTIC_PASS = 75.0
BINS = 10


# ------------------------------------------------------------------------------------ sample


def draw_sample(records: Sequence[LabelledRecord], size: int, seed: int) -> list[str]:
    """A stratified sample by (source, label): each stratum gets the same share, a stratum with
    fewer records gives all it has and the rest is shared among the others. The ids come in
    rounds over the strata, so any prefix is balanced too (a smaller run takes the first N)."""
    strata: dict[tuple[str, bool], list[str]] = defaultdict(list)
    for rec in records:
        strata[(rec.source or "unknown", rec.label)].append(str(rec.payload["id"]))
    keys = sorted(strata, key=lambda k: (k[0], k[1]))
    quota = dict.fromkeys(keys, 0)
    left = min(size, sum(len(v) for v in strata.values()))
    while left:
        open_ = [k for k in keys if quota[k] < len(strata[k])]
        for k in open_[:left]:
            quota[k] += 1
            left -= 1
    rng = random.Random(seed)
    drawn = {k: rng.sample(sorted(strata[k]), quota[k]) for k in keys}
    out: list[str] = []
    for i in range(max(quota.values(), default=0)):
        out += [drawn[k][i] for k in keys if i < len(drawn[k])]
    return out


def write_sample(path: Path, labels: Path, size: int, seed: int) -> None:
    records = read_labels(labels)
    ids = draw_sample(records, size, seed)
    by_id = {str(r.payload["id"]): r for r in records}
    strata: dict[str, int] = defaultdict(int)
    for i in ids:
        strata[f"{by_id[i].source} / {'correct' if by_id[i].label else 'wrong'}"] += 1
    data = {
        "labels": labels.name,
        "seed": seed,
        "size": len(ids),
        "drawn_by": "python -m bench.eval --write-sample",
        "strata": dict(sorted(strata.items())),
        "ids": ids,
    }
    path.write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")


# ------------------------------------------------------------------------------- metrics


def brier(labels: Sequence[bool], probs: Sequence[float]) -> float | None:
    if not labels:
        return None
    return sum((p - y) ** 2 for p, y in zip(probs, labels, strict=True)) / len(labels)


def ece(labels: Sequence[bool], probs: Sequence[float], bins: int = BINS) -> float | None:
    """Expected calibration error over ``bins`` equal-width bins of the probability."""
    if not labels:
        return None
    sums: dict[int, list[float]] = defaultdict(lambda: [0.0, 0.0, 0.0])
    for p, y in zip(probs, labels, strict=True):
        b = sums[min(int(p * bins), bins - 1)]
        b[0] += 1
        b[1] += p
        b[2] += y
    return sum(abs(b[1] - b[2]) for b in sums.values()) / len(labels)


# --------------------------------------------------------------------------------- judging


class _Recorder:
    """The backend, with each judged record's token probability kept (the result has none)."""

    def __init__(self, inner: Judge) -> None:
        self.inner = inner
        self.token_probability: dict[str, float | None] = {}

    @property
    def info(self) -> JudgeInfo:
        return self.inner.info

    def judge(self, request: JudgeRequest) -> JudgeReply:
        reply = self.inner.judge(request)
        self.token_probability[request.record.id] = reply.output.token_probability
        return reply

    def close(self) -> None:
        self.inner.close()


@dataclass(frozen=True)
class Row:
    id: str
    source: str
    label: bool
    outcome: str
    error: str | None
    score: float | None
    verdict: str | None
    confidence: float | None
    token_probability: float | None
    prompt_tokens: int
    completion_tokens: int
    seconds: float


def judge_records(
    backend: Judge, records: Sequence[LabelledRecord], *, show: bool, budget_s: float | None = None
) -> list[Row]:
    """Judge the records one at a time; with ``budget_s``, no record starts after that many
    seconds (the report counts the records judged: a run cut short says so)."""
    recorder = _Recorder(backend)
    pipeline = Pipeline(without_sampling(load_rules(RULES)), recorder)
    rows: list[Row] = []
    started = time.monotonic()
    for n, rec in enumerate(records, start=1):
        if budget_s is not None and time.monotonic() - started > budget_s:
            print(f"  time budget spent after {n - 1} records", file=sys.stderr, flush=True)
            break
        raw = json.dumps(rec.payload, ensure_ascii=False).encode()
        t0 = time.monotonic()
        result = pipeline.process(raw, {"file": "labels", "line": rec.line}).result
        rows.append(_row(rec, result, recorder, time.monotonic() - t0))
        if show and (n % 10 == 0 or n == len(records)):
            took = time.monotonic() - started
            print(f"  {n}/{len(records)} records, {took:.0f} s", file=sys.stderr, flush=True)
    return rows


def _row(rec: LabelledRecord, result: Result | None, recorder: _Recorder, seconds: float) -> Row:
    rid = str(rec.payload["id"])
    comp = result.components if result is not None else None
    return Row(
        id=rid,
        source=rec.source or "unknown",
        label=rec.label,
        outcome=result.outcome if result is not None else "dead_letter",
        error=(result.error or "").split(":", 1)[0] or None if result is not None else "invalid",
        score=result.score if result is not None else None,
        verdict=str(comp.verdict) if comp is not None else None,
        confidence=comp.confidence if comp is not None else None,
        token_probability=recorder.token_probability.get(rid),
        prompt_tokens=result.usage.prompt_tokens if result is not None else 0,
        completion_tokens=result.usage.completion_tokens if result is not None else 0,
        seconds=round(seconds, 3),
    )


def signal(row: Row, kind: str) -> float | None:
    """The raw signal of one row as P(correct), or None (a judge error, or no such signal)."""
    if row.outcome != "evaluated":
        return None
    if kind == "score":
        return None if row.score is None else row.score / 100
    if kind == "token":
        return row.token_probability
    if row.verdict is None or row.confidence is None:
        return None
    return row.confidence if Verdict(row.verdict) in PASSING_VERDICTS else 1 - row.confidence


def measure(rows: Sequence[Row], kind: str, threshold: float) -> dict[str, Any]:
    """The figures of one signal over ``rows``: the probability metrics on the rows that have
    the signal, kappa on all (a row without it is a wrong prediction)."""
    have = [(r, s) for r in rows if (s := signal(r, kind)) is not None]
    labels = [r.label for r, _ in have]
    probs = [s for _, s in have]
    predicted = [None if (s := signal(r, kind)) is None else s >= threshold for r in rows]
    k = kappa(confusion([r.label for r in rows], predicted))
    evaluated = [r for r in rows if r.outcome == "evaluated"]
    return {
        "n": len(rows),
        "with_signal": len(have),
        "judge_errors": sum(r.outcome == "judge_error" for r in rows),
        "error_reasons": dict(
            sorted(
                {
                    e: sum(r.error == e for r in rows if r.outcome != "evaluated")
                    for e in {r.error for r in rows if r.outcome != "evaluated"}
                    if e
                }.items()
            )
        ),
        "positives": sum(r.label for r in rows),
        "auc": _round(auc(labels, probs)),
        "brier": _round(brier(labels, probs)),
        "ece": _round(ece(labels, probs)),
        "kappa": _round(k),
        "mean_signal": _round(statistics.fmean(probs) if probs else None),
        "prompt_tokens_median": _median([r.prompt_tokens for r in evaluated]),
        "completion_tokens_median": _median([r.completion_tokens for r in evaluated]),
        "completion_tokens_max": max((r.completion_tokens for r in evaluated), default=None),
        "seconds_median": _median([r.seconds for r in rows]),
        "seconds_mean": _round(statistics.fmean(r.seconds for r in rows) if rows else None),
    }


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 4)


def _median(values: Sequence[float]) -> float | None:
    return round(statistics.median(values), 3) if values else None


def by_source(rows: Sequence[Row], kind: str, threshold: float) -> dict[str, Any]:
    groups: dict[str, list[Row]] = defaultdict(list)
    for r in rows:
        groups[r.source].append(r)
    return {s: measure(g, kind, threshold) for s, g in sorted(groups.items())}


# ---------------------------------------------------------------------------------- server


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def llama_server(threads: int, log: Path) -> Iterator[str]:
    """A llama-server for the Qwen model on a free loopback port; stopped by its PID."""
    for need, how in (
        (SERVER, "scripts/build-llama-server.sh"),
        (MODEL_FILE, "scripts/fetch-qwen.sh"),
    ):
        if not need.exists():
            raise SystemExit(f"eval: {need} is missing; run bash {how} (make eval does)")
    port = _free_port()
    cmd = [str(SERVER), "-m", str(MODEL_FILE), "--alias", MODEL_NAME, "--host", "127.0.0.1"]
    cmd += ["--port", str(port), "-c", "4096", "-t", str(threads), "-np", "1", "--no-webui"]
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("wb") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT)
        try:
            url = f"http://127.0.0.1:{port}/v1"
            deadline = time.monotonic() + 300
            while True:
                if proc.poll() is not None:
                    raise SystemExit(f"eval: llama-server exited ({proc.returncode}); see {log}")
                with (
                    contextlib.suppress(OSError),
                    urllib.request.urlopen(f"{url}/models", timeout=5) as r,
                ):
                    if r.status == 200:
                        break
                if time.monotonic() > deadline:
                    raise SystemExit(f"eval: llama-server not ready after 300 s; see {log}")
                time.sleep(1)
            yield url
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def llm_config(
    base_url: str,
    model: str,
    api_key: str | None,
    verdict: str,
    *,
    few_shot: int = 0,
    examples: Path | None = None,
) -> LlmConfig:
    """One record at a time, with room for a slow CPU server; no cache (every record asked)."""
    data: dict[str, Any] = {
        "base_url": base_url,
        "model": model,
        "verdict": verdict,
        "timeout_s": 600,
        "max_retries": 1,
        "max_total_retry_s": 1200,
        "max_concurrency": 1,
        "max_tokens": 600,
        "cache_size": 0,
        "few_shot": few_shot,
        "few_shot_file": examples,
    }
    if api_key:
        data["api_key"] = api_key
    return LlmConfig.model_validate(data)


def write_examples(
    path: Path,
    records: Sequence[LabelledRecord],
    sample_ids: Sequence[str],
    heuristic_rows: list[Row],
) -> dict[str, int]:
    """The few-shot examples file of the eval: the labelled records outside the sample whose
    question no sample record asks, as ``stef canary add`` writes them (the heuristic's verdict
    standing for the judge's at review time, the error types for the reviewer's note)."""
    sample = set(sample_ids)
    asked = {folded(str(r.payload["question"])) for r in records if str(r.payload["id"]) in sample}
    verdicts = {r.id: r.verdict for r in heuristic_rows}
    lines: list[str] = []
    left_out = 0
    for rec in records:
        rid = str(rec.payload["id"])
        if rid in sample:
            continue
        question = str(rec.payload["question"])
        if folded(question) in asked:
            left_out += 1
            continue
        line: dict[str, Any] = {
            "id": rid,
            "app": rec.payload.get("app"),
            "question": question,
            "enriched_question": rec.payload.get("enriched_question"),
            "sql": rec.payload["sql"],
            "label": rec.label,
        }
        if rec.error_types:
            line["note"] = "; ".join(rec.error_types)
        if verdicts.get(rid):
            line["judge_verdict"] = verdicts[rid]
        lines.append(json.dumps(line, ensure_ascii=False))
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(x + "\n" for x in lines), encoding="utf-8")
    return {"examples": len(lines), "same_question_left_out": left_out}


# ---------------------------------------------------------------------------------- report


def stef_calibrate(labels: Path) -> Any:
    """``stef calibrate --json`` of the heuristic on ``labels``, as a user runs it."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("STEF_")}
    env["PYTHONPATH"] = str(ROOT)
    cmd = [sys.executable, "-m", "stef.cli", "calibrate", str(labels), "--rules", str(RULES)]
    done = subprocess.run(
        [*cmd, "--json", "--no-progress"], env=env, capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        return {"error": done.stderr.strip()[-500:], "exit": done.returncode}
    return json.loads(done.stdout)


def _fmt(value: Any) -> str:
    if value is None:
        return "–"
    if isinstance(value, float):
        return f"{value:.3f}" if abs(value) < 10 else f"{value:.1f}"
    return str(value)


_COLUMNS = (
    ("n", "n"),
    ("judge_errors", "errors"),
    ("auc", "AUC"),
    ("brier", "Brier"),
    ("ece", "ECE"),
    ("kappa", "κ"),
    ("mean_signal", "mean p"),
    ("prompt_tokens_median", "prompt tok (median)"),
    ("completion_tokens_median", "completion tok (median)"),
    ("seconds_median", "s/record (median)"),
)


def _table(rows: list[tuple[str, dict[str, Any]]], first: str) -> list[str]:
    out = [
        f"| {first} | " + " | ".join(h for _, h in _COLUMNS) + " |",
        "| --- " * (len(_COLUMNS) + 1) + "|",
    ]
    for name, m in rows:
        cells = [
            f"{m[k]:.0f}" if "tokens" in k and m.get(k) is not None else _fmt(m.get(k))
            for k, _ in _COLUMNS
        ]
        out.append(f"| {name} | " + " | ".join(cells) + " |")
    return out


def markdown(report: dict[str, Any]) -> str:
    lines = [
        f"# STEF judge evaluation ({report['date']})",
        "",
        f"Command: `{report['command']}`. Labels: `{report['labels']}`; sample: "
        f"`bench/eval-sample.json` (seed {report['seed']}). Model: {report['model']} "
        f"at {report['endpoint']}.",
        "",
        "## Overall",
        "",
        *_table([(name, m["overall"]) for name, m in report["modes"].items()], "judge / signal"),
        "",
    ]
    for name, m in report["modes"].items():
        lines += [f"## {name}: per source", "", *_table(list(m["per_source"].items()), "source")]
        if m["overall"]["error_reasons"]:
            lines.append(f"\nJudge errors by reason: {m['overall']['error_reasons']}")
        lines.append("")
    return "\n".join(lines)


def _write(out: Path, report: dict[str, Any], rows: dict[str, list[dict[str, Any]]]) -> None:
    """The report so far (after each mode: a long run stopped later keeps what it measured)."""
    full = {**report, "rows": rows}
    (out / "report.json").write_text(json.dumps(full, indent=1) + "\n", encoding="utf-8")
    (out / "report.md").write_text(markdown(report), encoding="utf-8")


def _parser() -> argparse.ArgumentParser:
    summary = (__doc__ or "").split("\n")[0]
    parser = argparse.ArgumentParser(prog="python -m bench.eval", description=summary)
    parser.add_argument("--sample-size", type=int, default=SAMPLE_SIZE, help="probability mode")
    parser.add_argument("--structured-size", type=int, default=SAMPLE_SIZE, help="structured mode")
    parser.add_argument("--modes", default="heuristic,probability,few-shot,structured")
    parser.add_argument("--threads", type=int, default=1, help="llama-server threads (-t)")
    parser.add_argument(
        "--few-shot", type=int, default=3, help="k of the few-shot mode (probability, k examples)"
    )
    parser.add_argument(
        "--few-shot-size", type=int, default=SAMPLE_SIZE, help="records of the few-shot mode"
    )
    parser.add_argument(
        "--budget-s", type=float, default=None, help="per LLM mode: start no record after this"
    )
    parser.add_argument(
        "--structured-budget-s", type=float, default=None, help="structured mode's (--budget-s)"
    )
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument("--write-sample", action="store_true", help="draw bench/eval-sample.json")
    return parser


@dataclass(frozen=True)
class _Endpoint:
    """Where the LLM modes are judged: a server of the environment's, else a local one."""

    base_url: str | None
    model: str
    api_key: str | None

    @classmethod
    def from_env(cls) -> _Endpoint:
        return cls(
            os.environ.get("EVAL_BASE_URL") or None,
            os.environ.get("EVAL_MODEL") or MODEL_NAME,
            os.environ.get("EVAL_API_KEY") or None,
        )


def _new_report(args: argparse.Namespace, argv: list[str] | None, at: _Endpoint) -> dict[str, Any]:
    return {
        "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "command": " ".join(
            ["python -m bench.eval", *(argv if argv is not None else sys.argv[1:])]
        ),
        "labels": LABELS.name,
        "seed": SEED,
        "model": at.model,
        "endpoint": at.base_url or f"local llama-server (-t {args.threads})",
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, load {os.getloadavg()[0]:.1f}",
        "modes": {},
    }


def _record(
    report: dict[str, Any], name: str, rows: list[Row], kind: str, threshold: float
) -> None:
    """One judge or signal's measures into the report."""
    report["modes"][name] = {
        "signal": kind,
        "threshold": threshold,
        "overall": measure(rows, kind, threshold),
        "per_source": by_source(rows, kind, threshold),
    }


def _heuristic_mode(
    args: argparse.Namespace,
    rows: list[Row],
    sample_ids: list[str],
    report: dict[str, Any],
    rows_out: dict[str, list[dict[str, Any]]],
) -> None:
    """The heuristic judge's measures on every record and on the sample, and `stef
    calibrate`'s fit."""
    rows_out["heuristic"] = [asdict(r) for r in rows]
    _record(report, "heuristic (all, score/100)", rows, "score", HEURISTIC_PASS / 100)
    sample = set(sample_ids)
    _record(
        report,
        "heuristic (sample, score/100)",
        [r for r in rows if r.id in sample],
        "score",
        HEURISTIC_PASS / 100,
    )
    report["stef_calibrate_heuristic"] = stef_calibrate(LABELS)
    _write(args.out, report, rows_out)


def _llm_mode(
    args: argparse.Namespace,
    mode: str,
    url: str,
    at: _Endpoint,
    examples: Path,
    chosen: list[LabelledRecord],
) -> list[Row]:
    """One LLM mode's judge on the chosen records (within the mode's budget)."""
    if mode == "few-shot":
        config = llm_config(
            url, at.model, at.api_key, "probability", few_shot=args.few_shot, examples=examples
        )
    else:
        config = llm_config(url, at.model, at.api_key, mode)
    judge = build_llm_judge(config)
    try:
        budget = args.budget_s
        if mode == "structured" and args.structured_budget_s is not None:
            budget = args.structured_budget_s
        return judge_records(judge, chosen, show=True, budget_s=budget)
    finally:
        judge.close()


def _record_llm(
    report: dict[str, Any],
    rows_out: dict[str, list[dict[str, Any]]],
    mode: str,
    rows: list[Row],
    k: int,
) -> None:
    """An LLM mode's measures into the report (few-shot beside k = 0 on the same records)."""
    rows_out[mode] = [asdict(r) for r in rows]
    if mode == "probability":
        _record(report, "probability (P(Yes))", rows, "token", 0.5)
    elif mode == "few-shot":
        _record(report, f"probability, few-shot k={k} (P(Yes))", rows, "token", 0.5)
        paired = {r.id for r in rows}
        k0 = [Row(**x) for x in rows_out.get("probability", []) if x["id"] in paired]
        if k0 and len(k0) != len(rows_out["probability"]):
            # k = 0 on exactly the records the few-shot run judged.
            _record(report, "probability, k=0, the few-shot records", k0, "token", 0.5)
    else:
        _record(report, "structured (verdict token)", rows, "token", 0.5)
        _record(report, "structured (self-reported)", rows, "self", 0.5)


def _llm_modes(
    args: argparse.Namespace,
    modes: list[str],
    at: _Endpoint,
    by_id: dict[str, LabelledRecord],
    sample_ids: list[str],
    report: dict[str, Any],
    rows_out: dict[str, list[dict[str, Any]]],
) -> None:
    """Each LLM mode in turn against one server (started here unless EVAL_BASE_URL names one)."""
    examples = args.out / "few-shot-examples.jsonl"
    with contextlib.ExitStack() as stack:
        url = at.base_url or stack.enter_context(
            llama_server(args.threads, args.out / "llama-server.log")
        )
        for mode in modes:
            size = {
                "probability": args.sample_size,
                "few-shot": args.few_shot_size,
                "structured": args.structured_size,
            }[mode]
            chosen = [by_id[i] for i in sample_ids[:size]]
            print(f"eval: {mode} mode on {len(chosen)} records", file=sys.stderr)
            rows = _llm_mode(args, mode, url, at, examples, chosen)
            _record_llm(report, rows_out, mode, rows, args.few_shot)
            _write(args.out, report, rows_out)


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if not LABELS.exists():
        print(f"eval: the labels file is absent: {LABELS} (set EVAL_LABELS)", file=sys.stderr)
        return 2
    if args.write_sample:
        write_sample(SAMPLE, LABELS, SAMPLE_SIZE, SEED)
        print(f"eval: wrote {SAMPLE}")
        return 0
    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    records = read_labels(LABELS)
    sample_ids = json.loads(SAMPLE.read_text(encoding="utf-8"))["ids"]
    at = _Endpoint.from_env()
    report = _new_report(args, argv, at)
    args.out.mkdir(parents=True, exist_ok=True)
    rows_out: dict[str, list[dict[str, Any]]] = {}
    heuristic_rows: list[Row] = []
    if "heuristic" in modes or "few-shot" in modes:
        print(f"eval: heuristic on {len(records)} records", file=sys.stderr)
        heuristic_rows = judge_records(HeuristicJudge(), records, show=False)
    if "heuristic" in modes:
        _heuristic_mode(args, heuristic_rows, sample_ids, report, rows_out)
    if "few-shot" in modes:
        examples = args.out / "few-shot-examples.jsonl"
        report["few_shot"] = {
            "k": args.few_shot,
            "file": str(examples.relative_to(ROOT) if examples.is_relative_to(ROOT) else examples),
            **write_examples(examples, records, sample_ids, heuristic_rows),
        }
    llm_modes = [m for m in ("probability", "few-shot", "structured") if m in modes]
    if llm_modes:
        by_id = {str(r.payload["id"]): r for r in records}
        _llm_modes(args, llm_modes, at, by_id, sample_ids, report, rows_out)
    _write(args.out, report, rows_out)
    print(markdown(report))
    print(f"\neval: wrote {args.out / 'report.md'} and report.json", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

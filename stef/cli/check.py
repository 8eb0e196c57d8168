"""``stef check``: the settings, the rules and the LLM endpoint, checked the way every command
checks them at start, without reading a record."""

from __future__ import annotations

import argparse
import sys

from stef.api import Judge
from stef.cli.common import add_common, report_error, settings_of
from stef.errors import EndpointError, StefError
from stef.exits import Exit
from stef.judges.llm import check_local
from stef.judges.llm.examples import check_template, load_examples
from stef.judges.llm.preflight import check_endpoint
from stef.models import InputRecord
from stef.prompts import Prompts
from stef.rules import load_rules
from stef.settings import Settings

# The record of the test call: small, and already in STEF's field names.
TEST_RECORD = InputRecord(
    id="stef-check",
    question="How many orders were placed in 2023?",
    sql="SELECT COUNT(*) FROM orders WHERE order_date >= '2023-01-01' "
    "AND order_date < '2024-01-01'",
)


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "check",
        help="check the settings, the rules and the LLM endpoint",
        description="Check what a command reads at start: the settings (--config, STEF_*), the "
        "rules, and the LLM endpoint (its models list: reachable, the key accepted, the model "
        "listed; then one test record judged in the configured verdict mode). One line "
        "each. Exit status: 0 all good, 2 invalid settings or rules, 3 the LLM endpoint is "
        "unusable.",
    )
    add_common(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    try:
        settings = settings_of(args)
    except StefError as exc:
        return report_error("stef check", exc)
    print(f"settings: ok ({args.config or 'no config file'})")
    try:
        ruleset = load_rules(settings.rules)
    except (StefError, OSError) as exc:
        return report_error("stef check", exc)
    where = settings.rules or "built-in defaults"
    print(f"rules: ok ({where}; rules_version {ruleset.version})")
    if not settings.llm.configured:
        print("judge: heuristic (no LLM endpoint configured: STEF_LLM_BASE_URL, STEF_LLM_API_KEY)")
        return Exit.OK
    try:  # what replay and run refuse before the endpoint (a model, a usable cache): exit 2
        check_local(settings.llm)
    except StefError as exc:
        return report_error("stef check", exc)
    few_shot = settings.llm.few_shot_file
    if not settings.llm.few_shot and few_shot is not None:
        print(f"few-shot: off (llm.few_shot is 0; llm.few_shot_file {few_shot} is not read)")
    if settings.llm.few_shot and few_shot is not None:
        try:
            check_template(Prompts.load())
            examples = load_examples(few_shot)
        except StefError as exc:
            return report_error("stef check", exc)
        apps = ", ".join(
            f"{app or '(no app)'} {c['examples']} ({c['judge_wrong']} the judge got wrong)"
            for app, c in examples.counts().items()
        )
        print(
            f"few-shot: ok (k {settings.llm.few_shot}; {few_shot}: {apps or 'no examples yet'}"
            + (f"; {examples.too_long} too long to show" if examples.too_long else "")
            + (f"; {examples.dropped} past the per-app cap" if examples.dropped else "")
            + ")"
        )
    return _check_llm(settings)


def _check_llm(settings: Settings) -> int:
    """The endpoint: an OpenAI-shaped models list, and a test record judged in
    the configured verdict mode (a model the list does not name fails unless that test call
    shows the endpoint serves it). One line; exit 3 on the first that fails."""
    model = settings.llm.model
    try:
        checked = check_endpoint(settings.llm)
    except EndpointError as exc:
        return _unusable(f"{exc} (model {model})")
    failure = _test_call(settings)
    unlisted = checked.model_listed is False
    if failure is not None:
        why = f"; the models list does not name it ({_listed(checked.models)})" if unlisted else ""
        return _unusable(
            f"LLM endpoint {checked.url}: a test record got no verdict in verdict mode "
            f"{settings.llm.verdict} (model {model}{why}): {failure}"
        )
    # Not listed but answering: an Azure deployment name (Azure lists models, not deployments).
    print(f"judge: llm, model {model}; endpoint {checked.describe()}; test verdict ok")
    return Exit.OK


def _listed(models: tuple[str, ...]) -> str:
    shown = ", ".join(models[:5]) + (" ..." if len(models) > 5 else "")
    return f"{len(models)} listed: {shown}"


def _unusable(line: str) -> int:
    print(f"stef check: {line}", file=sys.stderr)
    return Exit.JUDGE_ERROR


def _test_call(settings: Settings) -> str | None:
    """Judge one built-in record the way a run would (same prompts, verdict mode, reply
    schema), without the cache and without retries; why it got no verdict, or None. The
    built-in rules (no app's sampling may skip it) and, in cascade mode, every record escalated:
    the call must reach the LLM."""
    llm = settings.llm.model_copy(
        update={"cache_size": 0, "cache_path": None, "max_retries": 0, "samples": 1}
    )
    update = {"llm": llm, "rules": None, "cascade_below": 1.0}
    try:
        with Judge(settings.model_copy(update=update)) as judge:
            result = judge.judge(TEST_RECORD)
    except StefError as exc:  # the calibration file, a template: said as it is
        return str(exc)
    if result.outcome == "judge_error":
        return result.error or "judge_error"
    return None

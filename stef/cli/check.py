"""``stef check``: the settings, the rules and the LLM endpoint, checked the way every command
checks them at start, without reading a record."""

from __future__ import annotations

import argparse
import sys

from stef.cli.common import add_common, report_error, settings_of
from stef.errors import EndpointError, StefError
from stef.exits import Exit
from stef.judges.llm.examples import check_template, load_examples
from stef.judges.llm.preflight import check_endpoint
from stef.prompts import Prompts
from stef.rules import load_rules


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "check",
        help="check the settings, the rules and the LLM endpoint",
        description="Check what a command reads at start: the settings (--config, STEF_*), the "
        "rules, and the LLM endpoint (its models list: reachable, the key accepted). One line "
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
    try:
        checked = check_endpoint(settings.llm)
    except EndpointError as exc:
        print(f"stef check: {exc} (model {settings.llm.model})", file=sys.stderr)
        return Exit.JUDGE_ERROR
    print(f"judge: llm, model {settings.llm.model}; endpoint {checked.describe()}")
    return Exit.OK

"""``stef rules check|schema``: validate rules files (``file:line: message``), print the schema."""

from __future__ import annotations

import argparse
import json
import sys

from stef.errors import RulesError
from stef.exits import Exit
from stef.rules import load_rules, rules_schema


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    rules = sub.add_parser("rules", help="rules files")
    rsub = rules.add_subparsers(dest="rules_command", required=True)
    rc = rsub.add_parser("check", help="validate rules files; file:line errors, exit 2 on error")
    rc.add_argument("path", nargs="?", default="rules")
    rc.set_defaults(func=check)
    rs = rsub.add_parser("schema", help="print the JSON schema of a rules file")
    rs.set_defaults(func=schema)


def check(args: argparse.Namespace) -> int:
    try:
        ruleset = load_rules(args.path)
    except RulesError as exc:
        for problem in exc.problems:
            print(str(problem), file=sys.stderr)
        count = len(exc.problems)
        print(f"{count} problem{'' if count == 1 else 's'} in {args.path}", file=sys.stderr)
        return Exit.USAGE  # bad rules: 2, as everywhere (the README's table)
    apps = ", ".join(ruleset.known_apps) or "(single file)"
    print(f"{args.path}: ok (rules_version {ruleset.version}; apps: {apps})")
    return Exit.OK


def schema(args: argparse.Namespace) -> int:
    print(json.dumps(rules_schema(), indent=2))
    return Exit.OK

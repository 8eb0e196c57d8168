"""What the app's rules call defaults, left out before the reference comparison.

A safety LIMIT (at or above ``limit_min``), the app's benign filters and the predicates on its
ignored columns are accepted by the judge whatever the question asks; the golden set is written
without them. Compared as written, every correct query of an app that adds a tenant filter or a
row cap would differ from its gold. Both queries lose them the same way before they are
compared (structure and generated databases alike).
"""

from __future__ import annotations

from sqlglot import exp
from sqlglot.errors import SqlglotError

from stef.rules import AppRules
from stef.sql.dialects import dialect_of, parse_sql
from stef.sql.predicates import conjuncts, predicate_of
from stef.stages.align import is_benign, is_ignored


def without_app_defaults(sql: str, dialect: str | None, rules: AppRules) -> str:
    """``sql`` without a safety LIMIT and without the outer WHERE's benign or ignored
    predicates; ``sql`` unchanged when it has none, or is not one plain SELECT sqlglot reads."""
    try:
        trees = parse_sql(sql, dialect)
    except (SqlglotError, RecursionError, ValueError):
        return sql
    tree = trees[0] if len(trees) == 1 else None
    if not isinstance(tree, exp.Select):
        return sql
    changed = False
    limit = tree.args.get("limit")
    count = limit.expression if isinstance(limit, exp.Limit) else None
    if isinstance(count, exp.Literal) and count.is_int and int(count.this) >= rules.limit_min:
        tree.set("limit", None)
        changed = True
    where = tree.args.get("where")
    if isinstance(where, exp.Where) and (rules.benign_filters or rules.ignore_filters):
        parts = list(conjuncts(where.this))
        kept = [c for c in parts if not _app_default(c, rules, dialect)]
        if len(kept) != len(parts):
            tree.set("where", exp.Where(this=exp.and_(*kept)) if kept else None)
            changed = True
    return tree.sql(dialect=dialect_of(dialect)) if changed else sql


def _app_default(node: exp.Expr, rules: AppRules, dialect: str | None) -> bool:
    pred = predicate_of(node, dialect)
    return pred is not None and (is_ignored(pred, rules) or is_benign(pred, rules, dialect))

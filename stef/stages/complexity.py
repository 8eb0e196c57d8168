"""Complexity stage: the tier of the SQL by BADGER's Algorithm 1, read off the SQL spec."""

from __future__ import annotations

from stef.models import Complexity, SqlSpec


def complexity(spec: SqlSpec) -> Complexity | None:
    """easy / medium / hard / extra_hard (BADGER §4.3, Algorithm 1); None for unparsed SQL.

    Component counts come from the deterministic spec: n_S projections, n_W WHERE predicates,
    n_G GROUP BY terms, n_O ORDER BY terms, n_T physical tables, n_H HAVING predicates.
    """
    if not spec.parsed:
        return None
    n_s = len(spec.projections)
    n_w = sum(1 for p in spec.filters if p.clause != "having")
    n_h = sum(1 for p in spec.filters if p.clause == "having")
    n_g = len(spec.group_by)
    n_o = len(spec.order_by)
    n_t = len(spec.tables)
    join = spec.has_join or n_t > 1
    nested = spec.has_nested_where
    setop = spec.has_set_operation
    cte = spec.has_cte
    if n_s <= 1 and n_w <= 1 and n_g == 0 and n_o == 0 and not join and not nested and not setop:
        return "easy"
    if n_s <= 3 and n_w <= 2 and n_g == 0 and not nested and not setop and not cte:
        return "medium"
    sigma = sum((n_s > 3, n_w > 3, n_g > 2, nested, setop, n_h > 0, cte, n_t > 3))
    if sigma >= 2:
        return "extra_hard"
    if n_s > 2 or n_w > 2 or n_g >= 2 or nested or setop or cte:
        return "hard"
    return "medium"

"""sqlglot dialects built once per process, and parsed trees without what STEF never reads.

``sqlglot.parse(sql, read="mysql")`` and ``node.sql(dialect=None)`` build a new ``Dialect`` on
every call (about 4.5 per record); a ``Dialect`` holds no per-call state (each parse and each
rendering makes its own parser or generator), so one instance per name serves every thread.
"""

from __future__ import annotations

from functools import lru_cache

from sqlglot import exp
from sqlglot.dialects.dialect import Dialect, Dialects

# The node metadata sqlglot's parser records for every identifier and literal: where it was in
# the text. STEF never reads it, and copying it is most of the cost of ``Expression.copy`` (a
# dict deep-copied per node), which every ``Expression.sql()`` makes.
_POSITIONS = frozenset(("line", "col", "start", "end"))


@lru_cache(maxsize=64)
def dialect_of(name: str | None) -> Dialect:
    """The one ``Dialect`` of ``name`` (None: sqlglot's generic dialect).

    Raises:
        ValueError: ``name`` is not a dialect sqlglot knows (not cached: raised every time).
    """
    return Dialect.get_or_raise(name)


@lru_cache(maxsize=1)
def dialect_names() -> tuple[str, ...]:
    """The sqlglot dialects a record or a rules file may name (plugins registered at import time
    included)."""
    names = {d.value for d in Dialects} | set(Dialect.classes)
    return tuple(sorted(n for n in names if n))


def drop_positions(node: exp.Expr) -> None:
    """Drop the parser's text positions from one node's metadata, in place.

    Nothing else of the metadata goes: the generator reads some keys (``inline``, names).
    """
    meta = node._meta
    if not meta:
        return
    if meta.keys() <= _POSITIONS:
        node._meta = None
    else:
        for key in _POSITIONS & meta.keys():
            del meta[key]


def render(node: exp.Expr, dialect: str | None = None, *, copy: bool = True) -> str:
    """``node.sql(dialect, comments=False)`` with the dialect built once.

    Args:
        node: the expression to render.
        dialect: the dialect to write; None for the generic one.
        copy: False only for a tree of the caller's own that may change (the generator may
            rewrite what it renders); True renders a copy, as ``Expression.sql`` does.
    """
    return dialect_of(dialect).generate(node, copy=copy, comments=False)

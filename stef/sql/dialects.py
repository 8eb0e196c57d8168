"""sqlglot dialects built once per process, SQL parsed as its engine reads it (:func:`parse_sql`:
SQLite's double-quoted strings), and parsed trees without what STEF never reads.

``sqlglot.parse(sql, read="mysql")`` and ``node.sql(dialect=None)`` build a new ``Dialect`` on
every call (about 4.5 per record); a ``Dialect`` holds no per-call state (each parse and each
rendering makes its own parser or generator), so one instance per name serves every thread.
The tokenizer and the parser of :func:`parse_sql` are kept too, one pair per dialect and thread
(where sqlglot's own ``tokenize`` and ``parse`` read: both start every call afresh), and emptied
after each parse; building them was a tenth of a parse.

A dialect is loaded by the first call that names it, and sqlglot enters its class in the registry
before it has set the class's parser and generator: a thread that named the dialect in that window
got sqlglot's generic ones (reference mode's workers, first writing SQLite side by side, wrote one
record's ``ILIKE`` for SQLite, which SQLite cannot run: CI, 2026-12-01). So STEF hands sqlglot a
``Dialect`` of :func:`dialect_of`, never a name, and every first loading is under one lock.
Loading every dialect up front would do too, for 34 MB more of every process.
"""

from __future__ import annotations

import threading
from collections import Counter
from functools import lru_cache

from sqlglot import exp
from sqlglot.dialects.dialect import Dialect, Dialects
from sqlglot.errors import ParseError
from sqlglot.parser import Parser
from sqlglot.tokenizer_core import Token, TokenType
from sqlglot.tokens import Tokenizer

from stef.sql.nesting import MAX_CALL_NESTING, CallsTooDeep, check_calls

# The node metadata sqlglot's parser records for every identifier and literal: where it was in
# the text. STEF never reads it, and copying it is most of the cost of ``Expression.copy`` (a
# dict deep-copied per node), which every ``Expression.sql()`` makes.
_POSITIONS = frozenset(("line", "col", "start", "end"))


# Held while sqlglot loads a dialect (the module docstring says why); a dialect already built is
# read without it (every rendering asks for one).
_LOADING = threading.Lock()
_BUILT: dict[str | None, Dialect] = {}
_MAX_BUILT = 64  # names may carry settings ("mysql, normalization_strategy = lowercase")


def dialect_of(name: str | None) -> Dialect:
    """The one ``Dialect`` of ``name`` (None: sqlglot's generic dialect), loaded whole before any
    thread gets it.

    Raises:
        ValueError: ``name`` is not a dialect sqlglot knows (not cached: raised every time).
    """
    dialect = _BUILT.get(name)
    if dialect is None:
        with _LOADING:
            dialect = _BUILT.get(name)
            if dialect is None:
                dialect = Dialect.get_or_raise(name)
                if len(_BUILT) < _MAX_BUILT:
                    _BUILT[name] = dialect
    return dialect


_SHIPPED = frozenset(d.value for d in Dialects if d.value)


def is_dialect(name: str) -> bool:
    """Whether ``name`` is a sqlglot dialect, without loading the 33 that sqlglot ships to tell
    (34 MB) unless it is none of them (a plugin's)."""
    return name in _SHIPPED or name in dialect_names()


@lru_cache(maxsize=1)
def dialect_names() -> tuple[str, ...]:
    """The sqlglot dialects a record or a rules file may name (plugins registered at import time
    included)."""
    with _LOADING:
        names = {d.value for d in Dialects} | set(Dialect.classes)  # loads every one
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


def parse_sql(sql: str, dialect: str | None) -> list[exp.Expr]:
    """The statements of ``sql`` in ``dialect`` (``sqlglot.parse`` with the dialect built once,
    empty statements left out), with SQLite's double-quoted strings read as SQLite reads them
    (:func:`_sqlite_strings`).

    Raises:
        Whatever ``sqlglot.parse`` raises (a parse error; ValueError for an unknown dialect);
        a TypeError, AttributeError, IndexError or KeyError of its parser on text it does not
        read (``SELECT a ? FROM t`` gave "Expr object expected; got None") as a ParseError, as
        every caller reads text it cannot parse.
    """
    tokenizer, parser = _readers(dialect)
    try:
        tokens = tokenizer.tokenize(sql)
        if sql.count("(") > MAX_CALL_NESTING:  # the tokens hold no parenthesis the text lacks
            check_calls([_word(t) for t in tokens])
        trees = [t for t in parser.parse(tokens, sql) if t is not None]
    except CallsTooDeep as exc:
        raise ParseError(str(exc)) from exc
    except (TypeError, AttributeError, IndexError, KeyError) as exc:
        raise ParseError(f"sqlglot could not read it: {type(exc).__name__}: {exc}") from exc
    finally:
        # Neither keeps the statement's text and tokens until the thread's next parse: a
        # replica's threads (one per LLM call in flight) would each hold their last one.
        tokenizer.tokenize("")
        parser.reset()
    if dialect == "sqlite" and '"' in sql:
        for tree in trees:
            _sqlite_strings(tree, sql)
    return trees


def _word(token: Token) -> str | None:
    """What :func:`check_calls` reads of a token: a parenthesis, a word (a name, a keyword, a
    type), or None for anything else (a string, a number, an operator)."""
    kind = token.token_type
    if kind is TokenType.L_PAREN:
        return "("
    if kind is TokenType.R_PAREN:
        return ")"
    if kind in _NOT_WORDS or not token.text[:1].isalpha():
        return None
    return token.text


# Tokens whose text may start with a letter but name nothing a call could be made on.
_NOT_WORDS = frozenset({
    TokenType.STRING, TokenType.NATIONAL_STRING, TokenType.RAW_STRING,
    TokenType.NATIONAL_RAW_STRING, TokenType.HEREDOC_STRING, TokenType.UNICODE_STRING,
    TokenType.BYTE_STRING, TokenType.BIT_STRING, TokenType.HEX_STRING,
})  # fmt: skip


_THREAD = threading.local()


def _readers(name: str | None) -> tuple[Tokenizer, Parser]:
    """This thread's tokenizer and parser of the dialect ``name`` (what ``Dialect.parse`` builds
    on every call, with its defaults: errors raised at once). Kept by name: a ``Dialect``
    compares equal to any other of its class, whatever its settings (``"mysql,
    normalization_strategy = lowercase"``).

    Raises:
        ValueError: ``name`` is not a dialect sqlglot knows.
    """
    readers: dict[str | None, tuple[Tokenizer, Parser]] | None = getattr(_THREAD, "readers", None)
    if readers is None:
        readers = _THREAD.readers = {}
    pair = readers.get(name)
    if pair is None:
        dialect = dialect_of(name)
        pair = (dialect.tokenizer(), dialect.parser())
        if _resets_whole(dialect):
            readers[name] = pair
    return pair


def _resets_whole(dialect: Dialect) -> bool:
    """Whether ``dialect`` reads with sqlglot's own ``tokenize`` and ``parse``, which reset all
    they hold. A dialect that overrides them (athena hands each statement to an inner Hive or
    Trino reader, which the outer reset leaves full) gets new readers for every parse, as
    ``sqlglot.parse`` gives it."""
    return (
        dialect.parser_class.parse is Parser.parse
        and dialect.tokenizer_class.tokenize is Tokenizer.tokenize
    )


# Where a double-quoted name stands for a value: the right side of a comparison with a column,
# an item of a column's IN list, a bound of its BETWEEN, a function's format
# (``strftime("%Y", d)``).
_COMPARISONS = (exp.EQ, exp.NEQ, exp.GT, exp.GTE, exp.LT, exp.LTE, exp.Like, exp.ILike, exp.Glob)
# The columns SQLite gives every table without naming them.
_IMPLICIT = frozenset({"rowid", "oid", "_rowid_"})


def _sqlite_strings(tree: exp.Expr, sql: str) -> None:
    """Read as strings, in place, the double-quoted names SQLite reads as strings.

    SQLite takes ``"France"`` for a string when no column has that name (a legacy that SQL
    written for SQLite, BIRD's among it, relies on: ``country = "France"``); sqlglot reads a
    name. Without the schema, a double-quoted name is taken for a value where only a value is
    compared: every use of the name is on the value side of a comparison with a column that is
    not itself a double-quoted name (``"start" < "end"`` compares two columns written alike), in
    a column's IN list, a BETWEEN bound or a function's format, and no alias, table, CTE column
    or other use has that name. Linear in the tree: an IN list is rebuilt once, not an item at
    a time.
    """
    columns = list(tree.find_all(exp.Column))
    quoted = {id(c) for c in columns if _double_quoted(c, sql)}
    sides: dict[int, bool] = {}
    values = [c for c in columns if id(c) in quoted and _value_side(c, quoted, sides)]
    if not values:
        return  # double-quoted names only (BIRD's "Free Meal Count"): no name walk
    uses = Counter(c.name.casefold() for c in columns)
    as_values = Counter(c.name.casefold() for c in values)
    named = _names(tree) | _IMPLICIT
    lists: dict[int, tuple[exp.Expr, set[int]]] = {}
    for column in values:
        name = column.name.casefold()
        if as_values[name] != uses[name] or name in named:
            continue
        parent = column.parent
        if isinstance(parent, exp.In) and column.arg_key == "expressions":
            lists.setdefault(id(parent), (parent, set()))[1].add(id(column))
        else:
            column.replace(exp.Literal.string(column.name))
    for parent, items in lists.values():
        parent.set(
            "expressions",
            [exp.Literal.string(e.name) if id(e) in items else e for e in parent.expressions],
        )


def _names(tree: exp.Expr) -> set[str]:
    """The names the query gives: aliases, tables, CTEs and their column lists, case-folded."""
    named = {a.alias.casefold() for a in tree.find_all(exp.Alias) if a.alias}
    for alias in tree.find_all(exp.TableAlias):
        named.add(alias.name.casefold())
        named.update(c.name.casefold() for c in alias.columns)
    named.update(t.name.casefold() for t in tree.find_all(exp.Table))
    return named


def _double_quoted(column: exp.Column, sql: str) -> bool:
    """An unqualified name written in double quotes (the parser's position says which quote)."""
    name = column.this
    if column.table or not isinstance(name, exp.Identifier) or not name.args.get("quoted"):
        return False
    start = (name._meta or {}).get("start")
    return isinstance(start, int) and 0 <= start < len(sql) and sql[start] == '"'


def _value_side(column: exp.Column, quoted: set[int], sides: dict[int, bool]) -> bool:
    """Where ``column`` stands, only a value can: decided once per parent (an IN list of
    thousands of items asks once)."""
    parent, key = column.parent, column.arg_key
    if parent is None:
        return False
    if key == "format":
        return True
    # The right side only: ``"Name" = t.name`` is more often two columns than a reversed test.
    valued = (
        (isinstance(parent, _COMPARISONS) and key == "expression")
        or (isinstance(parent, exp.In) and key == "expressions")
        or (isinstance(parent, exp.Between) and key in ("low", "high"))
    )
    if not valued:
        return False
    other = parent.this
    seen = sides.get(id(parent))
    if seen is None:
        seen = (
            isinstance(other, exp.Expr)
            and id(other) not in quoted
            and other.find(exp.Column) is not None
        )
        sides[id(parent)] = seen
    return seen

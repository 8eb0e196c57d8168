"""Structural comparison of two SQL queries, component by component (reference mode).

Both queries are parsed and brought to one canonical shape before they are compared, so the
rewrites that do not change a result compare equal: table aliases (``molecule AS T1`` reads
``molecule``), join order and ON-versus-WHERE for inner joins, CTEs that sqlglot's optimizer can
merge into their reader, projection order and aliases, commuted comparisons, ``IN`` versus an OR of
equalities, ``BETWEEN`` versus two comparisons, ``'1'`` versus ``1``. What is left is compared as
components: tables, joins, projections, aggregates, DISTINCT, filters, GROUP BY, HAVING, ORDER BY,
LIMIT, the query's shape (subqueries, set operations) and the queries beside the main SELECT
(a CTE body or derived table not merged, a recursive CTE, the other branches of a set
operation), each as its canonical text. Every differing component is one :class:`Difference`;
no difference at all means the two queries have the same structure.

Pure and bounded: no database, no I/O; a parse or optimizer failure is an outcome
(:class:`Comparison` with ``error``), never an exception.
"""

from __future__ import annotations

import hashlib
import re
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

from sqlglot import exp
from sqlglot.errors import SqlglotError
from sqlglot.optimizer.merge_subqueries import merge_subqueries
from sqlglot.optimizer.qualify import qualify

from stef.sql.budget import NO_DEADLINE, CpuDeadline
from stef.sql.canonical import canon, literal_value
from stef.sql.dialects import dialect_of, parse_sql, render
from stef.sql.equivalences import conjuncts, number_of, rewritten, table_key

# The components, in the order differences are listed.
COMPONENTS = (
    "shape",
    "subqueries",
    "tables",
    "joins",
    "projections",
    "aggregates",
    "distinct",
    "filters",
    "null_checks",
    "group_by",
    "having",
    "order_by",
    "limit",
)
# Differences of duplicates and NULLs only (DISTINCT, GROUP BY on what is projected, IS NOT NULL
# guards): the same rows up to repeats or rows without a value, usually the same answer.
MINOR = frozenset(("distinct", "null_checks", "group_by"))
# Queries whose text is longer than this are compared without sqlglot's optimizer passes (which
# walk scopes repeatedly): the canonical forms below still apply.
_MAX_OPTIMIZED_CHARS = 8_000
# ``x IS NOT NULL`` guards, compared apart from the other filters: they only drop NULLs.
_NOT_NULL = " is not null"
# ``table.column`` as :func:`_qualified` writes it.
_TABLE_COLUMN = re.compile(r"[^.\s()'\"`]+\.[^.\s()'\"`]+")
# A column that names an entity: ``name``, ``first_name``, ``displayname``, ``title``.
_NAME_COLUMN = re.compile(r"[a-z0-9_]*(?:name|title)")
_MIRROR = {exp.GT: exp.LT, exp.GTE: exp.LTE, exp.LT: exp.GT, exp.LTE: exp.GTE}
_SYMMETRIC = (exp.EQ, exp.NEQ, exp.NullSafeEQ)
_NEGATED = {exp.EQ: exp.NEQ, exp.NEQ: exp.EQ, exp.GT: exp.LTE, exp.GTE: exp.LT}
_NEGATED |= {exp.LT: exp.GTE, exp.LTE: exp.GT}


@dataclass(frozen=True)
class Difference:
    """One component that differs: what the generated query has, what the reference has."""

    component: str
    generated: str
    reference: str


@dataclass(frozen=True)
class Parts:
    """The components of one query, each in a canonical, order-free form."""

    shape: tuple[str, ...]
    # The queries beside the main SELECT (CTE bodies, derived tables, the other branches of a
    # set operation), each as its canonical text; a subquery in a compared clause is in that.
    subqueries: tuple[str, ...]
    tables: tuple[str, ...]
    joins: tuple[str, ...]
    projections: tuple[str, ...]
    aggregates: tuple[str, ...]
    # DISTINCT (True), none (False), or DISTINCT ON's expressions (``on (a, b)``).
    distinct: bool | str
    filters: tuple[str, ...]
    null_checks: tuple[str, ...]
    group_by: tuple[str, ...]
    having: tuple[str, ...]
    order_by: tuple[str, ...]
    limit: str | None
    # The GROUP BY's columns as ``table.column`` (an expression as its canonical form).
    grouped: tuple[str, ...] = ()
    # The main query is a set operation: its columns pair its branches' by position.
    positional: bool = False


@dataclass(frozen=True)
class Comparison:
    """The outcome of comparing a generated query with its reference.

    Attributes:
        differences: the differing components (empty: same structure).
        error: why no comparison was made (``generated_unparsed``, ``reference_unparsed``).
    """

    differences: tuple[Difference, ...] = field(default_factory=tuple)
    error: str | None = None

    @property
    def equivalent(self) -> bool:
        return self.error is None and not self.differences

    @property
    def minor_only(self) -> bool:
        """Every difference is a minor one (:data:`MINOR`), and there is one at least; a
        DISTINCT ON is none (another ON keeps other rows, not fewer repeats)."""
        return bool(self.differences) and all(
            d.component in MINOR
            and (d.component != "distinct" or {d.generated, d.reference} <= {"true", "false"})
            for d in self.differences
        )


def compare(
    generated: str, reference: str, dialect: str | None = None, *, ordered: bool = False
) -> Comparison:
    """Compare ``generated`` with ``reference`` component by component.

    Args:
        generated: the agent's SQL.
        reference: the gold SQL it is judged against.
        dialect: the sqlglot dialect both are read in (None: generic).
        ordered: the question asks for an order: ORDER BY counts even without a LIMIT.
    """
    gen, ref = parts_of(generated, dialect), parts_of(reference, dialect)
    return compare_parts(gen, ref, ordered=ordered)


def compare_parts(gen: Parts | None, ref: Parts | None, *, ordered: bool = False) -> Comparison:
    """Compare the components of two queries already taken apart (:func:`parts_of`; None: the
    query did not parse)."""
    if ref is None:
        return Comparison(error="reference_unparsed")
    if gen is None:
        return Comparison(error="generated_unparsed")
    return Comparison(differences=tuple(_differences(gen, ref, ordered=ordered)))


def _differences(gen: Parts, ref: Parts, *, ordered: bool) -> Iterator[Difference]:
    for name in COMPONENTS:
        a, b = getattr(gen, name), getattr(ref, name)
        if name == "order_by" and not ordered and gen.limit is None and ref.limit is None:
            continue  # an order nobody asked for and no LIMIT depends on: presentation
        if name == "projections" and gen.positional and ref.positional:
            if a != b:  # two set operations: the same columns in another order pair others
                yield Difference(name, _show(a), _show(b))
            continue
        if name == "projections" and Counter(a) == Counter(b):
            continue
        if isinstance(a, tuple) and name != "order_by":
            same = sorted(set(a)) == sorted(set(b))
        else:
            same = a == b
        if not same:
            yield Difference(name, _show(a), _show(b))


def keyed_grouping(gen: Parts, ref: Parts) -> bool:
    """Whether two queries group differently only by an entity's key: both read more than one
    table and group by columns of one table only; one groups by that table's own key (``id``,
    ``shop_id``, ``shopid``) and the other does not, and every other column either groups by is
    a name of the entity (``name``, ``course_name``, ``title``): ``GROUP BY s.shop_id`` or
    ``GROUP BY s.shop_id, s.name`` against ``GROUP BY s.name``, the per-shop counts of rows
    joined to each shop. The same groups wherever no two of the entities share a name."""
    a, b = set(gen.grouped), set(ref.grouped)
    if not a or not b or a == b or any(len(set(p.tables)) < 2 for p in (gen, ref)):
        return False
    if not all(_TABLE_COLUMN.fullmatch(c) for c in a | b):
        return False  # an expression, or a column of no known table
    columns = [c.split(".", 1) for c in a | b]
    if len({table for table, _ in columns}) != 1:
        return False
    keys = {f"{t}.{c}" for t, c in columns if table_key(t, c)}
    names = {f"{t}.{c}" for t, c in columns if _NAME_COLUMN.fullmatch(c)}
    if keys | names != a | b or not names:
        return False
    # The key on one side only; the other may group by one name in its place.
    keyed, other = (a - b, b - a) if a - b & keys else (b - a, a - b)
    return bool(keyed) and keyed <= keys and not other & keys and len(other) <= 1


def _show(value: tuple[str, ...] | str | bool | None) -> str:
    if isinstance(value, tuple):
        return ", ".join(value)
    if value is None:
        return ""
    return str(value).lower() if isinstance(value, bool) else value


# ------------------------------------------------------------------------ the canonical tree


def parts_of(
    sql: str, dialect: str | None = None, deadline: CpuDeadline = NO_DEADLINE
) -> Parts | None:
    """The canonical components of ``sql``; None when it does not parse to one query.

    Raises:
        CpuBudgetSpent: ``deadline`` passed between its steps (parse, optimize, components).
    """
    try:
        trees = parse_sql(sql, dialect)
    except (SqlglotError, RecursionError, ValueError):
        return None
    if len(trees) != 1 or not isinstance(trees[0], exp.Query):
        return None
    deadline.check()
    tree = _optimized(trees[0], dialect, len(sql))
    deadline.check()
    try:
        return _parts(tree, dialect, deadline)
    except (SqlglotError, RecursionError, ValueError, AttributeError, KeyError, TypeError):
        return None


def _optimized(tree: exp.Expr, dialect: str | None, size: int) -> exp.Expr:
    """``tree`` with CTEs and derived tables merged where sqlglot can (an unmerged CTE or
    subquery stays as written); the tree itself when the optimizer fails or the text is long."""
    if size > _MAX_OPTIMIZED_CHARS:
        return tree
    try:
        qualified = qualify(
            tree.copy(),
            dialect=dialect_of(dialect),
            validate_qualify_columns=False,
            quote_identifiers=False,
            identify=False,
            expand_stars=False,
        )
        return merge_subqueries(qualified)
    except (SqlglotError, RecursionError, ValueError, KeyError, AttributeError, AssertionError):
        return tree  # qualify asserts on SELECT * ... ORDER BY 1


def _parts(
    tree: exp.Expr, dialect: str | None, deadline: CpuDeadline, *, nested: bool = False
) -> Parts:
    """The components of ``tree``; ``nested``: a query beside the main SELECT, whose own
    subqueries are left out (the main query lists each of them already)."""
    keys = _Keys()
    if not nested:  # a nested query is a copy of part of a tree already sorted
        _sort_branches(tree, dialect, deadline, keys)
    for query in list(tree.find_all(exp.Select)):
        _expand_aliases(query)
    deadline.check()
    main, select = rewritten(tree, dialect)
    deadline.check()
    shape = _shape(main)
    tables = tuple(sorted(_table_name(t) for t in main.find_all(exp.Table)))
    joins, join_filters = _joins(select)
    where = select.args.get("where")
    filters = list(conjuncts(where.this)) if where is not None else []
    predicates = set(_predicates([*filters, *join_filters]))
    having = select.args.get("having")
    projections = tuple(_expr(p.unalias()) for p in select.expressions)
    order_by, limit = _order_and_limit(select)
    positional = isinstance(main, exp.SetOperation)
    if positional:
        # The operation's own ORDER BY and LIMIT order and cut all its rows (the first
        # branch's own, in parentheses, only its).
        outer = _order_and_limit(main, select)
        order_by = (*outer[0], *(f"first branch: {o}" for o in order_by))
        limit = outer[1] if limit is None else f"{outer[1] or 'none'}; first branch: {limit}"
    return Parts(
        shape=shape,
        subqueries=() if nested else _subqueries(main, select, dialect, deadline, keys),
        tables=tables,
        joins=joins,
        projections=projections,
        aggregates=tuple(sorted(_expr(a) for a in select.find_all(exp.AggFunc))),
        distinct=_distinct(select),
        filters=tuple(sorted(p for p in _year_ranges(predicates) if not p.endswith(_NOT_NULL))),
        null_checks=tuple(sorted(p for p in predicates if p.endswith(_NOT_NULL))),
        group_by=tuple(sorted({_expr(g) for g in _group_terms(select)})),
        having=tuple(sorted(set(_predicates(conjuncts(having.this))))) if having else (),
        order_by=order_by,
        limit=limit,
        grouped=_grouped(select),
        positional=positional,
    )


def _order_and_limit(
    node: exp.Expr, first: exp.Select | None = None
) -> tuple[tuple[str, ...], str | None]:
    """``node``'s own ORDER BY terms and LIMIT; a set operation's read against its ``first``
    branch, whose columns name the result's: a column it projects, by name or alias, and a
    position both read as the column's position (``ORDER BY 2``, ``ORDER BY y`` of
    ``SELECT a, b AS y``: ``#2``)."""
    order = node.args.get("order")
    terms = tuple(_order_term(o, first) for o in order.expressions) if order is not None else ()
    return terms, _limit(node.args.get("limit"), node.args.get("offset"))


# A set operation whose branches may come in any order: A UNION B is B UNION A (as a bag with
# ALL, and INTERSECT likewise); EXCEPT is not. One with a match by name or a join-like side or
# kind (DuckDB's BY NAME, BigQuery's LEFT ... ON) is left as written.
_COMMUTATIVE = (exp.Union, exp.Intersect)
_NOT_PLAIN = ("by_name", "side", "kind", "on", "match")
# What makes a link of a chain (A UNION B UNION C) a branch of its own: its own clauses.
_OWN_CLAUSES = ("with_", "order", "limit", "offset")
_OWN_AND_NOT_PLAIN = frozenset((*_OWN_CLAUSES, *_NOT_PLAIN))


class _Keys(dict[int, tuple[exp.Expr, str]]):
    """Each query's key once taken, by the node's id (the node kept beside its key: an id is
    only unique while its object lives): a SELECT's :func:`_subquery_key`, a set operation's
    digest of its kind and its branches' keys, a parenthesized query its query's. Sorting the
    branches takes the keys they are then listed by; a chain of 2,000 alternating UNION and
    UNION ALL reads each branch once, not once for each operation above it."""

    # The chains whose branches may come in any order (:func:`_sort_branches`), by id.
    sortable: set[int]

    def __init__(self) -> None:
        super().__init__()
        self.sortable = set()

    def of(self, node: exp.Expr, dialect: str | None, deadline: CpuDeadline) -> str:
        kept = self.get(id(node))
        if kept is not None and kept[0] is node:
            return kept[1]
        if isinstance(node, exp.Select):
            key = _subquery_key(node, dialect, deadline)
        elif isinstance(node, exp.Subquery) and not any(
            v for k, v in node.args.items() if k != "this"
        ):
            key = "(" + self.of(node.this, dialect, deadline) + ")"
        elif isinstance(node, exp.SetOperation):
            key = self.set_operation(node, dialect, deadline)
        else:
            key = canon(node)
        self[id(node)] = (node, key)
        return key

    def set_operation(
        self, op: exp.SetOperation, dialect: str | None, deadline: CpuDeadline
    ) -> str:
        """``op``'s key: its kind, DISTINCT-ness, own clauses, and its branches' keys (sorted
        where their order does not count, as :func:`_sort_branches` left them)."""
        own = [
            f"{k}={_shown_arg(v)}"
            for k, v in sorted(op.args.items())
            if k in _OWN_AND_NOT_PLAIN and v
        ]
        slots = _slots(op)
        branches = [self.of(parent.args[key], dialect, deadline) for parent, key in slots]
        if id(op) in self.sortable:
            branches.sort()  # in any order, sorted in place or not
        text = "\x00".join([type(op).__name__, str(bool(op.args.get("distinct"))), *own, *branches])
        return "setop:" + hashlib.blake2b(text.encode(), digest_size=16).hexdigest()


# The most nodes the branches' keys may read, as a multiple of the query's own: a set operation
# in a branch of another is read again with it (60 levels of UNION in IN (...) took 4.6 s
# against 0.2 s as written); past it the branches are compared as written.
_MAX_KEYED_READS = 4


def _sort_branches(tree: exp.Expr, dialect: str | None, deadline: CpuDeadline, keys: _Keys) -> bool:
    """The branches of every UNION and INTERSECT in ``tree`` put in one order, in place: by
    their canonical components (:func:`_subquery_key`), a chain of one kind and one
    DISTINCT-ness (``A UNION B UNION C``) as one list, inner operations first, each
    operation's key taken once sorted. So the main SELECT and the other branches are the same
    whichever order a query lists them in. First each operation's ORDER BY names its columns
    by position (:func:`_order_by_position`). Not under a LIMIT without an ORDER BY (there or
    above it: the rows kept follow the branches' order), nor where an ORDER BY term cannot be
    placed. False: the keys would read the tree more than :data:`_MAX_KEYED_READS` times over;
    nothing sorted, no key taken (:func:`_subqueries` still lists each operation's key, its
    chains' branches sorted in it)."""
    for op in list(tree.find_all(exp.SetOperation)):  # outer first
        _deduplicated_below(op)
        _unparenthesized(op)
    heads = [op for op in tree.find_all(exp.SetOperation) if not _linked(op)]
    # Against the branches as written; an order that cannot be placed keeps them so.
    placed = {id(op) for op in heads if _order_by_position(op)}
    if not heads:
        return True
    cut = _under_unordered_cut(tree)
    keys.sortable = {id(op) for op in heads if _chain(op) and id(op) in placed - cut}
    sizes = _sizes(tree)
    read = sum(sizes[id(parent.args[key])] for op in heads for parent, key in _slots(op))
    if read > _MAX_KEYED_READS * sizes[id(tree)]:
        return False
    for op in reversed(heads):  # inner first
        if id(op) in keys.sortable:
            slots = _slots(op)
            branches = [parent.args[key] for parent, key in slots]
            branches.sort(key=lambda b: keys.of(b, dialect, deadline))
            for (parent, key), branch in zip(slots, branches, strict=True):
                parent.set(key, branch)
        if op.parent is not None:  # what holds it reads its key: taken here, inner first
            keys.of(op, dialect, deadline)
    return True


def _deduplicated_below(op: exp.Expr) -> None:
    """A branch of a UNION, INTERSECT or EXCEPT without ALL that is a UNION ALL of no clauses
    of its own, made a UNION, in place: the outer operation's rows are distinct, whatever
    repeats it reads (``(A UNION ALL B) UNION C`` is ``A UNION B UNION C``). Called outer
    first, so it reaches the whole chain below."""
    if not op.args.get("distinct") or any(op.args.get(k) for k in _NOT_PLAIN):
        return
    for key in ("this", "expression"):
        branch = op.args.get(key)
        while isinstance(branch, exp.Subquery) and not any(
            v for k, v in branch.args.items() if k != "this"
        ):
            branch = branch.this
        if (
            type(branch) is exp.Union
            and not branch.args.get("distinct")
            and not any(branch.args.get(k) for k in _OWN_AND_NOT_PLAIN)
        ):
            branch.set("distinct", True)


def _unparenthesized(op: exp.Expr) -> None:
    """A chain's branch that is the same operation in bare parentheses, unwrapped in place:
    ``A UNION (B UNION C)`` is one chain of three (not so for EXCEPT)."""
    if not _chain(op):
        return
    for key in ("this", "expression"):
        branch = op.args.get(key)
        if not isinstance(branch, exp.Subquery) or any(
            v for k, v in branch.args.items() if k != "this"
        ):
            continue
        inner = branch.this
        if (
            type(inner) is type(op)
            and bool(inner.args.get("distinct")) == bool(op.args.get("distinct"))
            and not any(inner.args.get(k) for k in _OWN_AND_NOT_PLAIN)
        ):
            op.set(key, inner)


def _sizes(tree: exp.Expr) -> dict[int, int]:
    """Each node's count of nodes, itself and all below it, by id."""
    sizes: dict[int, int] = {}
    for node in reversed(list(tree.walk())):  # breadth first, reversed: children first
        sizes[id(node)] = 1 + sum(sizes.get(id(c), 0) for c in node.iter_expressions())
    return sizes


def _under_unordered_cut(tree: exp.Expr) -> set[int]:
    """The ids of the nodes of ``tree`` at or under a query with a LIMIT or OFFSET and no
    ORDER BY (one walk, parents first)."""
    out: set[int] = set()
    for node in tree.walk():
        if id(node.parent) in out or (
            isinstance(node, exp.Query) and _cut(node) and not node.args.get("order")
        ):
            out.add(id(node))
    return out


def _slots(op: exp.Expr) -> list[tuple[exp.Expr, str]]:
    """Where ``op``'s branches sit: a chain's as one list, another operation's two."""
    return list(_branch_slots(op)) if _chain(op) else [(op, "this"), (op, "expression")]


def _order_by_position(op: exp.Expr) -> bool:
    """``op``'s ORDER BY terms that name a column of its result as its position, in place:
    by the name or the expression a branch gives it, the first branch that does (SQLite's
    reading; ``ORDER BY y`` of ``SELECT a, b AS y ...``: ``ORDER BY 2``), since the first
    branch may be another once the branches are sorted. False: a term no branch projects."""
    order = op.args.get("order")
    if order is None:
        return True
    branches = _written_branches(op)
    for ordered in order.expressions:
        term = ordered.this if isinstance(ordered, exp.Ordered) else ordered
        if isinstance(term, exp.Literal) and term.is_int:
            continue
        position = next(filter(None, (_output_column(term, b) for b in branches)), None)
        if position is None:
            return False
        term.replace(exp.Literal.number(position[1:]))
    return True


def _written_branches(op: exp.Expr) -> list[exp.Select]:
    """The SELECTs ``op`` combines, left to right as written (through parentheses)."""
    out: list[exp.Select] = []
    pending: list[object] = [op]
    while pending:
        node = pending.pop()
        if isinstance(node, exp.SetOperation):
            pending += [node.expression, node.this]
        elif isinstance(node, exp.Subquery):
            pending.append(node.this)
        elif isinstance(node, exp.Select):
            out.append(node)
    return out


def _cut(op: exp.Expr) -> bool:
    return bool(op.args.get("limit") or op.args.get("offset"))


def _chain(op: object) -> bool:
    """Whether ``op`` is a UNION or INTERSECT whose branches may come in any order, as one
    list with the links of its kind below it (associative: ``(A UNION B) UNION C``)."""
    return isinstance(op, _COMMUTATIVE) and not any(op.args.get(k) for k in _NOT_PLAIN)


def _linked(op: exp.Expr) -> bool:
    """Whether ``op`` is a link of its parent's chain, sorted (and keyed) with it."""
    parent = op.parent
    return (
        _chain(op)
        and _chain(parent)
        and type(parent) is type(op)
        and op.arg_key in ("this", "expression")
        and bool(parent.args.get("distinct")) == bool(op.args.get("distinct"))
        and not any(op.args.get(k) for k in _OWN_CLAUSES)
    )


def _branch_slots(op: exp.Expr) -> Iterator[tuple[exp.Expr, str]]:
    """Where each branch of the chain ``op`` heads sits, in the order written: (the link
    holding it, its arg key). Without recursion: 2,000 branches are 2,000 links deep."""
    pending: list[tuple[exp.Expr, str]] = [(op, "expression"), (op, "this")]
    while pending:
        link, key = pending.pop()
        side = link.args[key]
        if isinstance(side, exp.Expr) and side.parent is link and _linked(side):
            pending += [(side, "expression"), (side, "this")]
        else:
            yield link, key


def _shown_arg(value: object) -> str:
    if isinstance(value, exp.Expr):
        return canon(value)
    if isinstance(value, list):
        return ", ".join(_shown_arg(v) for v in value)
    return str(value)


def _subqueries(
    main: exp.Expr,
    select: exp.Select,
    dialect: str | None,
    deadline: CpuDeadline,
    keys: _Keys,
) -> tuple[str, ...]:
    """Each SELECT of ``main`` that no other component reads, as its canonical form: not the
    main ``select``, not one holding it, not one inside a clause of it already compared; and
    each set operation below ``main``, as its key (which branches it combines:
    ``(t UNION u) UNION ALL s`` is not ``(t UNION s) UNION ALL u``)."""
    holding: set[int] = set()
    parent = select.parent
    while parent is not None:
        holding.add(id(parent))
        parent = parent.parent
    compared: set[int] = set()
    for key in ("expressions", "where", "having", "group", "order"):
        value = select.args.get(key)
        for node in value if isinstance(value, list) else [value]:
            if isinstance(node, exp.Expr):
                compared.update(id(s) for s in node.find_all(exp.Select, exp.SetOperation))
    found = [
        s
        for s in main.find_all(exp.Select)
        if s is not select and id(s) not in holding and id(s) not in compared
    ]
    minus = _subtracted(main)
    out = [minus.get(id(s), "") + keys.of(s, dialect, deadline) for s in found]
    # Each set operation below the main query too (those holding the main SELECT among them),
    # inner first: which branches a UNION under an INTERSECT combines. Its key sorts a chain's
    # branch keys, so it holds where the branches could not be sorted in place.
    for op in reversed(list(main.find_all(exp.SetOperation))):
        if op is not main and not _linked(op) and id(op) not in compared:
            out.append(minus.get(id(op), "") + keys.of(op, dialect, deadline))
    return tuple(sorted(out))


def _subtracted(main: exp.Expr) -> dict[int, str]:
    """``minus `` for each EXCEPT a query of ``main`` is on the right of, by the query's id
    (one walk, parents first): an EXCEPT's sides stay apart in a CTE, a derived table or
    under a UNION too."""
    out: dict[int, str] = {}
    for node in main.walk():
        parent = node.parent
        above = out.get(id(parent), "") if parent is not None else ""
        if isinstance(parent, exp.Except) and node.arg_key == "expression":
            above += "minus "
        if above:
            out[id(node)] = above
    return out


def _subquery_key(select: exp.Select, dialect: str | None, deadline: CpuDeadline) -> str:
    """``select`` as its own components, with the rewrites the main SELECT gets (commuted
    comparisons, ``IN`` versus an OR, conjuncts in any order) and its projections in any order
    (a CTE's or derived table's columns are read by name). As its canonical text, a grouped
    CTE's ``WHERE b > 1 AND a = 2`` differed from the same CTE's ``WHERE a = 2 AND b > 1``.
    The text, table aliases dropped, when it cannot be taken apart."""
    try:
        parts = _parts(select.copy(), dialect, deadline, nested=True)
    except (SqlglotError, RecursionError, ValueError, AttributeError, KeyError, TypeError):
        bare = select.copy()
        for table in bare.find_all(exp.Table):
            table.set("alias", None)
        return canon(bare)
    fields = {f: getattr(parts, f) for f in COMPONENTS}
    if not _set_branch(select):  # a set operation pairs its branches' columns by position
        fields["projections"] = tuple(sorted(parts.projections))
    for name in ("tables", "filters", "null_checks", "group_by", "having", "aggregates"):
        fields[name] = tuple(sorted(set(fields[name])))
    return repr(sorted(fields.items()))


def _distinct(select: exp.Select) -> bool | str:
    """The SELECT's DISTINCT: True, False, or ``on (...)`` with DISTINCT ON's expressions (in
    any order: one row for each combination of their values)."""
    distinct = select.args.get("distinct")
    on = distinct.args.get("on") if isinstance(distinct, exp.Distinct) else None
    if isinstance(on, exp.Expr):
        terms = on.expressions if isinstance(on, exp.Tuple) else [on]
        return f"on ({', '.join(sorted(_expr(t) for t in terms))})"
    return distinct is not None


def _set_branch(select: exp.Select) -> bool:
    """Whether ``select`` is a branch of a set operation (in parentheses or not)."""
    node: exp.Expr = select
    while isinstance(node.parent, exp.Subquery):
        node = node.parent
    return isinstance(node.parent, exp.SetOperation)


def _grouped(select: exp.Select) -> tuple[str, ...]:
    """The GROUP BY's columns as ``table.column``, a column an inner join equates with a
    table's own key as that key (``hiring.shop_id`` as ``shop.shop_id``); an expression as its
    canonical form."""
    terms = _group_terms(select)
    if not terms:
        return ()
    keys = _keys_joined(select)
    out = set()
    for term in terms:
        if isinstance(term, exp.Column):
            column = _qualified(term)[0]
            out.add(keys.get(column, column))
        else:
            out.add(_expr(term))
    return tuple(sorted(out))


def _keys_joined(select: exp.Select) -> dict[str, str]:
    """``table.column`` -> the ``table.key`` an inner join's ON equates it with (a table's own
    key, the column not one)."""
    keys: dict[str, str] = {}
    for join in select.args.get("joins") or []:
        on = join.args.get("on")
        if on is None or (join.side or "").lower() in ("left", "right", "full"):
            continue
        for cond in conjuncts(on):
            sides = [cond.this, cond.expression] if isinstance(cond, exp.EQ) else []
            if len(sides) != 2 or not all(isinstance(c, exp.Column) and c.table for c in sides):
                continue
            x, y = _qualified(*sides)
            for one, other in ((x, y), (y, x)):
                if table_key(*other.split(".", 1)) and not table_key(*one.split(".", 1)):
                    keys[one] = other
    return keys


def _expand_aliases(select: exp.Select) -> None:
    """References to a projection's alias in ORDER BY, GROUP BY and HAVING replaced by the
    projection itself (``ORDER BY n`` of ``COUNT(*) AS n`` reads ``ORDER BY COUNT(*)``; the
    optimizer's own names, ``_col_1``, likewise). In GROUP BY and HAVING an alias that is also
    a column's name of the query reads the column, as SQL resolves it there."""
    projections = [p for p in select.expressions if isinstance(p, exp.Alias) and p.this]
    aliases = {p.alias.casefold(): p.this for p in projections}
    if not aliases:
        return
    named = {c.name.casefold() for p in projections for c in p.this.find_all(exp.Column)}
    for key in ("order", "group", "having"):
        clause = select.args.get(key)
        if clause is None:
            continue
        for column in list(clause.find_all(exp.Column)):
            name = column.name.casefold()
            target = aliases.get(name)
            if column.table or target is None or (key != "order" and name in named):
                continue
            if isinstance(target, exp.Column) and target.name.casefold() == name:
                continue
            if column.parent_select is select:
                column.replace(target.copy())


def _table_name(table: exp.Table) -> str:
    return table.name.casefold()


def _shape(main: exp.Expr) -> tuple[str, ...]:
    """The query's shape beyond one SELECT: set operations, each with what it combines
    (``union(select, union all)``: which one nests in which), and the depth of subqueries."""
    out: list[str] = []
    operations = 0
    for op in main.find_all(exp.SetOperation):
        operations += 1
        if not _linked(op):  # a chain's links are its head's
            out.append(_set_shape(op))
    nested = sum(1 for s in main.find_all(exp.Select) if s is not main) - operations
    if nested > 0:
        out.append("subquery")
    return tuple(sorted(out))


def _set_shape(op: exp.Expr) -> str:
    """``op`` as its kind and the kinds of its branches: sorted for a chain of UNION or
    INTERSECT, as written for EXCEPT."""
    chained = _chain(op)
    slots = _slots(op)
    kinds = [_set_kind(parent.args[key]) for parent, key in slots]
    return f"{_set_kind(op)}({', '.join(sorted(kinds) if chained else kinds)})"


def _set_kind(node: object) -> str:
    while isinstance(node, exp.Subquery):
        node = node.this
    if isinstance(node, exp.SetOperation):
        return f"{type(node).__name__.lower()}{'' if node.args.get('distinct') else ' all'}"
    return type(node).__name__.lower()


def _joins(select: exp.Select) -> tuple[tuple[str, ...], list[exp.Expr]]:
    """The join graph (kind, and the column equalities tying the tables) and the filters an
    inner join's ON carries (they read as WHERE filters)."""
    graph: list[str] = []
    filters: list[exp.Expr] = []
    for join in select.args.get("joins") or []:
        side = (join.side or "").lower()
        kind = "left" if side in ("left", "right") else ("full" if side == "full" else "inner")
        on = join.args.get("on")
        using = join.args.get("using")
        if using:
            graph.append(f"{kind}: using {', '.join(sorted(canon(u) for u in using))}")
            continue
        if on is None:
            graph.append(f"{kind}: cross")
            continue
        for cond in conjuncts(on):
            if isinstance(cond, exp.EQ) and all(
                isinstance(s, exp.Column) for s in (cond.this, cond.expression)
            ):
                graph.append(
                    f"{kind}: {' = '.join(sorted(_qualified(cond.this, cond.expression)))}"
                )
            elif kind == "inner":
                filters.append(cond)
            else:
                graph.append(f"{kind}: {_expr(cond)}")
    return tuple(sorted(graph)), filters


def _qualified(*columns: exp.Column) -> list[str]:
    return [
        f"{c.table.casefold()}.{c.name.casefold()}" if c.table else c.name.casefold()
        for c in columns
    ]


def _predicates(terms: Iterable[exp.Expr]) -> Iterator[str]:
    for term in terms:
        yield from _predicate(term)


def _predicate(term: exp.Expr) -> Iterator[str]:
    """Canonical texts of one conjunct (BETWEEN gives two)."""
    while isinstance(term, exp.Paren):
        term = term.this
    if isinstance(term, exp.Not):
        yield from _negated(term.this)
        return
    if isinstance(term, exp.Between):
        low, high = term.args.get("low"), term.args.get("high")
        if low is not None and high is not None:
            yield _comparison(exp.GTE(this=term.this, expression=low))
            yield _comparison(exp.LTE(this=term.this, expression=high))
            return
    if isinstance(term, exp.In) and not term.args.get("query") and term.expressions:
        yield _membership(_expr(term.this), [_value(v) for v in term.expressions])
    elif isinstance(term, exp.And):
        for part in conjuncts(term):
            yield from _predicate(part)
    elif isinstance(term, exp.Or):
        yield _disjunction(term)
    elif isinstance(term, exp.Binary) and isinstance(term, exp.Predicate):
        yield _comparison(term)
    else:
        yield _expr(term)


def _negated(inner: exp.Expr) -> Iterator[str]:
    """Canonical texts of ``NOT inner``: IS NOT NULL, the flipped comparison, else ``not``."""
    while isinstance(inner, exp.Paren):
        inner = inner.this
    if isinstance(inner, exp.Is) and isinstance(inner.expression, exp.Null):
        yield f"{_expr(inner.this)}{_NOT_NULL}"
        return
    if isinstance(inner, exp.Binary):
        flipped = _NEGATED.get(type(inner))
        if flipped is not None:
            yield from _predicate(flipped(this=inner.this, expression=inner.expression))
            return
    yield "not " + " ".join(_predicate(inner))


def _disjunction(term: exp.Or) -> str:
    """An OR: equalities of one column as a membership, else its sorted disjuncts."""
    members = _or_equalities(term)
    if members is not None:
        return _membership(*members)
    return " or ".join(sorted(" and ".join(sorted(_predicate(t))) for t in _disjuncts(term)))


def _disjuncts(node: exp.Expr) -> Iterator[exp.Expr]:
    while isinstance(node, exp.Paren):
        node = node.this
    if isinstance(node, exp.Or):
        yield from _disjuncts(node.this)
        yield from _disjuncts(node.expression)
    else:
        yield node


def _or_equalities(term: exp.Or) -> tuple[str, list[str]] | None:
    """``a = 1 OR a = 2`` as (``a``, [1, 2]); None when the OR is anything else."""
    column = None
    values = []
    for d in _disjuncts(term):
        if not isinstance(d, exp.EQ):
            return None
        sides = [d.this, d.expression]
        lits = [s for s in sides if literal_value(s) is not None]
        if len(lits) != 1:
            return None
        other = sides[0] if lits[0] is sides[1] else sides[1]
        name = _expr(other)
        if column not in (None, name):
            return None
        column = name
        values.append(_value(lits[0]))
    return (column, values) if column is not None else None


def _membership(column: str, values: list[str]) -> str:
    unique = sorted(set(values))
    if len(unique) == 1:
        return f"{column} = {unique[0]}"
    return f"{column} in ({', '.join(unique)})"


def _comparison(term: exp.Binary) -> str:
    left, right = term.this, term.expression
    kind: type[exp.Binary] = type(term)
    # The literal goes right; a symmetric comparison orders its sides.
    if literal_value(left) is not None and literal_value(right) is None:
        left, right = right, left
        kind = _MIRROR.get(kind, kind)
    a, b = _side(left), _side(right)
    number = number_of(right)
    if kind in (exp.GT, exp.LT) and number is not None and number.is_integer():
        # Over integers x > 19 is x >= 20: the strict bound read as the inclusive one.
        b = str(int(number) + (1 if kind is exp.GT else -1))
        kind = exp.GTE if kind is exp.GT else exp.LTE
    if kind in _SYMMETRIC and literal_value(left) is None and literal_value(right) is None:
        a, b = sorted((a, b))
    op = render(kind(this=exp.column("a"), expression=exp.column("b"))).split()[1]
    if kind is exp.NullSafeEQ:
        op = "="
    return f"{a} {op.lower()} {b}"


def _side(node: exp.Expr) -> str:
    value = _value(node) if literal_value(node) is not None else None
    return value if value is not None else _expr(node)


def _value(node: exp.Expr) -> str:
    """A literal compared by value: '1' and 1 and 1.0 alike; strings keep their case."""
    value = literal_value(node)
    if value is None:
        return _expr(node)
    while isinstance(node, exp.Paren | exp.Cast):
        node = node.this
    if isinstance(node, exp.Literal) and node.is_string:
        text = str(node.this)
        try:
            float(text)
        except ValueError:
            return repr(text)
        if value != text:
            # '0040' is a string, not the number 40: only '40' reads as 40.
            return repr(text)
    return value


def _expr(node: exp.Expr) -> str:
    return canon(node)


def _group_terms(select: exp.Select) -> list[exp.Expr]:
    group = select.args.get("group")
    if group is None:
        return []
    # GROUP BY 1 names the first projection.
    out = []
    for term in group.expressions:
        if isinstance(term, exp.Literal) and term.is_int:
            index = int(term.this) - 1
            if 0 <= index < len(select.expressions):
                out.append(select.expressions[index].unalias())
                continue
        out.append(term)
    return out


def _order_term(ordered: exp.Expr, first: exp.Select | None = None) -> str:
    desc = isinstance(ordered, exp.Ordered) and bool(ordered.args.get("desc"))
    term = ordered.this if isinstance(ordered, exp.Ordered) else ordered
    return f"{_output_column(term, first) or _expr(term)} {'desc' if desc else 'asc'}"


def _output_column(term: exp.Expr, first: exp.Select | None) -> str | None:
    """``#n`` when ``term`` names the ``n``-th column of a set operation's result (``first``:
    its first branch) by position or by the first branch's name for it; None otherwise."""
    if first is None:
        return None
    if isinstance(term, exp.Literal) and term.is_int:
        return f"#{term.this}"
    if isinstance(term, exp.Column) and not term.table:
        name = term.name.casefold()
        for i, projection in enumerate(first.expressions, 1):
            if projection.alias_or_name.casefold() == name:
                return f"#{i}"
    text = canon(term)
    for i, projection in enumerate(first.expressions, 1):
        if canon(projection.unalias()) == text:
            return f"#{i}"
    return None


def _limit(limit: exp.Expr | None, offset: exp.Expr | None) -> str | None:
    """``LIMIT n`` as ``n``, with its offset as ``n offset m`` (``LIMIT m, n`` alike)."""
    if limit is None:
        return None
    value = limit.args.get("expression") or limit.this
    if value is None:
        return None
    skip = limit.args.get("offset") or (offset.args.get("expression") if offset else None)
    skipped = _expr(skip) if skip is not None else "0"
    return _expr(value) if skipped == "0" else f"{_expr(value)} offset {skipped}"


# ``d >= '1995-01-01'`` and ``d < '1996-01-01'`` (or ``d <= '1995-12-31'``): one year.
_DATE_BOUND = re.compile(r"^(.+) (>=|<|<=) '(\d{4})-(\d{2})-(\d{2})'$")


def _year_ranges(predicates: set[str]) -> set[str]:
    """Two bounds that enclose exactly one calendar year read as ``year(d) = Y``."""
    lows: dict[tuple[str, int], str] = {}
    highs: dict[tuple[str, int], str] = {}
    for p in predicates:
        m = _DATE_BOUND.match(p)
        if m is None:
            continue
        column, op, year, rest = m[1], m[2], int(m[3]), (m[4], m[5])
        if op == ">=" and rest == ("01", "01"):
            lows[(column, year)] = p
        elif (op == "<" and rest == ("01", "01")) or (op == "<=" and rest == ("12", "31")):
            highs[(column, year - 1 if op == "<" else year)] = p
    out = set(predicates)
    for key, low in lows.items():
        high = highs.get(key)
        if high is not None:
            out -= {low, high}
            out.add(f"year({key[0]}) = {key[1]}")
    return out

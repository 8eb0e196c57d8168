"""Rules files are YAML written by people while the service runs: a reader that no edit can crash.

PyYAML's safe composer and constructor with caps on size, nesting, values, integer length and
alias expansion; every failure is a :class:`RulesError` with the file and, when known, the line.
"""

from __future__ import annotations

from typing import Any

import yaml
from yaml.composer import Composer
from yaml.constructor import SafeConstructor
from yaml.parser import Parser
from yaml.reader import Reader
from yaml.resolver import Resolver
from yaml.scanner import Scanner

from stef.errors import RuleProblem, RulesError

#: A rules file is a few KiB; the cap bounds parse time and memory of a mistaken edit.
MAX_RULES_BYTES = 1 << 20
#: The schema needs 3 levels; the cap keeps PyYAML's recursive composer far from the stack limit.
MAX_DEPTH = 32
#: Longer integer literals are typos or pastes; parsing them is quadratic (sexagesimal) or hits
#: Python's int-str conversion limit.
MAX_INT_CHARS = 64
#: Values (YAML nodes) in one file: bounds the time of a reload, which runs in the service loop.
MAX_NODES = 50_000


class _Limits(Composer, SafeConstructor, Resolver):
    """PyYAML's safe composer and constructor with caps, and values located by line.

    The composer recurses once per nesting level, so 10,000 ``[`` exhaust the stack; the
    constructors raise bare ``ValueError`` (an integer past the int-str limit, 2024-02-30).
    """

    def __init__(self, path: str) -> None:
        Composer.__init__(self)
        SafeConstructor.__init__(self)
        Resolver.__init__(self)
        self.path = path
        self.depth = 0
        self.nodes = 0

    def problem(self, mark: Any, message: str) -> RulesError:
        line = mark.line + 1 if mark is not None else None
        return RulesError([RuleProblem(self.path, line, "", message)])

    def compose_node(self, parent: yaml.Node | None, index: Any) -> yaml.Node | None:
        mark = self.peek_event().start_mark  # type: ignore[attr-defined]
        if self.depth >= MAX_DEPTH:
            raise self.problem(mark, f"nested deeper than {MAX_DEPTH}")
        self.nodes += 1
        if self.nodes > MAX_NODES:
            raise self.problem(mark, f"more than {MAX_NODES} values")
        self.depth += 1
        try:
            return super().compose_node(parent, index)
        finally:
            self.depth -= 1

    def construct_object(self, node: yaml.Node, deep: bool = False) -> Any:
        try:
            return super().construct_object(node, deep)
        except (ValueError, OverflowError) as exc:
            raise self.problem(node.start_mark, f"unreadable value: {exc}") from exc

    def construct_yaml_int(self, node: yaml.ScalarNode) -> int:
        if len(node.value) > MAX_INT_CHARS:
            message = f"integer of {len(node.value)} characters (at most {MAX_INT_CHARS})"
            raise self.problem(node.start_mark, message)
        return super().construct_yaml_int(node)


# What add_constructor does, spelled out: its stub only accepts PyYAML's own loader classes.
_Limits.yaml_constructors = {
    **SafeConstructor.yaml_constructors,
    "tag:yaml.org,2002:int": _Limits.construct_yaml_int,
}


class _PyRulesLoader(_Limits, Reader, Scanner, Parser):
    def __init__(self, text: str, path: str) -> None:
        Reader.__init__(self, text)
        Scanner.__init__(self)
        Parser.__init__(self)
        _Limits.__init__(self, path)


try:  # libyaml scans about ten times faster; the composer stays ours (it comes first)
    from yaml._yaml import CParser

    class _CRulesLoader(_Limits, CParser):
        def __init__(self, text: str, path: str) -> None:
            CParser.__init__(self, text)
            _Limits.__init__(self, path)

    _Loader: type[_PyRulesLoader | _CRulesLoader] = _CRulesLoader
except ImportError:  # PyYAML built without libyaml
    _Loader = _PyRulesLoader


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    if isinstance(node, yaml.MappingNode):
        return [n for pair in node.value for n in pair]
    return []


def _check_aliases(root: yaml.Node, loader: _Limits) -> None:
    """Reject aliases that expand past the depth or size caps, or into themselves.

    Aliases share nodes, so a few lines can stand for gigabytes once expanded ("billion
    laughs"); sizes are summed over the node graph, each node once, without expanding it.
    """
    done: dict[int, tuple[int, int]] = {}  # id(node) -> (expanded depth, expanded size)
    open_: set[int] = set()
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:
        node, finished = stack.pop()
        key = id(node)
        if finished:
            kids = [done[id(c)] for c in _children(node)]
            depth = 1 + max((d for d, _ in kids), default=0)
            size = 1 + sum(s for _, s in kids)
            if isinstance(node, yaml.ScalarNode):
                size += len(node.value)
            if depth > MAX_DEPTH:
                raise loader.problem(node.start_mark, f"aliases nest deeper than {MAX_DEPTH}")
            if size > MAX_RULES_BYTES:
                raise loader.problem(node.start_mark, "aliases expand past 1 MiB")
            open_.discard(key)
            done[key] = (depth, size)
        elif key in open_:
            raise loader.problem(node.start_mark, "an alias refers to a node that contains it")
        elif key not in done:
            open_.add(key)
            stack.append((node, True))
            stack.extend((c, False) for c in _children(node) if id(c) not in done)


def _check_duplicate_keys(root: yaml.Node, loader: _Limits) -> None:
    """Reject a key given twice in one mapping: YAML readers keep the last silently, so a second
    ``benign_filters:`` block would drop the first without a word."""
    seen_nodes: set[int] = set()
    stack = [root]
    while stack:
        node = stack.pop()
        if id(node) in seen_nodes:  # an alias: checked where it was defined
            continue
        seen_nodes.add(id(node))
        if isinstance(node, yaml.MappingNode):
            first: dict[str, int] = {}
            for key, _ in node.value:
                if not isinstance(key, yaml.ScalarNode) or key.value == "<<":
                    continue
                line = key.start_mark.line + 1
                if key.value in first:
                    message = (
                        f"key {key.value[:80]!r} is given twice (lines {first[key.value]} and "
                        f"{line}); the second would silently replace the first"
                    )
                    raise loader.problem(key.start_mark, message)
                first[key.value] = line
        stack.extend(_children(node))


def load_yaml(text: str, path: str) -> tuple[yaml.Node | None, Any]:
    """The composed node (for line numbers) and the data of one YAML document."""
    bad = Reader.NON_PRINTABLE.search(text)
    if bad is not None:
        line = text.count("\n", 0, bad.start()) + 1
        message = f"control character U+{ord(bad.group()):04X} is not allowed in YAML"
        raise RulesError([RuleProblem(path, line, "", message)])
    loader = _Loader(text, path)
    try:
        node = loader.get_single_node()
        if node is None:
            return None, None
        _check_aliases(node, loader)
        _check_duplicate_keys(node, loader)
        return node, loader.construct_document(node)
    except yaml.YAMLError as exc:
        # A scanner may give up on deep flow nesting before our composer counts it (libyaml
        # does since PyYAML 6.0.4, in its own words): the depth is measured here, not read
        # from its message, so the problem is the same whichever scanner ran.
        deep_at = flow_too_deep(text, MAX_DEPTH)
        if deep_at is not None:
            problem = RuleProblem(path, deep_at, "", f"nested deeper than {MAX_DEPTH}")
            raise RulesError([problem]) from exc
        raise
    finally:
        loader.dispose()


def flow_too_deep(text: str, limit: int) -> int | None:
    """The 1-based line where flow brackets (``[``, ``{``) first nest deeper than ``limit``,
    outside quoted scalars and comments; None when they never do."""
    depth = 0
    line = 1
    quote = ""
    prev = "\n"
    i, n = 0, len(text)
    while i < n:
        ch = text[i]
        if ch == "\n":
            line += 1
        if quote:
            i, quote = _in_quote(text, i, quote)
        elif ch == "#" and prev in " \t\n":
            end = text.find("\n", i)
            i = n if end < 0 else end
            continue
        elif ch in "'\"" and prev in " \t\n[{,:-":
            quote = ch
        else:
            depth = _flow_depth(ch, depth)
            if depth > limit:
                return line
        prev = ch
        i += 1
    return None


def _in_quote(text: str, i: int, quote: str) -> tuple[int, str]:
    """Inside a quoted scalar at ``text[i]``: the index of the last character taken and the
    quote still open ("" once it closed)."""
    ch = text[i]
    if ch == quote:
        if quote == "'" and i + 1 < len(text) and text[i + 1] == "'":
            return i + 1, quote  # '' is an escaped quote inside a single-quoted scalar
        return i, ""
    if ch == "\\" and quote == '"':
        return i + 1, quote
    return i, quote


def _flow_depth(ch: str, depth: int) -> int:
    """The flow nesting after ``ch``."""
    if ch in "[{":
        return depth + 1
    if ch in "]}":
        return max(0, depth - 1)
    return depth


def yaml_problem(exc: yaml.YAMLError, path: str) -> RuleProblem:
    mark = getattr(exc, "problem_mark", None)
    line = mark.line + 1 if mark is not None else None
    # PyYAML's message spans lines ("while parsing ...\n  in <string>"): one line per problem.
    return RuleProblem(path, line, "", " ".join(f"not valid YAML: {exc}".split()))


def line_of(node: yaml.Node | None, loc: tuple[int | str, ...]) -> int | None:
    """The 1-based line of the YAML node at pydantic location ``loc``, or of its nearest parent.
    A mapping entry is located by its key's line (where a person looks for ``column_mapings:``),
    not by its value's, which may start on the next line."""
    line = node.start_mark.line + 1 if node is not None else None
    for part in loc:
        if isinstance(node, yaml.MappingNode):
            pair = next(((k, v) for k, v in node.value if getattr(k, "value", None) == part), None)
            if pair is None:
                return line
            node, line = pair[1], pair[0].start_mark.line + 1
        elif (
            isinstance(node, yaml.SequenceNode) and isinstance(part, int) and part < len(node.value)
        ):
            node = node.value[part]
            line = node.start_mark.line + 1
        else:
            return line
    return line

"""The regex IR that every constraint compiles to.

Schemas, Pydantic models and user regexes all become a tree of :class:`Node` objects over
bytes.  The IR is a regular-expression tree with extensions that plain regex text cannot
express (or only at great length) but the automaton builder (:mod:`structgen.fsm.nfa`,
:mod:`structgen.fsm.lazy_dfa`) compiles exactly: :class:`And` (intersection, e.g. ``pattern``
∩ ``minLength``), :class:`Minus` (difference, e.g. property names other than the declared
ones) and :class:`Automaton` (an explicit DFA, e.g. numerals divisible by 7).

Leaves are :class:`Lit` (an exact byte string) and :class:`Chars` (one code point from a
:class:`~structgen.schemas.charset.CharSet`, matched as its UTF-8 encoding).  The
constructors (:func:`lit`, :func:`seq`, :func:`alt`, :func:`opt`, :func:`rep`, :func:`chars`)
simplify as they build; :meth:`Node.to_regex` renders a tree for display.
"""

from __future__ import annotations

from dataclasses import dataclass

from .charset import MAX_CODE_POINT, CharSet


class Node:
    """Base class of the regex IR.  Nodes are immutable and compared by identity."""

    __slots__ = ()

    def to_regex(self) -> str:
        """Render as regex text for display.  ``And``/``Minus`` use the non-standard
        ``(?&…)`` / ``(?-…)`` notation; the result is not meant to be re-parsed."""
        return _render(self)


@dataclass(frozen=True, eq=False, slots=True)
class Lit(Node):
    """The exact byte string ``data``."""

    data: bytes


@dataclass(frozen=True, eq=False, slots=True)
class Chars(Node):
    """One code point of ``cs``, as UTF-8 (surrogates never match)."""

    cs: CharSet


@dataclass(frozen=True, eq=False, slots=True)
class Seq(Node):
    """Concatenation of ``items`` (``Seq(())`` matches the empty string)."""

    items: tuple[Node, ...]


@dataclass(frozen=True, eq=False, slots=True)
class Alt(Node):
    """Union of ``items`` (``Alt(())`` matches nothing)."""

    items: tuple[Node, ...]


@dataclass(frozen=True, eq=False, slots=True)
class Rep(Node):
    """``item`` repeated ``lo`` to ``hi`` times (``hi=None``: unbounded)."""

    item: Node
    lo: int
    hi: int | None


@dataclass(frozen=True, eq=False, slots=True)
class And(Node):
    """Intersection of the languages of ``items``."""

    items: tuple[Node, ...]


@dataclass(frozen=True, eq=False, slots=True)
class Minus(Node):
    """Strings of ``left`` that are not strings of ``right``."""

    left: Node
    right: Node


@dataclass(frozen=True, eq=False, slots=True)
class Automaton(Node):
    """An explicit deterministic byte automaton, for regular languages no short regex spells
    (decimal numerals divisible by 7: a regex for them has thousands of symbols, the automaton
    has 7 states).  ``edges[s]``: ``(lo, hi, target)`` byte ranges out of state ``s`` (no edge:
    the string dies); ``accepting[s]``; the start state is 0.  ``key`` names the language:
    two automata with one key are the same language (the compiler builds it once)."""

    key: str
    edges: tuple[tuple[tuple[int, int, int], ...], ...]
    accepting: tuple[bool, ...]


@dataclass(frozen=True, eq=False, slots=True)
class Join(Node):
    """``item (sep item)*`` with ``lo``..``hi`` items in all (``lo >= 1``, ``hi=None``:
    unbounded).  Unbounded joins compile with a single copy of ``item`` (a loop through
    ``sep``), where ``item (sep item)*`` as a regex needs two."""

    item: Node
    sep: Node
    lo: int
    hi: int | None


@dataclass(frozen=True, eq=False, slots=True)
class Members(Node):
    """Object members in a fixed order: ``items`` are ``(member, required)`` pairs joined by
    ``sep`` (optional ones may be skipped), followed by any number of ``extra`` members
    (``None``: no extra members).  Compiles to O(n) automaton states, where the equivalent
    plain regex needs O(n²) (SGLang/outlines build the latter)."""

    items: tuple[tuple[Node, bool], ...]
    sep: Node
    extra: Node | None


@dataclass(frozen=True, eq=False, slots=True)
class Anchor(Node):
    """``^`` (``start=True``) or ``$`` as parsed; resolved by :func:`~.regex_assertions.resolve_anchors`."""

    start: bool
    pos: int


@dataclass(frozen=True, eq=False, slots=True)
class Look(Node):
    """A look-ahead ``(?=…)`` (``negate=False``) or ``(?!…)``, or with ``behind`` a look-behind
    ``(?<=…)`` / ``(?<!…)``, as parsed: ``body`` is its alternation, which starts at ``start`` in
    the pattern text; resolved by :func:`~.regex_assertions.resolve_anchors`.  ``pos``: where
    ``(?`` opens.  ``word``: ``"b"`` for a whole word boundary ``\\b`` (``\\B`` with ``negate``)
    at ``pos``; ``"w"`` / ``"W"`` for one of its look-arounds, whose body is that class escape
    (``start`` is then -1: no text of its own)."""

    negate: bool
    body: Node
    start: int
    pos: int
    behind: bool = False
    word: str = ""


EPSILON = Seq(())
NOTHING = Alt(())


def children(node: Node) -> tuple[Node, ...]:
    """The IR nodes directly under ``node`` (an ``Automaton`` has none: its language is its table)."""
    if isinstance(node, (Seq, Alt, And)):
        return node.items
    if isinstance(node, Rep):
        return (node.item,)
    if isinstance(node, Minus):
        return (node.left, node.right)
    if isinstance(node, Join):
        return (node.item, node.sep)
    if isinstance(node, Members):
        return tuple(m for m, _ in node.items) + (node.sep,) + ((node.extra,) if node.extra is not None else ())
    if isinstance(node, Look):
        return (node.body,)
    return ()


def new_products(node: Node, seen: dict[int, Node]) -> list[Node]:
    """The ``And`` / ``Minus`` nodes under ``node`` (itself included) not in ``seen``, walking
    only nodes not seen before and adding every node walked to ``seen`` (by id; holding the node
    keeps its id its own), so a series of calls over a growing IR walks each node once."""
    found: list[Node] = []
    todo = [node]
    while todo:
        n = todo.pop()
        if id(n) in seen:
            continue
        seen[id(n)] = n
        if isinstance(n, (And, Minus)):
            found.append(n)
        todo.extend(children(n))
    return found


def lit(text: str | bytes) -> Node:
    """A literal; ``str`` is encoded as UTF-8."""
    return Lit(text.encode() if isinstance(text, str) else text)


def seq(*items: Node) -> Node:
    """Concatenation, flattening nested sequences and merging adjacent literals."""
    flat: list[Node] = []
    for it in items:
        parts = it.items if isinstance(it, Seq) else (it,)
        for p in parts:
            if p is NOTHING or (isinstance(p, Alt) and not p.items):
                return NOTHING
            if isinstance(p, Lit) and flat and isinstance(flat[-1], Lit):
                flat[-1] = Lit(flat[-1].data + p.data)
            elif not (isinstance(p, Lit) and not p.data):
                flat.append(p)
    if len(flat) == 1:
        return flat[0]
    return Seq(tuple(flat))


def alt(*items: Node) -> Node:
    """Union, flattening nested unions and dropping ``NOTHING``."""
    flat: list[Node] = []
    for it in items:
        for p in it.items if isinstance(it, Alt) else (it,):
            flat.append(p)
    if len(flat) == 1:
        return flat[0]
    return Alt(tuple(flat))


def opt(item: Node) -> Node:
    return Rep(item, 0, 1)


def rep(item: Node, lo: int, hi: int | None) -> Node:
    if hi is not None and hi < lo:
        return NOTHING
    if lo == hi == 1:
        return item
    if hi == 0:
        return EPSILON
    return Rep(item, lo, hi)


def chars(cs: CharSet) -> Node:
    return Chars(cs) if cs else NOTHING


_META = set("\\^$.|?*+()[]{}")


def _render_cp(cp: int, in_class: bool) -> str:
    c = chr(cp)
    if cp < 0x20 or cp == 0x7F or 0xD800 <= cp <= 0xDFFF:
        return f"\\x{cp:02x}" if cp < 0x100 else f"\\u{cp:04x}"
    if in_class and c in "\\]^-":
        return "\\" + c
    if not in_class and c in _META:
        return "\\" + c
    return c


def _render_charset(cs: CharSet) -> str:
    single = cs.single()
    if single is not None:
        return _render_cp(single, False)
    if cs.ranges == ((0, MAX_CODE_POINT),):
        return "[\\s\\S]"
    neg = cs.complement()
    body_of = lambda s: "".join(  # noqa: E731
        _render_cp(lo, True) if lo == hi else f"{_render_cp(lo, True)}-{_render_cp(hi, True)}" for lo, hi in s.ranges
    )
    if len(neg.ranges) < len(cs.ranges):
        return f"[^{body_of(neg)}]"
    return f"[{body_of(cs)}]"


def _render(node: Node) -> str:
    if isinstance(node, Lit):
        text = node.data.decode("utf-8", errors="backslashreplace")
        return "".join(_render_cp(ord(c), False) for c in text)
    if isinstance(node, Chars):
        return _render_charset(node.cs)
    if isinstance(node, Seq):
        return "".join(_group(i) if isinstance(i, Alt) else _render(i) for i in node.items)
    if isinstance(node, Alt):
        if not node.items:
            return "[^\\s\\S]"
        return "|".join(_render(i) for i in node.items)
    if isinstance(node, Rep):
        inner = _render(node.item)
        if not (isinstance(node.item, Chars) or (isinstance(node.item, Lit) and len(node.item.data) == 1)):
            inner = f"(?:{inner})"
        q = {(0, None): "*", (1, None): "+", (0, 1): "?"}.get((node.lo, node.hi))
        if q is None:
            q = f"{{{node.lo},}}" if node.hi is None else (f"{{{node.lo}}}" if node.lo == node.hi else f"{{{node.lo},{node.hi}}}")
        return inner + q
    if isinstance(node, And):
        return "(?&" + ")(?&".join(_render(i) for i in node.items) + ")"
    if isinstance(node, Minus):
        return f"(?:{_render(node.left)})(?-{_render(node.right)})"
    if isinstance(node, Anchor):
        return "^" if node.start else "$"
    if isinstance(node, Look):
        opener = ("(?<" if node.behind else "(?") + ("!" if node.negate else "=")
        return opener + _render(node.body) + ")"
    if isinstance(node, Automaton):
        return f"(?&<{node.key}>)"
    if isinstance(node, Members):
        return _render(members_as_regex(node))
    if isinstance(node, Join):
        return _render(seq(node.item, rep(seq(node.sep, node.item), node.lo - 1, None if node.hi is None else node.hi - 1)))
    raise TypeError(f"not a regex IR node: {node!r}")


def members_as_regex(node: Members) -> Node:
    """The plain-regex equivalent of a :class:`Members` node (O(n²) size; display and tests)."""
    if node.extra is not None:
        tail_true: Node = Rep(seq(node.sep, node.extra), 0, None)
        tail_false: Node = opt(seq(node.extra, tail_true))
    else:
        tail_true = tail_false = EPSILON
    for member, required in reversed(node.items):
        if required:
            tail_true, tail_false = seq(node.sep, member, tail_true), seq(member, tail_true)
        else:
            tail_true, tail_false = seq(opt(seq(node.sep, member)), tail_true), alt(seq(member, tail_true), tail_false)
    return tail_false


def _group(node: Node) -> str:
    return f"(?:{_render(node)})"


def char_length_bounds(node: Node) -> tuple[int, int | None]:
    """(min, max) length in code points of the strings of a code-point IR node (max None:
    unbounded or unknown).  Conservative for ``And`` / ``Minus`` (0, None)."""
    if isinstance(node, Lit):
        n = len(node.data.decode("utf-8"))
        return n, n
    if isinstance(node, Chars):
        return 1, 1
    if isinstance(node, Seq):
        lo = 0
        hi: int | None = 0
        for it in node.items:
            a, b = char_length_bounds(it)
            lo += a
            hi = None if hi is None or b is None else hi + b
        return lo, hi
    if isinstance(node, Alt):
        if not node.items:
            return 0, 0
        bounds = [char_length_bounds(i) for i in node.items]
        his = [b for _, b in bounds]
        return min(a for a, _ in bounds), None if any(h is None for h in his) else max(h for h in his if h is not None)
    if isinstance(node, Rep):
        a, b = char_length_bounds(node.item)
        return a * node.lo, None if node.hi is None or b is None else b * node.hi
    return 0, None

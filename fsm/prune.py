"""``prune``: an IR rewritten without its empty sub-languages, so that every NFA state built from
it can reach acceptance (what lets ``LazyDFA`` discover states without a trimming pass)."""

from __future__ import annotations

from structgen.schemas.charset import utf8_sequences
from structgen.schemas.ir import NOTHING, Alt, Anchor, And, Automaton, Chars, Join, Lit, Look, Members, Minus, Node, Rep, Seq

from .errors import GrammarCompileError
from .nfa import NFABuilder


def prune(node: Node, builder: NFABuilder, memo: dict[int, Node]) -> Node:
    """Rewrite ``node`` without empty sub-languages (``NOTHING`` if the whole is empty).

    After pruning every NFA state the builder makes can reach the final state, which is what
    lets :class:`LazyDFA` discover states without a trimming pass: every non-empty state set
    is live.  ``And`` / ``Minus`` are compiled here (eagerly, trimmed) and memoized.
    """
    got = memo.get(id(node))
    if got is not None:
        return got
    out: Node
    if isinstance(node, Lit):
        out = node
    elif isinstance(node, Chars):
        out = node if utf8_sequences(node.cs) else NOTHING
    elif isinstance(node, Seq):
        items = [prune(i, builder, memo) for i in node.items]
        out = NOTHING if any(i is NOTHING for i in items) else node if _same(items, node.items) else Seq(tuple(items))
    elif isinstance(node, Alt):
        items = [i for i in (prune(b, builder, memo) for b in node.items) if i is not NOTHING]
        out = NOTHING if not items else items[0] if len(items) == 1 else node if _same(items, node.items) else Alt(tuple(items))
    elif isinstance(node, Rep):
        item = prune(node.item, builder, memo)
        if item is NOTHING:
            out = Seq(()) if node.lo == 0 else NOTHING
        else:
            out = node if item is node.item else Rep(item, node.lo, node.hi)
    elif isinstance(node, Join):
        item = prune(node.item, builder, memo)
        sep = prune(node.sep, builder, memo)
        if item is NOTHING:
            out = NOTHING
        elif sep is NOTHING:
            out = item if node.lo <= 1 else NOTHING
        else:
            out = node if item is node.item and sep is node.sep else Join(item, sep, node.lo, node.hi)
    elif isinstance(node, Members):
        kept: list[tuple[Node, bool]] = []
        out = NOTHING
        dead = False
        for member, required in node.items:
            m = prune(member, builder, memo)
            if m is NOTHING:
                if required:
                    dead = True
                    break
                continue
            kept.append((m, required))
        if not dead:
            sep = prune(node.sep, builder, memo)
            extra = prune(node.extra, builder, memo) if node.extra is not None else None
            if sep is NOTHING:
                raise GrammarCompileError("object member separator matches nothing")
            extra = None if extra is NOTHING else extra
            same = sep is node.sep and extra is node.extra and len(kept) == len(node.items)
            same = same and all(m is old for (m, _r), (old, _o) in zip(kept, node.items))
            out = node if same else Members(tuple(kept), sep, extra)
    elif isinstance(node, And) and (counted := builder.counted(node)) is not None:
        out = node if counted.live(counted.initial, 0) else NOTHING
    elif isinstance(node, (And, Minus, Automaton)):
        out = NOTHING if builder.product(node).is_empty() else node
    elif isinstance(node, (Anchor, Look)):
        raise GrammarCompileError("regex IR still contains an anchor; resolve anchors before compiling")
    else:
        raise TypeError(f"not a regex IR node: {node!r}")
    memo[id(node)] = out
    return out


def _same(new: list[Node], old: tuple[Node, ...]) -> bool:
    """Whether the pruned children ``new`` are the very nodes ``old`` (nothing was rewritten:
    the node itself is kept, so what is memoized by node identity downstream still applies)."""
    return len(new) == len(old) and all(a is b for a, b in zip(new, old))

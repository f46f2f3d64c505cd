"""``minus_literals``: a byte DFA minus a finite set of strings, built straight from a trie.

Objects with declared properties exclude their names from the undeclared ones (``"any JSON
string" minus {"name", "age", ...}``), so most schemas build a few of these differences.  The
general route compiles the right side to a DFA (an NFA, a subset construction, a minimization)
and then walks the product level by level; for a finite right side the product has a closed
form: the trie of the excluded strings, each trie node paired with the one state the left
automaton reaches on that node's path, and past the trie a copy of the left automaton.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from structgen.schemas.ir import Alt, Lit, Node

from .dfa import DEAD, Budget, ByteDFA, byte_classes, empty_dfa, trim_and_minimize

MAX_LITERALS = 4096  # a larger union goes the general way (its trie alone is most of the cost)


def literal_strings(node: Node, limit: int = MAX_LITERALS) -> list[bytes] | None:
    """The strings of ``node`` when it is a literal or a (nested) union of literals, at most
    ``limit`` of them; None otherwise."""
    if isinstance(node, Lit):
        return [node.data]
    if not isinstance(node, Alt):
        return None
    out: list[bytes] = []
    for item in node.items:
        got = literal_strings(item, limit - len(out))
        if got is None:
            return None
        out.extend(got)
        if len(out) > limit:
            return None
    return out


def minus_literals(left: ByteDFA, strings: Sequence[bytes], budget: Budget) -> ByteDFA:
    """The trimmed, minimal DFA of ``left``'s language without ``strings``.

    States before minimization: trie node ``t`` (the path ``p``) is the pair
    ``(left after p, t)``: it accepts when ``left`` accepts ``p`` and ``p`` is not one of
    ``strings``; a byte with no trie edge leaves the trie for the copy of ``left``'s state it
    leads to.  A string ``left`` rejects on the way is not entered past that point.  Raises
    :class:`GrammarCompileError` past ``budget.max_states``."""
    if left.is_empty():
        return empty_dfa()
    table = left.table  # [S, 256]
    children: list[dict[int, int]] = [{}]  # trie node -> byte -> trie node
    state_of = [left.initial]  # trie node -> left's state on its path
    terminal = [False]  # trie node -> its path is one of ``strings``
    for s in strings:
        t = 0
        for b in s:
            nxt = children[t].get(b)
            if nxt is None:
                d = table.item(state_of[t], b)
                if d == DEAD:
                    break  # left rejects every string through here: nothing to exclude
                nxt = len(state_of)
                children[t][b] = nxt
                children.append({})
                state_of.append(d)
                terminal.append(False)
            t = nxt
        else:
            terminal[t] = True
    n_trie, n_left = len(state_of), table.shape[0]
    budget.check_states(n_trie + n_left)
    off = np.where(table != DEAD, table + n_trie, -1).astype(np.int32)  # [S, 256] left's copy, -1: no edge
    on = off[np.asarray(state_of, dtype=np.int64)]  # [T, 256] a trie node leaves for left's copy ...
    parents = [t for t, kids in enumerate(children) for _ in kids]
    labels = [b for kids in children for b in kids]
    targets = [c for kids in children for c in kids.values()]
    on[parents, labels] = targets  # ... unless the byte continues the trie
    trans = np.vstack([on, off])  # [T + S, 256]
    accepting = np.concatenate([left.accepting[state_of] & ~np.asarray(terminal, dtype=bool), left.accepting])  # [T + S]
    rep, class_of_byte = byte_classes(trans)
    classes = np.ascontiguousarray(np.take(trans, rep, axis=1))  # [T + S, C]
    return trim_and_minimize(classes, accepting, class_of_byte, 0, budget, minimize=True)

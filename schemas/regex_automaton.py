"""Regexes whose anchors and look-arounds the IR fold cannot place — inside a repetition, inside
a look-around, or past the fold's alternatives — compiled straight to a byte automaton.

The pattern becomes a Thompson NFA over code-point classes whose assertion edges are checked
while the subset construction reads the input, the way RE2 and Rust's regex-automata check
``^`` / ``$`` / ``\\b`` on epsilon transitions from the previous and the next character:

* ``^``: the input's start; ``$``: its end (read wide, also before one final newline, as
  Python's ``$``); a look-ahead of one character class (``(?=\\w)``, the halves of ``\\b`` /
  ``\\B``): the next character, known while the closure before it is built;
* a look-behind ``(?<=Y)`` / ``(?<!Y)`` runs "anything, then ``Y``" beside the input (runs of
  ``Y`` started at every position, part of the DFA state); the assertion reads whether one
  ends here (with the obligations of look-aheads inside ``Y`` it still carries);
* a longer look-ahead ``(?=X)`` / ``(?!X)`` becomes an obligation of the thread that passed it:
  the runs of ``X`` started there, carried along until one accepts (negated: until none is
  left); a thread lives while its obligations can still hold.  This is the subset construction
  of an alternating automaton (Chandra, Kozen & Stockmeyer, "Alternation", JACM 1981).

The DFA over the classes is minimized (Moore's partition refinement) and spelled in UTF-8
bytes as an :class:`~.ir.Automaton` over the raw text
(:func:`~.json_strings.encode_json_string_content` escapes it for JSON strings).  Bodies are read
narrow where they must match and wide where they must not, as in :mod:`.regex_assertions`, so the
result stays on its side of both ECMA-262 and Python.  Past :data:`MAX_REGEX_STATES` DFA states
or :data:`MAX_BUILD_S` seconds it raises :class:`~.errors.RegexError` naming the state cap or the
time-out.
"""

from __future__ import annotations

import time
from typing import NamedTuple

from .charset import CharSet, utf8_sequences
from .errors import RegexError
from .ir import Alt, Anchor, Automaton, Chars, Lit, Look, Node, Rep, Seq, char_length_bounds
from .regex import parse_alternation_at, word_boundary_parts, word_class

MAX_REGEX_STATES = 5000  # DFA states over character classes, before minimization
MAX_BUILD_S = 2.0  # seconds the subset construction may take (a time-out past it)
MAX_NFA_STATES = 20000  # Thompson states (counted repetitions are unrolled)
_END = -1  # the "next character" at the end of the input


class _Check(NamedTuple):
    """An assertion edge to ``target``: ``kind`` ``start`` / ``end`` (the input's ends), ``next``
    (the next character in class ``cs``), ``behind`` (a run of look-behind ``body`` ends here) or
    ``ahead`` (a run of the body from state ``body`` reaches state ``accept``); ``negate``
    flips it."""

    kind: str
    negate: bool
    target: int
    body: int = 0
    accept: int = 0
    cs: CharSet | None = None


class _Ob(NamedTuple):
    """An obligation: runs of a look-ahead body (``threads``) of which one must reach ``accept``
    (``negate``: none may)."""

    negate: bool
    accept: int
    threads: frozenset[_Thread]


class _Thread(NamedTuple):
    pos: int
    obs: frozenset[_Ob]


_Alts = list[frozenset[_Ob]]  # a disjunction of conjunctions of obligations ([]: false; [∅]: true)


class _Ctx(NamedTuple):
    """What the input read so far tells every thread: at its start, and the runs of each
    look-behind body started before this position and still going."""

    at_start: bool
    behinds: tuple[frozenset[_Thread], ...]


class _NFA:
    """Thompson NFA over code-point classes: ``chars[i]`` is state ``i``'s one character edge
    (class, target), ``eps[i]`` its epsilon edges, ``checks[i]`` its assertion edges;
    ``behinds``: (start, accept) of each look-behind body."""

    def __init__(self) -> None:
        self.chars: list[tuple[CharSet, int] | None] = []
        self.eps: list[list[int]] = []
        self.checks: list[list[_Check]] = []
        self.behinds: list[tuple[int, int]] = []

    def new(self) -> int:
        if len(self.chars) >= MAX_NFA_STATES:
            raise OverflowError
        self.chars.append(None)
        self.eps.append([])
        self.checks.append([])
        return len(self.chars) - 1


class _Builder:
    """The NFA of a parsed pattern; ``pattern`` is its text (look-around bodies are re-read
    from it narrow or wide)."""

    def __init__(self, pattern: str) -> None:
        self.pattern = pattern
        self.nfa = _NFA()

    def fragment(self, node: Node, wide: bool) -> tuple[int, int]:
        """(start, end) states of ``node``'s fragment, read ``wide`` or narrow."""
        nfa = self.nfa
        if isinstance(node, Chars):
            s, e = nfa.new(), nfa.new()
            nfa.chars[s] = (node.cs, e)
            return s, e
        if isinstance(node, Lit):
            text = node.data.decode("utf-8")
            return self.fragment(Seq(tuple(Chars(CharSet.of_chars(c)) for c in text)), wide)
        if isinstance(node, Seq):
            s = cur = nfa.new()
            for item in node.items:
                a, b = self.fragment(item, wide)
                nfa.eps[cur].append(a)
                cur = b
            return s, cur
        if isinstance(node, Alt):
            s, e = nfa.new(), nfa.new()
            for item in node.items:
                a, b = self.fragment(item, wide)
                nfa.eps[s].append(a)
                nfa.eps[b].append(e)
            return s, e
        if isinstance(node, Rep):
            return self._repetition(node, wide)
        if isinstance(node, Anchor):
            return self._anchor(node, wide)
        if isinstance(node, Look):
            return self._look(node, wide)
        raise RegexError(f"{type(node).__name__} is not a regex node", self.pattern, 0)

    def _repetition(self, node: Rep, wide: bool) -> tuple[int, int]:
        nfa = self.nfa
        s = cur = nfa.new()
        for _ in range(node.lo):
            a, b = self.fragment(node.item, wide)
            nfa.eps[cur].append(a)
            cur = b
        if node.hi is None:
            loop = nfa.new()
            a, b = self.fragment(node.item, wide)
            nfa.eps[cur].append(loop)
            nfa.eps[loop].append(a)
            nfa.eps[b].append(loop)
            return s, loop
        e = nfa.new()
        for _ in range(node.hi - node.lo):
            a, b = self.fragment(node.item, wide)
            nfa.eps[cur] += [a, e]
            cur = b
        nfa.eps[cur].append(e)
        return s, e

    def _edge(self, check: _Check) -> tuple[int, int]:
        s = self.nfa.new()
        self.nfa.checks[s].append(check)
        return s, check.target

    def _anchor(self, node: Anchor, wide: bool) -> tuple[int, int]:
        nfa = self.nfa
        e = nfa.new()
        if node.start:
            return self._edge(_Check("start", False, e))
        if not wide:
            return self._edge(_Check("end", False, e))
        s = nfa.new()  # Python's `$`: the end, or one final newline before it
        nl, at_end, done = nfa.new(), nfa.new(), nfa.new()
        nfa.chars[nl] = (CharSet.of_chars("\n"), at_end)
        nfa.checks[at_end].append(_Check("end", False, done))
        nfa.checks[s] += [_Check("end", False, e), _Check("ahead", False, e, nl, done)]
        return s, e

    def _look(self, node: Look, wide: bool) -> tuple[int, int]:
        nfa = self.nfa
        if node.word == "b":
            ways = [Seq((behind, ahead)) for behind, ahead in word_boundary_parts(node, wide)]
            return self.fragment(Alt(tuple(ways)), wide)
        body_wide = wide != node.negate  # what must match is read narrow, what must not wide
        if node.word:
            body: Node = Chars(word_class(node.word, body_wide))
        else:
            body = parse_alternation_at(self.pattern, node.start, wide=body_wide)
        e = nfa.new()
        if node.behind:
            lo, hi = _widths(body)
            if hi is None or lo != hi:
                raise RegexError("look-behind of other than a fixed number of characters is not supported", self.pattern, node.pos)
            nfa.behinds.append(self.fragment(body, body_wide))
            return self._edge(_Check("behind", node.negate, e, len(nfa.behinds) - 1))
        if isinstance(body, Chars):
            return self._edge(_Check("next", node.negate, e, cs=body.cs))
        a, b = self.fragment(body, body_wide)
        return self._edge(_Check("ahead", node.negate, e, a, b))


def _widths(node: Node) -> tuple[int, int | None]:
    """(min, max) characters ``node`` matches, its assertions zero wide (max None: unbounded)."""
    if isinstance(node, Anchor | Look):
        return 0, 0
    if isinstance(node, Seq | Alt) and node.items:
        bounds = [_widths(c) for c in node.items]
        his = [h for _l, h in bounds]
        if isinstance(node, Alt):
            return min(lo for lo, _h in bounds), None if None in his else max(h for h in his if h is not None)
        return sum(lo for lo, _h in bounds), None if None in his else sum(h for h in his if h is not None)
    if isinstance(node, Rep):
        lo, hi = _widths(node.item)
        return lo * node.lo, None if node.hi is None or hi is None else hi * node.hi
    return char_length_bounds(node)


def _atoms(sets: list[CharSet]) -> list[CharSet]:
    """The coarsest partition of all code points that every set in ``sets`` is a union of."""
    atoms = [CharSet.any()]
    for cs in dict.fromkeys(sets):
        split: list[CharSet] = []
        for a in atoms:
            inside, outside = a.intersect(cs), a.difference(cs)
            split += [x for x in (inside, outside) if x]
        atoms = split
    return atoms


class _Subsets:
    """The subset construction over atoms (see the module docstring)."""

    def __init__(self, nfa: _NFA, accept: int, atoms: list[CharSet]) -> None:
        self.nfa = nfa
        self.accept = accept
        self.atoms = atoms
        self.char_atoms = [None if c is None else frozenset(i for i, a in enumerate(atoms) if a.intersect(c[0])) for c in nfa.chars]
        self.check_atoms: dict[CharSet, frozenset[int]] = {}
        for checks in nfa.checks:
            for c in checks:
                if c.cs is not None and c.cs not in self.check_atoms:
                    self.check_atoms[c.cs] = frozenset(i for i, a in enumerate(atoms) if a.intersect(c.cs))
        self.accepts = {accept} | {c.accept for checks in nfa.checks for c in checks if c.kind == "ahead"} | {e for _s, e in nfa.behinds}
        self.memo: dict[tuple[_Thread, _Ctx, int], frozenset[_Thread]] = {}

    # -- look-behinds
    def start_ctx(self) -> _Ctx:
        return _Ctx(True, tuple(frozenset() for _ in self.nfa.behinds))

    def _behind_runs(self, k: int, ctx: _Ctx, nxt: int) -> frozenset[_Thread]:
        """Look-behind ``k``'s runs before ``nxt``, one started here included."""
        return self.closure(ctx.behinds[k] | {_Thread(self.nfa.behinds[k][0], frozenset())}, ctx, nxt)

    def advance(self, ctx: _Ctx, atom: int) -> _Ctx:
        """The context after reading ``atom``."""
        return _Ctx(False, tuple(self.step(self._behind_runs(k, ctx, atom), atom) for k in range(len(ctx.behinds))))

    def _behind(self, c: _Check, ctx: _Ctx, nxt: int) -> _Alts:
        """Look-behind check ``c`` as alternatives of obligations (those of look-aheads in its
        body that a run ending here still carries)."""
        accept = self.nfa.behinds[c.body][1]
        done = [r.obs for r in self._behind_runs(c.body, ctx, nxt) if r.pos == accept]
        if any(not obs for obs in done):
            return [] if c.negate else [frozenset()]
        if not c.negate:
            return list(dict.fromkeys(done))
        return self._none_of(done)

    @staticmethod
    def _none_of(done: list[frozenset[_Ob]]) -> _Alts:
        """That no set in ``done`` holds whole: not (o1 and o2 …) = (not o1) or (not o2) …"""
        alts: _Alts = [frozenset()]
        for obs in done:
            alts = list(dict.fromkeys(a | {_Ob(not o.negate, o.accept, o.threads)} for a in alts for o in obs))
        return alts

    # -- threads
    def closure(self, threads: frozenset[_Thread], ctx: _Ctx, nxt: int) -> frozenset[_Thread]:
        """``threads`` followed through epsilon and assertion edges before next character
        ``nxt`` (``_END``: none): those at a character edge or an accepting state, each with
        its obligations resolved as far as ``nxt`` allows."""
        out: set[_Thread] = set()
        for t in threads:
            key = (t, ctx, nxt)
            got = self.memo.get(key)
            if got is None:
                got = self._closure_one(t, ctx, nxt)
                self.memo[key] = got
            out |= got
        return frozenset(out)

    def _closure_one(self, thread: _Thread, ctx: _Ctx, nxt: int) -> frozenset[_Thread]:
        nfa = self.nfa
        out: set[_Thread] = set()
        seen: set[_Thread] = set()
        stack = [_Thread(thread.pos, obs) for obs in self._resolve_all(thread.obs, ctx, nxt)]
        while stack:
            t = stack.pop()
            if t in seen:
                continue
            seen.add(t)
            if nfa.chars[t.pos] is not None or t.pos in self.accepts:
                out.add(t)
            stack += [_Thread(p, t.obs) for p in nfa.eps[t.pos]]
            for c in nfa.checks[t.pos]:
                if c.kind == "ahead":
                    body = _Ob(c.negate, c.accept, frozenset({_Thread(c.body, frozenset())}))
                    stack += [_Thread(c.target, t.obs | alt) for alt in self._resolve(body, ctx, nxt)]
                elif c.kind == "behind":
                    stack += [_Thread(c.target, t.obs | alt) for alt in self._behind(c, ctx, nxt)]
                elif self._holds(c, ctx, nxt):
                    stack.append(_Thread(c.target, t.obs))
        return frozenset(out)

    def _holds(self, c: _Check, ctx: _Ctx, nxt: int) -> bool:
        if c.kind == "start":
            got = ctx.at_start
        elif c.kind == "end":
            got = nxt == _END
        else:  # next
            assert c.cs is not None
            got = nxt != _END and nxt in self.check_atoms[c.cs]
        return got != c.negate

    def _resolve_all(self, obs: frozenset[_Ob], ctx: _Ctx, nxt: int) -> _Alts:
        alts: _Alts = [frozenset()]
        for ob in obs:
            alts = list(dict.fromkeys(a | b for a in alts for b in self._resolve(ob, ctx, nxt)))
            if not alts:
                break
        return alts

    def _resolve(self, ob: _Ob, ctx: _Ctx, nxt: int) -> _Alts:
        """Obligation ``ob`` before ``nxt`` as alternatives of obligations still pending."""
        runs = self.closure(ob.threads, ctx, nxt)
        done = [r.obs for r in runs if r.pos == ob.accept]
        rest = frozenset(r for r in runs if r.pos != ob.accept)
        if any(not obs for obs in done):
            return [] if ob.negate else [frozenset()]
        if not ob.negate:
            return list(dict.fromkeys([*done, *([frozenset({_Ob(False, ob.accept, rest)})] if rest else [])]))
        pending = frozenset({_Ob(True, ob.accept, rest)}) if rest else frozenset()
        return [a | pending for a in self._none_of(done)]

    def step(self, threads: frozenset[_Thread], atom: int) -> frozenset[_Thread]:
        """The threads after reading ``atom`` (those at a character edge that takes it, with
        their obligations' runs moved too; a thread whose obligation can no longer hold dies)."""
        out = set()
        for t in threads:
            c = self.nfa.chars[t.pos]
            if c is None or atom not in (self.char_atoms[t.pos] or ()):
                continue
            obs: set[_Ob] = set()
            for ob in t.obs:
                runs = self.step(ob.threads, atom)
                if runs:
                    obs.add(_Ob(ob.negate, ob.accept, runs))
                elif not ob.negate:
                    break  # its body can no longer match: the thread dies
            else:
                out.add(_Thread(c[1], frozenset(obs)))
        return frozenset(out)

    def accepting(self, threads: frozenset[_Thread], ctx: _Ctx) -> bool:
        """Whether the input may end here: a thread at the end with no positive obligation
        pending (at the end no body can read on: a pending negated one holds)."""
        return any(t.pos == self.accept and all(o.negate for o in t.obs) for t in self.closure(threads, ctx, _END))


def _dfa(pattern: str, sub: _Subsets, start: int) -> tuple[list[dict[int, int]], list[bool]]:
    """The DFA over atoms: ``trans[s][atom]`` (absent: the input dies), ``accepting[s]``."""
    first = (sub.start_ctx(), frozenset({_Thread(start, frozenset())}))
    index = {first: 0}
    order = [first]
    trans: list[dict[int, int]] = []
    accepting: list[bool] = []
    deadline = time.perf_counter() + MAX_BUILD_S
    for ctx, threads in order:
        if time.perf_counter() > deadline:
            raise RegexError(f"the automaton of its anchors and look-arounds takes over {MAX_BUILD_S:g} s to build (time-out)", pattern, 0)
        row: dict[int, int] = {}
        for atom in range(len(sub.atoms)):
            moved = sub.step(sub.closure(threads, ctx, atom), atom)
            if not moved:
                continue
            key = (sub.advance(ctx, atom), moved)
            if key not in index:
                if len(order) >= MAX_REGEX_STATES:
                    raise RegexError(f"anchors and look-arounds make more than {MAX_REGEX_STATES} states (state cap)", pattern, 0)
                index[key] = len(order)
                order.append(key)
            row[atom] = index[key]
        trans.append(row)
        accepting.append(sub.accepting(threads, ctx))
    return trans, accepting


def _minimal(trans: list[dict[int, int]], accepting: list[bool]) -> tuple[list[dict[int, int]], list[bool]]:
    """The minimal DFA (Moore's partition refinement) without states that cannot reach an
    accepting one; the start stays state 0."""
    back: list[set[int]] = [set() for _ in trans]
    for s, row in enumerate(trans):
        for t in row.values():
            back[t].add(s)
    live = {s for s, a in enumerate(accepting) if a}
    stack = list(live)
    while stack:
        for p in back[stack.pop()]:
            if p not in live:
                live.add(p)
                stack.append(p)
    rows = [{a: t for a, t in row.items() if t in live} for row in trans]
    block = [int(accepting[s]) if s in live else -1 for s in range(len(trans))]
    while True:
        signatures: dict[tuple[object, ...], int] = {}
        new = []
        for s in range(len(trans)):
            if block[s] < 0:
                new.append(-1)
                continue
            sig = (block[s], tuple(sorted((a, block[t]) for a, t in rows[s].items())))
            new.append(signatures.setdefault(sig, len(signatures)))
        if len(signatures) == len({b for b in block if b >= 0}):
            break
        block = new
    renumber = {block[0]: 0} if block[0] >= 0 else {}
    for s in range(len(trans)):
        if block[s] >= 0 and block[s] not in renumber:
            renumber[block[s]] = len(renumber)
    n = max(len(renumber), 1)
    out_trans: list[dict[int, int]] = [{} for _ in range(n)]
    out_acc = [False] * n
    for s in range(len(trans)):
        if block[s] >= 0:
            b = renumber[block[s]]
            out_trans[b] = {a: renumber[block[t]] for a, t in rows[s].items()}
            out_acc[b] = accepting[s]
    return out_trans, out_acc


_Edges = tuple[tuple[tuple[int, int, int], ...], ...]  # per state, (lo, hi, target) byte ranges


def _bytes(trans: list[dict[int, int]], accepting: list[bool], atoms: list[CharSet]) -> tuple[_Edges, tuple[bool, ...]]:
    """The DFA over atoms spelled in UTF-8: per state, the byte sequences of the code points of
    each target merged into a trie of byte ranges (inner trie states shared)."""
    edges: list[tuple[tuple[int, int, int], ...]] = [() for _ in trans]
    acc = list(accepting)
    inner: dict[frozenset[tuple[tuple[tuple[int, int], ...], int]], int] = {}

    def build(items: frozenset[tuple[tuple[tuple[int, int], ...], int]]) -> tuple[tuple[int, int, int], ...]:
        cuts = sorted({lo for seq, _t in items for lo in (seq[0][0], seq[0][1] + 1)})
        out: list[tuple[int, int, int]] = []
        for lo, nxt in zip(cuts, cuts[1:]):
            hi = nxt - 1
            tails = frozenset((seq[1:], t) for seq, t in items if seq[0][0] <= lo and hi <= seq[0][1])
            if not tails:
                continue
            ends = {t for seq, t in tails if not seq}
            if ends:
                target = next(iter(ends))  # atoms are disjoint: one code point, one target
            else:
                target = inner.get(tails, -1)
                if target < 0:
                    target = len(edges)
                    inner[tails] = target
                    edges.append(())
                    acc.append(False)
                    edges[target] = build(tails)
            if out and out[-1][2] == target and out[-1][1] + 1 == lo:
                out[-1] = (out[-1][0], hi, target)
            else:
                out.append((lo, hi, target))
        return tuple(out)

    for s, row in enumerate(trans):
        by_target: dict[int, CharSet] = {}
        for a, t in row.items():
            by_target[t] = by_target[t].union(atoms[a]) if t in by_target else atoms[a]
        items = frozenset((tuple(seq), t) for t, cs in by_target.items() for seq in utf8_sequences(cs))
        edges[s] = build(items) if items else ()
    return tuple(edges), tuple(acc)


def assertion_automaton(node: Node, pattern: str, *, search: bool, wide: bool) -> Automaton:
    """``node`` (parsed from ``pattern``, read ``wide`` or narrow) with its anchors and
    look-arounds, as a byte automaton over the raw UTF-8 text: the whole input (``search``:
    anything, a match, anything).  Raises :class:`RegexError` past the state cap
    (:data:`MAX_NFA_STATES`, :data:`MAX_REGEX_STATES`) or the time-out (:data:`MAX_BUILD_S`),
    and for a look-behind of variable width."""
    builder = _Builder(pattern)
    nfa = builder.nfa
    try:
        parts: list[Node] = [Rep(Chars(CharSet.any()), 0, None), node, Rep(Chars(CharSet.any()), 0, None)] if search else [node]
        start, accept = builder.fragment(Seq(tuple(parts)), wide)
    except OverflowError:
        raise RegexError(f"the pattern's automaton exceeds {MAX_NFA_STATES} NFA states (state cap)", pattern, 0) from None
    sets = [c[0] for c in nfa.chars if c is not None] + [c.cs for checks in nfa.checks for c in checks if c.cs is not None]
    atoms = _atoms(sets)
    sub = _Subsets(nfa, accept, atoms)
    trans, accepting = _minimal(*_dfa(pattern, sub, start))
    edges, acc = _bytes(trans, accepting, atoms)
    key = f"regex-assertions:{'search' if search else 'full'}:{'wide' if wide else 'narrow'}:{pattern}"
    return Automaton(key, edges, acc)

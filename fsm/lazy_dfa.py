"""``LazyDFA``: subset construction on demand over a lazily built NFA, so a compile builds only
the states its requests reach (``compile_lazy`` in :mod:`.lazy_compile` prunes empty
sub-languages first, so every NFA state can reach acceptance); the same construction run to
completion over a built NFA (eager DFAs) is :func:`.eager_subsets.determinize_built`."""

from __future__ import annotations

import pickle
import time
from array import array
from typing import TYPE_CHECKING, Any

import numpy as np

from .closure import scc_closure, small_closure
from .compiler_config import GC_PAUSE
from .dfa import DEAD
from .dfa_paths import NO_PATH, distances_to_accept, extend_nfa_distances, longest_path, reach_max
from .errors import GrammarCompileError
from .length_product import RELAXED, CountedRow, CountedState

if TYPE_CHECKING:
    from structgen.schemas.ir import Node

    from .nfa import NFABuilder

_c_expand_state: Any
_c_expand_ahead: Any
try:  # the compiled expansion step (fsm/_lazy_expand.c); optional, see setup.py
    from ._lazy_expand import expand_ahead as _c_expand_ahead
    from ._lazy_expand import expand_state as _c_expand_state
except ImportError:  # pragma: no cover - exercised when no C compiler was available at install
    _c_expand_state = _c_expand_ahead = None

# ----------------------------------------------------------------------------- lazy determinization


SMALL_CLOSURE = 64  # closures up to this many NFA states skip the memoizing SCC search
# ... in the compiled step, up to this many: a depth-first search in C costs less than the
# Python SCC search, which still takes the longer chains (each of their exits memoized at once)
C_CLOSURE = 512
AHEAD_BATCH = 64  # states per compiled call of complete_ahead between deadline checks
# the NFA side of an unfinished automaton: pickled as one blob and loaded on first use (below)
NFA_FIELDS = ("builder", "bound_root", "edges", "eps", "has_edges", "_closures", "_nfa_dist", "_nfa_dist_n")


class LazyDFA:
    """A byte DFA whose states are built on demand by subset construction.

    State 0 is the dead state; every other state is live (can reach acceptance) because the
    NFA comes from a pruned IR.  ``table`` is ``int32 [capacity, C]`` over ``C`` byte classes
    (``class_of_byte``: ``int32 [256]``), ``-1`` in the rows of states not expanded yet.
    Expansion mutates the object but never changes the language or the meaning of a state id,
    so all queries are deterministic; callers serialize expansions (``TokenFSM`` holds a lock).
    Picklable.  ``max_states`` caps discovered states (:class:`GrammarCompileError`).
    """

    def __init__(self, builder: NFABuilder, start: int, final: int, max_states: int) -> None:
        nfa = builder.nfa
        self.builder = builder
        # byte classes must be fixed before lazily built fragments add edges: take them from
        # every byte range in the whole IR, not only from the part built so far
        cuts = sorted(nfa.bounds)
        class_of_byte = np.zeros(256, dtype=np.int32)
        for c, (a, b) in enumerate(zip(cuts, cuts[1:])):
            class_of_byte[a:b] = c
        self.class_of_byte = class_of_byte
        self._cob = class_of_byte.tolist()
        self.class_first_byte = np.array(cuts[:-1], dtype=np.int32)
        self.class_size = np.diff(np.array(cuts, dtype=np.int32))
        self.num_classes = len(cuts) - 1
        self.edges = nfa.edges
        self.eps = nfa.eps
        self.has_edges = [bool(e) for e in nfa.edges]
        self.final = final
        self.max_states = max_states
        self.index: dict[tuple[frozenset[int], bool], int] = {(frozenset(), False): 0}
        self.sets: list[frozenset[int]] = [frozenset()]
        self.acc: list[bool] = [False]
        self.table = np.full((64, self.num_classes), -1, dtype=np.int32)
        self.table[0] = 0
        self._forced: dict[int, bytes] = {0: b""}
        self._nfa_dist: list[int] = []  # NFA state -> bytes to final (distance_to_accept)
        self._nfa_dist_n = 0
        self._dfa_dist: dict[int, int] = {}  # state -> distance_to_accept, memo while incomplete
        self._dist_all = array("q")  # once complete: per state its distance_to_accept
        self.bound_root: Node | None = None  # the IR whose worst distance bounds every state's (compile_lazy)
        self._distance_bound: int | None = None  # distance_bound, once asked for
        self._bound_known = False
        self.length_bound: int | None = None  # ≥ the longest accepted string's bytes; None: unbounded
        self._closures: dict[int, tuple[frozenset[int], bool]] = {}  # NFA state -> its closure
        self.use_compiled = True  # expand (fsm/_lazy_expand.c) and extend distances (fsm/_paths.c) in C where built
        self.complete = False  # every reachable state expanded and the NFA dropped (complete_ahead)
        # once complete, per state (arrays: a shipped grammar loads each as one buffer, where a list
        # is an object per state): its one forced byte, else -1; the largest distance it can reach
        self._single = array("h")
        self._reach = array("q")
        self._row_plans: dict[int, CountedRow | None] = {}  # state -> counted_row (once complete: the plans alone)
        self._apart: dict[int, bool] = {}  # plain occurrence -> its exit reads no byte of its strings
        self.initial = self._state_of(self._closure([start]))

    def __getstate__(self) -> dict[str, Any]:
        """The state, the NFA side of an unfinished automaton (:data:`NFA_FIELDS`: the NFA
        builder, its edge lists and closures, hundreds of thousands of small objects) as one
        pickled blob, loaded by the first attribute access that needs it: a grammar shipped
        unfinished costs its receiver that load only once it expands a state or extends its
        NFA distances, never for serving the states already built.  Its transition table
        travels without the spare capacity past the states discovered."""
        state = self.__dict__.copy()
        if not self.complete:
            state["table"] = self.table[: len(self.sets)]  # the built rows (a view pickles its rows alone); the copy grows its own capacity
            if "_nfa_blob" not in state:
                state["_nfa_blob"] = pickle.dumps({k: state.pop(k) for k in NFA_FIELDS}, protocol=pickle.HIGHEST_PROTOCOL)
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)

    if not TYPE_CHECKING:  # a fallback for the NFA fields alone, hidden from the type checker

        def __getattr__(self, name: str) -> Any:
            blob = self.__dict__.get("_nfa_blob")
            if blob is None or name not in NFA_FIELDS:
                raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")
            with GC_PAUSE.paused():  # hundreds of thousands of small objects: no collector passes over them midway
                self.__dict__.update(pickle.loads(blob))
            self.__dict__.pop("_nfa_blob", None)
            return self.__dict__[name]

    @property
    def nfa_loaded(self) -> bool:
        """False while the NFA side of a shipped, unfinished automaton is still a blob."""
        return "_nfa_blob" not in self.__dict__

    @property
    def num_states(self) -> int:
        """States discovered so far (including the dead state 0)."""
        return self.table.shape[0] if self.complete else len(self.sets)

    def is_empty(self) -> bool:
        return self.initial == DEAD

    def _closure(self, seeds: list[int]) -> tuple[frozenset[int], bool]:
        """Epsilon closure of ``seeds``: (members with byte edges, whether ``final`` is reached).

        Single-state closures are memoized: once the stubs met on the way are expanded, no
        epsilon list reachable from a state changes again, so a closure never goes stale.
        """
        if len(seeds) == 1:
            return self._closure_one(seeds[0])
        parts = [self._closure_one(q) for q in seeds]
        return frozenset().union(*(p[0] for p in parts)), any(p[1] for p in parts)

    def _closure_one(self, seed: int) -> tuple[frozenset[int], bool]:
        """Closure of one NFA state (:func:`.closure.small_closure`, else the memoizing
        :func:`.closure.scc_closure`), memoized; stubs met on the way are expanded."""
        memo = self._closures
        got = memo.get(seed)
        if got is not None:
            return got
        pending, expand = self.builder.pending, self._expand_stub
        got = small_closure(seed, self.eps, pending, expand, self.has_edges, self.final, SMALL_CLOSURE)
        if got is not None:
            memo[seed] = got
            return got
        return scc_closure(seed, memo, self.eps, pending, expand, self.has_edges, self.final)

    def build_fragments(self, deadline: float, max_nfa_states: int | None = None) -> int:
        """Build the NFA fragments still pending, oldest first, until none is left,
        ``time.perf_counter()`` passes ``deadline`` or the NFA holds ``max_nfa_states`` (default
        a quarter of its state cap; the rest stay lazy).  Later expansions find them built, and
        so does every copy of this automaton shipped to another process (an engine and a row
        worker would otherwise each build them again).  Same language, same DFA states.
        Returns the fragments built; callers serialize it with expansions."""
        if self.complete:
            return 0
        builder = self.builder
        pending = builder.pending
        cap = builder.budget.max_nfa_states // 4 if max_nfa_states is None else max_nfa_states
        built = 0
        sizes: dict[int, tuple[Node, int]] = {}  # eager NFA states per IR node
        while len(self.eps) < cap and time.perf_counter() < deadline:
            # the pairs of a lazy length product stay lazy: built whole, they would be the product
            q = next((q for q, (node, _x) in pending.items() if not isinstance(node, CountedState)), None)
            if q is None:
                break
            room = cap - len(self.eps)
            # whole when it fits (no stubs inside to expand one by one), else one level as a closure would
            self._expand_stub(q, eager=builder.lengths.eager_states(pending[q][0], room, sizes) <= room)
            built += 1
        return built

    def complete_ahead(self, deadline: float, max_states: int) -> bool:
        """Expand every state reachable from the initial one now, in discovery order (e.g. on a
        compile process before the automaton is shipped), until all are (True),
        ``time.perf_counter()`` passes ``deadline`` or the states discovered could pass
        ``max_states`` or half the automaton's own cap (False; what was expanded stays, and the
        cap is never reached here: the rest is left to the states requests reach).  Once all
        are, each state's distance to acceptance and single forced byte are read off the table
        and the NFA is dropped (``complete``): queries read the table alone, nothing is
        expanded again, and a pickled copy carries no NFA state sets to rebuild.  Same
        language, same state ids.  Callers serialize it with expansions."""
        if self.complete:
            return True
        limit = min(max_states, self.max_states // 2)
        products = self.builder.length_products
        if products is not None:  # every position will be expanded: a plain string's far positions in one go
            products.ahead = max(limit - len(self.sets), 0)
        try:
            done = self._expand_all(deadline, limit)
        finally:
            if products is not None:
                products.ahead = 0
        if not done:
            return False
        self._row_plans = {k: v for k, v in self._row_plans.items() if v is not None}
        n = len(self.sets)
        self.table = np.ascontiguousarray(self.table[:n])
        acc = np.array(self.acc, dtype=bool)
        dist = distances_to_accept(self.table, acc)
        self._dfa_dist = {}
        self._dist_all = array("q", dist.tolist())
        self._reach = array("q", reach_max(self.table, dist).tolist())
        live = self.table != DEAD  # [n, C]
        first = live.argmax(axis=1)  # [n] the first live class
        one = (live.sum(axis=1) == 1) & (self.class_size[first] == 1) & ~acc  # [n] one byte leads on
        self._single = array("h", np.where(one, self.class_first_byte[first], -1).tolist())
        self.complete = True
        self.builder = self.sets = self.index = self.edges = self.eps = self.has_edges = self.bound_root = None  # type: ignore[assignment]
        self._closures, self._nfa_dist, self._nfa_dist_n = {}, [], 0
        return True

    def _expand_all(self, deadline: float, limit: int) -> bool:
        """:meth:`complete_ahead`'s expansion: every state and the relaxed states of its row
        plans, until none is left (True) or past ``deadline`` or ``limit`` states (False)."""
        s = planned = 1
        while True:
            if s >= len(self.sets):
                n = len(self.sets)
                if not self._plan_rows(planned):  # the plans' relaxed states expanded too
                    return True
                planned = n
            if time.perf_counter() > deadline or len(self.sets) + self.num_classes > limit:
                return False
            if self.use_compiled and _c_expand_ahead is not None:
                s = self.expand_batch(s, limit)
            else:
                self.expand(s)
                s += 1

    def expand_batch(self, first: int, limit: int) -> int:
        """Expand up to :data:`AHEAD_BATCH` states from ``first`` on in one compiled call (the
        fragments and large closures it meets built here in between, as :meth:`expand` does);
        returns the first state not expanded."""
        self._make_room()
        s, got = _c_expand_ahead(
            first, AHEAD_BATCH, limit, self.sets, self.acc, self.index, self.table, self.edges, self.class_of_byte,
            self.num_classes, self.eps, self.has_edges, self.builder.pending, self.final, self._closures, C_CLOSURE,
            self.max_states,
        )  # fmt: skip
        if got is not None:
            self._unblock(got)
        return s

    def row_representative(self, state: int, token_bytes: int) -> int:
        """A state with ``state``'s mask row: itself, or, where ``state`` holds pairs of a lazy
        length product far from their bound (:meth:`.length_product.LengthProducts.row_swaps`),
        the state with those pairs relaxed (no count: no token can meet the bound from them),
        so that one trie walk serves every position far from the bound instead of one per
        character, and discovers relaxed pairs only instead of a pair per state and count."""
        products = None if self.complete else self.builder.length_products
        if products is None or not products.occurrences:
            return state
        members = self.sets[state]
        swaps = products.row_swaps(members, token_bytes)
        if not swaps:
            return state
        new = set(members)
        for s, occ, pair_state in swaps:
            q = products.stub(self.builder, occ, pair_state, RELAXED)
            if q in self.builder.pending:
                self._expand_stub(q)
            new.discard(s)
            new.add(products.entry(self.builder, occ, pair_state, RELAXED))
        return self._state_of((frozenset(new), bool(self.acc[state])))

    def counted_row(self, state: int) -> CountedRow | None:
        """How ``state``'s mask row follows from another's: where its NFA states are one pair of
        a plain length product on a character boundary with ``count`` characters read, plus
        exactly what that pair's exit reaches (a bounded string's position and nothing else),
        the relaxed state (that pair with no bound, the same exit) and the characters left:
        ``state``'s row is the relaxed row less the tokens needing more
        (:class:`~.counted_rows.CharNeeds`).  None for any other state.  Memoized; on a
        complete automaton, the plans made before its NFA was dropped.  Callers serialize it
        with expansions (it may build the relaxed state)."""
        if self.complete or state in self._row_plans:
            return self._row_plans.get(state)
        plan = self._row_plans[state] = self._plan_row(state)
        return plan

    def _plan_row(self, state: int) -> CountedRow | None:
        products = self.builder.length_products
        if products is None or not products.has_plain:
            return None
        members = self.sets[state]
        got = products.plain_pair(members)
        if got is None:
            return None
        occ, count, entry = got
        automaton, exit_ = products.occurrences[occ]
        rest = members - {entry}
        if rest != self._closure([exit_])[0] or not self._exit_apart(occ, rest):
            return None  # other NFA states beside the pair, or an exit that could read string bytes
        q = products.stub(self.builder, occ, automaton.initial, RELAXED)
        if q in self.builder.pending:
            self._expand_stub(q)
        relaxed = self._state_of((rest | {products.entry(self.builder, occ, automaton.initial, RELAXED)}, bool(self.acc[state])))
        return CountedRow(relaxed, automaton.hi - count, automaton)

    def _exit_apart(self, occ: int, exit_members: frozenset[int]) -> bool:
        """Whether no byte that continues occurrence ``occ``'s strings also leads out of its
        exit (a JSON string's closing quote never does): a token's split between the string
        and what follows is then its first byte outside the string."""
        got = self._apart.get(occ)
        if got is None:
            assert self.builder.length_products is not None
            body = self.builder.length_products.body_bytes(occ)
            got = not any(b in body for q in exit_members for lo, hi, _t in self.edges[q] for b in range(lo, hi + 1))
            self._apart[occ] = got
        return got

    def _plan_rows(self, first: int) -> bool:
        """Plan the row (:meth:`counted_row`) of every state from ``first`` on before the NFA
        goes; True when that discovered states (relaxed ones) still to expand."""
        products = self.builder.length_products
        if products is None or not products.has_plain:
            return False
        n = len(self.sets)
        for state in range(first, n):
            self.counted_row(state)
        return len(self.sets) > n

    def _expand_stub(self, q: int, *, eager: bool = False) -> None:
        """Build the pending fragment at NFA state ``q`` (``eager``: whole) and note which new
        states have byte edges."""
        self.builder.expand_stub(q, eager=eager)
        self.has_edges.extend(map(bool, self.edges[len(self.has_edges) :]))

    def _state_of(self, key: tuple[frozenset[int], bool]) -> int:
        d = self.index.get(key)
        if d is not None:
            return d
        d = len(self.sets)
        if d >= self.max_states:
            raise GrammarCompileError(f"automaton exceeds max_states={self.max_states} DFA states")
        if d >= self.table.shape[0]:
            self._grow(d + 1)
        self.index[key] = d
        self.sets.append(key[0])
        self.acc.append(key[1])
        return d

    def _grow(self, rows: int) -> None:
        """Make ``table`` hold at least ``rows`` states (doubling; new rows unexpanded)."""
        cap = self.table.shape[0]
        while cap < rows:
            cap *= 2
        if cap > self.table.shape[0]:
            grow = np.full((cap - self.table.shape[0], self.num_classes), -1, dtype=np.int32)
            self.table = np.concatenate([self.table, grow])

    def expand(self, state: int) -> np.ndarray:
        """The transition row of ``state`` (``int32 [C]``), computing it on first use: in C
        (``fsm/_lazy_expand.c``) where it is built, with the fragments its closures reach built
        and closures past ``C_CLOSURE`` NFA states searched here in between; else in
        Python (:meth:`_expand_py`).  Same language either way; new states may be numbered in
        another order."""
        row = self.table[state]
        if row[0] >= 0:
            return row
        if self.use_compiled and _c_expand_state is not None:
            while True:
                self._make_room()
                got = _c_expand_state(
                    state, self.sets, self.acc, self.index, self.table, self.edges, self.class_of_byte, self.num_classes,
                    self.eps, self.has_edges, self.builder.pending, self.final, self._closures, C_CLOSURE, self.max_states,
                )  # fmt: skip
                if got is None:
                    return self.table[state]
                self._unblock(got)
        return self._expand_py(state)

    def _make_room(self) -> None:
        """Room in ``table`` for the states one compiled step may add (one per byte class)."""
        if self.table.shape[0] < len(self.sets) + self.num_classes:
            self._grow(len(self.sets) + self.num_classes)

    def _unblock(self, got: int | bool) -> None:
        """Do what a compiled step handed back before it can go on: False, the state cap
        (``GrammarCompileError``); s ≥ 0, build the pending fragment at NFA state s; -(s + 1),
        the memoizing SCC search for the large closure of s."""
        if got is False:
            raise GrammarCompileError(f"automaton exceeds max_states={self.max_states} DFA states")
        if got >= 0:
            self._expand_stub(got)
        else:
            self._closure_one(-got - 1)

    def _expand_py(self, state: int) -> np.ndarray:
        """:meth:`expand` in Python, for a state not expanded yet: the reference, and the path
        where the extension is not built."""
        moves: dict[int, list[int]] = {}
        edges, cob = self.edges, self._cob
        for q in self.sets[state]:
            for lo, hi, t in edges[q]:
                for c in range(cob[lo], cob[hi] + 1):
                    lst = moves.get(c)
                    if lst is None:
                        moves[c] = [t]
                    else:
                        lst.append(t)
        new = [DEAD] * self.num_classes
        by_target: dict[int, int] = {}  # one NFA target (most classes) -> DFA state
        by_targets: dict[tuple[int, ...], int] = {}
        for c, targets in moves.items():
            if len(targets) == 1:
                t = targets[0]
                d = by_target.get(t)
                if d is None:
                    d = by_target[t] = self._state_of(self._closure(targets))
            else:
                tkey = tuple(sorted(set(targets)))
                d = by_targets.get(tkey)
                if d is None:
                    d = by_targets[tkey] = self._state_of(self._closure(list(tkey)))
            new[c] = d
        self.table[state] = new
        return self.table[state]

    def is_accepting(self, state: int) -> bool:
        return self.acc[state]

    def next_state(self, state: int, byte: int) -> int:
        return int(self.expand(state)[self.class_of_byte[byte]])

    def walk(self, state: int, data: bytes) -> int:
        """State after ``data`` from ``state`` (0 if it dies)."""
        for b in data:
            state = self.next_state(state, b)
            if state == DEAD:
                return DEAD
        return state

    def accepts(self, data: bytes) -> bool:
        s = self.walk(self.initial, data)
        return s != DEAD and self.acc[s]

    def forced(self, state: int) -> bytes:
        """The longest byte string every accepted continuation from ``state`` starts with."""
        got = self._forced.get(state)
        if got is not None:
            return got
        chain: list[tuple[int, int]] = []
        cur = state
        seen = set()
        while cur not in self._forced and not self.acc[cur] and cur not in seen:
            seen.add(cur)
            if self.complete:  # each state's one forced byte is known
                b = self._single[cur]
                if b < 0:
                    break
                chain.append((cur, b))
                cur = int(self.table[cur, self._cob[b]])
                continue
            row = self.expand(cur)
            live = np.flatnonzero(row != DEAD)
            if len(live) != 1 or self.class_size[live[0]] != 1:
                break
            chain.append((cur, int(self.class_first_byte[live[0]])))
            cur = int(row[live[0]])
        tail = self._forced.setdefault(cur, b"")  # accepting, branching, or already known
        for st, b in reversed(chain):
            tail = bytes([b]) + tail
            self._forced[st] = tail
        return self._forced[state]

    def max_length(self, state: int | None = None) -> int | None:
        """Bytes in the longest accepted string from ``state`` (default: the initial state), or
        None when the language from there is infinite (a cycle is reachable: every state is
        live, so any reachable cycle repeats forever).  Expands every reachable state; the
        state cap raises ``GrammarCompileError`` as in any expansion.  Deterministic.  Raises
        ``ValueError`` for a state the automaton has not discovered."""
        start = self.initial if state is None else state
        if not 0 <= start < self.num_states:
            raise ValueError(f"state {start} is not a discovered automaton state (0..{self.num_states - 1})")
        if start == DEAD:
            return None
        return longest_path(start, lambda q: [t for t in np.unique(self.expand(q)).tolist() if t != DEAD], self.acc)

    @property
    def distance_bound(self) -> int | None:
        """An upper bound on every state's :meth:`distance_to_accept` (``NO_PATH`` when some
        state may have none within it), or None where no bound is known; worked out the first
        time it is asked for, not by the compile (a first mask does not need it): once the
        automaton is complete, the largest exact distance (:meth:`reach_bound` of the initial
        state); before, the worst distance within the compiled IR
        (:meth:`~.node_lengths.NodeLengths.worst_distance`).  Callers serialize it with
        expansions (it may build the IR's products)."""
        if not self._bound_known:
            if self.complete:  # every state is reachable from the initial one
                self._distance_bound = self.reach_bound(self.initial)
            elif self.bound_root is not None:
                try:
                    self._distance_bound = self.builder.lengths.worst_distance(self.bound_root)
                except RecursionError:  # an IR deeper than the stack: no bound, exact distances serve
                    self._distance_bound = None
            self._bound_known = True
        return self._distance_bound

    def reach_bound(self, state: int) -> int | None:
        """The largest :meth:`distance_to_accept` among the states ``state`` can reach, itself
        included (:func:`~.dfa_paths.reach_max`), once the automaton is complete; None before.  Pure query."""
        return self._reach[state] if self._reach else None

    def distance_to_accept(self, state: int) -> int:
        """Bytes in the shortest accepted continuation from ``state`` (0 when accepting;
        ``NO_PATH`` for the dead state).  Exact: NFA shortest paths where a fragment not built
        yet costs its language's exact shortest length (:meth:`~.node_lengths.NodeLengths.shortest`), so building
        it later never changes a known distance.  Memoized; updating the NFA distances costs
        O(states and edges added since the last call).  Callers serialize it with expansions.
        Raises ``ValueError`` for a state the automaton has not discovered."""
        if not 0 <= state < self.num_states:
            raise ValueError(f"state {state} is not a discovered automaton state (0..{self.num_states - 1})")
        if self.acc[state]:
            return 0
        if self.complete:
            return self._dist_all[state]
        got = self._dfa_dist.get(state)
        if got is not None:
            return got
        if self._nfa_dist_n != len(self.eps):
            self._extend_nfa_dist()
        dist = self._nfa_dist
        out = min((dist[q] for q in self.sets[state]), default=NO_PATH)
        self._dfa_dist[state] = out
        return out

    def prepare_distances(self) -> None:
        """Bring the NFA distances behind :meth:`distance_to_accept` up to date now (e.g. after an
        eager expansion, so later queries cost a lookup).  Callers serialize it with expansions."""
        if not self.complete and self._nfa_dist_n != len(self.eps):
            self._extend_nfa_dist()

    def _extend_nfa_dist(self) -> None:
        """Distances to ``final`` for the NFA states added since the last call
        (:func:`~.dfa_paths.extend_nfa_distances`)."""
        n1 = len(self.eps)
        shortest = self.builder.lengths.shortest
        pending, n0 = self.builder.pending, self._nfa_dist_n
        extend_nfa_distances(self._nfa_dist, self.eps, self.edges, self.final, n0, pending, shortest, use_compiled=self.use_compiled)
        self._nfa_dist_n = n1


def has_compiled_expansion() -> bool:
    """Whether the compiled expansion steps (``fsm/_lazy_expand.c``) are built."""
    return _c_expand_ahead is not None and _c_expand_state is not None

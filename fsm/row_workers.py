"""``RowWorkers``: worker processes that compute first-visit mask rows off the serving process.

A cold grammar (a schema seen for the first time) meets a new automaton state at nearly every
step of every request, and each new state's mask row is a walk of the whole vocabulary trie
that expands automaton states in Python.  Done inline, a batch of cold requests pays those
walks one after another on the engine thread.  Here each grammar compiled on the compile
processes is also loaded (as the pickled FSM the compile produced) into one of ``N`` row
worker processes; the engine keeps its own copy for everything else (advance, jump-forward,
budgets) and, once per step, sends every missing row of the batch to the workers holding those
grammars, all workers at once, and stores what comes back (:func:`fill_rows`).  Where a
request's token budget binds (``max_tokens`` nearer than its automaton's bounds), the worker
also computes the state's budget rows (:meth:`BudgetRows.rows_bytes`), which would
otherwise walk the state's successors on the engine thread.

A worker's copy discovers its automaton states in its own order, so engine states are named to
it by a token path from a state it already knows (:meth:`TokenFSM.witness_path`); replaying
the path on the worker's copy reaches an equivalent state (same residual language, so the same
row).  Rows are bit-identical to rows computed inline.  Whatever a worker cannot answer (it
died, timed out, no longer holds the grammar, or the walk raised) is computed inline as before,
so a late or failed worker never changes a mask, only where it is computed.

The pattern is the one of vLLM's and SGLang's grammar backends (mask work for a batch in
parallel, off the step's critical Python thread), with processes instead of native threads
because our walk expands the automaton in Python.
"""

from __future__ import annotations

import gc
import multiprocessing
import multiprocessing.connection
import os
import pickle
import queue
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from multiprocessing.connection import Connection
from typing import Any, NamedTuple

from .token_fsm import TokenFSM
from .vocab import Vocabulary

WORKER_GRAMMARS = 512  # grammars a row worker keeps (LRU); the engine falls back inline beyond
REPLY_TIMEOUT_S = 30.0  # a worker silent this long is declared dead (its rows computed inline)
WAIT_SLICE_S = 0.0002  # rows_outstanding(until=...) checks ``until`` at least this often


class RowSource:
    """Where a :class:`TokenFSM`'s rows are computed: ``workers`` (the pool), ``index`` (the
    worker process), ``key`` (the grammar's name there), ``known`` (engine states whose
    worker-side equivalent the worker has recorded)."""

    __slots__ = ("index", "key", "known", "workers")

    def __init__(self, workers: RowWorkers, index: int, key: str, initial: int) -> None:
        self.workers = workers
        self.index = index
        self.key = key
        self.known: set[int] = {initial}


class RowWorkerStats(NamedTuple):
    """Counters of a :class:`RowWorkers` pool since it started: ``fills`` (collections that
    stored rows or waited: one per sample, plus those of :meth:`RowWorkers.collect_ready`),
    ``rows`` and ``budget_rows`` (states whose mask row, or budget rows, the workers computed),
    ``busy_s`` (seconds the workers spent on them, replaying paths included, summed over
    workers), ``critical_s`` (per fill, the longest single answer's ``busy`` among those
    collected, summed over fills), ``wait_s`` (seconds the collecting thread blocked for
    answers) and ``reply_bytes`` (rows received)."""

    fills: int = 0
    rows: int = 0
    budget_rows: int = 0
    busy_s: float = 0.0
    critical_s: float = 0.0
    wait_s: float = 0.0
    reply_bytes: int = 0

    def minus(self, earlier: RowWorkerStats) -> RowWorkerStats:
        """The counts between ``earlier`` and these (a benchmark run's share)."""
        return RowWorkerStats(
            self.fills - earlier.fills,
            self.rows - earlier.rows,
            self.budget_rows - earlier.budget_rows,
            self.busy_s - earlier.busy_s,
            self.critical_s - earlier.critical_s,
            self.wait_s - earlier.wait_s,
            self.reply_bytes - earlier.reply_bytes,
        )


RowWant = tuple[TokenFSM, int, "int | None"]
"""A row wanted: (FSM, engine state, tokens the request may still emit or None: no budget)."""
_Ask = tuple[TokenFSM, RowSource, list[tuple[int, int, int]], list[int], list[int]]  # fsm, its source, token paths, states, budget states


class RowWorkers:
    """``processes`` spawned worker processes, each with its own copy of ``vocab``, serving
    mask rows of the grammars :meth:`attach`-ed to them.  Thread-safe.  Raises
    ``ValueError`` for ``processes`` < 1."""

    def __init__(self, vocab: Vocabulary, processes: int) -> None:
        if processes < 1:
            raise ValueError(f"processes must be >= 1, got {processes}")
        self.vocab = vocab
        self.processes = processes
        self._conns: list[Connection | None] = []
        self._procs: list[Any] = []
        self._send_locks = [threading.Lock() for _ in range(processes)]
        self._fill_lock = threading.Lock()
        self._pending: dict[int, list[list[_Ask]]] = {}  # per worker, the asks of each message not answered yet
        self._asked: set[tuple[int, int]] = set()  # (fsm uid, state) asked for and not collected yet
        self._next = 0
        self._started = False
        self._start_lock = threading.Lock()
        self._stats = RowWorkerStats()

    def start(self, timeout_s: float = 120.0) -> None:
        """Spawn the workers (once) and wait until each has loaded the vocabulary.  Raises
        ``TimeoutError`` past ``timeout_s``."""
        with self._start_lock:
            if self._started:
                return
            ctx = multiprocessing.get_context("spawn")  # never fork a process that may hold CUDA
            for _ in range(self.processes):  # small arguments: start() returns before the child has imported anything
                mine, theirs = ctx.Pipe(duplex=True)
                proc = ctx.Process(target=_worker_main, args=(theirs,), daemon=True, name="structgen-rows")
                proc.start()
                theirs.close()
                self._conns.append(mine)
                self._procs.append(proc)
            vocab = pickle.dumps(self.vocab, protocol=pickle.HIGHEST_PROTOCOL)  # pickled once, for every worker
            for conn in self._conns:
                assert conn is not None
                conn.send_bytes(vocab)
            for i, conn in enumerate(self._conns):
                assert conn is not None
                if not conn.poll(timeout_s) or conn.recv() != "ready":
                    self.close()
                    raise TimeoutError(f"row worker {i} did not start within {timeout_s} s")
            self._started = True

    def pids(self) -> list[int | None]:
        """Each worker's process id (None for one not started or dropped), in worker order."""
        return [p.pid if c is not None else None for p, c in zip(self._procs, self._conns)]

    def attach(self, fsm: TokenFSM, key: str, path: str) -> bool:
        """Have a worker load the grammar in the file ``path`` (the pickled state of ``fsm``
        without its vocabulary, as the compile process wrote it; the worker removes the file)
        and route ``fsm``'s missing rows there.  False when no worker took it (the file is
        the caller's again)."""
        self.start()
        index = self._next % self.processes
        self._next += 1
        if not self._send(index, ("load", key, path)):
            return False
        fsm.track_witnesses()
        fsm.row_source = RowSource(self, index, key, fsm.initial)
        return True

    def request(self, wanted: Sequence[RowWant]) -> int:
        """Send the missing rows of ``wanted`` (:data:`RowWant` triples whose FSM this pool
        serves; budget rows where :meth:`BudgetRows.walk_needed`) to the workers without
        waiting: each starts on them at once, while the caller goes on (the engine asks once
        a step's sampled tokens are processed, then collects them all with :meth:`fill` at the
        next sample).  Returns the rows asked for."""
        asks = self._asks(wanted)
        asked = 0
        with self._fill_lock:
            for i, items in asks.items():
                if self._send(i, ("rows", [(src.key, path, states, budget) for _f, src, path, states, budget in items])):
                    self._pending.setdefault(i, []).append(items)
                    for fsm, _src, _path, states, _budget in items:
                        self._asked.update((fsm.uid, s) for s in states)
                        asked += len(states)
        return asked

    def fill(self, wanted: Sequence[RowWant]) -> int:
        """Ask for the missing rows of ``wanted`` not asked for yet, then wait for every
        answer outstanding (all workers in parallel) and store the rows in their FSMs.  Returns
        the rows stored; the others are left to inline computation."""
        self.request(wanted)
        return self._collect(block=True)

    def collect_ready(self) -> int:
        """Store the answers the workers have already sent (never waits); the others stay
        outstanding.  Returns the rows stored."""
        return self._collect(block=False)

    def outstanding(self, wanted: Sequence[RowWant]) -> list[bool]:
        """For each of ``wanted`` (in order), whether its row (or budget rows) is still being
        computed by a worker of this pool: asked for (now, if it was not yet), not answered.
        Answers already sent are stored first (:meth:`collect_ready`); never waits.  False for
        wants this pool does not serve."""
        self.request(wanted)
        self.collect_ready()
        with self._fill_lock:
            asked = self._asked
            return [fsm.row_source is not None and fsm.row_source.workers is self and (fsm.uid, state) in asked
                    for fsm, state, _left in wanted]  # fmt: skip

    def has_pending(self) -> bool:
        """Whether any answer is outstanding (rows asked for and not collected yet)."""
        return bool(self._pending)

    def wait_answer(self, timeout_s: float) -> None:
        """Return once a worker with an answer outstanding has sent something, or after
        ``timeout_s`` seconds (at once when none is outstanding)."""
        with self._fill_lock:
            conns = [c for i, c in enumerate(self._conns) if i in self._pending and c is not None]
        if conns:
            multiprocessing.connection.wait(conns, timeout_s)

    def _collect(self, block: bool) -> int:
        """Store the answers outstanding, in each worker's order: all of them (waiting, up to
        ``REPLY_TIMEOUT_S`` per worker) when ``block``, else those already sent."""
        stored = budgets = nbytes = 0
        busy = critical = wait = 0.0
        with self._fill_lock:
            for i in list(self._pending):
                messages = self._pending[i]
                while messages:
                    conn = self._conns[i]
                    if not block and conn is not None and not conn.poll(0):
                        break
                    items = messages.pop(0)
                    t0 = time.perf_counter()
                    reply = self._recv(i)
                    wait += time.perf_counter() - t0
                    replies, seconds = reply if reply is not None else ([None] * len(items), 0.0)
                    busy += seconds
                    critical = max(critical, seconds)
                    n, b, nb = self._store(items, replies)
                    stored, budgets, nbytes = stored + n, budgets + b, nbytes + nb
                if not messages:
                    del self._pending[i]
            if stored or wait:
                old = self._stats
                self._stats = RowWorkerStats(old.fills + 1, old.rows + stored - budgets, old.budget_rows + budgets,
                                             old.busy_s + busy, old.critical_s + critical, old.wait_s + wait,
                                             old.reply_bytes + nbytes)  # fmt: skip
        return stored

    def _store(self, items: list[_Ask], replies: list[Any]) -> tuple[int, int, int]:
        """One worker message's answers into their FSMs (caller holds the fill lock): the
        states stored, those of them with budget rows, the bytes.  An item answered None (the
        worker died, evicted the grammar, or its walk raised) turns that FSM's rows inline."""
        stored = budgets = nbytes = 0
        for (fsm, _src, _path, states, budget), rows in zip(items, replies):
            self._asked.difference_update((fsm.uid, s) for s in states)
            if rows is None:  # dead, evicted there, or the walk raised: inline from now on, as without workers
                fsm.row_source = None
                continue
            for state, row in zip(states, rows):
                if isinstance(row, bytes):
                    fsm.put_row(state, row)
                    nbytes += len(row)
                else:
                    fsm.budgets.put(state, *row)
                    nbytes += sum(map(len, row[1]))
            stored += len(states)
            budgets += len(budget)
        return stored, budgets, nbytes

    @property
    def rows_served(self) -> int:
        """States whose mask row or budget rows the workers computed."""
        stats = self.stats()
        return stats.rows + stats.budget_rows

    def stats(self) -> RowWorkerStats:
        """The pool's counters (:class:`RowWorkerStats`)."""
        with self._fill_lock:
            return self._stats

    def _asks(self, wanted: Sequence[RowWant]) -> dict[int, list[_Ask]]:
        """Per worker, the asks for the rows of ``wanted`` that are missing and not asked for
        yet: each FSM's token paths to its states (from states the worker knows), the states,
        and those of them whose budget rows are wanted too."""
        asks: dict[int, list[_Ask]] = {}
        per_fsm: dict[int, _Ask] = {}
        for fsm, state, left in wanted:
            src = fsm.row_source
            if src is None or src.workers is not self or (fsm.uid, state) in self._asked:
                continue
            budget = fsm.budgets.walk_needed(state, left)
            if fsm.has_row(state) and not budget:
                continue
            entry = per_fsm.get(fsm.uid)
            if entry is None:
                entry = per_fsm[fsm.uid] = (fsm, src, [], [], [])
                asks.setdefault(src.index, []).append(entry)
            if state in entry[3]:
                continue
            path = fsm.witness_path(state, src.known)
            if path is None:  # a state reached another way: its row is computed inline
                continue
            entry[2].extend(path)
            src.known.update(s for s, _p, _t in path)
            entry[3].append(state)
            if budget:
                entry[4].append(state)
        return asks

    def alive(self, index: int) -> bool:
        return self._started and self._conns[index] is not None

    def _send(self, index: int, msg: Any) -> bool:
        conn = self._conns[index] if index < len(self._conns) else None
        if conn is None:
            return False
        try:
            with self._send_locks[index]:
                conn.send(msg)
            return True
        except (OSError, EOFError, ValueError):
            self._drop(index)
            return False

    def _recv(self, index: int) -> Any:
        conn = self._conns[index]
        if conn is None:
            return None
        try:
            if conn.poll(REPLY_TIMEOUT_S):
                return conn.recv()
        except (OSError, EOFError, ValueError):
            pass
        self._drop(index)
        return None

    def _drop(self, index: int) -> None:
        """A worker that failed: no more requests go to it (its grammars' rows are inline)."""
        conn, self._conns[index] = self._conns[index], None
        if conn is not None:
            conn.close()
        proc = self._procs[index] if index < len(self._procs) else None
        if proc is not None and proc.is_alive():
            proc.kill()

    def close(self) -> None:
        """Stop the workers (their grammars' rows are computed inline from then on)."""
        for i in range(len(self._conns)):
            self._send(i, ("stop",))
        for i, proc in enumerate(self._procs):
            proc.join(timeout=5)
            if proc.is_alive():
                proc.kill()
            conn = self._conns[i]
            if conn is not None:
                conn.close()
            self._conns[i] = None


def request_rows(wanted: Sequence[RowWant]) -> int:
    """Start the row workers on the missing rows of ``wanted`` (:data:`RowWant` triples)
    without waiting; :func:`fill_rows` collects them.  FSMs no pool serves are skipped.
    Returns the rows asked for."""
    return sum(w.request([wanted[j] for j in at]) for w, at in _by_pool(wanted))


def fill_rows(wanted: Sequence[RowWant]) -> int:
    """Have the row workers compute the missing rows of ``wanted`` (:data:`RowWant` triples),
    each pool in parallel; FSMs no pool serves are skipped (their rows stay inline).  Returns
    the rows stored (those asked for earlier with :func:`request_rows` included)."""
    return sum(w.fill([wanted[j] for j in at]) for w, at in _by_pool(wanted))


def rows_outstanding(wanted: Sequence[RowWant], until: Callable[[], bool] | None = None) -> list[bool]:
    """For each of ``wanted`` (:data:`RowWant` triples, in order), whether a row worker is
    still computing its row: missing rows are asked for now and answers already sent are
    stored (:meth:`RowWorkers.outstanding`).  Without ``until`` nothing waits; with it, the
    answers are waited for until they are all in or ``until()`` is true (e.g. the GPU's forward
    has finished: a row that comes in before that costs nothing).  False where the FSM's rows
    are computed inline or already known."""
    late = [False] * len(wanted)
    waiting = list(range(len(wanted)))
    while True:
        for j in waiting:
            late[j] = False  # unless a pool that still serves it says otherwise
        for workers, at in _by_pool([wanted[j] for j in waiting]):
            for k, out in zip(at, workers.outstanding([wanted[waiting[k]] for k in at])):
                late[waiting[k]] = out
        waiting = [j for j in waiting if late[j]]
        if until is None or not waiting or until():
            return late
        src = wanted[waiting[0]][0].row_source
        if src is not None:
            src.workers.wait_answer(WAIT_SLICE_S)


def _by_pool(wanted: Sequence[RowWant]) -> list[tuple[RowWorkers, list[int]]]:
    """The live pools serving ``wanted``, each with the positions of the wants it serves."""
    pools: dict[int, tuple[RowWorkers, list[int]]] = {}
    for j, want in enumerate(wanted):
        src = want[0].row_source
        if src is not None and src.workers.alive(src.index):
            pools.setdefault(id(src.workers), (src.workers, []))[1].append(j)
    return list(pools.values())


def _worker_main(conn: Connection) -> None:
    """A row worker: first the pickled vocabulary (then ``"ready"`` once its trie is built);
    then ``("load", key, path)`` keeps the grammar pickled in file ``path`` (and removes the
    file; one it cannot read is skipped, its rows then computed inline); ``("rows", [(key, path,
    states, budget states), ...])`` replays each path on the worker's copy (engine state → its
    own) and answers (per item, the rows of ``states`` as bytes, or (cuts, rows as bytes) for
    the budget states, None when the grammar is not held or the walk raised; the seconds it
    took); ``("stop",)``
    ends it.  A reader thread (:func:`_read_all`) takes every
    message off the pipe as it arrives."""
    vocab: Vocabulary = pickle.loads(conn.recv_bytes())
    vocab.prepare()
    fsms: OrderedDict[str, tuple[TokenFSM, dict[int, int]]] = OrderedDict()
    # the vocabulary and every grammar loaded are frozen out of the collector's passes (long
    # lived; a loaded grammar holds no reference cycles, so an evicted one still goes by
    # reference counting): its passes over the grammars held would cost more than the rows,
    # and it stays on for the small cycles expansions leave behind (see fsm.compiler_config.GcPause)
    gc.collect()
    gc.freeze()
    inbox: queue.SimpleQueue[Any] = queue.SimpleQueue()
    threading.Thread(target=_read_all, args=(conn, inbox), daemon=True).start()
    conn.send("ready")
    while True:
        msg = inbox.get()
        if msg[0] == "stop":
            return
        if msg[0] == "load":
            _, key, path = msg
            try:
                with open(path, "rb") as f:
                    blob = f.read()
                os.unlink(path)
            except OSError:
                continue
            fsm = TokenFSM.__new__(TokenFSM)
            fsm.__setstate__({**pickle.loads(blob), "vocab": vocab})
            fsms[key] = (fsm, {fsm.initial: fsm.initial})
            fsms.move_to_end(key)
            while len(fsms) > WORKER_GRAMMARS:
                fsms.popitem(last=False)
            gc.collect()  # only what is not frozen yet: this grammar and the rows since the last load
            gc.freeze()
            continue
        t0 = time.perf_counter()
        rows = [_rows(fsms, key, path, states, budget) for key, path, states, budget in msg[1]]
        conn.send((rows, time.perf_counter() - t0))


def _read_all(conn: Connection, inbox: queue.SimpleQueue[Any]) -> None:
    """A row worker's reader thread: every message into ``inbox`` as it arrives (a closed
    pipe reads as ``("stop",)``), so the engine's sends never wait on this worker's own send.
    The engine writes new grammars from the thread that collects compile results while its
    loop thread reads answers only at the sample: a worker that read only between answers
    could block on sending a large answer while the engine blocks on sending it a grammar,
    and the loop thread then waits behind that send (a deadlock)."""
    while True:
        try:
            msg = conn.recv()
        except (EOFError, OSError):
            msg = ("stop",)
        inbox.put(msg)
        if msg[0] == "stop":
            return


def _rows(
    fsms: OrderedDict[str, tuple[TokenFSM, dict[int, int]]],
    key: str,
    path: list[tuple[int, int, int]],
    states: list[int],
    budget: list[int],
) -> list[bytes | tuple[list[int], list[bytes]]] | None:
    got = fsms.get(key)
    if got is None:
        return None
    fsms.move_to_end(key)
    fsm, mine = got
    try:
        for state, parent, token in path:
            nxt = fsm.next_state(mine[parent], token)
            if nxt < 0:
                return None
            mine[state] = nxt
        return [fsm.budgets.rows_bytes(mine[s]) if s in budget else fsm.mask_row(mine[s]).tobytes() for s in states]
    except Exception:
        return None

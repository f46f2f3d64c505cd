"""Compile service: constraint → :class:`TokenFSM`, with caches, limits and async compiles.

- An in-memory LRU of compiled FSMs (and of failures, so a repeated bad constraint is
  rejected at once), keyed by constraint kind, text, options, limits and the vocabulary
  fingerprint;
- an optional on-disk cache (``cache_dir``) of the pickled FSM (DFA plus the mask rows
  computed when it was stored);
- every compile runs under a :class:`~structgen.fsm.dfa.Budget` (``timeout_s``,
  ``max_states``), so none runs past its limit or exhausts memory; :meth:`submit` runs
  compiles on a worker thread and returns a ``Future``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import hashlib
import os
import pickle
import tempfile
import threading
import time
from collections import OrderedDict
from collections.abc import Iterable
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, ThreadPoolExecutor
from concurrent.futures import wait as wait_futures
from typing import Any

from structgen.schemas.errors import ConstraintError, UnsupportedSchemaError

from .compile_pool import CompileAnswer, CompilePool
from .compile_process import process_config, state_without_vocab, worker_compile, worker_init
from .compiler_config import GC_PAUSE, CompilerConfig, CompileStats
from .constraint import Constraint, located
from .dfa import Budget
from .errors import CompileWorkerError, GrammarCompileError, GrammarTimeoutError
from .lazy_compile import compile_lazy
from .product_cache import ProductCache
from .row_workers import RowWorkers
from .token_fsm import TokenFSM
from .vocab import Vocabulary


class GrammarCompiler:
    """Compiles constraints for one vocabulary.  Thread-safe."""

    def __init__(self, vocab: Vocabulary, config: CompilerConfig | None = None) -> None:
        self.vocab = vocab
        self.config = config or CompilerConfig()
        self._lru: OrderedDict[str, TokenFSM | BaseException] = OrderedDict()
        self._lock = threading.Lock()
        self._inflight: dict[str, Future[TokenFSM]] = {}
        self._pool: ThreadPoolExecutor | None = None
        self._procs: CompilePool | None = None
        self._row_workers: RowWorkers | None = None
        self._counts = {"memory_hits": 0, "disk_hits": 0, "misses": 0, "failures": 0}
        self._compile_s = 0.0
        self.products = ProductCache(self.config.product_cache_mb << 20) if self.config.product_cache_mb else None

    def cache_key(self, constraint: Constraint) -> str:
        c = self.config
        return hashlib.sha256(f"{constraint.key}|{self.vocab.fingerprint}|{c.timeout_s}|{c.max_states}".encode()).hexdigest()

    def compile(self, constraint: Constraint) -> TokenFSM:
        """Compile (or fetch) ``constraint``; the initial state's mask row is ready on return.

        Raises ``ConstraintError`` subclasses (bad schema / regex), ``GrammarCompileError``
        (state cap, empty language) or ``GrammarTimeoutError``; failures are cached too.
        """
        key = self.cache_key(constraint)
        with self._lock:
            got = self._lru.get(key)
            if got is not None:
                self._lru.move_to_end(key)
                self._counts["memory_hits"] += 1
        if isinstance(got, TokenFSM):
            return got
        fsm_or_err: TokenFSM | BaseException | None = self._fetch_or_compile(key, constraint) if got is None else got.with_traceback(None)
        got = None
        if isinstance(fsm_or_err, BaseException):
            # dropped from this frame as the exception leaves it: its traceback holds the frame,
            # and a frame holding the exception is a cycle that a frozen collector never frees
            err, fsm_or_err = fsm_or_err, None
            try:
                raise err  # a cached failure gets a fresh traceback, not one grown by every raise
            finally:
                del err
        assert fsm_or_err is not None
        return fsm_or_err

    def _fetch_or_compile(self, key: str, constraint: Constraint) -> TokenFSM | BaseException:
        """A miss of the memory LRU: the disk cache's grammar, else a compile (its failure
        returned, not raised); remembered in the LRU either way."""
        from_disk = self._load_disk(key)
        fsm_or_err: TokenFSM | BaseException | None = from_disk
        if from_disk is None:
            t0 = time.perf_counter()
            try:
                fsm_or_err = self._compile_uncached(constraint)
            except (ConstraintError, GrammarCompileError) as e:
                fsm_or_err = e
            self._compile_s += time.perf_counter() - t0
            with self._lock:
                self._counts["misses"] += 1
                if isinstance(fsm_or_err, BaseException):
                    self._counts["failures"] += 1
            if not isinstance(fsm_or_err, BaseException):
                self._store_disk(key, fsm_or_err)
        else:
            with GC_PAUSE.paused() if self.config.pause_gc else contextlib.nullcontext():
                self._precompute(from_disk, time.perf_counter())
            with self._lock:
                self._counts["disk_hits"] += 1
        assert fsm_or_err is not None
        self._remember(key, fsm_or_err)
        return fsm_or_err

    def _compile_uncached(self, constraint: Constraint) -> TokenFSM:
        with GC_PAUSE.paused() if self.config.pause_gc else contextlib.nullcontext():
            return self._compile_now(constraint)

    def _compile_now(self, constraint: Constraint) -> TokenFSM:
        started = time.perf_counter()
        budget = Budget(timeout_s=self.config.timeout_s, max_states=self.config.max_states)
        node, report = constraint.convert(check=budget.check_time)
        try:
            dfa = compile_lazy(node, budget, self.products)
        except GrammarTimeoutError as e:
            raise located(e, report) from None
        except GrammarCompileError as e:
            shallow = constraint.shallower()  # the state cap: unconstrained values nested less deeply
            if shallow is None:
                raise located(e, report) from None
            return self._compile_now(shallow)
        if dfa.is_empty():
            if report is not None and report.emptied:  # not an unsatisfiable schema: a narrowing left it empty
                keyword, pointer, why = report.emptied[0]
                raise UnsupportedSchemaError(why, keyword=keyword, pointer=pointer)
            raise GrammarCompileError("the constraint matches nothing (empty language): no output can satisfy it")
        fsm = TokenFSM(dfa, self.vocab)
        fsm.mask_row_index(fsm.initial)
        self._precompute(fsm, started)
        return fsm

    def _precompute(self, fsm: TokenFSM, started: float) -> None:
        """Eager rows per ``config.precompute_states`` (a no-op when 0 or already complete),
        stopping ``timeout_s`` or ``precompute_budget_s``, whichever is shorter, after
        ``started`` (``perf_counter`` seconds: when the compile or the disk load began)."""
        if not self.config.precompute_states or fsm.rows_complete:
            return
        budget_s = self.config.precompute_budget_s
        deadline = started + (self.config.timeout_s if budget_s is None else min(self.config.timeout_s, budget_s))
        try:
            fsm.precompute_rows(max_states=self.config.precompute_states, deadline=deadline)
        except GrammarCompileError:
            pass  # the state cap: rows past it stay lazy, and serving there raises as before

    def _remember(self, key: str, fsm_or_err: TokenFSM | BaseException) -> None:
        """Insert into the in-memory LRU (most recent last), trimming it to ``cache_size``.  A
        failure is kept without its traceback and chained exceptions: their frames held what
        the failed compile built (a state cap's automaton, tens of MB) for as long as the
        failure stayed cached."""
        if isinstance(fsm_or_err, BaseException):
            _strip(fsm_or_err)
        with self._lock:
            if self.config.cache_size:
                self._lru[key] = fsm_or_err
                self._lru.move_to_end(key)
                while len(self._lru) > self.config.cache_size:
                    self._lru.popitem(last=False)

    def evict(self, constraint: Constraint, fsm: TokenFSM) -> bool:
        """Drop ``fsm`` from the in-memory cache if it is what ``constraint`` maps to (a lazily
        built automaton that met its state cap while serving: the next request compiles a
        fresh copy instead of failing at once).  Returns whether it was dropped; the disk cache
        keeps the grammar as compiled."""
        key = self.cache_key(constraint)
        with self._lock:
            if self._lru.get(key) is not fsm:
                return False
            del self._lru[key]
            return True

    def put(self, constraint: Constraint, fsm: TokenFSM) -> None:
        """Seed the in-memory cache with ``fsm``, compiled elsewhere for ``constraint`` with
        this compiler's vocabulary (a warm start: the next :meth:`compile` of it is a hit).
        Raises ``ValueError`` when ``fsm`` was built for another vocabulary."""
        if fsm.vocab.fingerprint != self.vocab.fingerprint:
            raise ValueError("the FSM was compiled for another vocabulary (fingerprints differ)")
        self._remember(self.cache_key(constraint), fsm)

    def precompile(self, constraints: Iterable[Constraint], processes: int = 1) -> dict[str, TokenFSM | BaseException]:
        """Compile every distinct constraint into the cache ahead of traffic (a server's warm
        start), on ``processes`` worker processes when > 1 (compiles are CPU-bound Python, so
        threads would share one core).  Returns ``{constraint.key: TokenFSM or the refusal}``;
        refusals (``ConstraintError``, ``GrammarCompileError``) are cached and returned, never
        raised.  Raises ``ValueError`` for ``processes`` < 1."""
        if processes < 1:
            raise ValueError(f"processes must be >= 1, got {processes}")
        distinct: dict[str, Constraint] = {}
        for c in constraints:
            distinct.setdefault(c.key, c)
        out: dict[str, TokenFSM | BaseException] = {}
        if processes == 1 or len(distinct) < 2:
            for k, c in distinct.items():
                try:
                    out[k] = self.compile(c)
                except (ConstraintError, GrammarCompileError) as e:
                    out[k] = e
            return out
        import multiprocessing

        ctx = multiprocessing.get_context("spawn")  # never fork a process that may hold CUDA
        config = dataclasses.replace(process_config(self.config), cache_dir=None)
        with ProcessPoolExecutor(min(processes, len(distinct)), mp_context=ctx, initializer=worker_init,
                                 initargs=(self.vocab, config)) as pool:  # fmt: skip
            futures = {k: pool.submit(worker_compile, c) for k, c in distinct.items()}
            for k, fut in futures.items():
                blob, _seconds = fut.result()
                if isinstance(blob, BaseException):
                    got: TokenFSM | BaseException = blob
                else:
                    got = self._from_state(pickle.loads(blob))
                key = self.cache_key(distinct[k])
                with self._lock:
                    self._counts["misses"] += 1
                    if isinstance(got, BaseException):
                        self._counts["failures"] += 1
                self._remember(key, got)
                if isinstance(got, TokenFSM):
                    self._store_disk(key, got)
                out[k] = got
        return out

    def submit(self, constraint: Constraint) -> Future[TokenFSM]:
        """Compile on a worker thread (or, with ``config.processes``, a worker process: its
        answers are taken in by :meth:`poll`, which the engine loop calls once per step, or by
        waiting on the future); concurrent submits of one constraint share a Future.  A cached
        constraint returns a Future that is already done."""
        key = self.cache_key(constraint)
        inner: Future[CompileAnswer] | None = None
        with self._lock:
            got = self._inflight.get(key)
            if got is not None:
                return got
            if self.config.processes:
                fut, inner = self._submit_process(key, constraint)
            else:
                if self._pool is None:
                    self._pool = ThreadPoolExecutor(self.config.workers, thread_name_prefix="structgen-compile")
                fut = self._pool.submit(self.compile, constraint)
                self._inflight[key] = fut
        # callbacks outside the lock: one whose future is already done runs right here, and takes it
        if inner is not None:
            inner.add_done_callback(functools.partial(self._adopt, key, fut))
        elif not self.config.processes:
            fut.add_done_callback(functools.partial(self._forget_future, key))
        return fut

    def _submit_process(self, key: str, constraint: Constraint) -> tuple[Future[TokenFSM], Future[CompileAnswer] | None]:
        """:meth:`submit` on the worker processes: the caller's Future and the worker's (None
        for a cache hit, already answered); caller holds the lock and adopts the worker's
        result (:meth:`_adopt`) once it has released it."""
        got = self._lru.get(key)
        if got is not None:
            fut: Future[TokenFSM] = Future()
            self._lru.move_to_end(key)
            self._counts["memory_hits"] += 1
            if isinstance(got, BaseException):
                fut.set_exception(got)
            else:
                fut.set_result(got)
            return fut, None
        pool = self._processes()
        fut = pool.future()
        self._inflight[key] = fut
        return fut, pool.submit(constraint)

    def _processes(self) -> CompilePool:
        """The worker processes (spawned on first use, and again after a worker died); caller
        holds the lock."""
        if self._procs is not None and not self._procs.healthy:
            self._procs.close()
            self._procs = None
        if self._procs is None:
            config = process_config(self.config)
            if self.config.row_processes and self._row_workers is None:
                self._row_workers = RowWorkers(self.vocab, self.config.row_processes)
            self._procs = CompilePool(self.config.processes, worker_init, (self.vocab, config), worker_compile)
        return self._procs

    def poll(self) -> None:
        """Take in every answer the compile processes have sent (never blocks; a no-op without
        ``config.processes``): their futures are answered here, on the calling thread, instead
        of on helper threads that would wait for the GIL (:mod:`.compile_pool`)."""
        pool = self._procs
        if pool is not None:
            pool.poll()

    def wait(self, futures: list[Future[TokenFSM]], timeout_s: float) -> None:
        """Block until one of ``futures`` (from :meth:`submit`) may be done, or ``timeout_s``
        seconds pass."""
        pool = self._procs
        if pool is not None:
            pool.wait(timeout_s)
        elif futures:
            wait_futures(futures, timeout=timeout_s, return_when=FIRST_COMPLETED)

    def start_workers(self, timeout_s: float = 120.0) -> None:
        """Spawn the worker processes now and wait until each has loaded the vocabulary (a
        server's start-up, so the first requests never wait for a spawn).  A no-op without
        ``config.processes``.  Raises ``TimeoutError`` past ``timeout_s``."""
        if not self.config.processes:
            return
        with self._lock:
            pool = self._processes()
        pool.start(timeout_s)
        if self._row_workers is not None:
            self._row_workers.start(timeout_s)

    def _adopt(self, key: str, fut: Future[TokenFSM], inner: Future[CompileAnswer]) -> None:
        """A worker process's answer → ``fut`` (a TokenFSM on this compiler's vocabulary, or
        the refusal), cached as :meth:`compile` caches.  A dead worker fails the compile with
        ``CompileWorkerError`` (not cached) and the pool is replaced at the next submit."""
        got: TokenFSM | BaseException
        seconds = 0.0
        path = None
        try:
            blob, seconds, path = inner.result()
            if isinstance(blob, BaseException):
                got = blob
            else:  # a grammar is hundreds of thousands of small objects: the collector's passes over
                # the growing heap would cost several times the unpickling itself
                with GC_PAUSE.paused() if self.config.pause_gc else contextlib.nullcontext():
                    got = self._from_state(pickle.loads(blob))
            if self._row_workers is not None and isinstance(got, TokenFSM) and path is not None:
                try:
                    if self._row_workers.attach(got, key, path):
                        path = None  # the row worker reads and removes it
                except (OSError, TimeoutError):
                    pass  # row workers that cannot start or take it: this grammar's rows are computed inline
        except BaseException as e:  # a dead worker, or anything else a worker raised, reaches the caller unchanged
            got = e
        if path is not None:
            with contextlib.suppress(OSError):
                os.unlink(path)
        transient = isinstance(got, CompileWorkerError)  # not the constraint's fault: not cached
        with self._lock:
            self._inflight.pop(key, None)
            self._counts["misses"] += 1
            self._compile_s += seconds
            if isinstance(got, BaseException):
                self._counts["failures"] += 1
        if not transient and (not isinstance(got, BaseException) or isinstance(got, (ConstraintError, GrammarCompileError))):
            self._remember(key, got)
        if isinstance(got, BaseException):
            fut.set_exception(got)
        else:
            fut.set_result(got)

    def _forget_future(self, key: str, _fut: Future[TokenFSM]) -> None:
        self._forget(key)

    def _forget(self, key: str) -> None:
        with self._lock:
            self._inflight.pop(key, None)

    def stats(self) -> CompileStats:
        with self._lock:
            return CompileStats(compile_s=self._compile_s, **self._counts)

    def close(self) -> None:
        """Stop the worker threads (pending compiles finish first) and processes (compiles not
        answered yet are cancelled: their futures raise ``CancelledError``)."""
        if self._pool is not None:
            self._pool.shutdown(wait=True)
            self._pool = None
        with self._lock:
            procs, self._procs = self._procs, None
        if procs is not None:
            procs.close()
        rows, self._row_workers = self._row_workers, None
        if rows is not None:
            rows.close()

    @property
    def row_workers(self) -> RowWorkers | None:
        """The row worker processes (``config.row_processes``), or None."""
        return self._row_workers

    # ------------------------------------------------------------------ disk cache

    def _disk_path(self, key: str) -> str | None:
        d = self.config.cache_dir
        return None if d is None else os.path.join(d, code_digest(), key[:2], key + ".pkl")

    def _load_disk(self, key: str) -> TokenFSM | None:
        path = self._disk_path(key)
        if path is None or not os.path.exists(path):
            return None
        try:
            with open(path, "rb") as f:
                return self._from_state(pickle.load(f))
        except Exception:  # a corrupt or stale entry is recompiled
            return None

    def _from_state(self, state: dict[str, Any]) -> TokenFSM:
        """A TokenFSM from :func:`_state_without_vocab`'s output, on this compiler's vocabulary."""
        fsm = TokenFSM.__new__(TokenFSM)
        fsm.__setstate__({**state, "vocab": self.vocab})
        return fsm

    def _store_disk(self, key: str, fsm: TokenFSM) -> None:
        path = self._disk_path(key)
        if path is None:
            return
        os.makedirs(os.path.dirname(path), exist_ok=True)
        state = state_without_vocab(fsm)
        fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path))
        with os.fdopen(fd, "wb") as f:
            pickle.dump(state, f, protocol=pickle.HIGHEST_PROTOCOL)
        os.replace(tmp, path)


def _strip(exc: BaseException) -> None:
    """Drop the tracebacks of ``exc`` and of the exceptions it chains (``__cause__`` /
    ``__context__``), and the context itself; the messages stay."""
    seen: set[int] = set()
    cur: BaseException | None = exc
    while cur is not None and id(cur) not in seen:
        seen.add(id(cur))
        cur.__traceback__ = None
        nxt = cur.__cause__
        cur.__context__ = None
        cur = nxt


@functools.cache
def code_digest() -> str:
    """16 hex digits of BLAKE2b over the sources and compiled extensions of the ``fsm`` and
    ``schemas`` packages (file names and bytes): the code that decides a pickled grammar's
    layout and language.  The disk cache keeps its entries under this name, so a grammar
    pickled by another version of the code is never loaded (its objects could lack fields
    this version reads, or accept another language)."""
    from structgen import schemas

    h = hashlib.blake2b(digest_size=8)
    for folder in (os.path.dirname(os.path.abspath(__file__)), os.path.dirname(os.path.abspath(schemas.__file__))):
        for name in sorted(os.listdir(folder)):
            if name.endswith((".py", ".c", ".so", ".pyd")):
                h.update(name.encode() + b"\0")
                with open(os.path.join(folder, name), "rb") as f:
                    h.update(f.read())
    return h.hexdigest()


def compile(constraint: Constraint | str, vocab: Vocabulary | Any, *, timeout_s: float = 10.0, max_states: int = 50_000) -> TokenFSM:
    """Compile a :class:`Constraint` (or a regex string, fullmatch semantics) for ``vocab``.

    ``vocab``: a :class:`Vocabulary`, a tokenizer folder, or a ``transformers`` tokenizer.
    Returns a :class:`TokenFSM` whose initial mask row is ready.  Raises ``RegexError`` /
    ``SchemaError`` / ``UnsupportedSchemaError`` for bad constraints, ``GrammarCompileError``
    (state cap, empty language) and ``GrammarTimeoutError`` (``timeout_s``).
    """
    if not isinstance(vocab, Vocabulary):
        vocab = Vocabulary.from_tokenizer(vocab)
    if isinstance(constraint, str):
        constraint = Constraint.regex(constraint)
    compiler = GrammarCompiler(vocab, CompilerConfig(timeout_s=timeout_s, max_states=max_states, cache_size=0))
    return compiler.compile(constraint)

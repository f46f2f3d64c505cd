"""Prometheus metrics of one server (its own ``CollectorRegistry``: several apps in one process
never collide).  Exposed in the text format at ``GET /metrics``."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

from structgen.engine.request import Usage

if TYPE_CHECKING:
    from structgen.server.engine_client import EngineSnapshot

_TPOT_BUCKETS = (0.001, 0.0025, 0.005, 0.0075, 0.01, 0.015, 0.02, 0.03, 0.05, 0.075, 0.1, 0.2, 0.5, 1.0)
_LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0)


class ServerMetrics:
    """Counters and histograms of requests, tokens and compiles.

    ``queue_length``: a callable giving requests accepted and not yet answered (read at scrape
    time).  ``kv_free`` / ``radix_locked``: callables for the KV pool's free slots and the radix
    tokens pinned by running requests.  ``kv_capacity``: the KV pool's slots; ``running`` /
    ``waiting``: callables for the engine's running requests and those waiting for admission or
    for their grammar's compile (read at scrape time, without a lock: a scrape sees a recent
    step, not necessarily the current one); ``compiles``: a callable giving the engine's latest
    :class:`~structgen.server.engine_client.EngineSnapshot`, whose grammar-cache counters are
    exported as ``structgen_grammar_compiles{result=hit|miss|failure}``.
    """

    def __init__(
        self,
        queue_length: Callable[[], float],
        kv_free: Callable[[], float],
        radix_locked: Callable[[], float],
        *,
        kv_capacity: int = 0,
        running: Callable[[], float] = lambda: 0.0,
        waiting: Callable[[], float] = lambda: 0.0,
        compiles: Callable[[], EngineSnapshot] | None = None,
    ) -> None:
        self._prompt_total = 0
        self._cached_total = 0
        self.registry = reg = CollectorRegistry()
        self.requests = Counter("structgen_requests", "HTTP requests answered", ["route", "status"], registry=reg)
        self.prompt_tokens = Counter("structgen_prompt_tokens", "prompt tokens of finished requests", registry=reg)
        self.cached_tokens = Counter("structgen_cached_tokens", "prompt tokens served by the radix cache", registry=reg)
        self.completion_tokens = Counter("structgen_completion_tokens", "completion tokens generated", registry=reg)
        self.forced_tokens = Counter("structgen_forced_tokens", "completion tokens emitted by jump-forward", registry=reg)
        self.finished = Counter("structgen_finished_requests", "engine requests finished", ["finish_reason"], registry=reg)
        hit = Gauge("structgen_cache_hit_rate", "cached / prompt tokens since start", registry=reg)
        hit.set_function(self._hit_rate)
        Gauge("structgen_queue_length", "requests accepted and not yet answered", registry=reg).set_function(queue_length)
        Gauge("structgen_kv_free_tokens", "free KV-pool slots", registry=reg).set_function(kv_free)
        Gauge("structgen_radix_locked_tokens", "radix-cache tokens pinned by running requests", registry=reg).set_function(radix_locked)
        Gauge("structgen_running_requests", "requests in the engine's running batch", registry=reg).set_function(running)
        Gauge("structgen_waiting_requests", "requests waiting for admission or for their grammar", registry=reg).set_function(waiting)
        usage = Gauge("structgen_kv_usage", "fraction of KV-pool slots neither free nor evictable", registry=reg)
        usage.set_function(lambda: 1.0 - kv_free() / kv_capacity if kv_capacity else 0.0)
        self.compile_seconds = Histogram(
            "structgen_compile_seconds",
            "seconds a constrained request waited for its grammar (cache hits included)",
            buckets=_LATENCY_BUCKETS,
            registry=reg,
        )
        if compiles is not None:
            grammars = Gauge("structgen_grammar_compiles", "grammar-cache lookups of the engine since start", ["result"], registry=reg)
            grammars.labels("hit").set_function(lambda: compiles().compile_hits)
            grammars.labels("miss").set_function(lambda: compiles().compile_misses)
            grammars.labels("failure").set_function(lambda: compiles().compile_failures)
        self.ttft_seconds = Histogram("structgen_ttft_seconds", "time to first token", buckets=_LATENCY_BUCKETS, registry=reg)
        self.latency_seconds = Histogram("structgen_request_seconds", "request latency", buckets=_LATENCY_BUCKETS, registry=reg)
        self.tpot_seconds = Histogram(
            "structgen_tpot_seconds", "time per output token after the first (TPOT) per request", buckets=_TPOT_BUCKETS, registry=reg
        )

    def _hit_rate(self) -> float:
        return self._cached_total / self._prompt_total if self._prompt_total else 0.0

    def observe_usage(self, usage: Usage, finish_reason: str) -> None:
        """Account one finished engine request."""
        self._prompt_total += usage.prompt_tokens
        self._cached_total += usage.cached_tokens
        self.prompt_tokens.inc(usage.prompt_tokens)
        self.cached_tokens.inc(usage.cached_tokens)
        self.completion_tokens.inc(usage.completion_tokens)
        self.forced_tokens.inc(usage.forced_tokens)
        self.finished.labels(finish_reason).inc()
        self.ttft_seconds.observe(usage.ttft_s)
        if usage.completion_tokens > 1:
            self.tpot_seconds.observe((usage.latency_s - usage.ttft_s) / (usage.completion_tokens - 1))

    def render(self) -> bytes:
        return generate_latest(self.registry)

"""Prometheus metrics of one server (its own ``CollectorRegistry``: several apps in one process
never collide).  Exposed in the text format at ``GET /metrics``."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.core import GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector

from structgen.engine.gc_pauses import GC_PAUSE_BUCKETS, GCStats
from structgen.engine.request import Usage

if TYPE_CHECKING:
    from structgen.server.engine_client import EngineSnapshot

_TPOT_BUCKETS = (0.001, 0.0025, 0.005, 0.0075, 0.01, 0.015, 0.02, 0.03, 0.05, 0.075, 0.1, 0.2, 0.5, 1.0)
_LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0)


class ServerMetrics:
    """Counters and histograms of requests, tokens and compiles.

    ``queue_length``: a callable giving requests accepted and not yet answered; ``engine``: a
    callable giving the engine's latest
    :class:`~structgen.server.engine_client.EngineSnapshot` (both read at scrape time; a scrape
    sees a recent step, not necessarily the current one).  From the snapshot come the KV pool's
    free slots (evictable radix nodes counted free) and usage, the radix tokens pinned by running
    requests, the running and waiting requests (waiting for admission or for their grammar) and
    the grammar cache's counters, ``structgen_grammar_compiles{result=hit|miss|failure}``.
    ``gc``: a callable giving this process's collector pauses; with the engine's (from its
    snapshot) they are ``structgen_gc_pause_seconds{process=front_end|engine}`` (a histogram)
    and ``structgen_gc_longest_pause_seconds`` (one process when the engine runs on a thread
    of the front end: both label the same pauses then).
    """

    def __init__(self, queue_length: Callable[[], float], engine: Callable[[], EngineSnapshot], gc: Callable[[], GCStats]) -> None:
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

        def kv_free() -> float:
            st = engine()
            return st.kv_free + st.kv_evictable

        def kv_usage() -> float:
            capacity = engine().kv_capacity
            return 1.0 - kv_free() / capacity if capacity else 0.0

        def gauge(name: str, doc: str, fn: Callable[[], float]) -> None:
            Gauge(name, doc, registry=reg).set_function(fn)

        gauge("structgen_queue_length", "requests accepted and not yet answered", queue_length)
        gauge("structgen_kv_free_tokens", "free KV-pool slots", kv_free)
        gauge("structgen_radix_locked_tokens", "radix-cache tokens pinned by running requests", lambda: engine().radix_locked)
        gauge("structgen_running_requests", "requests in the engine's running batch", lambda: engine().running)
        gauge(
            "structgen_waiting_requests", "requests waiting for admission or for their grammar", lambda: engine().waiting + engine().grammar
        )
        gauge("structgen_kv_usage", "fraction of KV-pool slots neither free nor evictable", kv_usage)
        grammars = Gauge("structgen_grammar_compiles", "grammar-cache lookups of the engine since start", ["result"], registry=reg)
        grammars.labels("hit").set_function(lambda: engine().compile_hits)
        grammars.labels("miss").set_function(lambda: engine().compile_misses)
        grammars.labels("failure").set_function(lambda: engine().compile_failures)
        self.compile_seconds = Histogram(
            "structgen_compile_seconds",
            "seconds a constrained request waited for its grammar (cache hits included)",
            buckets=_LATENCY_BUCKETS,
            registry=reg,
        )
        reg.register(_GCPauseCollector({"front_end": gc, "engine": lambda: engine().gc}))
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


class _GCPauseCollector(Collector):
    """The collector pauses of each named process, read at scrape time."""

    def __init__(self, sources: dict[str, Callable[[], GCStats]]) -> None:
        self.sources = sources

    def collect(self) -> Iterator[Metric]:
        pauses = HistogramMetricFamily("structgen_gc_pause_seconds", "garbage-collector pauses since start", labels=["process"])
        longest = GaugeMetricFamily("structgen_gc_longest_pause_seconds", "longest garbage-collector pause since start", labels=["process"])
        for name, read in self.sources.items():
            st = read()
            cumulative = list(itertools.accumulate(st.counts))
            buckets = [(str(bound), float(c)) for bound, c in zip(GC_PAUSE_BUCKETS, cumulative)] + [("+Inf", float(cumulative[-1]))]
            pauses.add_metric([name], buckets, st.pause_s)
            longest.add_metric([name], st.longest_s)
        yield pauses
        yield longest

"""Benchmark harness: ``structgen bench json`` (workloads, runs, reports, baselines),
``structgen bench conformance`` and the engine step profiler.  Nothing below the CLI imports it."""

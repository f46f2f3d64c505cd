"""``structgen bench json``: metric computations on synthetic timings, and a tiny CPU run end to end."""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

import pytest

from structgen.bench.common import percentile
from structgen.bench.json_bench import MODES, mode_config
from structgen.bench.report import Record, summarize
from structgen.bench.workloads import build_workload
from structgen.engine.engine import EngineConfig


def _rec(ttft: float, latency: float, tokens: int, *, forced: int = 0, prompt: int = 10, cached: int = 0, valid: bool = True) -> Record:
    return Record(prompt, cached, tokens, forced, tokens - forced, ttft, latency, "stop" if valid else "length", valid)


def test_percentile_nearest_rank() -> None:
    assert percentile([], 0.5) != percentile([], 0.5)  # NaN
    assert percentile([5.0], 0.99) == 5.0
    values = [float(i) for i in range(1, 101)]  # 1..100
    assert percentile(values, 0.5) == 51.0  # index round(0.5 * 99) = 50 (banker's rounding of 49.5)
    assert percentile(values, 0.99) == 99.0
    assert percentile(values, 0.0) == 1.0 and percentile(values, 1.0) == 100.0


def test_summarize_on_synthetic_timings() -> None:
    records = [
        _rec(0.100, 1.100, 11, forced=5, prompt=100, cached=50),  # TPOT (1.1 - 0.1) / 10 = 100 ms
        _rec(0.200, 0.600, 5, forced=1, prompt=100, cached=0),  # TPOT 0.4 / 4 = 100 ms
        _rec(0.300, 0.300, 1, prompt=100, valid=False),  # one token: no TPOT
        Record(0, 0, 0, 0, 0, 0.0, 0.0, "error", False),  # rejected: counted, not timed
    ]
    s = summarize(records, wall_s=2.0, peak_mem_bytes=3 * 2**20)
    assert s["requests"] == 4
    assert s["req_per_s"] == pytest.approx(1.5)  # 3 served in 2 s
    assert s["out_tok_per_s"] == pytest.approx(17 / 2)
    assert s["tpot_p50_ms"] == pytest.approx(100.0) and s["tpot_p99_ms"] == pytest.approx(100.0)
    assert s["ttft_p50_ms"] == pytest.approx(200.0) and s["ttft_p99_ms"] == pytest.approx(300.0)
    assert s["forced_share"] == pytest.approx(6 / 17)
    assert s["cache_hit_rate"] == pytest.approx(50 / 300)
    assert s["validity"] == pytest.approx(2 / 4)
    assert s["forwards_per_req"] == pytest.approx((6 + 4 + 1) / 3)
    assert s["peak_gpu_mem_mb"] == pytest.approx(3.0)
    assert s["length_share"] == pytest.approx(1 / 3)  # the one-token request ended on max_tokens
    assert s["stopped_invalid"] == 0
    empty = summarize([], wall_s=1.0)
    assert empty["req_per_s"] == 0.0 and math.isnan(empty["ttft_p50_ms"])


def test_requests_per_level() -> None:
    from structgen.bench.json_bench import requests_at

    assert requests_at(512, 1, 0) == 512  # no waves: every level runs them all
    assert [requests_at(512, c, 2) for c in (1, 16, 64, 256)] == [4, 32, 128, 512]
    assert requests_at(100, 64, 4) == 100


def test_modes_and_workloads_are_validated() -> None:
    base = EngineConfig()
    assert mode_config(base, "no-jump-forward")[0].scheduler.jump_forward is False
    assert mode_config(base, "no-radix")[0].scheduler.radix_cache is False
    assert mode_config(base, "unconstrained")[1] is False
    assert mode_config(base, "no-cuda-graph")[0].cuda_graph is False
    assert mode_config(base, "prefill-auto")[0].prefill_kernel == "auto" and base.prefill_kernel == "fa2"
    assert not mode_config(base, "no-extend-as-decode")[0].extend_as_decode and base.extend_as_decode
    assert set(MODES) >= {"default", "unconstrained"}
    both = mode_config(base, "prefill-auto+no-extend-as-decode+defer-late-rows")[0]
    assert both.prefill_kernel == "auto" and not both.extend_as_decode and both.scheduler.defer_late_rows
    assert mode_config(base, "no-radix+unconstrained") == (mode_config(base, "no-radix")[0], False)
    for bad in ("default+no-radix", "prefill-auto+fast", "prefill-fa2"):
        with pytest.raises(ValueError, match="unknown mode"):
            mode_config(base, bad)
    with pytest.raises(ValueError, match="unknown mode"):
        mode_config(base, "fast")
    with pytest.raises(ValueError, match="unknown workload"):
        build_workload("poems", 2, 0)
    chars = build_workload("character", 3, 0)
    assert len(chars) == 3 and "Harry Potter" in chars[0].prompt and chars[0].constraint.kind == "regex"
    shared = build_workload("shared-prefix", 3, 0)
    common = os.path.commonprefix([r.prompt for r in shared])  # noqa: RUF071 (a character prefix is meant)
    assert len(common) > 1500 and common.count("\nJSON: ") == 4  # the 4 worked examples


def test_cli_tiny_cpu_run_end_to_end(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from structgen.cli import main

    out = tmp_path / "bench"
    argv = ["bench", "json", "--workload", "character,extraction", "--modes", "default,no-jump-forward,unconstrained"]
    argv += ["--num-requests", "3", "--concurrency", "1", "3", "--device", "cpu", "--out", str(out), "--no-progress"]
    argv += ["--baselines", "hf-xgrammar"]
    assert main(argv) == 0
    lines = (out / "results.jsonl").read_text().splitlines()
    meta = json.loads(lines[0])["meta"]
    assert {"command", "machine", "commit", "model", "date"} <= set(meta)
    rows = [json.loads(x) for x in lines[1:] if "meta" not in json.loads(x)]
    assert len(rows) == 2 * (3 + 1) * 2  # workloads × (modes + baseline) × concurrency levels
    assert "transformers generate() + xgrammar" in meta["baseline hf-xgrammar"]
    assert {r["mode"] for r in rows} == {"default", "no-jump-forward", "unconstrained", "hf-xgrammar"}
    for r in rows:
        assert r["requests"] == 3 and r["req_per_s"] > 0
        if r["mode"] != "unconstrained":
            assert r["validity"] == 1.0  # constrained outputs are valid (the demo model finishes within max_tokens)
    jf = {(r["workload"], r["mode"]): r for r in rows if r["concurrency"] == 1}
    assert jf[("character", "default")]["forced_share"] > 0.5
    assert jf[("character", "no-jump-forward")]["forced_share"] == 0.0
    assert jf[("character", "default")]["forwards_per_req"] < jf[("character", "no-jump-forward")]["forwards_per_req"]
    md = (out / "results.md").read_text()
    assert md.count("\n| character |") == 8 and "TPOT p99 ms" in md
    for png in ("throughput.png", "tpot.png", "forced_share.png"):
        assert (out / png).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "results.jsonl" in capsys.readouterr().out
    assert all(len(r["tpots_ms"]) <= r["requests"] for r in rows)
    assert all(not r["warm_grammars"] and r["compile_s"] == 0.0 for r in rows)  # cold: compiles count in the runs
    engine_rows = [r for r in rows if r["mode"] != "hf-xgrammar"]
    assert all((r["compile_mean_ms"] > 0) == (r["mode"] != "unconstrained") for r in engine_rows)  # each run's engine compiles anew
    assert all("compile_mean_ms" not in r for r in rows if r["mode"] == "hf-xgrammar")  # the engine's compiles only
    assert "compile mean ms" in md
    more = ["bench", "json", "--workload", "character", "--modes", "default,unconstrained", "--num-requests", "2", "--concurrency", "2"]
    more += ["--baselines", "hf-xgrammar", "--warm-grammars"]
    assert main([*more, "--device", "cpu", "--out", str(out), "--no-progress", "--append"]) == 0
    md = (out / "results.md").read_text()
    assert "Part 1:" in md and "Part 2:" in md and md.count("\n| character |") == 11
    part2 = [json.loads(x) for x in (out / "results.jsonl").read_text().splitlines()[len(lines) :]]
    warm = {r["mode"]: r for r in part2 if "meta" not in r}
    assert set(warm) == {"default", "unconstrained", "hf-xgrammar"} and all(r["warm_grammars"] for r in warm.values())
    assert warm["default"]["compile_s"] > 0 and warm["hf-xgrammar"]["compile_s"] > 0  # compiled before the clock
    assert warm["unconstrained"]["compile_s"] == 0.0 and warm["default"]["validity"] == 1.0
    assert warm["default"]["compile_mean_ms"] == 0.0  # every grammar of the timed run was compiled before it
    bad = [
        (["--workload", "nope"], "unknown workload 'nope'"),
        (["--concurrency", "0"], "concurrency levels must be ≥ 1"),
        (["--num-requests", "0"], "num_requests must be ≥ 1"),
        (["--baselines", "vllm"], "unknown baseline 'vllm'"),
        (["--shots", "0"], "shots must be ≥ 1"),
        (["--waves", "-1"], "waves must be ≥ 0"),
        (["--maskbench-dir", str(out / "nope")], "is not a folder"),
    ]
    for args, message in bad:
        assert main(["bench", "json", *args, "--out", str(out)]) == 2, args
        assert message in capsys.readouterr().err, args
    assert main(["bench", "json", "--config", "llama3-8b", "--out", str(out)]) == 2
    assert "--random-weights" in capsys.readouterr().err


def test_max_tokens_cover_the_longest_accepted_output(tiny_vocab: object) -> None:
    """Finite languages get max_tokens = longest output in bytes + 1 (EOS), capped; unbounded
    ones keep theirs; the byte DFA's max_length is exact on small regexes."""
    from structgen.fsm import Constraint, GrammarCompiler

    from structgen.bench.workloads import BenchRequest, bound_max_tokens

    compiler = GrammarCompiler(tiny_vocab)  # type: ignore[arg-type]
    cases = {r"abc": 3, r"a{2,5}": 5, r"(ab|c)d?": 3, r"é{1,2}": 4, r"a*": None, r"[0-9]{1,3}(\.[0-9]+)?": None}
    for rx, n in cases.items():
        assert compiler.compile(Constraint.regex(rx)).dfa.max_length() == n, rx
    schema = {"type": "object", "properties": {"a": {"type": "string", "maxLength": 3}}, "required": ["a"], "additionalProperties": False}
    n = compiler.compile(Constraint.json_schema(schema)).dfa.max_length()
    assert n == len('{"a": "') + 3 * len("\\u0000") + len('"}')  # three escaped control characters
    reqs = [BenchRequest("p", Constraint.regex(rx), 8) for rx in (r"a{2,5}", r"a*", r"a{1,100}", r"b{1,3000}")]
    got = bound_max_tokens(reqs, lambda c: compiler.compile(c).dfa.max_length(), cap=1000)
    assert [r.max_tokens for r in got] == [8, 8, 101, 1000]  # never lowered; unbounded kept; capped
    # unbounded languages cover their shortest output when min_length is given
    long_min = [BenchRequest("p", Constraint.regex(r"a{20}b*"), 8), BenchRequest("p", Constraint.regex(r"ab*"), 8)]
    shortest = lambda c: compiler.compile(c).distance(compiler.compile(c).initial)  # noqa: E731
    got = bound_max_tokens(long_min, lambda c: compiler.compile(c).dfa.max_length(), cap=1000, min_length=shortest)
    assert [r.max_tokens for r in got] == [21, 8]
    with pytest.raises(ValueError, match="cap must be >= 1"):
        bound_max_tokens(reqs, lambda c: 3, cap=0)


def test_compile_check_bounds_the_longest_output_without_expanding(tiny_vocab: object) -> None:
    """bench json's check gives the compile's length bound: at least the exact longest output
    (the full expansion's) and close to it, None for unbounded or refused constraints, and the
    automaton stays as lazy as the compile left it."""
    from structgen.fsm import CompilerConfig, Constraint, GrammarCompiler

    from structgen.bench.json_bench import _CompileCheck

    check = _CompileCheck(tiny_vocab, CompilerConfig())  # type: ignore[arg-type]
    exact = GrammarCompiler(tiny_vocab)  # type: ignore[arg-type]
    schemas = [
        {"type": "object", "properties": {"a": {"type": "string", "maxLength": 3}}, "required": ["a"], "additionalProperties": False},
        {"enum": ["x", "yy", {"k": [1, 2]}]},
        {"type": "array", "items": {"type": "boolean"}, "maxItems": 3},
    ]
    for schema in schemas:
        c = Constraint.json_schema(schema)
        assert check(c)
        states = check.compiler.compile(c).dfa.num_states
        bound = check.max_length(c)
        assert check.compiler.compile(c).dfa.num_states == states, schema  # nothing expanded
        longest = exact.compile(c).dfa.max_length()
        assert longest is not None and bound is not None and longest <= bound <= longest + 4, (schema, bound, longest)
    assert check.max_length(Constraint.regex(r"a*")) is None
    assert check.max_length(Constraint.json_schema({"type": "strin"})) is None


def test_bound_schema_adds_bounds_only_where_missing() -> None:
    from structgen.bench.workloads import bound_schema

    schema = {
        "type": "object",
        "properties": {
            "s": {"type": "string", "minLength": 40},
            "t": {"type": "string", "maxLength": 3},
            "e": {"type": "string", "enum": ["x"]},
            "xs": {"type": "array", "items": {"type": ["integer", "null"]}},
            "n": {"type": "number", "exclusiveMinimum": 0},
        },
    }
    b = bound_schema(schema, max_length=16, max_items=4, magnitude=100)
    p = b["properties"]
    assert p["s"]["maxLength"] == 40 and p["t"] == {"type": "string", "maxLength": 3} and "maxLength" not in p["e"]
    assert p["xs"]["maxItems"] == 4 and p["xs"]["items"] == {"type": ["integer", "null"], "minimum": -100, "maximum": 100}
    assert p["n"] == {"type": "number", "exclusiveMinimum": 0, "maximum": 100}
    assert "maxLength" not in schema["properties"]["s"]  # the input is not modified


def test_hf_baselines_share_the_engine_weights_and_give_valid_outputs(tiny_llama_dir: str) -> None:
    """The transformers twin decodes exactly what the engine decodes (same weights, greedy), and
    both grammar baselines give valid, well-formed records."""
    import torch
    from structgen.fsm import Constraint

    from structgen.bench.baselines import HFBaseline, load_hf_twin
    from structgen.bench.workloads import BenchRequest
    from structgen.engine.engine import Engine
    from structgen.engine.request import GenerateRequest, SamplingParams

    cfg = EngineConfig(device="cpu", dtype="float32")
    with Engine(tiny_llama_dir, cfg) as engine:
        prompt = "The quick brown fox"
        text = engine.generate([GenerateRequest(prompt, SamplingParams(max_tokens=12))])[0].text
        model, _ = load_hf_twin(tiny_llama_dir, device=torch.device("cpu"), dtype="float32")
        ids = engine.tokenize(prompt)
        out = model.generate(
            torch.tensor([ids]), attention_mask=torch.ones(1, len(ids), dtype=torch.long), max_new_tokens=12, do_sample=False
        )
        assert engine.tokenizer.decode(out[0, len(ids) :]) == text
        schema = {"type": "object", "properties": {"c": {"enum": ["red", "green"]}, "ok": {"type": "boolean"}}, "required": ["c", "ok"]}
        reqs = [
            BenchRequest("Pick: ", Constraint.regex(r"(yes|no) [a-c]{1,3}"), 16),
            BenchRequest("A longer prompt that pads the other row: ", Constraint.json_schema(schema), 24),
            BenchRequest("Bad: ", Constraint.regex(r"(?=x)"), 8),  # refused by both libraries
        ]
        for name in ("hf-xgrammar", "hf-outlines-core"):
            b = HFBaseline(name, model, engine.tokenizer, engine.vocab, engine.eos_token_ids)
            records, wall = b.run(reqs, concurrency=3)
            assert wall > 0 and len(records) == 3
            assert [r.valid for r in records] == [True, True, False], name
            assert records[2].finish_reason == "error"
            for r in records[:2]:
                assert r.finish_reason == "stop" and 0 < r.ttft_s <= r.latency_s and r.forwards >= r.completion_tokens
                assert r.prompt_tokens == len(engine.tokenize(reqs[records.index(r)].prompt))
        slow = HFBaseline("hf-outlines-core", model, engine.tokenizer, engine.vocab, engine.eos_token_ids, compile_timeout_s=1e-4)
        timed_out, _ = slow.run([BenchRequest("x", Constraint.regex(r"[a-z]{1,60}@[a-z]{1,40}\.com"), 8)], concurrency=1)
        assert timed_out[0].finish_reason == "error" and not timed_out[0].valid
        with pytest.raises(ValueError, match="unknown baseline"):
            HFBaseline("vllm", model, engine.tokenizer, engine.vocab, engine.eos_token_ids)


def test_cli_reads_maskbench_from_the_given_folder(tmp_path: Path) -> None:
    """--maskbench-dir is the only source of MaskBench schemas (regression: the engine runs
    once read the default ../shared folder)."""
    from structgen.cli import main

    data = tmp_path / "mb"
    data.mkdir()
    for i, enum in enumerate((["a", "b"], ["x", "y"])):
        (data / f"s{i}.json").write_text(json.dumps({"schema": {"type": "object", "properties": {"k": {"enum": enum}}, "required": ["k"]}}))
    out = tmp_path / "bench"
    argv = ["bench", "json", "--workload", "maskbench", "--maskbench-dir", str(data), "--modes", "default", "--num-requests", "2"]
    assert main([*argv, "--concurrency", "2", "--device", "cpu", "--out", str(out), "--no-progress"]) == 0
    rows = [json.loads(x) for x in (out / "results.jsonl").read_text().splitlines() if '"meta"' not in x]
    assert len(rows) == 1 and rows[0]["requests"] == 2 and rows[0]["validity"] == 1.0
    assert not (out / "requests-maskbench.jsonl").exists()
    distinct = tmp_path / "distinct"
    assert (
        main(
            [
                *argv,
                "--distinct-schemas",
                "--save-requests",
                "--concurrency",
                "2",
                "--device",
                "cpu",
                "--out",
                str(distinct),
                "--no-progress",
            ]
        )
        == 0
    )
    saved = [json.loads(x) for x in (distinct / "requests-maskbench.jsonl").read_text().splitlines()]
    schemas = [json.loads(r["text"]) for r in saved]
    assert [r["kind"] for r in saved] == ["json_schema"] * 2 and all(r["max_tokens"] >= 1 for r in saved)
    assert [sorted(s["properties"]) for s in schemas] == [["k", "ref_0_0"], ["k", "ref_0_1"]]  # one new optional name each
    assert all(s["required"] == ["k"] for s in schemas)
    rows = [json.loads(x) for x in (distinct / "results.jsonl").read_text().splitlines() if '"meta"' not in x]
    assert rows[0]["validity"] == 1.0
    empty = tmp_path / "empty"
    empty.mkdir()
    assert main([*argv[:5], str(empty), *argv[6:], "--concurrency", "1", "--device", "cpu", "--out", str(out), "--no-progress"]) == 0
    assert "skipped maskbench: no requests (data absent)" in (out / "results.md").read_text()


def test_profile_breaks_each_step_into_phases(tmp_path: Path) -> None:
    """--profile writes one profile.md section per engine run, whose phases add up to at most
    the wall time, and leaves the shared model runner unwrapped afterwards."""
    from structgen.api import default_model_path
    from structgen.bench.json_bench import BenchConfig, bench_json
    from structgen.bench.step_profile import StepProfiler
    from structgen.engine.engine import Engine
    from structgen.engine.request import GenerateRequest, SamplingParams

    out = tmp_path / "prof"
    config = BenchConfig(
        workloads=("character",), modes=("default", "no-jump-forward"), concurrency=(2,), num_requests=2,
        out_dir=str(out), progress=False, profile=True, command="test",
    )  # fmt: skip
    bench_json(default_model_path(), config, EngineConfig(device="cpu"))
    md = (out / "profile.md").read_text()
    assert md.count("## character · ") == 2 and "| eager |" in md and "outside" in md
    assert "| of it: grammar poll ms | of it: mask rows ms |" in md

    with Engine(default_model_path(), EngineConfig(device="cpu")) as engine:
        prof = StepProfiler()
        assert engine.scheduler.overlap
        prof.attach(engine)
        assert not engine.scheduler.overlap  # a synchronizing observer runs without the overlap scheduler
        with pytest.raises(RuntimeError, match="already attached"):
            prof.attach(engine)
        outs = engine.generate([GenerateRequest("Name: ", SamplingParams(max_tokens=6))] * 2)
        prof.detach()
        assert engine.scheduler.overlap and engine.observer is None
        assert "forward" not in vars(engine.runner) and "schedule" not in vars(engine.scheduler)
        assert all(o.usage.completion_tokens > 0 for o in outs)
        assert len(prof.steps) == engine.stats().forwards
        assert all(s.kind == "eager" and s.requests >= 1 and s.tokens >= s.requests for s in prof.steps)
        assert all(0 <= s.poll_s and 0 < s.rows_s and s.poll_s + s.rows_s <= s.sample_s for s in prof.steps)  # parts of the sample
        s = prof.summary(wall_s=100.0)
        inside = s["schedule_s"] + s["forward_s"] + s["sample_s"] + s["process_s"]
        assert 0 < inside <= 100.0 and math.isclose(s["outside_s"], 100.0 - inside)
        assert s["kinds"]["eager"]["steps"] == len(prof.steps)
        assert set(s["gc"]) == {0, 1, 2}
        import gc

        full = s["gc"][2]["count"]
        prof.attach(engine)
        gc.collect()
        prof.detach()
        gc.collect()  # detached: not recorded
        assert prof.gc_pauses[-1][0] == 2 and prof.summary(1.0)["gc"][2]["count"] == full + 1
        assert prof._on_gc not in gc.callbacks


def test_profile_reports_the_row_workers_share() -> None:
    """A profile of an engine with row workers says what they computed, how long they were
    busy and how long the sample waited for them (per collection)."""
    from structgen.fsm import RowWorkerStats

    from structgen.bench.step_profile import profile_markdown

    run = RowWorkerStats(fills=6, rows=40, budget_rows=2, busy_s=0.3, critical_s=0.06, wait_s=0.012, reply_bytes=3 << 20)
    summary = {"kinds": {}, "wall_s": 1.0, "schedule_s": 0.1, "forward_s": 0.5, "sample_s": 0.2, "process_s": 0.1,
               "outside_s": 0.1, "gc": {}, "row_workers": run.minus(RowWorkerStats(fills=1))._asdict()}  # fmt: skip
    md = profile_markdown("t", summary)
    assert "Row workers: 5 collections, 40 mask rows and 2 states' budget rows (3.0 MiB)" in md
    assert "busy 0.300 s" in md and "12.00 ms (mean)" in md and "blocked on them 0.012 s (2.40 ms per collection)" in md
    assert "Row workers" not in profile_markdown("t", {**summary, "row_workers": None})


def test_modes_that_change_the_runner_get_a_runner_of_their_own(tmp_path: Path) -> None:
    """A runner-level mode (a kernel setting) runs on a runner built for it, never on the shared
    one that would ignore the setting; modes sharing the runner's settings run together first."""
    from structgen.api import default_model_path
    from structgen.bench.json_bench import BenchConfig, bench_json

    config = BenchConfig(
        workloads=("character",), modes=("default", "no-extend-as-decode", "no-jump-forward"), concurrency=(2,), num_requests=2,
        out_dir=str(tmp_path), progress=False, command="test",
    )  # fmt: skip
    rows = bench_json(default_model_path(), config, EngineConfig(device="cpu"))
    assert [r["mode"] for r in rows] == ["default", "no-jump-forward", "no-extend-as-decode"]
    assert all(r["requests"] == 2 and r["validity"] == 1.0 for r in rows)

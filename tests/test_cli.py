from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from structgen.cli import main

from .conftest import GPT2_DIR


def test_compile_command_checks_an_instance(capsys: pytest.CaptureFixture[str]) -> None:
    schema = '{"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}'
    assert main(["compile", "--tokenizer", GPT2_DIR, "--schema", schema, "--instance", '{"n": 5}']) == 0
    out = capsys.readouterr().out
    assert "accepted: True" in out and "with jump-forward" in out
    assert main(["compile", "--tokenizer", GPT2_DIR, "--schema", schema, "--instance", '{"n": "x"}']) == 1
    assert "accepted: False" in capsys.readouterr().out
    # the literal text is checked; another spelling of an accepted value says so
    assert main(["compile", "--tokenizer", GPT2_DIR, "--schema", schema, "--instance", '{ "n":5 }']) == 1
    out = capsys.readouterr().out
    assert "accepted: False" in out and "spelling of the same value is accepted" in out


@pytest.mark.parametrize(
    "args,message",
    [
        (["--regex", "a(?<=bc|d)"], "look-behind of other than a fixed number of characters is not supported"),
        (["--schema", '{"type": "array", "uniqueItems": true}'], "keyword 'uniqueItems' at #"),
        (["--schema", '{"type": "str'], "schema is not valid JSON"),
        (["--schema", '{"type": "integer"}', "--instance", "{nope"], "--instance is not JSON"),
    ],
)
def test_compile_command_bad_input_is_a_clear_error(args: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["compile", "--tokenizer", GPT2_DIR, *args]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


def test_missing_tokenizer_folder_is_a_clear_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["compile", "--tokenizer", "/nonexistent", "--regex", "a"]) == 2
    assert "tokenizer folder not found" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--precompute-states", "-1"], "precompute_states must be >= 0"),
        (["--precompute-budget-s", "0"], "precompute_budget_s must be > 0"),
        (["--timeout-s", "0"], "timeout_s must be > 0"),
        (["--workers", "0"], "workers must be >= 1"),
    ],
)
def test_conformance_bad_limits_are_a_clear_error(
    args: list[str], message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Checked before any worker process starts (a bad limit used to fail in every worker)."""
    argv = ["bench", "conformance", "--tokenizer", GPT2_DIR, "--suites", "maskbench", "--maskbench", str(tmp_path), *args]
    assert main([*argv, "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


def test_conformance_run_checks_pause_gc(tmp_path: Path) -> None:
    from structgen.bench.conformance import run

    with pytest.raises(ValueError, match="pause_gc must be a bool"):
        run(tokenizer=GPT2_DIR, suites=["maskbench"], test_suite_root=None, maskbench_root=str(tmp_path), out_dir=str(tmp_path),
            pause_gc="off")  # type: ignore[arg-type]  # fmt: skip


SUBCOMMANDS = [
    [],
    ["compile"],
    ["generate"],
    ["demo"],
    ["serve"],
    ["bench"],
    ["bench", "json"],
    ["bench", "conformance"],
    ["bench", "peers"],
]


@pytest.mark.parametrize("args", SUBCOMMANDS)
def test_python_m_structgen_help(args: list[str]) -> None:
    """``python -m structgen`` runs the same CLI; every subcommand's ``--help`` works."""
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-P", "-m", "structgen", *args, "--help"], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("usage: structgen") and "--help" in out.stdout


def test_the_checkout_root_on_the_import_path_is_a_clear_error() -> None:
    """Run from the checkout's root without ``-P``, the checkout's ``kernels/`` folder is the
    top-level ``kernels``: where Hugging Face's ``kernels`` package is installed (transformers
    imports it to read a model config) the commands say so and how to run instead; with
    ``-P`` (or elsewhere) nothing is shadowed."""
    import importlib.metadata
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[1]
    try:
        importlib.metadata.version("kernels")
        installed = True
    except importlib.metadata.PackageNotFoundError:
        installed = False
    code = "from structgen.cli import shadowed_kernels; print(shadowed_kernels())"
    for flags, shadowed in (([], installed), (["-P"], False)):
        out = subprocess.run([sys.executable, *flags, "-c", code], cwd=root, capture_output=True, text=True, timeout=120)
        assert out.returncode == 0, out.stderr
        assert ("python -P -m structgen" in out.stdout) == shadowed and ("None" in out.stdout) == (not shadowed), out.stdout
    if installed:
        out = subprocess.run([sys.executable, "-m", "structgen", "demo"], cwd=root, capture_output=True, text=True, timeout=120)
        assert out.returncode == 2 and "shadows the Hugging Face 'kernels' package" in out.stderr, out.stderr


def test_conformance_unknown_anchor_is_a_clear_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["bench", "conformance", "--tokenizer", GPT2_DIR, "--suites", "maskbench", "--maskbench", str(tmp_path)]
    assert main([*argv, "--anchors", "outlines", "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert "unknown anchor 'outlines'" in err and "Traceback" not in err


def test_conformance_shards_merge_into_the_whole_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Two shards merged report what one run over every schema reports (timings aside)."""
    data = tmp_path / "data"
    data.mkdir()
    for k in range(5):
        schema = {"type": "integer", "multipleOf": 3 + k} if k % 2 else {"type": "string", "maxLength": k}
        (data / f"s{k}.json").write_text(json.dumps({"schema": schema, "tests": [{"data": 6, "valid": k % 2 == 1 and 6 % (3 + k) == 0}]}))
    base = ["bench", "conformance", "--tokenizer", GPT2_DIR, "--suites", "maskbench", "--maskbench", str(data), "--workers", "1",
            "--anchors", "none", "--samples", "1"]  # fmt: skip
    assert main([*base, "--out", str(tmp_path / "whole")]) == 0
    for i in range(2):
        assert main([*base, "--shard", f"{i}/2", "--out", str(tmp_path / "parts")]) == 0
    shards = sorted(str(p) for p in (tmp_path / "parts").glob("*.shard-*.json"))
    assert len(shards) == 2
    assert main(["bench", "conformance", "--merge", *shards, "--out", str(tmp_path / "merged")]) == 0
    whole = json.loads((tmp_path / "whole" / "conformance-gpt2.json").read_text())["suites"]["maskbench"]
    merged = json.loads((tmp_path / "merged" / "conformance-gpt2.json").read_text())["suites"]["maskbench"]
    for key in ("schemas", "compiled", "passing", "unsupported", "soundness_violations_instances"):
        assert merged[key] == whole[key], key
    assert merged["schemas"] == 5
    capsys.readouterr()
    assert main(["bench", "conformance", "--merge", shards[0], "--out", str(tmp_path / "bad")]) == 2
    assert "expected shards" in capsys.readouterr().err
    assert main([*base, "--shard", "2/2", "--out", str(tmp_path / "bad")]) == 2
    assert "--shard '2/2'" in capsys.readouterr().err


def test_conformance_runs_the_anchors_on_the_same_instances(tmp_path: Path) -> None:
    """llguidance and xgrammar compile the same schemas and walk the same instances; a keyword
    one of them cannot express shows up as its refusal or its unsound instances, never ours."""
    pytest.importorskip("llguidance")
    pytest.importorskip("xgrammar")
    from structgen.bench.conformance import run

    data = tmp_path / "data"
    data.mkdir()
    items = {
        "plain": ({"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}, [({"a": 1}, True), ({}, False)]),
        "not": ({"type": "integer", "not": {"enum": [1, 2]}}, [(3, True), (1, False)]),
    }
    for name, (schema, tests) in items.items():
        (data / f"{name}.json").write_text(json.dumps({"schema": schema, "tests": [{"data": d, "valid": v} for d, v in tests]}))
    out = run(tokenizer=GPT2_DIR, suites=["maskbench"], test_suite_root=None, maskbench_root=str(data), out_dir=str(tmp_path / "o"),
              workers=1, samples=1, anchors=("llguidance", "xgrammar"), progress=False)  # fmt: skip
    s = out["suites"]["maskbench"]
    assert s["passing"] == 2 and s["soundness_violations_instances"] == 0
    for anchor in ("llguidance", "xgrammar"):
        a = s["anchors"][anchor]
        assert a["schemas"] == 2 and a["compiled"] + a["unsupported"] + a["errors"] == 2
        assert a["valid_instances"] + a["invalid_instances"] == 2 * a["compiled"]
    assert s["anchors"]["llguidance"]["passing"] >= 1
    both = s["anchors"]["llguidance"]["both"]  # the timings over the schemas both engines compiled
    assert both["schemas"] == s["anchors"]["llguidance"]["compiled"] and both["structgen"]["token_us"]["mean"] > 0
    md = (tmp_path / "o" / "conformance-gpt2.md").read_text()
    assert "| maskbench | xgrammar |" in md and "| maskbench | structgen (with llguidance) |" in md


def test_an_anchor_that_kills_its_worker_costs_only_its_own_result(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each engine runs a schema as its own task: an anchor crashing in native code (here: its
    walk ends the process) is that anchor's ``worker-died``; structgen's result on the same
    schema, and every other schema's, stand."""
    pytest.importorskip("llguidance")
    import os

    from structgen.bench import conformance

    real = conformance.run_anchor

    def crash_on_marked(anchor, schema, texts):  # type: ignore[no-untyped-def]
        if schema.get("title") == "crash":
            os._exit(1)
        return real(anchor, schema, texts)

    monkeypatch.setattr(conformance, "run_anchor", crash_on_marked)  # the forked workers inherit it
    data = tmp_path / "data"
    data.mkdir()
    for name, schema in {"a": {"type": "integer", "title": "crash"}, "b": {"type": "boolean"}}.items():
        (data / f"{name}.json").write_text(json.dumps({"schema": schema, "tests": [{"data": 1, "valid": name == "a"}]}))
    out = conformance.run(tokenizer=GPT2_DIR, suites=["maskbench"], test_suite_root=None, maskbench_root=str(data),
                          out_dir=str(tmp_path / "o"), workers=2, samples=1, anchors=("llguidance",), progress=False)  # fmt: skip
    s = out["suites"]["maskbench"]
    assert s["passing"] == 2 and s["errors"] == 0  # ours: both schemas, the crashed one included
    items = {r["name"]: r for r in json.loads((tmp_path / "o" / "conformance-gpt2.json").read_text())["items"]}
    assert items["a"]["passing"] and items["a"]["anchors"]["llguidance"]["detail"] == "worker-died"
    assert items["b"]["anchors"]["llguidance"]["outcome"] == "compiled"


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["serve", "--precompute-states", "-1"], "precompute_states must be >= 0"),
        (["serve", "--precompute-budget-s", "0"], "precompute_budget_s must be > 0"),
        (["serve", "--compile-processes", "-1"], "--compile-processes '-1': give a number of processes (0 or more)"),
        (["serve", "--prefill-kernel", "fa4"], "argument --prefill-kernel: invalid choice: 'fa4'"),
        (["bench", "peers", "--endpoint", "s=structgen@http://127.0.0.1:9", "--concurrency", "0"], "--concurrency must be >= 1"),
        (["bench", "peers", "--endpoint", "nope"], "expected LABEL=FLAVOR@URL"),
    ],
)
def test_serve_and_peers_reject_bad_flags_before_starting(argv: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    """A bad compile or load flag is a named error with exit code 2, before any model loads or
    any request is sent (argparse's own checks exit with that code)."""
    try:
        code = main(argv)
    except SystemExit as e:
        code = e.code
    assert code == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


def test_serve_habits_of_vllm_and_sglang_users(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``serve MODEL`` positional, ``--max-model-len``, ``--version``, defaults in ``--help``;
    a file given as the model, an unknown device and a port in use are named errors (exit 2)
    before any model loads."""
    import socket

    from structgen import __version__
    from structgen.cli import build_parser

    args = build_parser().parse_args(["serve", "some/folder", "--max-model-len", "1024", "--chat-template", "t.jinja"])
    assert args.model_arg == "some/folder" and args.max_context == 1024 and args.chat_template == "t.jinja"
    with pytest.raises(SystemExit) as ex:
        main(["--version"])
    assert ex.value.code == 0 and capsys.readouterr().out.strip() == f"structgen {__version__}"
    with pytest.raises(SystemExit):
        main(["serve", "--help"])
    assert "(default: 8000)" in capsys.readouterr().out
    assert main(["serve", "a", "--model", "b"]) == 2
    assert "two models given" in capsys.readouterr().err
    weights = tmp_path / "model.safetensors"
    weights.write_bytes(b"x")
    assert main(["serve", str(weights), "--port", "0"]) == 2
    assert "is a file" in capsys.readouterr().err
    assert main(["serve", "--device", "gpu", "--port", "0"]) == 2
    assert "is not a device" in capsys.readouterr().err
    assert main(["serve", "--chat-template", str(tmp_path / "missing.jinja"), "--port", "0"]) == 2
    assert "neither a file nor a Jinja template" in capsys.readouterr().err
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        assert main(["serve", "--port", str(port)]) == 2
    err = capsys.readouterr().err
    assert f"cannot listen on 127.0.0.1:{port}" in err and "Traceback" not in err


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the message of a build without CUDA")
def test_serve_cuda_on_a_cpu_build_is_named(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["serve", "--device", "cuda", "--port", "0"]) == 2
    err = capsys.readouterr().err
    assert "sees no CUDA device" in err and "Traceback" not in err


def test_worker_processes_auto_follows_the_device_and_cores() -> None:
    import torch

    from structgen.engine.config import auto_worker_processes

    cuda, cpu = torch.device("cuda"), torch.device("cpu")
    assert auto_worker_processes(cuda, 16) == (12, 11)  # the split measured on the 16-core GPU box
    assert auto_worker_processes(cuda, 4) == (0, 0) and auto_worker_processes(cpu, 64) == (0, 0)
    assert auto_worker_processes(cuda, 128) == (32, 31)
    assert auto_worker_processes(cuda, 16, reserved=2) == (12, 10)  # serve: the front end has a core too
    from structgen.engine.config import worker_processes

    assert worker_processes("auto", "auto", "cpu") == {"processes": 0, "row_processes": 0}
    assert worker_processes("3", "2", "auto") == {"processes": 3, "row_processes": 2}
    with pytest.raises(ValueError, match="--compile-processes 'many'"):
        worker_processes("many", "auto", "cpu")
    with pytest.raises(ValueError, match="--row-processes '-2': give a number of processes \\(0 or more\\)"):
        worker_processes("2", "-2", "cpu")


@pytest.mark.parametrize("pause_gc", [True, False])
def test_a_conformance_worker_freezes_the_heap_as_the_engine_does(pause_gc: bool) -> None:
    """With the collector handled as the engine handles it (the default), a conformance worker
    moves its start-up heap (vocabulary, anchors) out of the collector's passes, and again
    after each compile, so the timed token walks pay no full collection over the vocabulary;
    with ``--no-pause-gc`` it leaves the collector as Python has it."""
    import gc

    from structgen.bench import conformance
    from structgen.bench.conformance_items import Item

    gc.unfreeze()
    try:
        conformance._init_worker(GPT2_DIR, 10.0, 50_000, 1, pause_gc=pause_gc)
        after_start = gc.get_freeze_count()
        assert (after_start > 0) == pause_gc
        item = Item("maskbench", "k", {"type": "object", "properties": {"k": {"type": "integer"}}}, [({"k": 1}, True)])
        res = conformance.run_ours(item)
        assert res.outcome == "compiled" and res.passing
        assert (gc.get_freeze_count() > after_start) == pause_gc
    finally:
        gc.unfreeze()
        conformance._STATE.clear()

"""vLLM's offline engine (``LLM.generate``) on the requests ``structgen bench json --save-requests``
ran in-process, so the two engines are compared without HTTP in between.

Runs in vLLM's own environment (it pins other versions of torch, flashinfer and pydantic than
structgen's): it imports only vLLM, ``jsonschema`` and the standard library.  For each
concurrency level a fresh ``LLM`` (``max_num_seqs`` = the level, so every schema is cold, as in
structgen's fresh engine per level) gets all of a workload's requests at once, greedy, each
with its own ``max_tokens``; vLLM compiles each grammar as its request arrives.  Per
(workload, level): req/s, output tok/s, validity (``jsonschema`` with format checking /
``re.fullmatch``) and ``max_tokens`` cuts.  With ``--structgen RESULTS_JSONL`` (the bench json
run's ``results.jsonl``), the markdown puts structgen's rows for the same workloads and levels
beside vLLM's.

    PYTHONPATH=VLLM_SITE VLLM_USE_FLASHINFER_SAMPLER=0 python3 benchmarks/vllm_offline.py \\
        --model CHECKPOINT --requests OUT --backend guidance --concurrency 64 256 \\
        --structgen OUT/results.jsonl --out OUT
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shlex
import sys
import time
from pathlib import Path
from typing import Any


def load_requests(folder: Path, workload: str) -> list[dict[str, Any]]:
    """The requests bench json saved for ``workload`` (``requests-<workload>.jsonl``)."""
    path = folder / f"requests-{workload}.jsonl"
    if not path.is_file():
        raise SystemExit(f"vllm_offline: {path} not found (run structgen bench json with --save-requests first)")
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def is_valid(req: dict[str, Any], text: str) -> bool:
    """Whether ``text`` meets ``req``'s constraint (as ``structgen bench`` checks it)."""
    import jsonschema

    if req["kind"] == "regex":
        return re.fullmatch(req["text"], text) is not None
    try:
        value = json.loads(text)
    except ValueError:
        return False
    schema = json.loads(req["text"])
    cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    return bool(cls(schema, format_checker=cls.FORMAT_CHECKER).is_valid(value))


def run_level(model: str, backend: str, conc: int, workloads: dict[str, list[dict[str, Any]]]) -> list[dict[str, Any]]:
    """One fresh ``LLM`` with ``max_num_seqs`` = ``conc``; every workload's requests through it."""
    from vllm import LLM, SamplingParams
    from vllm.sampling_params import StructuredOutputsParams

    t0 = time.perf_counter()
    llm = LLM(model=model, dtype="bfloat16", seed=0, max_num_seqs=conc,
              structured_outputs_config={"backend": backend, "disable_any_whitespace": True})  # fmt: skip
    startup = time.perf_counter() - t0
    llm.generate(["Warm-up: "], SamplingParams(max_tokens=8, temperature=0.0), use_tqdm=False)
    rows = []
    for w, reqs in workloads.items():
        params = []
        for r in reqs:
            so = (
                StructuredOutputsParams(json=json.loads(r["text"]))
                if r["kind"] == "json_schema"
                else StructuredOutputsParams(regex=r["text"])
            )
            params.append(SamplingParams(temperature=0.0, max_tokens=r["max_tokens"], structured_outputs=so))
        t1 = time.perf_counter()
        outs, refused = _generate(llm, [r["prompt"] for r in reqs], params)
        wall = time.perf_counter() - t1
        tokens = sum(len(o.outputs[0].token_ids) for o in outs.values())
        done = [(reqs[i], o.outputs[0]) for i, o in sorted(outs.items())]
        rows.append({
            "workload": w, "concurrency": conc, "requests": len(reqs), "failed": refused, "wall_s": round(wall, 3),
            "req_per_s": round(len(done) / wall, 2), "out_tok_per_s": round(tokens / wall, 1),
            "mean_out_tokens": round(tokens / len(done), 1) if done else 0.0,
            "valid": round(sum(is_valid(r, o.text) for r, o in done) / len(reqs), 4),
            "max_tokens_cuts": sum(o.finish_reason == "length" for _r, o in done),
            "startup_s": round(startup, 1),
        })  # fmt: skip
        print(json.dumps(rows[-1]), flush=True)
    del llm
    return rows


def _generate(llm: Any, prompts: list[str], params: list[Any]) -> tuple[dict[int, Any], int]:
    """Every request through ``llm``'s engine (``add_request`` / ``step``, vLLM's LLMEngine
    loop); a request vLLM refuses on arrival (a schema its backend rejects) is counted, not run,
    as the HTTP server answers it with a 400.  Returns the finished outputs by request index and
    the number refused."""
    engine = llm.llm_engine
    refused = 0
    for i, (prompt, sp) in enumerate(zip(prompts, params)):
        try:
            engine.add_request(str(i), prompt, sp)
        except ValueError:
            refused += 1
    outs: dict[int, Any] = {}
    while engine.has_unfinished_requests():
        for o in engine.step():
            if o.finished:
                outs[int(o.request_id)] = o
    return outs, refused


def structgen_rows(path: Path) -> list[dict[str, Any]]:
    """The default-mode rows of a ``structgen bench json`` results.jsonl, and its meta."""
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return [r for r in rows if "meta" in r] + [r for r in rows if r.get("mode") == "default"]


def render(meta: dict[str, Any], vrows: list[dict[str, Any]], srows: list[dict[str, Any]]) -> str:
    """Markdown: per workload, structgen's and vLLM's row at each level and the ratio."""
    smeta: dict[str, Any] = next((r["meta"] for r in srows if "meta" in r and "commit" in r["meta"]), {})
    md = ["# In-process: structgen.Engine against vLLM's offline LLM.generate", ""]
    if smeta:
        md += [f"- structgen: `{smeta.get('command', '')}` (commit {smeta.get('commit', '?')}, {smeta.get('machine', '')})"]
    md += [f"- vLLM {meta['vllm']}, structured outputs backend `{meta['backend']}` with `disable_any_whitespace`: `{meta['command']}`", ""]
    for w in dict.fromkeys(r["workload"] for r in vrows):
        md += [f"## {w}", "", "| concurrency | engine | req/s | out tok/s | mean out tokens | valid | max_tokens cuts | refused | structgen ÷ vLLM (req/s) |",
               "|---|---|---|---|---|---|---|---|---|"]  # fmt: skip
        for v in (r for r in vrows if r["workload"] == w):
            s = next((r for r in srows if r.get("workload") == w and r.get("concurrency") == v["concurrency"]), None)
            if s is not None:
                ratio = s["req_per_s"] / v["req_per_s"] if v["req_per_s"] else float("nan")
                mean_out = s["out_tok_per_s"] * s["wall_s"] / s["requests"] if s["requests"] else 0.0
                cuts = round(s["length_share"] * s["requests"])
                md.append(f"| {v['concurrency']} | structgen | {s['req_per_s']:.2f} | {s['out_tok_per_s']:.0f} | "
                          f"{mean_out:.1f} | {100 * s['validity']:.1f}% | {cuts} | 0 | {ratio:.2f}× |")  # fmt: skip
            md.append(f"| {v['concurrency']} | vLLM + {meta['backend']} | {v['req_per_s']:.2f} | {v['out_tok_per_s']:.0f} | "
                      f"{v['mean_out_tokens']:.1f} | {100 * v['valid']:.1f}% | {v['max_tokens_cuts']} | {v.get('failed', 0)} | |")  # fmt: skip
        md.append("")
    md += ["Both engines get the same requests (the file bench json saved), greedy, the same `max_tokens`, the same "
           "checkpoint; every schema is new to the engine that runs it (a fresh engine per level).  structgen keeps at most "
           "*concurrency* requests in its engine; vLLM gets all at once with `max_num_seqs` = *concurrency*.  The requests are "
           "those bench json keeps (a schema structgen's compiler refuses is left out of its workload); *refused*: requests "
           "vLLM rejected on arrival (its backend's schema check), counted in *valid* as failures.", ""]  # fmt: skip
    return "\n".join(md)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", required=True, help="checkpoint folder (the one structgen ran)")
    ap.add_argument("--requests", required=True, help="the bench json output folder holding requests-WORKLOAD.jsonl")
    ap.add_argument("--workload", default="extraction,maskbench")
    ap.add_argument("--backend", default="guidance", help="vLLM structured outputs backend: guidance | xgrammar")
    ap.add_argument("--concurrency", type=int, nargs="+", default=[64, 256])
    ap.add_argument("--structgen", default=None, help="structgen's results.jsonl for the side-by-side table")
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    if min(args.concurrency) < 1:
        ap.error("every --concurrency must be ≥ 1")
    import vllm

    folder = Path(args.requests)
    workloads = {w: load_requests(folder, w) for w in args.workload.split(",") if (folder / f"requests-{w}.jsonl").is_file()}
    if not workloads:
        raise SystemExit(f"vllm_offline: no requests-*.jsonl for {args.workload} in {folder}")
    meta = {"vllm": vllm.__version__, "backend": args.backend, "machine": f"{platform.machine()}, {os.cpu_count()} cores",
            "command": "python3 benchmarks/vllm_offline.py " + shlex.join(a for a in sys.argv[1:])}  # fmt: skip
    rows = [r for c in args.concurrency for r in run_level(args.model, args.backend, c, workloads)]
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "vllm-offline.json").write_text(json.dumps({"meta": meta, "rows": rows}, indent=1) + "\n")
    srows = structgen_rows(Path(args.structgen)) if args.structgen else []
    (out / "offline.md").write_text(render(meta, rows, srows))


if __name__ == "__main__":
    main()

"""Soundness fuzzing on thousands of random schemas (``structgen.bench.schema_fuzz``): every
automaton sample and every accepted near-miss mutation must validate with ``jsonschema``; any
exception other than the named schema / compile errors is a crash.

Usage: ``python benchmarks/schema_fuzz.py [--n 3000] [--seed 1000] [--depth 4] [--instances 10] [--out DIR]``.
Writes ``schema-fuzz.md`` and ``schema-fuzz.json`` (the first failures, if any, in full).
"""

from __future__ import annotations

import argparse
import collections
import json
import time
from pathlib import Path

from structgen.bench.common import run_meta
from structgen.bench.schema_fuzz import fuzz

HERE = Path(__file__).resolve().parent


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=3000)
    ap.add_argument("--seed", type=int, default=1000)
    ap.add_argument("--depth", type=int, default=4)
    ap.add_argument("--instances", type=int, default=10, help="hypothesis-jsonschema instances per schema and per negation")
    ap.add_argument("--out", default=str(HERE / "results" / "soundness"))
    args = ap.parse_args()
    if args.n < 1 or args.depth < 1:
        ap.error("--n and --depth must be >= 1")
    started = run_meta()  # the commit whose code runs (read now, not when the run ends)
    t0 = time.perf_counter()
    results = fuzz(args.n, seed=args.seed, depth=args.depth, instances=args.instances)
    wall = time.perf_counter() - t0
    status = collections.Counter(r.status for _s, r in results)
    failures = [
        {"schema": s, "status": r.status, "unsound": r.unsound[:5], "detail": r.detail}
        for s, r in results
        if r.unsound or r.status == "crash"
    ]
    ok = [r for _s, r in results if r.status == "ok"]
    summary = {
        "schemas": len(results),
        "compiled": status["ok"],
        "refused": status["refused"],
        "limits": status["limit"],
        "crashes": status["crash"],
        "samples": sum(r.samples for r in ok),
        "mutants_accepted": sum(r.mutants_accepted for r in ok),
        "valid_instances": sum(r.valid_instances for r in ok),
        "valid_accepted": sum(r.valid_accepted for r in ok),
        "invalid_instances_rejected": sum(r.invalid_instances for r in ok),
        "unsound_schemas": sum(1 for r in ok if r.unsound),
        "wall_s": round(wall, 1),
    }
    meta = {**started, "n": args.n, "seed": args.seed, "depth": args.depth, "instances": args.instances}
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "schema-fuzz.json").write_text(json.dumps({"meta": meta, "summary": summary, "failures": failures[:50]}, indent=1) + "\n")
    lines = [
        "# Soundness fuzzing on random schemas",
        "",
        *(f"- {k}: `{v}`" if k == "command" else f"- {k}: {v}" for k, v in meta.items()),
        "",
        "| " + " | ".join(summary) + " |",
        "|" + "---|" * len(summary),
        "| " + " | ".join(str(v) for v in summary.values()) + " |",
        "",
        "Schemas from `allOf` / `anyOf` / `oneOf` / `not` (of any subschema) / `if` / `then` / `else` / `enum` / `const` / "
        "`type` / `$ref` with string, number (`multipleOf` by any divisor), array (`contains` counts, `uniqueItems`, "
        "`unevaluatedItems`) and object (property counts, dependencies, `propertyNames`, `unevaluatedProperties`) keywords. *unsound_schemas*: schemas with a sample, an accepted near-miss mutation "
        "or an accepted hypothesis-jsonschema instance of the schema's negation that `jsonschema` rejects (exact "
        "`multipleOf`, formats checked); *invalid_instances_rejected*: those instances, all rejected unless counted as "
        "unsound; *valid_accepted* / *valid_instances*: instances of the schema accepted (the rest differ by the layout's "
        "narrowings: property order, undeclared properties, number forms). *crashes*: exceptions other than the named errors.",
        "",
    ]
    (out / "schema-fuzz.md").write_text("\n".join(lines))
    print("\n".join(lines))
    return 1 if failures else 0


if __name__ == "__main__":
    raise SystemExit(main())

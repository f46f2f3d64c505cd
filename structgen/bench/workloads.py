"""The workloads of ``structgen bench json``: each request a prompt, a constraint and
``max_tokens`` (raised to cover the longest output a finite constraint accepts,
:func:`bound_max_tokens`, so only unbounded languages can be cut).

- ``character``: SGLang's ``json_jump_forward`` character regex over its 50 Harry Potter names
  (``structgen/bench/data``, Apache-2.0, sgl-project/sglang).
- ``extraction``: schemas and texts of the demo-model generator's held-out split.
- ``maskbench``: JSONSchemaBench schemas sampled with a fixed seed from ``--maskbench-dir``
  (JSONSchemaBench's ``maskbench/data``; skipped without it; schemas the compiler refuses are
  left out and counted), with an instruction prompt; unbounded strings, arrays and numbers get
  bounds (:func:`bound_schema`) so that random-weight models finish.
- ``shared-prefix``: extraction queries behind one long few-shot prefix (radix-cache reuse).
"""

from __future__ import annotations

import json
import os
import random
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, NamedTuple

from structgen.fsm import Constraint

ASSETS = Path(__file__).resolve().parent / "data"

CHARACTER_REGEX = (
    r"""\{\n"""
    + r"""    "name": "[\w\d\s]{1,16}",\n"""
    + r"""    "house": "(Gryffindor|Slytherin|Ravenclaw|Hufflepuff)",\n"""
    + r"""    "blood status": "(Pure-blood|Half-blood|Muggle-born)",\n"""
    + r"""    "occupation": "(student|teacher|auror|ministry of magic|death eater|order of the phoenix)",\n"""
    + r"""    "wand": \{\n"""
    + r"""        "wood": "[\w\d\s]{1,16}",\n"""
    + r"""        "core": "[\w\d\s]{1,16}",\n"""
    + r"""        "length": [0-9]{1,2}\.[0-9]{0,2}\n"""
    + r"""    \},\n"""
    + r"""    "alive": "(Alive|Deceased)",\n"""
    + r"""    "patronus": "[\w\d\s]{1,16}",\n"""
    + r"""    "bogart": "[\w\d\s]{1,16}"\n"""
    + r"""\}"""
)  # sgl-project/sglang benchmark/json_jump_forward (Apache-2.0)

WORKLOADS = ("character", "extraction", "maskbench", "shared-prefix")


class BenchRequest(NamedTuple):
    prompt: str
    constraint: Constraint
    max_tokens: int


def character_requests(n: int) -> list[BenchRequest]:
    names = [x.strip() for x in (ASSETS / "harry_potter_names.txt").read_text().splitlines() if x.strip()]
    c = Constraint.regex(CHARACTER_REGEX)
    prompt = "{} is a character in Harry Potter. Please fill in the following information about this character.\n"
    return [BenchRequest(prompt.format(names[i % len(names)]), c, 256) for i in range(n)]


def extraction_requests(n: int, seed: int) -> list[BenchRequest]:
    from structgen.demo.data import generate_examples

    return [BenchRequest(e.prompt, Constraint.json_schema(e.schema), 200) for e in generate_examples(n, "heldout", seed)]


def shared_prefix_requests(n: int, seed: int, shots: int = 4) -> list[BenchRequest]:
    """Extraction queries behind ``shots`` worked examples (~120 tokens each with the demo
    model's tokenizer), so the prefix fits a 1,024-token context."""
    from structgen.demo.data import generate_examples

    prefix = "".join(e.prompt + e.target + "\n\n" for e in generate_examples(shots, "train", seed + 1))
    return [BenchRequest(prefix + e.prompt, Constraint.json_schema(e.schema), 200) for e in generate_examples(n, "heldout", seed)]


def bound_schema(schema: Any, max_length: int = 32, max_items: int = 8, magnitude: int = 10**9) -> Any:
    """A copy of ``schema`` whose unbounded values get bounds, so that random-weight models
    give bounded outputs under every system alike: strings without ``maxLength`` (and without
    ``enum``/``const``) get ``maxLength`` = max(``minLength``, ``max_length``), arrays without
    ``maxItems`` get max(``minItems``, ``max_items``), integers and numbers without
    ``minimum``/``maximum`` get ±``magnitude``.  Fraction digits stay unbounded (JSON Schema
    cannot bound them)."""
    if isinstance(schema, list):
        return [bound_schema(x, max_length, max_items, magnitude) for x in schema]
    if not isinstance(schema, dict):
        return schema
    out = {k: bound_schema(v, max_length, max_items, magnitude) for k, v in schema.items()}
    t = schema.get("type")
    types = set(t) if isinstance(t, list) else {t} if isinstance(t, str) else set()
    if "enum" in schema or "const" in schema:
        return out
    if "string" in types and "maxLength" not in schema:
        out["maxLength"] = max(int(schema.get("minLength", 0) or 0), max_length)
    if "array" in types and "maxItems" not in schema:
        out["maxItems"] = max(int(schema.get("minItems", 0) or 0), max_items)
    if types & {"integer", "number"}:
        if "minimum" not in schema and "exclusiveMinimum" not in schema:
            out["minimum"] = -magnitude
        if "maximum" not in schema and "exclusiveMaximum" not in schema:
            out["maximum"] = magnitude
    return out


def maskbench_requests(n: int, seed: int, root: Path | None, check: Callable[[Constraint], bool] | None = None) -> list[BenchRequest]:
    """``n`` schemas of the MaskBench data folder ``root`` sampled with ``seed`` (those ``check``
    rejects are skipped); [] when no folder is given or it is absent."""
    if root is None or not root.is_dir():
        return []
    files = sorted(root.glob("*.json"))
    random.Random(seed).shuffle(files)
    out: list[BenchRequest] = []
    for f in files:
        if len(out) >= n:
            break
        schema = bound_schema(json.loads(f.read_text())["schema"])
        c = Constraint.json_schema(schema)
        if check is not None and not check(c):
            continue
        text = json.dumps(schema)[:1500]
        out.append(BenchRequest(f"Write one JSON value that satisfies this JSON Schema:\n{text}\nJSON: ", c, 256))
    return out


MAX_TOKENS_CAP = 2048


def bound_max_tokens(
    reqs: Sequence[BenchRequest],
    max_length: Callable[[Constraint], int | None],
    cap: int = MAX_TOKENS_CAP,
    min_length: Callable[[Constraint], int | None] | None = None,
) -> list[BenchRequest]:
    """``reqs`` with ``max_tokens`` raised to 1 + the longest output their constraint accepts
    (in bytes, an upper bound on tokens: a token emits at least one byte; + 1 for EOS), at most
    ``cap``, so that a finite language is never cut by ``max_tokens``.  ``max_length``: bytes
    of the longest accepted string (or an upper bound on them), None when unbounded; then
    ``min_length`` (bytes of the shortest, if given) raises it to cover the shortest output,
    so that every request can end valid.  Raises ``ValueError`` for ``cap`` < 1."""
    if cap < 1:
        raise ValueError(f"cap must be >= 1, got {cap}")
    out = []
    for r in reqs:
        n = max_length(r.constraint)
        if n is None and min_length is not None:
            n = min_length(r.constraint)
        out.append(r if n is None else r._replace(max_tokens=max(r.max_tokens, min(cap, n + 1))))
    return out


def build_workload(
    name: str,
    n: int,
    seed: int,
    check: Callable[[Constraint], bool] | None = None,
    *,
    shots: int = 4,
    maskbench_dir: str | os.PathLike[str] | None = None,
) -> list[BenchRequest]:
    """The requests of workload ``name`` (``shots``: worked examples in the shared prefix;
    ``maskbench_dir``: the JSONSchemaBench ``maskbench/data`` folder; without it the maskbench
    workload has no requests and is skipped).  Raises ``ValueError`` for an unknown
    name."""
    if name == "character":
        return character_requests(n)
    if name == "extraction":
        return extraction_requests(n, seed)
    if name == "shared-prefix":
        return shared_prefix_requests(n, seed, shots)
    if name == "maskbench":
        return maskbench_requests(n, seed, Path(maskbench_dir) if maskbench_dir else None, check=check)
    raise ValueError(f"unknown workload {name!r}; choose from {', '.join(WORKLOADS)}")


def distinct_schemas(reqs: Sequence[BenchRequest], tag: str) -> list[BenchRequest]:
    """``reqs`` with every object schema made unique: an optional string property named after
    the request (``ref_<tag>_<i>``, at most 12 characters) joins its ``properties``, so no
    schema repeats within a run and each one is new to the server when it arrives (the
    workloads draw from a few dozen schema shapes).  Regexes and other schemas are unchanged."""
    out = []
    for i, r in enumerate(reqs):
        schema = json.loads(r.constraint.text) if r.constraint.kind == "json_schema" else None
        if isinstance(schema, dict) and isinstance(schema.get("properties"), dict):
            schema["properties"][f"ref_{tag}_{i}"] = {"type": "string", "maxLength": 12}
            r = r._replace(constraint=type(r.constraint).json_schema(schema, r.constraint.options))
        out.append(r)
    return out


def save_requests(path: Path, reqs: Sequence[BenchRequest]) -> None:
    """Write ``reqs`` to ``path`` as JSON lines ``{"prompt", "kind", "text", "max_tokens"}``
    (``kind``: ``json_schema`` or ``regex``; ``text``: the schema's JSON text or the regex), the
    form another engine's driver reads (``benchmarks/vllm_offline.py``)."""
    with open(path, "w") as f:
        for r in reqs:
            row = {"prompt": r.prompt, "kind": r.constraint.kind, "text": r.constraint.text, "max_tokens": r.max_tokens}
            f.write(json.dumps(row) + "\n")

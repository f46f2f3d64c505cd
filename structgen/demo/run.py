"""``structgen demo``: a handful of extractions with the embedded demo model, each printed with
its stats (tokens sampled vs forced by jump-forward, forwards, time)."""

from __future__ import annotations

import json
import time
from typing import Any

from structgen.demo.examples import Person

HANDWRITTEN: list[tuple[Any, str]] = [
    (Person, "Marta Kowalczyk, 41, can be reached at marta.k@post.eu."),
    (
        {"type": "object", "properties": {"city": {"type": "string"}, "population": {"type": "integer"}}},
        "Tartu has a population of 97,000 and a university older than most.",
    ),
    (
        {
            "type": "object",
            "properties": {"product": {"type": "string"}, "price": {"type": "number"}, "in_stock": {"type": "boolean"}},
            "required": ["product", "price", "in_stock"],
        },
        "The Kelvo X2 kettle costs $39.99 but is sold out until May.",
    ),
    (
        {
            "type": "object",
            "properties": {
                "order_id": {"type": "integer", "minimum": 1, "maximum": 9999999},
                "status": {"enum": ["pending", "shipped", "delivered", "cancelled"]},
                "total": {"type": "number", "minimum": 0, "maximum": 100000},
            },
            "required": ["order_id", "status"],
            "additionalProperties": False,
        },
        "Your order 48213 has shipped; the total came to $129.95.",
    ),
]


def run_demo(model: str | None = None, *, held_out: int = 3, seed: int = 0) -> int:
    """Load the model (default: the embedded demo model), run the hand-written examples and
    ``held_out`` examples of the held-out split, print each object with its stats; returns 0.
    Raises ``ValueError`` for ``held_out`` < 0 and ``ModelLoadError`` for a bad model folder."""
    if held_out < 0:
        raise ValueError(f"held_out must be ≥ 0, got {held_out}")
    from structgen.api import default_model_path, generate
    from structgen.demo.data import generate_examples
    from structgen.engine.engine import Engine

    path = model or default_model_path()
    t0 = time.perf_counter()
    engine = Engine(path)
    print(f"model: {path} (loaded in {time.perf_counter() - t0:.2f} s)")
    jobs: list[tuple[Any, str, Any]] = [(m, text, None) for m, text in HANDWRITTEN]
    jobs += [(e.schema, e.text, e.answer) for e in generate_examples(held_out, "heldout", seed)]
    try:
        for target, text, expected in jobs:
            t0 = time.perf_counter()
            if isinstance(target, type):
                value, out = generate(target, text, engine=engine, return_output=True)
                shown = value.model_dump_json()
            else:
                value, out = generate(schema=target, prompt=text, engine=engine, return_output=True)
                shown = json.dumps(value, ensure_ascii=False)
            ms = (time.perf_counter() - t0) * 1e3
            u = out.usage
            print(f"\ntext:   {text}\nobject: {shown}")
            if expected is not None:
                print(f"gold:   {json.dumps(expected, ensure_ascii=False)}  ({'match' if value == expected else 'differs'})")
            print(f"stats:  {u.sampled_tokens} tokens sampled, {u.forced_tokens} forced (jump-forward), {u.forwards} forwards, {ms:.0f} ms")
    finally:
        engine.close()
    return 0

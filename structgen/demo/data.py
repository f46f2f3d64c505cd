"""Synthetic extraction pairs for the embedded demo model.

Each example is (JSON Schema, text, answer): the schema is one of a domain's field subsets, the
text mentions the chosen values in shuffled, templated sentences, and the answer is the JSON in
our canonical layout (``SchemaOptions().dumps``, properties in schema order).  Ten domains, field
types string / integer / number / boolean / enum / date / nested object / list, optional fields
(in the schema but absent from the text → absent from the answer).

40% of the sentences use the field's own phrasings, 60% field-agnostic ones composed from pieces
around the field's name (so the model learns to find a value by its label).  Splits: ``"train"``
uses all but the last own phrasing of every field, all but the last field-agnostic links, all but
the last intro, and 4 of every 5 word-list entries; ``"heldout"`` uses only the unseen phrasings and the
unseen word-list entries (half of all names, cities, ... are made-up words in both).  Training
sentences also get noise the held-out split never has: links of meaningless words between a
label and its value, and meaningless words in place of template words, so that the model finds
values by their labels and types rather than by exact wordings; made-up values for the fields
drawn from short word lists (reasons, job titles, tags, company kinds), so that values are copied
rather than recalled; and intros and asides of made-up words, so that a sentence without a label
is never a source of values.  Training also composes links and value-first sentences from a
small grammar (auxiliary + participle + preposition, "… to be"), states booleans in many
label-based shapes ("No member.", "Breakfast? Yes."), and in one example of five states one field
through a meaningless stand-in label, so that a value next to a label never seen is still
found.  Fully determined by the seed.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from typing import Any

from structgen.demo.domains import DOMAINS, Domain, Example
from structgen.demo.natural_text import make_natural_example
from structgen.demo.phrasing import DISTRACTORS, noise_sentence, phrase
from structgen.demo.values import SPLITS
from structgen.engine.prompt_format import format_prompt
from structgen.schemas import SchemaOptions


def make_example(rng: random.Random, split: str, domain: Domain | None = None, phrasing: str | None = None) -> Example:
    """One example of ``split`` (``"train"`` or ``"heldout"``).  ``phrasing`` (a split; default
    ``split``) picks whose sentence phrasings state the values, so that benchmarks can write
    held-out values with training phrasings and tell unseen values from unseen wordings.
    Raises ``ValueError`` for an unknown split or phrasing."""
    if split not in SPLITS:
        raise ValueError(f"split must be one of {SPLITS}, got {split!r}")
    phrasing = split if phrasing is None else phrasing
    if phrasing not in SPLITS:
        raise ValueError(f"phrasing must be one of {SPLITS}, got {phrasing!r}")
    dom = domain or rng.choice(DOMAINS)
    fields = [f for f in dom.fields if f.required or rng.random() < 0.75]
    schema: dict[str, Any] = {
        "type": "object",
        "properties": {f.name: f.schema for f in fields},
        "required": [f.name for f in fields if f.required],
        "additionalProperties": False,
    }
    answer: dict[str, Any] = {}
    sentences = []
    # training only: one field in five examples is stated through a meaningless label
    stand_in = rng.randrange(len(fields)) if split == "train" and rng.random() < 0.2 else -1
    for i, f in enumerate(fields):
        if not f.required and rng.random() < 0.3:
            continue  # in the schema, not in the text: the answer omits it
        value = f.gen(rng, split)
        answer[f.name] = value
        sentences.append(phrase(f, phrasing, rng, value, stand_in=i == stand_in))
    distractors = DISTRACTORS[:-3] if split == "train" else DISTRACTORS[-3:]
    sentences += rng.sample(distractors, rng.choice([0, 0, 1, 2]))
    if split == "train" and rng.random() < 0.4:
        sentences += [noise_sentence(rng) for _ in range(rng.randint(1, 2))]
    rng.shuffle(sentences)
    intros = dom.intros[:-1] if split == "train" else dom.intros[-1:]
    intro = rng.choice(intros)
    if split == "train" and rng.random() < 0.3:
        intro = noise_sentence(rng, intro=True)
    text = " ".join([intro, *sentences])
    return Example(dom.name, schema, text, answer, format_prompt(schema, text), SchemaOptions().dumps(answer))


SOURCES = ("templated", "natural", "mixed")


def generate_examples(
    n: int, split: str = "train", seed: int = 0, source: str = "templated", natural_share: float = 0.6
) -> Iterator[Example]:
    """``n`` examples of ``split``, deterministic for a given seed (the two splits use
    independent streams).  ``source``: ``"templated"`` (this module's labelled sentences),
    ``"natural"`` (:mod:`structgen.demo.natural_text`: sentences as people write them, free-form
    field names, ``json_object``) or ``"mixed"`` (natural with probability ``natural_share``).
    Raises ``ValueError`` for an unknown source or a share outside [0, 1]."""
    if source not in SOURCES:
        raise ValueError(f"source must be one of {SOURCES}, got {source!r}")
    if not 0.0 <= natural_share <= 1.0:
        raise ValueError(f"natural_share must be in [0, 1], got {natural_share}")
    share = {"templated": 0.0, "natural": 1.0, "mixed": natural_share}[source]
    rng = random.Random(f"{seed}:{split}" if source == "templated" else f"{seed}:{split}:{source}")
    for _ in range(n):
        yield make_natural_example(rng, split) if share and rng.random() < share else make_example(rng, split)

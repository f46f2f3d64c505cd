"""The demo generator's natural sentences: deterministic, every answer valid for its schema and
copied from its text, held-out values kept out of training, number words and ordinals right."""

from __future__ import annotations

import random

import jsonschema
import pytest
from structgen.schemas import SchemaOptions

from structgen.demo import natural_values as nv
from structgen.demo.data import generate_examples
from structgen.demo.natural_people import PERSON
from structgen.demo.natural_text import FRAMES, make_natural_example
from structgen.engine.prompt_format import PROMPT_TEMPLATE, format_prompt


def test_natural_examples_are_deterministic_valid_and_copied_from_the_text() -> None:
    a = list(generate_examples(600, "train", seed=1, source="natural"))
    assert a == list(generate_examples(600, "train", seed=1, source="natural"))
    assert a != list(generate_examples(600, "train", seed=2, source="natural"))
    kinds = set()
    for e in a + list(generate_examples(300, "heldout", seed=1, source="natural")):
        kinds.add(e.domain)
        jsonschema.Draft202012Validator(e.schema).validate(e.answer)
        assert e.target == SchemaOptions().dumps(e.answer)
        assert e.prompt in (format_prompt(e.schema, e.text), PROMPT_TEMPLATE.format(fields="", text=e.text.strip()))
        for key, value in e.answer.items():
            if isinstance(value, str):  # every string value is written in the text as it is answered
                assert value.lower() in e.text.lower(), (key, value, e.text)
        if e.schema != {"type": "object"}:  # required fields are always stated
            assert set(e.schema.get("required", [])) <= set(e.answer)
    assert kinds == {f"natural-{f.name}" for f in FRAMES}


def test_json_object_examples_name_the_fields_themselves() -> None:
    rng = random.Random(0)
    seen = 0
    for _ in range(400):
        e = make_natural_example(rng, "train", PERSON)
        if e.schema == {"type": "object"}:
            seen += 1
            assert set(e.answer) <= {a.keys[0] for a in (PERSON.head, *PERSON.attrs)}
            assert "name" in e.answer
    assert seen > 10


def test_mixed_source_holds_both_kinds_and_bad_arguments_are_refused() -> None:
    domains = [e.domain for e in generate_examples(400, "train", seed=0, source="mixed", natural_share=0.5)]
    natural = sum(d.startswith("natural-") for d in domains)
    assert 120 < natural < 280
    assert [e.domain for e in generate_examples(50, "train", seed=0)] == [
        e.domain for e in generate_examples(50, "train", seed=0, source="templated")
    ]
    with pytest.raises(ValueError, match="source"):
        list(generate_examples(1, source="web"))
    with pytest.raises(ValueError, match="natural_share"):
        list(generate_examples(1, source="mixed", natural_share=1.5))


def test_held_out_values_come_from_the_held_out_fifth() -> None:
    train = set(nv.split_items(nv.CITIES, "train"))
    held = set(nv.split_items(nv.CITIES, "heldout"))
    assert train and held and not train & held and train | held == set(nv.CITIES)
    rng = random.Random(5)
    drawn = {nv.city(rng, "heldout") for _ in range(500)}
    assert not drawn & train and drawn & held


@pytest.mark.parametrize(
    ("n", "words"), [(0, "zero"), (9, "nine"), (13, "thirteen"), (40, "forty"), (42, "forty-two"), (99, "ninety-nine")]
)
def test_number_words(n: int, words: str) -> None:
    assert nv.number_word(n) == words


def test_number_word_range_and_ordinals() -> None:
    with pytest.raises(ValueError, match="0-99"):
        nv.number_word(100)
    assert [nv.ordinal(n) for n in (1, 2, 3, 4, 11, 12, 13, 21, 70, 112)] == [
        "1st",
        "2nd",
        "3rd",
        "4th",
        "11th",
        "12th",
        "13th",
        "21st",
        "70th",
        "112th",
    ]


def test_prices_and_populations_are_written_as_their_values() -> None:
    rng = random.Random(3)
    for _ in range(300):
        v = nv.price_value(rng)
        shown = nv.price_text(rng, v)
        digits = "".join(c for c in shown if c.isdigit() or c == ".")
        assert float(digits) == pytest.approx(v)
        n = nv.population_value(rng)
        text = nv.population_text(rng, n)
        value = float(text.split()[0]) * 1_000_000 if text.endswith("million") else int(text.replace(",", ""))
        assert round(value) == n

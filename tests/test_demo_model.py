"""The demo data generator and the embedded demo model (packaged, loaded, accurate enough that a
broken export cannot land)."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest
from pydantic import BaseModel, Field

import structgen
from structgen.demo.data import generate_examples, make_example
from structgen.demo.domains import DOMAINS
from structgen.demo.phrasing import GENERIC_LINKS_HELD_OUT
from structgen.engine.prompt_format import describe_fields, format_prompt

# The bar for this smoke set (benchmarks/results/demo-model/demo-model.md gives the shipped model's
# figure and that of random weights of the same shape).
SMOKE_MIN_FIELD_EM = 0.80


def test_generator_is_deterministic_and_valid() -> None:
    a = list(generate_examples(200, "train", seed=3))
    b = list(generate_examples(200, "train", seed=3))
    assert a == b
    assert a != list(generate_examples(200, "train", seed=4))
    validator = jsonschema.Draft202012Validator
    for e in a + list(generate_examples(200, "heldout", seed=3)):
        value = json.loads(e.target)
        assert value == e.answer
        validator(e.schema, format_checker=validator.FORMAT_CHECKER).validate(value)
        assert list(value) == [k for k in e.schema["properties"] if k in value]  # canonical order
        assert e.prompt == format_prompt(e.schema, e.text)
    assert {e.domain for e in a} == {d.name for d in DOMAINS}


def test_held_out_split_uses_unseen_phrasings() -> None:
    train_text = " ".join(e.text for e in generate_examples(3000, "train", seed=0))
    own_phrasings = " ".join(p for d in DOMAINS for f in d.fields for p in f.phrases)
    unseen = [link for link in GENERIC_LINKS_HELD_OUT if link not in own_phrasings]
    assert unseen
    for link in unseen:
        assert link not in train_text
    for dom in DOMAINS:
        assert dom.intros[-1] not in train_text
    import random

    with pytest.raises(ValueError, match="split"):
        make_example(random.Random(0), "test")
    with pytest.raises(ValueError, match="phrasing"):
        make_example(random.Random(0), "heldout", phrasing="test")
    # held-out values written with training phrasings: held-out word-list entries only, and no
    # held-out link in the text
    from structgen.demo.values import JOB_TITLES, REASONS

    rng = random.Random(5)
    mixed = [make_example(rng, "heldout", phrasing="train") for _ in range(300)]
    roles = {e.answer["role"] for e in mixed if "role" in e.answer}
    reasons = {e.answer["reason"] for e in mixed if "reason" in e.answer}
    assert roles and reasons
    assert roles <= set(JOB_TITLES[4::5]) and reasons <= set(REASONS[4::5])
    mixed_text = " ".join(e.text for e in mixed)
    for link in unseen:
        assert link not in mixed_text


def test_word_list_fields_get_made_up_values_in_training_only() -> None:
    """Reasons, job titles and tags come from short word lists: training mixes in made-up values
    (so the model copies them instead of recalling the list), the held-out split uses only the
    held-out entries (every 5th), which training never writes."""
    from structgen.demo.values import JOB_TITLES, REASONS, TAGS

    train = [e.answer for e in generate_examples(3000, "train", seed=0)]
    held = [e.answer for e in generate_examples(1000, "heldout", seed=0)]
    lists = {"reason": REASONS, "role": JOB_TITLES, "tags": TAGS}
    for key, items in lists.items():
        held_out_entries = set(items[4::5])
        t = [v for a in train if key in a for v in (a[key] if key == "tags" else [a[key]])]
        h = [v for a in held if key in a for v in (a[key] if key == "tags" else [a[key]])]
        assert t and h
        assert 0.3 < sum(v not in items for v in t) / len(t) < 0.7, key  # made-up share
        assert not held_out_entries & set(t), key
        assert set(h) <= held_out_entries, key


def test_training_aside_words_are_no_label_and_not_held_out() -> None:
    import re

    from structgen.demo import phrasing, values

    labels = {w for d in DOMAINS for f in d.fields for w in f.name.split("_")}
    held_out_sentences = " ".join([*phrasing.DISTRACTORS[-3:], *(d.intros[-1] for d in DOMAINS)])
    held_out_words = {w.lower() for w in re.findall(r"[A-Za-z]+", held_out_sentences)}
    lists = (values.FIRST, values.LAST, values.CITIES, values.STREETS, values.ADJECTIVES, values.NOUNS, values.AIRLINES)
    held_out_values = {
        x.lower() for items in (*lists, values.REASONS, values.JOB_TITLES, values.TAGS, values.COMPANY_KINDS) for x in items[4::5]
    }
    aside = set(phrasing.ASIDE_WORDS)
    assert len(aside) == len(phrasing.ASIDE_WORDS)
    assert not labels & aside
    assert not held_out_words & aside
    assert not held_out_values & aside


def test_training_link_grammar_never_writes_a_held_out_link() -> None:
    """The composed links and value-first shapes are training-only: none equals a held-out link
    or value-first shape, and none uses a held-out link's own verb."""
    from structgen.demo import phrasing

    composed = phrasing.composed_links()
    assert len(composed) > 1000
    held_links = {link.strip() for link in phrasing.GENERIC_LINKS_HELD_OUT}
    assert not composed & held_links
    held_verbs = {"given", "came", "stands", "turned"}
    assert not {w for link in composed for w in link.split()} & held_verbs
    held_first = {f.replace("{v} ", "").replace(" {l}", "") for f in phrasing.VALUE_FIRST[-phrasing.HELD_OUT_VALUE_FIRST :]}
    first = {f"{link.rstrip(':')} {det}".strip() for link in composed for det in ("the", "its", "")}
    assert not first & held_first
    # the grammar reaches training text, and the held-out split is untouched by it
    train_text = " ".join(e.text for e in generate_examples(500, "train", seed=0))
    assert sum(f" {link} " in train_text for link in phrasing.TO_BE) >= 3
    held_text = " ".join(e.text for e in generate_examples(500, "heldout", seed=0))
    assert not [link for link in phrasing.TO_BE if f" {link} " in held_text]


def test_training_boolean_shapes_state_the_right_polarity() -> None:
    import random
    import re

    from structgen.demo import phrasing

    rng = random.Random(0)
    for label in ("is member", "in stock", "breakfast", "follow up"):
        for value in (True, False):
            for _ in range(200):
                words = re.findall(r"[a-z]+", phrasing.bool_phrase(label, value, rng).lower())
                assert any(w in phrasing.NEGATIONS for w in words) is (not value), (label, value, words)


def test_describe_fields_for_a_pydantic_model() -> None:
    class Address(BaseModel):
        city: str
        zip: str = Field(pattern=r"^[0-9]{5}$")

    class Person(BaseModel):
        name: str
        age: int
        home: Address
        tags: list[str] = []

    text = describe_fields(Person.model_json_schema())
    assert text == "name: string; age: integer; home: object {city: string; zip: string}; tags: list of string, optional"


@pytest.fixture(scope="module")
def demo_engine() -> structgen.Engine:
    from structgen.api import default_model_path

    engine = structgen.Engine(default_model_path())
    yield engine
    engine.close()


def test_packaged_model_is_small_and_generates_valid_objects(demo_engine: structgen.Engine) -> None:
    folder = Path(demo_engine.model_path)
    assert sum(f.stat().st_size for f in folder.iterdir()) <= 25_000_000
    assert (folder / "README.md").is_file() and (folder / "structgen_prompt.json").is_file()
    for e in generate_examples(5, "heldout", seed=11):
        value = structgen.generate(schema=e.schema, prompt=e.text, engine=demo_engine)
        jsonschema.validate(value, e.schema)


def test_generate_wraps_text_in_the_extraction_prompt(demo_engine: structgen.Engine) -> None:
    """A text prompt with a schema reaches the demo model as the training prompt (field list +
    text), for a JSON Schema dict and for a Pydantic model alike."""
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(demo_engine.model_path)
    e = next(iter(generate_examples(1, "heldout", seed=0)))
    _, out = structgen.generate(schema=e.schema, prompt=e.text, engine=demo_engine, return_output=True)
    assert out.usage.prompt_tokens == len(tok(e.prompt, add_special_tokens=False)["input_ids"])

    class City(BaseModel):
        city: str

    text = "City: Lisbon."
    _, out = structgen.generate(City, text, engine=demo_engine, return_output=True)
    expected = format_prompt(City.model_json_schema(), text)
    assert "Fields: city: string" in expected
    assert out.usage.prompt_tokens == len(tok(expected, add_special_tokens=False)["input_ids"])


def test_wrapping_never_makes_a_fitting_prompt_fail(demo_engine: structgen.Engine) -> None:
    """A field list longer than the context (a big enum) is not wrapped around a prompt that
    fits as given: the request runs on the prompt as written instead of failing."""
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(demo_engine.model_path)
    schema = {"type": "object", "properties": {"code": {"enum": [f"value_{i:03d}" for i in range(400)]}}, "required": ["code"]}
    text = "The code is value_042."
    assert len(tok(format_prompt(schema, text))["input_ids"]) >= 1024  # wrapped: over the model's context
    value, out = structgen.generate(schema=schema, prompt=text, engine=demo_engine, return_output=True)
    jsonschema.validate(value, schema)
    assert out.usage.prompt_tokens == len(tok(text)["input_ids"])


def test_demo_chat_template_reads_developer_and_names_other_roles(demo_engine: structgen.Engine) -> None:
    """``developer`` messages are read as ``system`` ones (the field list); roles the model has no
    place for are an error naming the role, never dropped silently."""
    from structgen.engine.request import RequestError

    user = {"role": "user", "content": "Ada is 36."}
    as_system = demo_engine.tokenize([{"role": "system", "content": "name: string"}, user])
    assert demo_engine.tokenize([{"role": "developer", "content": "name: string"}, user]) == as_system
    for role in ("assistant", "tool"):
        with pytest.raises(RequestError, match=f"not '{role}'"):
            demo_engine.tokenize([user, {"role": role, "content": "x"}])


def test_accuracy_smoke_on_fixed_held_out_examples(demo_engine: structgen.Engine) -> None:
    from demo_model import smoke_field_em

    em = smoke_field_em(demo_engine)
    assert em >= SMOKE_MIN_FIELD_EM, em


def test_demo_command_rejects_bad_input(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from structgen.cli import main

    assert main(["demo", "--model", str(tmp_path / "missing")]) == 2
    assert "does not exist" in capsys.readouterr().err
    assert main(["demo", "--held-out", "-1"]) == 2
    assert "held_out must be ≥ 0" in capsys.readouterr().err


def test_generate_defaults_to_the_demo_model_and_demo_command(capsys: pytest.CaptureFixture[str]) -> None:
    from structgen.cli import main
    from structgen.demo.examples import Person
    from structgen.demo.run import HANDWRITTEN

    # the README's examples, read by the default model as the README says
    person = structgen.generate(Person, "Ana Silva, 30, moved to Lisbon last spring.")
    assert (person.name, person.age) == ("Ana Silva", 30)
    people = structgen.generate(Person, ["Ben Okafor is 41 years old.", "At 52, Tomás Ruiz still plays football every Sunday."])
    assert [(p.name, p.age) for p in people] == [("Ben Okafor", 41), ("Tomás Ruiz", 52)]
    assert main(["demo", "--held-out", "1"]) == 0
    out = capsys.readouterr().out
    assert out.count("object: ") == len(HANDWRITTEN) + 1 and "forced (jump-forward)" in out


@pytest.mark.parametrize("content", ["not json", "[1]", '{"prompt_format": "other"}'])
def test_a_malformed_prompt_format_file_is_a_model_load_error(tmp_path: Path, content: str) -> None:
    from structgen.engine.prompt_format import load_prompt_format
    from structgen.models import ModelLoadError

    (tmp_path / "structgen_prompt.json").write_text(content)
    with pytest.raises(ModelLoadError, match=r"structgen_prompt\.json"):
        load_prompt_format(tmp_path)
    assert load_prompt_format(tmp_path / "nowhere").name is None  # no file: prompts as given

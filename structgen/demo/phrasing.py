"""How the demo generator states a field's value in a sentence: the field's own phrasings and
field-agnostic ones composed from pieces around its label (prefixes, links, value-first
sentences, a small link grammar, boolean shapes, stand-in labels), with the held-out pieces kept
out of training."""

# ruff: noqa: E501  (word lists and phrasings read best one field per line)
from __future__ import annotations

import itertools
import random
from typing import Any

from structgen.demo.domains import FieldSpec
from structgen.demo.values import made_up_word

# Field-agnostic phrasings keyed on the field's name ("flight_number" → "flight number"), built
# from pieces (a prefix, the label, a link, the value; or value first): hundreds of sentence
# shapes, so the model learns to find a value by its label instead of memorizing templates.
# The last pieces of LINKS and VALUE_FIRST are held out.
PREFIXES = (
    "",
    "",
    "",
    "Also, ",
    "Note: ",
    "For the record, ",
    "Please note that ",
    "FYI, ",
    "Update: ",
    "As requested, ",
    "In short, ",
    "Finally, ",
)
LINKS = (
    " is recorded as ",
    " appears as ",
    " was noted as ",
    " comes to ",
    " is entered as ",
    " reads as ",
    ": ",
    " is ",
    " = ",
    " - ",
    " was ",
    " reads ",
    " equals ",
    " shows ",
    " is listed as ",
    " is set to ",
    " came out as ",
    " stands at ",
    " turned out to be ",
    " is given as ",
)
VALUE_FIRST = (
    "{v} is recorded as the {l}",
    "{v} is listed as its {l}",
    "{v} goes under {l}",
    "{v} counts as the {l}",
    "{v} is the {l}",
    "{v} for {l}",
    "{v} ({l})",
    "{v} as {l}",
    "{v}, the {l}",
    "{v} as the {l}",
    "{v} is its {l}",
    "{v} was the {l}",
)
# training-only prefixes (the held-out split uses PREFIXES alone)
TRAIN_PREFIXES = (
    "By the way, ",
    "To confirm, ",
    "Recorded: ",
    "Then again, ",
    "Last we checked, ",
    "Per the file, ",
)
HELD_OUT_LINKS = 4
HELD_OUT_VALUE_FIRST = 2
GENERIC_LINKS_HELD_OUT = LINKS[-HELD_OUT_LINKS:]


FILLER = "now then still already just really currently officially apparently clearly simply finally usually reportedly certainly indeed basically actually also again once truly exactly".split()  # fmt: skip
DISTRACTORS = (
    "The weather was mild.", "Thanks for reading.", "More details may follow.", "This was written quickly.",
    "Nothing else to add.", "See you soon.", "All other items are unchanged.", "Please keep this note.",
    "The office opens at nine.", "Questions go to the front desk.", "Keep this for your records.", "Have a nice day.",
)  # fmt: skip


def _noise_words(rng: random.Random, lo: int = 1, hi: int = 3) -> str:
    """``lo``–``hi`` words that mean nothing here: made-up words and filler (training only)."""
    return " ".join(made_up_word(rng).lower() if rng.random() < 0.6 else rng.choice(FILLER) for _ in range(rng.randint(lo, hi)))


INTRO_WORDS = ("note", "record", "entry", "summary", "notice", "memo", "sheet", "details", "update", "report", "file", "overview")


# common English words that are no field's label and appear in no held-out intro or aside
# (tests/test_demo_model.py checks both), for training-only asides
ASIDE_WORDS = tuple(
    "please kindly we you they our that these those all some any more most other each every "
    "bring call ask tell show write open close start finish wait look find give take make "
    "team list form copy box line side part case point group "
    "soon later tomorrow early late there again always never often maybe perhaps "
    "good great small large new old next last second few many little much well better best "
    "thanks welcome sorry hello regards cheers meeting plan week month evening weekend holiday "
    "about after before during under over between without within around".split()
)


def noise_sentence(rng: random.Random, intro: bool = False) -> str:
    """Training only: a sentence without any field's label, of common English words, made-up
    (often capitalized) words and filler, as an intro (``"Zorvak memo."``, ``"Weekend update:"``)
    or an aside (``"Please check the desk later."``), so that words outside a labelled sentence,
    capitalized sentence openers included, are never taken for values (the held-out intros and
    asides are sentences the model has never seen)."""
    if intro:
        if rng.random() < 0.5:
            head = " ".join(rng.choice(ASIDE_WORDS) for _ in range(rng.randint(1, 2))).capitalize()
        else:
            head = " ".join(
                made_up_word(rng) if i == 0 or rng.random() < 0.5 else made_up_word(rng).lower() for i in range(rng.randint(1, 2))
            )
        return f"{head} {rng.choice(INTRO_WORDS)}{rng.choice(['.', ':', '!'])}"
    if rng.random() < 0.5:
        words = [rng.choice(ASIDE_WORDS) for _ in range(rng.randint(3, 7))]
    else:
        words = _noise_words(rng, 2, 5).split(" ")
    if rng.random() < 0.5:
        words[rng.randrange(len(words))] = made_up_word(rng)
    sentence = " ".join(words)
    return sentence[0].upper() + sentence[1:] + rng.choice([".", ".", "!"])


# Training-only link grammar: an auxiliary, a participle and a preposition ("has been logged
# under"), or a "to be" chain ("is said to be"): hundreds of wordings between a label and its
# value instead of LINKS' sixteen, so that the model finds a value after any run of linking
# words (one that ends in "to be" included).  None is a held-out link: the held-out links' own
# verbs (given, came, stands, turned) are in none of these lists (tests/test_demo_model.py).
LINK_AUX = ("is", "was", "has been", "had been", "is now", "was then", "will be", "is still", "is currently", "got")
LINK_PARTICIPLES = (
    "listed", "recorded", "noted", "marked", "logged", "entered", "written", "stated", "filed", "registered",
    "reported", "shown", "confirmed", "printed", "typed", "saved", "updated", "put down", "set",
)  # fmt: skip
LINK_PREPS = ("as", "as", "to", "at", "under", "with", "", ":")
TO_BE = (
    "seems to be", "appears to be", "proved to be", "happens to be", "is said to be", "is known to be",
    "was found to be", "is meant to be", "is thought to be", "is believed to be", "is likely to be", "was reported to be",
)  # fmt: skip


def _grammar_link(aux: str, participle: str, prep: str) -> str:
    """``"was logged under"``, ``"has been noted:"``, ``"is set"``."""
    link = f"{aux} {participle}"
    return link + prep if prep in ("", ":") else f"{link} {prep}"


def composed_links() -> frozenset[str]:
    """Every link the training-only link grammar can write (without surrounding spaces)."""
    combos = itertools.product(LINK_AUX, LINK_PARTICIPLES, LINK_PREPS)
    return frozenset(TO_BE) | {_grammar_link(*c) for c in combos}


def _composed_link(rng: random.Random) -> str:
    """One link of the training-only link grammar, without surrounding spaces (``"was logged
    under"``, ``"is said to be"``, ``"has been noted:"``)."""
    if rng.random() < 0.3:
        return rng.choice(TO_BE)
    prep = rng.choice(LINK_PREPS)  # drawn first: the shipped model's training stream
    return _grammar_link(rng.choice(LINK_AUX), rng.choice(LINK_PARTICIPLES), prep)


def _link(split: str, rng: random.Random) -> str:
    """A fixed link, or (train only) one of the link grammar's, one padded with 1–2 filler words,
    or a link of 1–3 meaningless words, so no single wording between a label and its value is
    needed to find the value."""
    links = LINKS[:-HELD_OUT_LINKS] if split == "train" else LINKS[-HELD_OUT_LINKS:]
    link = rng.choice(links)
    if split == "train" and rng.random() < 0.35:
        link = f" {_composed_link(rng)} "
    if split == "train" and rng.random() < 0.5:
        link = " " + " ".join(rng.sample(FILLER, rng.randint(1, 2))) + link
    if split == "train" and rng.random() < 0.3:
        link = " " + _noise_words(rng) + rng.choice([" ", ": ", " - "])
    return link


def _generic(label: str, shown: str, split: str, rng: random.Random) -> str:
    firsts = VALUE_FIRST[:-HELD_OUT_VALUE_FIRST] if split == "train" else VALUE_FIRST[-HELD_OUT_VALUE_FIRST:]
    if rng.random() < 0.7:
        body = rng.choice([label, f"the {label}", f"its {label}"]) + _link(split, rng) + shown
    elif split == "train" and rng.random() < 0.4:
        # training only: the value followed by meaningless lowercase words, then the label, so
        # that a value is known to end where the lowercase words start ("Dr. Costa examined ...")
        body = f"{shown} {_noise_words(rng, 1, 3)} {rng.choice(['', 'the ', 'its ', 'for ', 'as '])}{label}"
    elif split == "train" and rng.random() < 0.4:
        # training only: value first through the link grammar ("Oslo was logged as the city")
        link = _composed_link(rng).rstrip(":")
        body = f"{shown} {link} {rng.choice(['the ', 'its ', ''])}{label}"
    else:
        body = rng.choice(firsts).format(v=shown, l=label)
    prefix = rng.choice(PREFIXES + TRAIN_PREFIXES if split == "train" else PREFIXES)
    sentence = prefix + body
    return sentence[0].upper() + sentence[1:] + "."


# training-only boolean sentences: a (shortened, sometimes modified) label with a yes/no word, or
# a polarity word around it ("No member.", "With zorvak breakfast.", "Remote? No.")
YES_WORDS = ("yes", "yes", "true", "confirmed", "on")
NO_WORDS = ("no", "no", "false", "none", "off")
NEGATIONS = ("no", "not", "without", "never", "none", "false", "off", "nothing")
BOOL_ADVERBS = ("Entirely", "Completely", "Totally", "Definitely", "Certainly", "Always", "Really")


def bool_phrase(label: str, value: bool, rng: random.Random) -> str:
    """Training only: a boolean stated through its label in one of many shapes, the label often
    shortened (``"is member"`` → ``"member"``) or preceded by a meaningless word, so that the
    polarity is read from the words around any label-like phrase, not from fixed sentences."""
    words = label.split(" ")
    if len(words) > 1 and words[0] in ("is", "in") and rng.random() < 0.5:
        label = " ".join(words[1:])
    if rng.random() < 0.3:
        modifier = rng.choice([made_up_word(rng), made_up_word(rng).lower(), rng.choice(ASIDE_WORDS)])
        if modifier.lower() not in NEGATIONS:  # a modifier never flips the polarity
            label = f"{modifier} {label}"
    cap = label[0].upper() + label[1:]
    word = rng.choice(YES_WORDS if value else NO_WORDS)
    if value:
        forms = [
            f"{cap}: {word}.",
            f"{cap}? {word.capitalize()}.",
            f"With {label}.",
            f"{cap} included.",
            f"{rng.choice(BOOL_ADVERBS)} {label}.",
            f"{cap}, {word}.",
        ]
    else:
        forms = [
            f"{cap}: {word}.",
            f"{cap}? {word.capitalize()}.",
            f"No {label}.",
            f"Without {label}.",
            f"Not {label}.",
            f"{cap} not included.",
        ]
    return rng.choice(forms)


def _stand_in_label(rng: random.Random) -> str:
    """Training only: 1–2 meaningless lowercase words in place of a field's name, so that a value
    next to a label never seen (a held-out synonym) is still taken for the one field whose
    label is nowhere in the text."""
    return " ".join(made_up_word(rng).lower() for _ in range(rng.randint(1, 2)))


def phrase(field: FieldSpec, split: str, rng: random.Random, value: Any, stand_in: bool = False) -> str:
    """One sentence stating ``value`` for ``field``.  ``stand_in`` (training only) states it
    through a meaningless label instead of the field's name or own phrasings."""
    is_bool = field.schema.get("type") == "boolean"
    label = _stand_in_label(rng) if stand_in else field.name.replace("_", " ")
    if split == "train" and is_bool and rng.random() < 0.3:
        return bool_phrase(label, value, rng)
    if stand_in or rng.random() < 0.6:
        shown = ("yes" if value else "no") if is_bool else field.show(rng, value)
        return _generic(label, shown, split, rng)
    template = rng.choice(field.phrases[:-1] if split == "train" else field.phrases[-1:])
    if is_bool:
        yes, no = template.split("|")
        return yes if value else no
    if split == "train" and rng.random() < 0.3:
        # word noise: 1–2 words of the template become meaningless ones, so the model learns to
        # find the value by its type and the words that are left, not by the exact template
        words = template.split(" ")
        slots = [i for i, w in enumerate(words) if "{v}" not in w]
        for i in rng.sample(slots, min(len(slots), rng.randint(1, 2))):
            words[i] = _noise_words(rng, 1, 1) + ("." if words[i].endswith(".") else "")
        template = " ".join(words)
    return template.format(v=field.show(rng, value))

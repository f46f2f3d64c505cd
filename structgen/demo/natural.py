"""Natural sentences for the demo generator: what an entity is (:class:`Frame`: a person, a city,
a product, an event, an order, a company, a book, a film, a pet; defined in
:mod:`~structgen.demo.natural_people` and :mod:`~structgen.demo.natural_things`) and where a
sentence may place each of its fields (:class:`Attr`), so that an entity is described the way
people write, its fields placed by a small grammar instead of one sentence per field
(:mod:`~structgen.demo.natural_text` writes the sentences).

A sentence is built around the entity's head value (a name, a title): a fronted adjunct ("At 34,
…", "Born in Lyon, …"), a role before it ("Our new intern, …"), a premodifier ("the
52-year-old …"), appositives and parentheses after it (", 34, from Lyon," / "(29)"), predicates
joined by "and" ("is 34 and lives in Lyon"), a verb phrase of filler that may hold numbers,
dates and places that are no field's value ("has run the bakery for 30 years"), follow-up
sentences with a pronoun ("She is 34."), or a label list ("Name: … Age: …").  Numbers are
written in digits or words ("forty-two", "Twelve-year-old"), prices with currency signs and
separators, populations as "2.1 million"; a share of texts are all lower case.  Schemas use
arbitrary names for the same fields (``name`` / ``full_name`` / ``personName``), number or
integer types, optional fields the text leaves out, fields in any order, and ``{"type":
"object"}`` alone (``response_format`` ``json_object``: the answer names the fields itself).

Fully determined by the seed; the ``"heldout"`` split draws values from the held-out fifth of
every word list (:mod:`structgen.demo.natural_values`)."""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from structgen.demo import natural_values as nv

Gen = Callable[[random.Random, str], Any]


@dataclass(frozen=True)
class Attr:
    """One field of an entity: schema names (the first is the canonical one, used for
    ``json_object``), its JSON type, a value generator ``gen(rng, split)``, how a value is
    written (``show(rng, value)``), and where a sentence may place it (``{v}``: the written
    value): ``pre`` before the head, ``app`` after it between commas or in parentheses,
    ``pred`` as a predicate, ``front`` as a fronted adjunct, ``labels`` for label lists,
    ``subj`` as a clause of its own where the head (``{h}``) is an object ("{v} wrote {h}"),
    ``tail`` as a phrase closing such a clause ("in {v}").
    Booleans give ``pred`` as ``true phrases | false phrases`` pairs."""

    keys: tuple[str, ...]
    kind: str
    gen: Gen
    show: Callable[[random.Random, Any], str] = lambda _r, v: str(v)
    pre: tuple[str, ...] = ()
    app: tuple[str, ...] = ()
    pred: tuple[str, ...] = ()
    front: tuple[str, ...] = ()
    labels: tuple[str, ...] = ()
    subj: tuple[str, ...] = ()
    tail: tuple[str, ...] = ()


@dataclass(frozen=True)
class Frame:
    """An entity: its head field (written as a noun phrase's head), other fields, roles that
    introduce the head ("my cousin", "the winner"), nouns a premodifier attaches to ("man"),
    filler verb phrases, its pronoun (``None``: he / she), how the head value is written
    (``head_forms``: ``{h}`` is the value, e.g. ``order #{h}``, quotes around a title) and
    clauses that hold the head as an object (``openers``: "I met {h}")."""

    name: str
    head: Attr
    attrs: tuple[Attr, ...]
    roles: tuple[str, ...]
    nouns: tuple[str, ...]
    fillers: tuple[str, ...]
    pronoun: str | None = None
    head_forms: tuple[str, ...] = ("{h}",)
    openers: tuple[str, ...] = field(default=())


def int_shown(words: float = 0.15) -> Callable[[random.Random, Any], str]:
    """An ``Attr.show`` for integers: digits, or words (0–99) with probability ``words``."""
    return lambda rng, v: nv.int_text(rng, v, words)


def int_between(lo: int, hi: int) -> Gen:
    """A value generator: an integer in [lo, hi]."""
    return lambda rng, _s: rng.randint(lo, hi)


def price(rng: random.Random, _s: str) -> float:
    """A value generator: :func:`~structgen.demo.natural_values.price_value`."""
    return nv.price_value(rng)


def coin(rng: random.Random, _s: str) -> bool:
    """A value generator: true or false, evenly."""
    return rng.random() < 0.5


def listed_or_made_up(items: tuple[str, ...]) -> Gen:
    """A value generator: an entry of the split's share of ``items`` (70%) or a made-up word."""
    return lambda rng, split: rng.choice(nv.split_items(items, split)) if rng.random() < 0.7 else nv.made_up_word(rng).lower()


TIME = (
    "last week",
    "in May",
    "on Friday",
    "this spring",
    "two years ago",
    "in 2019",
    "yesterday",
    "at 9 am",
    "in the 1990s",
    "on March 3",
    "since 2011",
    "every Sunday",
    "three times",
    "for a decade",
    "after 12 hours",
    "in under 40 minutes",
)

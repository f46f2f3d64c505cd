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

# ruff: noqa: E501  (word lists and phrasings read best one field per line)
from __future__ import annotations

import datetime
import functools
import itertools
import random
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

from structgen.engine.prompt_format import format_prompt
from structgen.schemas import SchemaOptions

SPLITS = ("train", "heldout")

FIRST = tuple("Ana Ben Carla David Elena Farid Grace Hugo Irene Jonas Kira Liam Maya Noah Olga Pablo Quinn Rosa Samir Tara Umar Vera Wen Ximena Yusuf Zoe Amir Bianca Chen Dario Emma Felix Gita Hana Ivan Julia Kofi Lena Marco Nadia Omar Priya Rafael Sofia Tomas Uma Viktor Willa Yara Zane Aiko Bruno Celia Dmitri Esme Fatima Goran Helga Ines Jamal".split())  # fmt: skip
LAST = tuple("Smith Garcia Chen Müller Rossi Silva Novak Kowalski Tanaka Okafor Patel Johansson Dubois Moreau Costa Ivanova Nguyen Kim Haddad Jensen Schmidt Lopez Weber Fischer Romano Santos Horvat Kaya Mendes Lindqvist Sato Reyes Brennan Duarte Eriksen Farouk Greco Hale Ibarra Jovanovic Keller Laurent Mbeki Nakamura Ortega Park Quint Rahman Stone Torres Ueda Varga Walsh Young Zielinski".split())  # fmt: skip
CITIES = tuple("Lisbon Porto Madrid Berlin Munich Vienna Prague Warsaw Krakow Oslo Bergen Dublin Cork Paris Lyon Nice Rome Milan Turin Athens Zagreb Sofia Riga Tallinn Vilnius Helsinki Geneva Zurich Bern Ghent Leiden Utrecht Seville Bilbao Malaga Naples Verona Graz Brno Gdansk Aarhus Malmo Tampere Salzburg Lucerne Bruges Delft Toledo Genoa".split())  # fmt: skip
STREETS = tuple("Oak Maple Cedar Elm Pine Birch River Lake Hill Park Mill Church Market Station Garden Bridge Forest Harbor Meadow Orchard Willow Spring Chestnut Aspen Poplar Laurel Juniper Hazel Rowan Alder".split())  # fmt: skip
STREET_KINDS = ["Street", "Road", "Avenue", "Lane", "Way"]
SYLLABLES = "ka lo ve ri to na mi so pe du la zen tor vin bel mar cor fin gal hex bra qui sta nel dor pim rus wen yal fo gi ju tam ser kol ane pol vik ema dru".split()  # fmt: skip
COMPANY_KINDS = ("Labs", "Systems", "Group", "Works", "Partners", "Logistics", "Foods", "Energy", "Media", "Robotics")
INDUSTRIES = ["software", "retail", "logistics", "energy", "healthcare", "finance", "education", "manufacturing"]
ADJECTIVES = tuple("Silver Quiet Golden Swift Bright Hidden Crimson Gentle Frozen Wild Lucky Ancient Velvet Hollow Bold Paper Iron Lunar Amber Northern Misty Rapid Solar Tiny Grand".split())  # fmt: skip
NOUNS = tuple("Lamp Kettle River Garden Compass Lantern Anchor Falcon Harbor Orchard Mirror Bridge Engine Forest Island Candle Meadow Tower Feather Valley Clock Pillow Basket Drum Sail".split())  # fmt: skip
CATEGORIES = ["kitchen", "garden", "office", "toys", "sports", "electronics"]
ORDER_STATUS = ["pending", "shipped", "delivered", "cancelled"]
EVENT_KINDS = ["concert", "conference", "workshop", "festival", "meetup"]
AIRLINES = tuple("Aerolux Skyway Nordair Bluejet Transalp Coastline Meridian Polaris Zephyr Aurora Atlantis Condorra Vistair Solstice Horizonte".split())  # fmt: skip
CABINS = ["economy", "premium", "business", "first"]
REASONS = ("checkup", "headache", "fever", "back pain", "sprained ankle", "allergy", "cough", "rash", "flu symptoms", "ear infection", "vaccination", "sore throat", "insomnia", "migraine", "knee pain")  # fmt: skip
SPECIALTIES = ["cardiology", "dermatology", "pediatrics", "neurology", "orthopedics", "general practice"]
GENRES = ["mystery", "fantasy", "romance", "history", "science", "poetry", "thriller"]
ROOM_TYPES = ["single", "double", "twin", "suite"]
JOB_LEVELS = ["junior", "mid", "senior", "lead"]
JOB_TITLES = tuple("engineer designer analyst accountant nurse teacher chef editor technician manager pilot architect".split())
TAGS = tuple("urgent fragile gift bulk priority sample refurbished eco imported local seasonal limited".split())
MONTHS = ["January", "February", "March", "April", "May", "June", "July", "August", "September", "October", "November", "December"]


@functools.cache
def _split(items: tuple[str, ...], split: str) -> tuple[str, ...]:
    """4 of every 5 entries for "train", the 5th for "heldout" (computed once per word list)."""
    return tuple(x for i, x in enumerate(items) if (i % 5 == 4) == (split == "heldout"))


class Example(NamedTuple):
    """One pair: ``domain``, ``schema`` (JSON Schema), ``text``, ``answer`` (the value),
    ``prompt`` (the model input) and ``target`` (the canonical JSON the model must write)."""

    domain: str
    schema: dict[str, Any]
    text: str
    answer: dict[str, Any]
    prompt: str
    target: str


@dataclass(frozen=True)
class FieldSpec:
    """One property: its schema, whether it is required, a value generator ``gen(rng, split)``,
    phrasings (``{v}`` is the rendered value; the last one is held out) and how a value is
    rendered in text (``show(rng, value)``; booleans use ``phrases`` as ``true|false`` pairs)."""

    name: str
    schema: dict[str, Any]
    required: bool
    gen: Callable[[random.Random, str], Any]
    phrases: tuple[str, ...]
    show: Callable[[random.Random, Any], str] = lambda _rng, v: str(v)


@dataclass(frozen=True)
class Domain:
    name: str
    intros: tuple[str, ...]
    fields: tuple[FieldSpec, ...]


# ------------------------------------------------------------------------------ value generators


def _word(rng: random.Random) -> str:
    """A made-up capitalized word: values the model cannot have memorized, so it
    must copy them from the text.  Half are random letter strings, so every token piece of the
    vocabulary shows up in values during training (a token never seen there cannot be copied)."""
    if rng.random() < 0.5:
        return "".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randint(3, 9))).capitalize()
    return "".join(rng.choice(SYLLABLES) for _ in range(rng.randint(2, 3))).capitalize()


@functools.cache
def _token_pieces() -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The purely alphabetic pieces of the demo model's tokenizer: (word-initial pieces, inner
    pieces), read from the packaged ``tokenizer.json``."""
    import json

    from structgen.api import default_model_path

    vocab = json.loads(Path(default_model_path(), "tokenizer.json").read_text())["model"]["vocab"]
    initial = tuple(sorted(t[1:] for t in vocab if t.startswith("\u0120") and t[1:].isascii() and t[1:].isalpha()))
    inner = tuple(sorted(t for t in vocab if t.isascii() and t.isalpha()))
    return initial, inner


def _piece_word(rng: random.Random) -> str:
    """A made-up word glued from 1–3 random alphabetic pieces of the tokenizer's vocabulary
    (training only): without these, many pieces never occur in a training answer, and a piece
    the model never wrote is one it cannot copy."""
    initial, inner = _token_pieces()
    word = rng.choice(initial) + "".join(rng.choice(inner) for _ in range(rng.randint(0, 2)))
    return word[:1].upper() + word[1:]


def _train_word(rng: random.Random) -> str:
    """A made-up word for training values: :func:`_word` or :func:`_piece_word`."""
    return _piece_word(rng) if rng.random() < 0.5 else _word(rng)


def _choose(rng: random.Random, split: str, items: tuple[str, ...], made_up: float = 0.5) -> str:
    """An entry of the split's share of ``items``, or (with probability ``made_up``) a made-up word
    (training also draws :func:`_piece_word`; the held-out split draws as it always did)."""
    if rng.random() < made_up:
        return _train_word(rng) if split == "train" else _word(rng)
    return rng.choice(_split(items, split))


def _pick(items: tuple[str, ...], made_up: float = 0.5) -> Callable[[random.Random, str], str]:
    """:func:`_choose` as a field's value generator."""
    return lambda rng, split: _choose(rng, split, items, made_up)


def _pick_open(items: tuple[str, ...], train_made_up: float, max_words: int = 1) -> Callable[[random.Random, str], str]:
    """A value of a small word list (reasons, job titles) that the model must still copy from the
    text: in training, with probability ``train_made_up``, 1–``max_words`` lowercase made-up
    words instead, so that the held-out entries are not the only values it never wrote.  The
    held-out split draws exactly as ``_pick(items, 0.0)`` does."""

    def gen(rng: random.Random, split: str) -> str:
        if rng.random() < (train_made_up if split == "train" else 0.0):
            return " ".join(_train_word(rng).lower() for _ in range(rng.randint(1, max_words)))
        return rng.choice(_split(items, split))

    return gen


def _first(rng: random.Random, split: str) -> str:
    return _choose(rng, split, FIRST)


def _last(rng: random.Random, split: str) -> str:
    return _choose(rng, split, LAST)


def _person(rng: random.Random, split: str) -> str:
    return f"{_first(rng, split)} {_last(rng, split)}"


def _company(rng: random.Random, split: str) -> str:
    root = "".join(rng.choice(SYLLABLES) for _ in range(rng.randint(2, 3))).capitalize()
    kind = rng.choice(_split(COMPANY_KINDS, split))
    if split == "train" and rng.random() < 0.4:
        kind = _train_word(rng)  # training only: the kind word is copied too, not picked from a list
    return f"{root} {kind}"


def _adj_noun(rng: random.Random, split: str) -> str:
    return f"{_choose(rng, split, ADJECTIVES, 0.3)} {_choose(rng, split, NOUNS, 0.3)}"


def _title(rng: random.Random, split: str) -> str:
    return f"The {_adj_noun(rng, split)}"


def _product(rng: random.Random, split: str) -> str:
    return _adj_noun(rng, split)


def _street(rng: random.Random, split: str) -> str:
    return f"{rng.randint(1, 250)} {_choose(rng, split, STREETS)} {rng.choice(STREET_KINDS)}"


def _address(rng: random.Random, split: str) -> dict[str, Any]:
    return {"street": _street(rng, split), "city": _choose(rng, split, CITIES), "zip": f"{rng.randint(1000, 99999):05d}"}


def _email(rng: random.Random, split: str) -> str:
    user = f"{_first(rng, split).lower()}.{_last(rng, split).lower()}".replace("ü", "u")
    return f"{user}@{rng.choice(['mail', 'post', 'inbox', 'web'])}.{rng.choice(['com', 'org', 'net', 'eu'])}"


def _date(rng: random.Random, _split_: str) -> str:
    d = datetime.date(2015, 1, 1) + datetime.timedelta(days=rng.randrange(4000))
    return d.isoformat()


def _show_date(rng: random.Random, iso: str) -> str:
    d = datetime.date.fromisoformat(iso)
    return rng.choice([iso, f"{MONTHS[d.month - 1]} {d.day}, {d.year}", f"{d.day} {MONTHS[d.month - 1]} {d.year}"])


def _price(rng: random.Random, _split_: str) -> float:
    cents = rng.choice([c for c in range(1, 100) if c % 10])
    return round(rng.randint(1, 2000) + cents / 100, 2)


def _show_price(_rng: random.Random, v: float) -> str:
    return f"${v:.2f}"


def _int(lo: int, hi: int) -> Callable[[random.Random, str], int]:
    return lambda rng, _s: rng.randint(lo, hi)


def _bool(rng: random.Random, _s: str) -> bool:
    return rng.random() < 0.5


def _list_of(items: tuple[str, ...], lo: int, hi: int) -> Callable[[random.Random, str], list[str]]:
    def gen(rng: random.Random, split: str) -> list[str]:
        pool = _split(items, split)
        out = rng.sample(pool, min(len(pool), rng.randint(lo, hi)))
        if split == "train":  # training only: made-up items, so items are copied, not recalled
            out = [_train_word(rng).lower() if rng.random() < 0.5 else x for x in out]
        return out

    return gen


def _show_list(_rng: random.Random, v: list[str]) -> str:
    return v[0] if len(v) == 1 else ", ".join(v[:-1]) + " and " + v[-1]


def _show_address(rng: random.Random, a: dict[str, Any]) -> str:
    return rng.choice([f"{a['street']}, {a['city']} {a['zip']}", f"{a['street']} in {a['city']} (postal code {a['zip']})"])


def _f(name: str, schema: dict[str, Any], required: bool, gen: Any, phrases: list[str], show: Any = None) -> FieldSpec:
    return FieldSpec(name, schema, required, gen, tuple(phrases), show or (lambda _rng, v: str(v)))


STR = {"type": "string", "minLength": 1, "maxLength": 40}
DATE = {"type": "string", "format": "date"}
ADDRESS = {
    "type": "object",
    "properties": {"street": STR, "city": STR, "zip": {"type": "string", "pattern": "^[0-9]{5}$"}},
    "required": ["street", "city", "zip"],
    "additionalProperties": False,
}
PRICE = {"type": "number", "minimum": 0, "maximum": 100000}


def _enum(values: list[str]) -> dict[str, Any]:
    return {"enum": values}


DOMAINS: tuple[Domain, ...] = (
    Domain(
        "person",
        ("A short profile follows.", "Here is what we know about someone.", "Contact card:", "Profile notes."),
        (
            _f(
                "name",
                STR,
                True,
                _person,
                ["Name: {v}.", "This profile belongs to {v}.", "The person is called {v}.", "{v} is the person described here."],
            ),
            _f(
                "age",
                {"type": "integer", "minimum": 0, "maximum": 120},
                True,
                _int(18, 95),
                ["Age: {v}.", "They are {v} years old.", "The person's age is {v}.", "At {v}, they keep busy."],
            ),
            _f("email", STR, False, _email, ["Email: {v}.", "You can write to {v}.", "Their email address is {v}.", "Reach them at {v}."]),
            _f(
                "address",
                ADDRESS,
                False,
                _address,
                ["Address: {v}.", "They live at {v}.", "Home is {v}.", "Their home address is {v}."],
                _show_address,
            ),
            _f(
                "is_member",
                {"type": "boolean"},
                False,
                _bool,
                [
                    "They are a member.|They are not a member.",
                    "Membership: active.|Membership: none.",
                    "They joined the club.|They never joined the club.",
                    "Club member: yes.|Club member: no.",
                ],
            ),
        ),
    ),
    Domain(
        "company",
        ("Company overview.", "Business register entry:", "A note about a firm.", "Corporate summary."),
        (
            _f(
                "company",
                STR,
                True,
                _company,
                ["Company: {v}.", "The firm is {v}.", "{v} is the business in question.", "This entry concerns {v}."],
            ),
            _f(
                "industry",
                _enum(INDUSTRIES),
                True,
                lambda rng, s: rng.choice(INDUSTRIES),
                ["Industry: {v}.", "It works in {v}.", "Its sector is {v}.", "The company operates in {v}."],
            ),
            _f(
                "employees",
                {"type": "integer", "minimum": 1, "maximum": 1000000},
                False,
                _int(3, 90000),
                ["Employees: {v}.", "It employs {v} people.", "The headcount is {v}.", "Staff count stands at {v}."],
            ),
            _f(
                "founded",
                {"type": "integer", "minimum": 1800, "maximum": 2030},
                False,
                _int(1890, 2024),
                ["Founded: {v}.", "It was founded in {v}.", "The firm dates from {v}.", "Its founding year is {v}."],
            ),
            _f(
                "headquarters",
                ADDRESS,
                False,
                _address,
                ["Headquarters: {v}.", "The head office is at {v}.", "It is based at {v}.", "Main office: {v}."],
                _show_address,
            ),
        ),
    ),
    Domain(
        "product",
        ("Product listing.", "Catalog item:", "An item in our shop.", "Product sheet."),
        (
            _f("product", STR, True, _product, ["Product: {v}.", "The item is the {v}.", "We sell the {v}.", "Listing for the {v}."]),
            _f("price", PRICE, True, _price, ["Price: {v}.", "It costs {v}.", "The price is {v}.", "Yours for {v}."], _show_price),
            _f(
                "category",
                _enum(CATEGORIES),
                False,
                lambda rng, s: rng.choice(CATEGORIES),
                ["Category: {v}.", "It belongs in {v}.", "Filed under {v}.", "Shelved with {v} goods."],
            ),
            _f(
                "in_stock",
                {"type": "boolean"},
                False,
                _bool,
                [
                    "In stock.|Out of stock.",
                    "Available now.|Currently unavailable.",
                    "We have it in stock.|It is sold out.",
                    "Ships today.|Back-ordered.",
                ],
            ),
            _f(
                "tags",
                {"type": "array", "items": STR, "maxItems": 4},
                False,
                _list_of(TAGS, 1, 3),
                ["Tags: {v}.", "It is tagged {v}.", "Labels: {v}.", "Marked as {v}."],
                _show_list,
            ),
        ),
    ),
    Domain(
        "order",
        ("Order confirmation.", "Purchase record:", "An order was placed.", "Order details."),
        (
            _f(
                "order_id",
                {"type": "integer", "minimum": 1, "maximum": 9999999},
                True,
                _int(1000, 999999),
                ["Order number {v}.", "Order ID: {v}.", "This is order {v}.", "Reference {v} applies."],
            ),
            _f("customer", STR, True, _person, ["Customer: {v}.", "It was placed by {v}.", "The buyer is {v}.", "Ordered by {v}."]),
            _f(
                "status",
                _enum(ORDER_STATUS),
                True,
                lambda rng, s: rng.choice(ORDER_STATUS),
                ["Status: {v}.", "The order is {v}.", "Current state: {v}.", "It has been marked {v}."],
            ),
            _f(
                "total",
                PRICE,
                False,
                _price,
                ["Total: {v}.", "The total comes to {v}.", "Amount charged: {v}.", "They paid {v}."],
                _show_price,
            ),
            _f(
                "quantity",
                {"type": "integer", "minimum": 1, "maximum": 1000},
                False,
                _int(1, 40),
                ["Quantity: {v}.", "They bought {v} units.", "Items in the order: {v}.", "{v} pieces were ordered."],
            ),
            _f(
                "shipping_address",
                ADDRESS,
                False,
                _address,
                ["Ship to {v}.", "Delivery address: {v}.", "It goes to {v}.", "Send it to {v}."],
                _show_address,
            ),
        ),
    ),
    Domain(
        "event",
        ("Event announcement.", "Save the date!", "Calendar entry:", "Upcoming event."),
        (
            _f("event", STR, True, _title, ["Event: {v}.", "Join us for {v}.", "The event is called {v}.", "Coming up: {v}."]),
            _f(
                "kind",
                _enum(EVENT_KINDS),
                True,
                lambda rng, s: rng.choice(EVENT_KINDS),
                ["Type: {v}.", "It is a {v}.", "Format: {v}.", "Expect a {v}."],
            ),
            _f(
                "date",
                DATE,
                True,
                _date,
                ["Date: {v}.", "It takes place on {v}.", "Mark {v} in your calendar.", "Scheduled for {v}."],
                _show_date,
            ),
            _f("city", STR, False, _pick(CITIES), ["City: {v}.", "It will be held in {v}.", "Location: {v}.", "The venue is in {v}."]),
            _f(
                "capacity",
                {"type": "integer", "minimum": 1, "maximum": 100000},
                False,
                _int(20, 5000),
                ["Capacity: {v}.", "There are {v} seats.", "Up to {v} guests can attend.", "Room for {v} people."],
            ),
            _f(
                "free",
                {"type": "boolean"},
                False,
                _bool,
                [
                    "Entry is free.|Tickets are required.",
                    "No charge.|Paid entry.",
                    "Admission: free.|Admission: paid.",
                    "It costs nothing.|It is a paid event.",
                ],
            ),
        ),
    ),
    Domain(
        "flight",
        ("Flight booking.", "Your itinerary:", "Travel confirmation.", "Boarding details."),
        (
            _f("passenger", STR, True, _person, ["Passenger: {v}.", "Booked for {v}.", "Traveller name: {v}.", "The ticket is for {v}."]),
            _f("airline", STR, True, _pick(AIRLINES), ["Airline: {v}.", "You fly with {v}.", "Operated by {v}.", "Carrier: {v}."]),
            _f(
                "flight_number",
                {"type": "string", "pattern": "^[A-Z]{2}[0-9]{2,4}$"},
                True,
                lambda rng, s: "".join(rng.choice("ABCDEFGHJKLMNPRSTUVWXZ") for _ in range(2)) + str(rng.randint(10, 9999)),
                ["Flight {v}.", "Flight number: {v}.", "You are on flight {v}.", "Board flight {v}."],
            ),
            _f("from_city", STR, True, _pick(CITIES), ["From: {v}.", "Departing from {v}.", "Origin: {v}.", "It leaves {v}."]),
            _f("to_city", STR, True, _pick(CITIES), ["To: {v}.", "Arriving in {v}.", "Destination: {v}.", "It lands in {v}."]),
            _f("date", DATE, False, _date, ["Date: {v}.", "Departure on {v}.", "You travel on {v}.", "The flight is on {v}."], _show_date),
            _f(
                "cabin",
                _enum(CABINS),
                False,
                lambda rng, s: rng.choice(CABINS),
                ["Cabin: {v}.", "Seat class: {v}.", "You fly {v}.", "Booked in {v} class."],
            ),
        ),
    ),
    Domain(
        "medical_visit",
        ("Clinic visit summary.", "Appointment notes:", "Patient visit record.", "Visit report."),
        (
            _f("patient", STR, True, _person, ["Patient: {v}.", "The patient is {v}.", "Seen today: {v}.", "Visit for {v}."]),
            _f(
                "doctor",
                STR,
                True,
                lambda rng, s: "Dr. " + _last(rng, s),
                ["Doctor: {v}.", "Attending physician: {v}.", "Seen by {v}.", "{v} examined the patient."],
            ),
            _f(
                "specialty",
                _enum(SPECIALTIES),
                False,
                lambda rng, s: rng.choice(SPECIALTIES),
                ["Department: {v}.", "Specialty: {v}.", "Clinic: {v}.", "Referred to {v}."],
            ),
            _f("date", DATE, True, _date, ["Date: {v}.", "Visit date: {v}.", "Seen on {v}.", "The appointment was on {v}."], _show_date),
            _f(
                "reason",
                STR,
                True,
                _pick_open(REASONS, 0.6, max_words=2),
                ["Reason: {v}.", "Complaint: {v}.", "They came in with {v}.", "Presenting issue: {v}."],
            ),
            _f(
                "follow_up",
                {"type": "boolean"},
                False,
                _bool,
                [
                    "A follow-up is needed.|No follow-up needed.",
                    "Return visit booked.|No return visit.",
                    "Follow-up: yes.|Follow-up: no.",
                    "Come back in two weeks.|No need to come back.",
                ],
            ),
        ),
    ),
    Domain(
        "book",
        ("Book record.", "Library catalog entry:", "A book recommendation.", "Bibliographic note."),
        (
            _f("title", STR, True, _title, ["Title: {v}.", "The book is {v}.", "Read {v}.", "It is titled {v}."]),
            _f("author", STR, True, _person, ["Author: {v}.", "Written by {v}.", "It is by {v}.", "{v} wrote it."]),
            _f(
                "year",
                {"type": "integer", "minimum": 1500, "maximum": 2030},
                False,
                _int(1900, 2024),
                ["Year: {v}.", "Published in {v}.", "It came out in {v}.", "First printed in {v}."],
            ),
            _f(
                "pages",
                {"type": "integer", "minimum": 1, "maximum": 5000},
                False,
                _int(80, 1200),
                ["Pages: {v}.", "It runs to {v} pages.", "Length: {v} pages.", "A {v}-page read."],
            ),
            _f(
                "genre",
                _enum(GENRES),
                False,
                lambda rng, s: rng.choice(GENRES),
                ["Genre: {v}.", "It is a {v} book.", "Shelved under {v}.", "A work of {v}."],
            ),
        ),
    ),
    Domain(
        "hotel_booking",
        ("Hotel reservation.", "Booking confirmation:", "Your stay is booked.", "Reservation summary."),
        (
            _f("guest", STR, True, _person, ["Guest: {v}.", "Reserved for {v}.", "The guest is {v}.", "Booking name: {v}."]),
            _f(
                "hotel",
                STR,
                True,
                lambda rng, s: f"Hotel {_adj_noun(rng, s)}",
                ["Hotel: {v}.", "You stay at {v}.", "Property: {v}.", "Booked at {v}."],
            ),
            _f("check_in", DATE, True, _date, ["Check-in: {v}.", "Arrival on {v}.", "You arrive {v}.", "Check in on {v}."], _show_date),
            _f(
                "nights",
                {"type": "integer", "minimum": 1, "maximum": 60},
                True,
                _int(1, 14),
                ["Nights: {v}.", "The stay is {v} nights.", "Length of stay: {v} nights.", "You stay {v} nights."],
            ),
            _f(
                "room",
                _enum(ROOM_TYPES),
                False,
                lambda rng, s: rng.choice(ROOM_TYPES),
                ["Room: {v}.", "Room type: {v}.", "You have a {v} room.", "A {v} room is reserved."],
            ),
            _f(
                "breakfast",
                {"type": "boolean"},
                False,
                _bool,
                [
                    "Breakfast included.|Breakfast not included.",
                    "With breakfast.|Room only.",
                    "Breakfast: yes.|Breakfast: no.",
                    "Morning meal included.|No morning meal.",
                ],
            ),
        ),
    ),
    Domain(
        "job_posting",
        ("Job posting.", "We are hiring!", "Open position:", "Vacancy notice."),
        (
            _f("role", STR, True, _pick_open(JOB_TITLES, 0.6), ["Role: {v}.", "We need a {v}.", "Position: {v}.", "Hiring a {v}."]),
            _f("company", STR, True, _company, ["Company: {v}.", "Employer: {v}.", "Join {v}.", "The hiring firm is {v}."]),
            _f(
                "level",
                _enum(JOB_LEVELS),
                False,
                lambda rng, s: rng.choice(JOB_LEVELS),
                ["Level: {v}.", "Seniority: {v}.", "This is a {v} role.", "Experience level: {v}."],
            ),
            _f(
                "salary",
                {"type": "integer", "minimum": 0, "maximum": 1000000},
                False,
                lambda rng, s: rng.randint(20, 180) * 1000,
                ["Salary: {v}.", "Pay is {v} per year.", "It pays {v}.", "Annual salary: {v}."],
            ),
            _f("city", STR, False, _pick(CITIES), ["City: {v}.", "Based in {v}.", "The office is in {v}.", "Work from {v}."]),
            _f(
                "remote",
                {"type": "boolean"},
                False,
                _bool,
                [
                    "Remote work is allowed.|On-site only.",
                    "Remote: yes.|Remote: no.",
                    "You can work from home.|No remote work.",
                    "Fully remote.|Office based.",
                ],
            ),
        ),
    ),
)


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
    return " ".join(_word(rng).lower() if rng.random() < 0.6 else rng.choice(FILLER) for _ in range(rng.randint(lo, hi)))


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


def _noise_sentence(rng: random.Random, intro: bool = False) -> str:
    """Training only: a sentence without any field's label, of common English words, made-up
    (often capitalized) words and filler, as an intro (``"Zorvak memo."``, ``"Weekend update:"``)
    or an aside (``"Please check the desk later."``), so that words outside a labelled sentence,
    capitalized sentence openers included, are never taken for values (the held-out intros and
    asides are sentences the model has never seen)."""
    if intro:
        if rng.random() < 0.5:
            head = " ".join(rng.choice(ASIDE_WORDS) for _ in range(rng.randint(1, 2))).capitalize()
        else:
            head = " ".join(_word(rng) if i == 0 or rng.random() < 0.5 else _word(rng).lower() for i in range(rng.randint(1, 2)))
        return f"{head} {rng.choice(INTRO_WORDS)}{rng.choice(['.', ':', '!'])}"
    if rng.random() < 0.5:
        words = [rng.choice(ASIDE_WORDS) for _ in range(rng.randint(3, 7))]
    else:
        words = _noise_words(rng, 2, 5).split(" ")
    if rng.random() < 0.5:
        words[rng.randrange(len(words))] = _word(rng)
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


def _bool_phrase(label: str, value: bool, rng: random.Random) -> str:
    """Training only: a boolean stated through its label in one of many shapes, the label often
    shortened (``"is member"`` → ``"member"``) or preceded by a meaningless word, so that the
    polarity is read from the words around any label-like phrase, not from fixed sentences."""
    words = label.split(" ")
    if len(words) > 1 and words[0] in ("is", "in") and rng.random() < 0.5:
        label = " ".join(words[1:])
    if rng.random() < 0.3:
        modifier = rng.choice([_word(rng), _word(rng).lower(), rng.choice(ASIDE_WORDS)])
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
    return " ".join(_word(rng).lower() for _ in range(rng.randint(1, 2)))


def _phrase(field: FieldSpec, split: str, rng: random.Random, value: Any, stand_in: bool = False) -> str:
    """One sentence stating ``value`` for ``field``.  ``stand_in`` (training only) states it
    through a meaningless label instead of the field's name or own phrasings."""
    is_bool = field.schema.get("type") == "boolean"
    label = _stand_in_label(rng) if stand_in else field.name.replace("_", " ")
    if split == "train" and is_bool and rng.random() < 0.3:
        return _bool_phrase(label, value, rng)
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
        sentences.append(_phrase(f, phrasing, rng, value, stand_in=i == stand_in))
    distractors = DISTRACTORS[:-3] if split == "train" else DISTRACTORS[-3:]
    sentences += rng.sample(distractors, rng.choice([0, 0, 1, 2]))
    if split == "train" and rng.random() < 0.4:
        sentences += [_noise_sentence(rng) for _ in range(rng.randint(1, 2))]
    rng.shuffle(sentences)
    intros = dom.intros[:-1] if split == "train" else dom.intros[-1:]
    intro = rng.choice(intros)
    if split == "train" and rng.random() < 0.3:
        intro = _noise_sentence(rng, intro=True)
    text = " ".join([intro, *sentences])
    return Example(dom.name, schema, text, answer, format_prompt(schema, text), SchemaOptions().dumps(answer))


def generate_examples(n: int, split: str = "train", seed: int = 0) -> Iterator[Example]:
    """``n`` examples of ``split``, deterministic for a given seed (the two splits use
    independent streams)."""
    rng = random.Random(f"{seed}:{split}")
    for _ in range(n):
        yield make_example(rng, split)

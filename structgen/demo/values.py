"""Word lists and value generators of the demo generator: names, places, products, dates, prices,
lists; each list split 4:1 into training and held-out entries (:func:`split_items`), and half of
the values made-up words so that values are copied rather than recalled."""

# ruff: noqa: E501  (word lists and phrasings read best one field per line)
from __future__ import annotations

import datetime
import functools
import random
from collections.abc import Callable
from pathlib import Path
from typing import Any

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
def split_items(items: tuple[str, ...], split: str) -> tuple[str, ...]:
    """4 of every 5 entries for "train", the 5th for "heldout" (computed once per word list)."""
    return tuple(x for i, x in enumerate(items) if (i % 5 == 4) == (split == "heldout"))


# ------------------------------------------------------------------------------ value generators


def made_up_word(rng: random.Random) -> str:
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

    from structgen.api import demo_model_dir

    path = Path(demo_model_dir(), "tokenizer.json")  # the tokenizer alone: the weights need not be there
    if not path.is_file():
        raise FileNotFoundError(f"the embedded demo tokenizer is missing ({path}); reinstall structgen with its package data")
    vocab = json.loads(path.read_text())["model"]["vocab"]
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
    """A made-up word for training values: :func:`made_up_word` or :func:`_piece_word`."""
    return _piece_word(rng) if rng.random() < 0.5 else made_up_word(rng)


def _choose(rng: random.Random, split: str, items: tuple[str, ...], made_up: float = 0.5) -> str:
    """An entry of the split's share of ``items``, or (with probability ``made_up``) a made-up word
    (training also draws :func:`_piece_word`; the held-out split draws as it always did)."""
    if rng.random() < made_up:
        return _train_word(rng) if split == "train" else made_up_word(rng)
    return rng.choice(split_items(items, split))


def pick(items: tuple[str, ...], made_up: float = 0.5) -> Callable[[random.Random, str], str]:
    """:func:`_choose` as a field's value generator."""
    return lambda rng, split: _choose(rng, split, items, made_up)


def pick_open(items: tuple[str, ...], train_made_up: float, max_words: int = 1) -> Callable[[random.Random, str], str]:
    """A value of a small word list (reasons, job titles) that the model must still copy from the
    text: in training, with probability ``train_made_up``, 1–``max_words`` lowercase made-up
    words instead, so that the held-out entries are not the only values it never wrote.  The
    held-out split draws exactly as ``pick(items, 0.0)`` does."""

    def gen(rng: random.Random, split: str) -> str:
        if rng.random() < (train_made_up if split == "train" else 0.0):
            return " ".join(_train_word(rng).lower() for _ in range(rng.randint(1, max_words)))
        return rng.choice(split_items(items, split))

    return gen


def _first(rng: random.Random, split: str) -> str:
    return _choose(rng, split, FIRST)


def gen_last(rng: random.Random, split: str) -> str:
    return _choose(rng, split, LAST)


def gen_person(rng: random.Random, split: str) -> str:
    return f"{_first(rng, split)} {gen_last(rng, split)}"


def gen_company(rng: random.Random, split: str) -> str:
    root = "".join(rng.choice(SYLLABLES) for _ in range(rng.randint(2, 3))).capitalize()
    kind = rng.choice(split_items(COMPANY_KINDS, split))
    if split == "train" and rng.random() < 0.4:
        kind = _train_word(rng)  # training only: the kind word is copied too, not picked from a list
    return f"{root} {kind}"


def gen_adj_noun(rng: random.Random, split: str) -> str:
    return f"{_choose(rng, split, ADJECTIVES, 0.3)} {_choose(rng, split, NOUNS, 0.3)}"


def gen_title(rng: random.Random, split: str) -> str:
    return f"The {gen_adj_noun(rng, split)}"


def gen_product(rng: random.Random, split: str) -> str:
    return gen_adj_noun(rng, split)


def _street(rng: random.Random, split: str) -> str:
    return f"{rng.randint(1, 250)} {_choose(rng, split, STREETS)} {rng.choice(STREET_KINDS)}"


def gen_address(rng: random.Random, split: str) -> dict[str, Any]:
    return {"street": _street(rng, split), "city": _choose(rng, split, CITIES), "zip": f"{rng.randint(1000, 99999):05d}"}


def gen_email(rng: random.Random, split: str) -> str:
    user = f"{_first(rng, split).lower()}.{gen_last(rng, split).lower()}".replace("ü", "u")
    return f"{user}@{rng.choice(['mail', 'post', 'inbox', 'web'])}.{rng.choice(['com', 'org', 'net', 'eu'])}"


def gen_date(rng: random.Random, _split_: str) -> str:
    d = datetime.date(2015, 1, 1) + datetime.timedelta(days=rng.randrange(4000))
    return d.isoformat()


def show_date(rng: random.Random, iso: str) -> str:
    d = datetime.date.fromisoformat(iso)
    return rng.choice([iso, f"{MONTHS[d.month - 1]} {d.day}, {d.year}", f"{d.day} {MONTHS[d.month - 1]} {d.year}"])


def gen_price(rng: random.Random, _split_: str) -> float:
    cents = rng.choice([c for c in range(1, 100) if c % 10])
    return round(rng.randint(1, 2000) + cents / 100, 2)


def show_price(_rng: random.Random, v: float) -> str:
    return f"${v:.2f}"


def gen_int(lo: int, hi: int) -> Callable[[random.Random, str], int]:
    return lambda rng, _s: rng.randint(lo, hi)


def gen_bool(rng: random.Random, _s: str) -> bool:
    return rng.random() < 0.5


def gen_list_of(items: tuple[str, ...], lo: int, hi: int) -> Callable[[random.Random, str], list[str]]:
    def gen(rng: random.Random, split: str) -> list[str]:
        pool = split_items(items, split)
        out = rng.sample(pool, min(len(pool), rng.randint(lo, hi)))
        if split == "train":  # training only: made-up items, so items are copied, not recalled
            out = [_train_word(rng).lower() if rng.random() < 0.5 else x for x in out]
        return out

    return gen


def show_list(_rng: random.Random, v: list[str]) -> str:
    return v[0] if len(v) == 1 else ", ".join(v[:-1]) + " and " + v[-1]


def show_address(rng: random.Random, a: dict[str, Any]) -> str:
    return rng.choice([f"{a['street']}, {a['city']} {a['zip']}", f"{a['street']} in {a['city']} (postal code {a['zip']})"])

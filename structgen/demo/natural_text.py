"""Writing one entity of :mod:`structgen.demo.natural` as text, and the (schema, text, answer)
example around it: field placement by a small grammar, label lists, bare value lists, lower-case
texts, distractor sentences, free-form field names and ``json_object`` requests."""

# ruff: noqa: E501  (phrasings read best one per line)
from __future__ import annotations

import random
import re
from typing import Any

from structgen.demo import natural_values as nv
from structgen.demo.domains import Example
from structgen.demo.natural import TIME, Attr, Frame
from structgen.demo.natural_people import CITY, EVENT, PERSON, PET
from structgen.demo.natural_things import BOOK, COMPANY, FILM, ORDER, PRODUCT
from structgen.engine.prompt_format import PROMPT_TEMPLATE, format_prompt
from structgen.schemas import SchemaOptions

# the entities and how often each is drawn (people most: the commonest extraction request)
FRAMES = (PERSON, PERSON, PERSON, CITY, PRODUCT, PRODUCT, EVENT, ORDER, COMPANY, BOOK, FILM, PET)
DISTRACTORS = (
    "It was a long week.", "Nobody expected that.", "More news next week.", "Photos are on the website.", "The office is on the 4th floor.",
    "We met 3 times before.", "It rained all day.", "Thanks to everyone who helped.", "The report is due on the 15th.", "Call us at 555-0142.",
    "The meeting ran late.", "Parking costs extra.", "Doors open at 7.", "The rest is history.", "Two people missed the bus.",
    "We drove there from {c}.", "The team flew to {c} for a holiday.", "Last year we visited {c}.", "A similar story was told in {c}.",
)  # fmt: skip
OTHER_MENTIONS = (
    "{P} often travels with {o}.",
    "{P} works with {o}.",
    "{o} was there too.",
    "{P} shares an office with {o}.",
    "Her friend {o} came along.",
)


def _fill(rng: random.Random, template: str, shown: str) -> str:
    if "{c}" in template:  # a place that is no field's value
        template = template.replace("{c}", nv.city(rng, "train"))
    if shown[:1].lower() in "aeiou":  # "a nurse", "an engineer"
        template = re.sub(r"\ba \{v\}", "an {v}", template)
    return template.replace("{v}", shown).replace("{t}", rng.choice(TIME))


def _cap(s: str) -> str:
    return s[:1].upper() + s[1:]


def _pronoun(frame: Frame, rng: random.Random) -> str:
    return frame.pronoun or rng.choice(["He", "She"])


def _bool_pred(a: Attr, rng: random.Random, value: bool) -> str:
    yes, no = rng.choice(a.pred).split("|")
    return yes if value else no


def _place(rng: random.Random, present: list[tuple[Attr, Any]]) -> dict[str, list[tuple[Attr, Any]]]:
    """Where each present field goes: ``front`` / ``pre`` (one each), ``app`` / ``pred`` (up to
    two each) or ``after`` (a follow-up sentence)."""
    slots: dict[str, list[tuple[Attr, Any]]] = {"front": [], "pre": [], "app": [], "pred": [], "after": []}
    cap = {"front": 1, "pre": 1, "app": 2, "pred": 2, "after": 9}
    for a, v in present:
        if a.kind == "boolean":
            options = ["pred", "pred", "after"]
        else:
            options = [
                k
                for k, forms in (("front", a.front), ("pre", a.pre), ("app", a.app), ("app", a.app), ("pred", a.pred), ("pred", a.pred))
                if forms
            ]
            options += ["after"] if a.pred else []
        options = [k for k in options if len(slots[k]) < cap[k]] or ["after" if a.pred or a.kind == "boolean" else "app"]
        slots[rng.choice(options)].append((a, v))
    return slots


def _pred_text(rng: random.Random, a: Attr, v: Any) -> str:
    return _bool_pred(a, rng, v) if a.kind == "boolean" else _fill(rng, rng.choice(a.pred), a.show(rng, v))


def _appositives(rng: random.Random, apps: list[tuple[Attr, Any]]) -> str:
    if not apps:
        return ""
    bare = all("{v}" in a.app or "({v})" in a.app for a, _ in apps) and len({a.kind for a, _ in apps}) == len(apps)
    if bare and rng.random() < 0.3:  # bare values in one parenthesis: "(26, Cardiff)"
        return " (" + ", ".join(a.show(rng, v) for a, v in apps) + ")"
    parts = [_fill(rng, rng.choice(a.app), a.show(rng, v)) for a, v in apps]
    if len(parts) == 1 and (parts[0].startswith("(") or (parts[0].split(" ")[0].isdigit() and rng.random() < 0.4)):
        return f" ({parts[0].strip('()')})"
    return "".join(f", {p.strip('()')}" for p in parts) + ","


def _subject(frame: Frame, rng: random.Random, head: str, pre: list[tuple[Attr, Any]]) -> tuple[str, bool]:
    """The noun phrase around the head value, and whether it already ends in a comma."""
    premod = _fill(rng, rng.choice(pre[0][0].pre), pre[0][0].show(rng, pre[0][1])) if pre else ""
    r = rng.random()
    if head.startswith("the "):  # "the Kelvo kettle": no role before it
        return (f"the {premod} {head[4:]}" if premod else head), False
    if premod and "year-old" not in premod:  # "architect Ana Lee"
        return f"{premod} {head}", False
    if premod and r < 0.35:
        return f"the {premod} {rng.choice(frame.nouns)} {head}", False
    if premod and r < 0.5 and frame.pronoun is None:
        return f"{rng.choice(frame.roles)}, a {premod} {rng.choice(frame.nouns)} named {head},", True
    if premod:
        return f"{premod} {head}", False
    if r < 0.2 and frame.pronoun is None:
        return f"{rng.choice(frame.roles)}, {head},", True
    if r < 0.35:
        return f"{rng.choice(frame.roles)} {head}", False
    return head, False


ADJUNCTS = ("According to our notes,", "As far as I know,", "By the way,", "Officially,", "Last I heard,", "For the record,", "In short,", "Believe it or not,", "To be fair,", "As it turns out,")  # fmt: skip


def _after(frame: Frame, rng: random.Random, rest: list[tuple[Attr, Any]]) -> list[str]:
    """Follow-up sentences with a pronoun for the fields a sentence did not hold."""
    pron = _pronoun(frame, rng)
    return [f"{pron} {_pred_text(rng, a, v)}." for a, v in rest]


def _subject_clause(frame: Frame, rng: random.Random, head_text: str, present: list[tuple[Attr, Any]]) -> str | None:
    """A field as the subject and the head as its object ("Ana Lee wrote The Hours."), the
    other fields in follow-up sentences; None when no present field has such a clause."""
    holders = [(a, v) for a, v in present if a.subj]
    if not holders:
        return None
    a, v = rng.choice(holders)
    clause = rng.choice(a.subj).replace("{v}", a.show(rng, v)).replace("{h}", head_text)
    rest = [(b, w) for b, w in present if b is not a]
    rng.shuffle(rest)
    tails = [x for x in rest if x[0].tail]
    if tails and rng.random() < 0.6:  # "Ana Lee founded Kelvo in 1998"
        b, w = tails[0]
        clause += " " + _fill(rng, rng.choice(b.tail), b.show(rng, w))
        rest = [x for x in rest if x is not tails[0]]
    elif rng.random() < 0.2:
        clause += " " + rng.choice(TIME)
    return " ".join([_cap(clause) + rng.choice([".", ".", "!"]), *_after(frame, rng, rest)])


def _opener_clause(frame: Frame, rng: random.Random, np: str, present: list[tuple[Attr, Any]]) -> str:
    """The head as an object of an unrelated clause ("I met Ana Lee, 34,"), the fields in
    follow-ups."""
    clause = rng.choice(frame.openers).replace("{h}", np.rstrip(","))
    tails = [x for x in present if x[0].tail]
    if tails and rng.random() < 0.5:  # "We visited the Kelvo Fair in Lyon"
        b, w = tails[0]
        clause += " " + _fill(rng, rng.choice(b.tail), b.show(rng, w))
        present = [x for x in present if x is not tails[0]]
    after = _after(frame, rng, present)
    if after and rng.random() < 0.3:
        return _cap(clause) + "; " + " ".join(after)[0].lower() + " ".join(after)[1:]
    return " ".join([_cap(clause) + rng.choice([".", "!"]), *after])


def _prose(frame: Frame, rng: random.Random, head: str, present: list[tuple[Attr, Any]]) -> str:
    head_text = rng.choice(frame.head_forms).replace("{h}", head)
    r = rng.random()
    if r < 0.2:
        clause = _subject_clause(frame, rng, head_text, present)
        if clause is not None:
            return clause
    slots = _place(rng, present)
    if frame.openers and r > 0.85 and not slots["front"]:
        apps = _appositives(rng, slots["app"])
        return _opener_clause(frame, rng, head_text + apps, slots["pre"] + slots["pred"] + slots["after"])
    subj, comma = _subject(frame, rng, head_text, slots["pre"])
    apps = _appositives(rng, slots["app"])
    if comma and apps:  # "my cousin, Ana Lee, 34," / "my cousin, Ana Lee (34),"
        subj, apps = subj[:-1], apps if apps.startswith(",") else apps + ","
    np = subj + apps
    preds = [_pred_text(rng, a, v) for a, v in slots["pred"]]
    filler = _fill(rng, rng.choice(frame.fillers), "")
    vp = " and ".join(preds) + (f", and {filler}" if rng.random() < 0.15 else "") if preds else filler
    if not preds and not slots["front"] and rng.random() < 0.2:
        opener = rng.choice(["Meet", "Say hello to", "This is", "Here is", "Introducing"])
        sentence = f"{opener} {np.rstrip(',')}" + rng.choice([".", "!", f": {vp}."])
    else:
        sentence = f"{np} {vp}" + rng.choice([".", ".", ".", "!"])
    if slots["front"]:
        a, v = slots["front"][0]
        sentence = _fill(rng, rng.choice(a.front), a.show(rng, v)) + " " + sentence
    elif rng.random() < 0.1:
        sentence = rng.choice(ADJUNCTS) + " " + sentence
    sentence = _cap(sentence.replace(" ,", ",").replace(",.", ".").replace(",!", "!"))
    return " ".join([sentence, *_after(frame, rng, slots["after"])])


def _label_list(frame: Frame, rng: random.Random, head: str, present: list[tuple[Attr, Any]], keys: dict[int, str]) -> str:
    sep = rng.choice([". ", "; ", ", ", " | ", "\n", " - "])
    colon = rng.choice([": ", ": ", " = ", " - "])
    items = [(frame.head, head)] + present
    parts = []
    for a, v in items:
        label = keys[id(a)] if rng.random() < 0.25 or not a.labels else rng.choice(a.labels)
        shown = v if a is frame.head else ("yes" if v else "no") if a.kind == "boolean" else a.show(rng, v)
        parts.append(f"{label}{colon}{shown}")
    return sep.join(parts) + ("." if sep == ". " else "")


def _bare_list(frame: Frame, rng: random.Random, head: str, present: list[tuple[Attr, Any]]) -> str:
    vals = [a.show(rng, v) for a, v in present if a.kind != "boolean"]
    return f"{head}, " + ", ".join(vals) + "." if vals else f"{head}."


def _schema_key(rng: random.Random, a: Attr, json_object: bool) -> str:
    key = a.keys[0] if json_object or rng.random() < 0.55 else rng.choice(a.keys)
    if rng.random() < 0.08 and "_" in key:
        head, *rest = key.split("_")
        key = head + "".join(p.capitalize() for p in rest)
    return key


def _prop_schema(rng: random.Random, a: Attr) -> dict[str, Any]:
    kind = a.kind
    if kind == "integer" and rng.random() < 0.1:
        kind = "number"
    out: dict[str, Any] = {"type": kind}
    if kind == "string" and rng.random() < 0.3:
        out["maxLength"] = 60
    return out


JOINT = Attr(
    ("item",),
    "string",
    lambda _r, _s: "",
    pred=("contains {v}", "is for {v}", "covers {v}", "was for {v}"),
    app=("for {v}", "({v})"),
    subj=("Someone ordered {v} under {h}", "{v} were ordered under {h}"),
    labels=("Items",),
)


def _plural(noun: str) -> str:
    if noun.endswith(("s", "sh", "ch", "x")):
        return noun + "es"
    if noun.endswith("y") and noun[-2:-1] not in "aeiou":
        return noun[:-1] + "ies"
    return noun + "s"


def _join_order(rng: random.Random, values: dict[int, Any], present: list[tuple[Attr, Any]]) -> list[tuple[Attr, Any]]:
    """An order's item and quantity written together ("2 desk lamps", "desk lamp x2"): the
    item's value is then the noun as written (plural when the quantity is above one)."""
    by_key = {a.keys[0]: (a, v) for a, v in present}
    if "item" not in by_key or "quantity" not in by_key or rng.random() < 0.3:
        return present
    (ia, item), (qa, q) = by_key["item"], by_key["quantity"]
    if rng.random() < 0.7:
        item = _plural(item) if q > 1 else item
        shown = f"{nv.int_text(rng, q, 0.3)} {item}"
    else:
        shown = rng.choice([f"{item} x{q}", f"{q} x {item}", f"{q} units of {item}", f"{item} (qty {q})"])
    values[id(ia)] = item
    return [(a, v) for a, v in present if a not in (ia, qa)] + [(JOINT, shown)]


def make_natural_example(rng: random.Random, split: str, frame: Frame | None = None) -> Example:
    """One natural example of ``split`` (``"train"`` or ``"heldout"``: values from that split's
    share of the word lists).  The head field and every required field are in the text;
    optional fields may be left out of the text (then out of the answer)."""
    frame = frame or rng.choice(FRAMES)
    json_object = rng.random() < 0.1
    head = frame.head.gen(rng, split)
    chosen = [a for a in frame.attrs if rng.random() < 0.6]
    if rng.random() < 0.3:
        rng.shuffle(chosen)
    values = {id(a): a.gen(rng, split) for a in chosen}
    required = {id(a) for a in chosen if rng.random() < 0.75}
    in_text = [a for a in chosen if id(a) in required or rng.random() < 0.6]
    keys = {id(a): _schema_key(rng, a, json_object) for a in (frame.head, *chosen)}
    if len(set(keys.values())) < len(keys):  # two fields drew one name: use the canonical names
        keys = {id(a): a.keys[0] for a in (frame.head, *chosen)}
    order = [frame.head, *chosen]
    if rng.random() < 0.15:
        rng.shuffle(order)
    present = [(a, values[id(a)]) for a in in_text]
    rng.shuffle(present)
    style = rng.random()
    if frame.name == "order" and style >= 0.12:
        present = _join_order(rng, values, present)
    if style < 0.12:
        text = _label_list(frame, rng, head, present, keys)
    elif style < 0.17 and frame.name == "person":
        text = _bare_list(frame, rng, head, present)
    else:
        text = _prose(frame, rng, head, present)
    extra = []
    if rng.random() < 0.35:
        extra.append(rng.choice(DISTRACTORS).replace("{c}", nv.city(rng, split)))
    if frame.pronoun is None and rng.random() < 0.1:
        extra.append(rng.choice(OTHER_MENTIONS).replace("{P}", rng.choice(["He", "She"])).replace("{o}", nv.person_name(rng, split)))
    for e in extra:
        if rng.random() < 0.3:
            text = f"{e} {text}"
        else:
            text = f"{text}{'' if text.endswith(('.', '!', '?')) else '.'} {e}"
    answer_values = {id(frame.head): head, **{id(a): values[id(a)] for a in in_text}}
    lower = rng.random() < 0.06
    if lower:
        text = text.lower().rstrip(".!")
    answer: dict[str, Any] = {}
    for a in order:
        if id(a) in answer_values:
            v = answer_values[id(a)]
            answer[keys[id(a)]] = v.lower() if lower and isinstance(v, str) else v
    if json_object:
        schema: dict[str, Any] = {"type": "object"}
    else:
        schema = {
            "type": "object",
            "properties": {keys[id(a)]: _prop_schema(rng, a) for a in order},
            "required": [keys[id(a)] for a in order if a is frame.head or id(a) in required],
        }
        if rng.random() < 0.7:
            schema["additionalProperties"] = False
        if rng.random() < 0.15:  # no "required" at all, as hand-written schemas often have
            del schema["required"]
    prompt = format_prompt(schema, text)
    if json_object and rng.random() < 0.3:  # a chat request without a field list
        prompt = PROMPT_TEMPLATE.format(fields="", text=text.strip())
    return Example("natural-" + frame.name, schema, text, answer, prompt, SchemaOptions().dumps(answer))

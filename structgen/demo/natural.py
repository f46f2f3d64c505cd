"""Natural sentences for the demo generator: one entity (a person, a city, a product, an event,
an order, a company, a book, a film, a pet, a job, a sale) described the way people write, with
its fields placed by a small grammar instead of one sentence per field.

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

# ruff: noqa: E501  (phrasings read best one per line)
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


def _int_show(words: float = 0.15) -> Callable[[random.Random, Any], str]:
    return lambda rng, v: nv.show_int(rng, v, words)


def _year(rng: random.Random, _s: str) -> int:
    return rng.randint(1890, 2026)


def _ri(lo: int, hi: int) -> Gen:
    return lambda rng, _s: rng.randint(lo, hi)


def _price(rng: random.Random, _s: str) -> float | int:
    v = nv.price_value(rng)
    return int(v) if v == int(v) else v


def _bool(rng: random.Random, _s: str) -> bool:
    return rng.random() < 0.5


def _choice(items: tuple[str, ...]) -> Gen:
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
PERSON_FILLERS = (
    "leads the sales team",
    "won the chess tournament {t}",
    "joined the company {t}",
    "has two dogs and a cat",
    "teaches math at the local school",
    "has run the family shop for 25 years",
    "spoke at the conference {t}",
    "moved house {t}",
    "plays the violin",
    "was promoted {t}",
    "volunteers at the library",
    "finished the marathon {t}",
    "started a podcast {t}",
    "is learning Portuguese",
    "fixed the roof {t}",
    "owns a small bakery",
    "writes for a newspaper",
    "retired {t}",
    "has three children",
    "coaches the under-12 football team",
    "opened a cafe {t}",
    "studies medicine",
    "drives a taxi at night",
    "sings in a choir",
    "is looking for a new job",
)
ATTR_AGE = Attr(
    ("age", "person_age", "years", "ageYears"),
    "integer",
    _ri(1, 99),
    _int_show(0.15),
    pre=("{v}-year-old",),
    app=("{v}", "aged {v}", "age {v}", "who is {v}", "who just turned {v}", "{v} years old", "now {v}"),
    pred=(
        "is {v}",
        "is {v} years old",
        "is {v} years of age",
        "turned {v} {t}",
        "just turned {v}",
        "celebrated turning {v} {t}",
        "is aged {v}",
    ),
    front=("At {v},", "Aged {v},", "At age {v},"),
    labels=("Age", "age", "Years"),
    tail=("at {v}", "at age {v}", "aged {v}"),
)
ATTR_HOME = Attr(
    ("city", "hometown", "location", "residence", "home_city"),
    "string",
    nv.city,
    app=("from {v}", "of {v}", "who lives in {v}", "based in {v}"),
    pred=(
        "lives in {v}",
        "is from {v}",
        "is based in {v}",
        "moved to {v} {t}",
        "calls {v} home",
        "lives and works in {v}",
        "comes from {v}",
        "grew up in {c} but lives in {v}",
        "was born in {c} and now lives in {v}",
        "moved from {c} to {v}",
        "left {c} for {v}",
    ),
    front=("Born in {v},", "In {v},", "Back in {v},", "Living in {v},", "From {v}:"),
    labels=("City", "Location", "Lives in", "Home"),
    subj=("{v} is home to {h}", "The {v}-based {h}"),
    tail=("in {v}", "from {v}"),
)
PERSON = Frame(
    "person",
    Attr(("name", "full_name", "person", "personName", "person_name"), "string", nv.person_name, labels=("Name", "Full name", "name")),
    (
        ATTR_AGE,
        ATTR_HOME,
        Attr(
            ("occupation", "job", "profession", "job_title", "role"),
            "string",
            _choice(nv.JOBS),
            pre=("{v}",),
            app=("a {v}", "the {v}", "who works as a {v}"),
            pred=("works as a {v}", "is a {v}", "has been a {v} for years"),
            labels=("Occupation", "Job", "Profession"),
        ),
        Attr(
            ("email", "email_address", "contact_email"),
            "string",
            lambda rng, s: (
                f"{nv.made_up_word(rng).lower()}{rng.choice(['', '.', '_']) + nv.made_up_word(rng).lower() if rng.random() < 0.4 else ''}{rng.choice(['', str(rng.randint(1, 99))])}@{rng.choice(['mail', 'example', 'inbox', 'post'])}.{rng.choice(['com', 'org', 'de', 'io', 'net'])}"
            ),
            app=("({v})", "reachable at {v}"),
            pred=("can be reached at {v}", "uses the address {v}"),
            labels=("Email", "E-mail", "Contact"),
        ),
    ),
    (
        "my cousin",
        "my neighbor",
        "our new intern",
        "the winner",
        "my grandmother",
        "the applicant",
        "our guest",
        "the new manager",
        "his sister",
        "the patient",
        "my friend",
        "the author of the report",
        "the youngest player",
        "the driver",
    ),
    ("man", "woman", "student", "engineer", "teacher", "runner", "retiree", "nurse", "artist", "farmer", "boy", "girl"),
    PERSON_FILLERS,
    openers=(
        "We spoke with {h}",
        "Everyone knows {h}",
        "I sat next to {h}",
        "The prize went to {h}",
        "Please welcome {h}",
        "I had lunch with {h}",
        "They hired {h}",
        "You should call {h}",
    ),
)
CITY = Frame(
    "city",
    Attr(("city", "name", "city_name", "town"), "string", nv.city, labels=("City", "Town", "Name")),
    (
        Attr(
            ("population", "inhabitants", "residents", "pop"),
            "integer",
            lambda rng, _s: nv.population_value(rng),
            nv.show_population,
            app=("home to {v} people", "population {v}", "with {v} inhabitants", "({v} residents)", "pop. {v}"),
            pred=(
                "has a population of {v}",
                "has {v} inhabitants",
                "is home to {v} people",
                "has about {v} residents",
                "counts {v} inhabitants",
            ),
            front=("With {v} residents,", "Home to {v} people,"),
            labels=("Population", "Inhabitants"),
            subj=(
                "{v} people live in {h}",
                "About {v} people call {h} home",
                "The population of {h} is {v}",
                "{h}'s population is {v}",
                "Roughly {v} people live in {h}",
                "Approximately {v} residents make {h} their home",
                "Some {v} people live in {h}",
            ),
        ),
        Attr(
            ("country", "nation"),
            "string",
            nv.country,
            app=("in {v}", "{v}"),
            pred=("is in {v}", "lies in {v}", "is a city in {v}"),
            front=("In {v},",),
            labels=("Country",),
        ),
        Attr(
            ("founded", "founded_in", "year_founded"),
            "integer",
            _year,
            app=("founded in {v}",),
            pred=("was founded in {v}", "dates back to {v}"),
            labels=("Founded",),
        ),
    ),
    ("the capital", "the port city", "the old town of", "the city of"),
    ("city", "town", "port", "capital"),
    openers=("We visited {h}", "I grew fond of {h}", "Tourists love {h}", "Last summer I went to {h}", "She moved to {h}"),
    fillers=(
        "sits on a river",
        "is known for its bridges",
        "hosts a big market every Saturday",
        "has two universities",
        "attracts many tourists",
        "grew quickly after the war",
        "has a famous cathedral",
    ),
    pronoun="It",
    head_forms=("{h}", "{h}", "the city of {h}"),
)
PRODUCT = Frame(
    "product",
    Attr(("product", "name", "product_name", "item", "productName", "model"), "string", nv.product, labels=("Product", "Item", "Model")),
    (
        Attr(
            ("price", "cost", "price_usd", "amount"),
            "number",
            _price,
            nv.show_price,
            app=("at {v}", "for {v}", "priced at {v}", "({v})", "{v}"),
            pred=("costs {v}", "sells for {v}", "is priced at {v}", "is {v}", "goes for {v}", "retails at {v}", "is on sale for {v}"),
            front=("For {v},", "At {v},"),
            labels=("Price", "Cost"),
            tail=("for {v}", "at {v}"),
            subj=(
                "You can get {h} for {v}",
                "{v} buys you {h}",
                "The price of {h} is {v}",
                "{h} will set you back {v}",
                "For just {v} you get {h}",
            ),
        ),
        Attr(
            ("in_stock", "available", "inStock", "is_available"),
            "boolean",
            _bool,
            pred=(
                "is in stock|is out of stock",
                "is available|is unavailable",
                "is available now|is currently unavailable",
                "is back in stock|is sold out",
                "ships today|is not in stock",
                "can be ordered right away|is not available at the moment",
            ),
            labels=("In stock", "Available"),
        ),
        Attr(
            ("brand", "maker", "manufacturer"),
            "string",
            lambda rng, s: rng.choice(nv.split_items(nv.BRANDS, s)) if rng.random() < 0.6 else nv.made_up_name_part(rng),
            app=("by {v}", "made by {v}", "from {v}"),
            pred=("is made by {v}", "comes from {v}"),
            labels=("Brand", "Maker"),
            subj=("{v} makes {h}", "{v} has released {h}"),
        ),
        Attr(
            ("color", "colour"),
            "string",
            _choice(nv.COLORS),
            pre=("{v}",),
            app=("in {v}",),
            pred=("comes in {v}",),
            labels=("Color", "Colour"),
        ),
    ),
    ("the new", "our best-selling", "the popular", "this week's deal, the", "the store's"),
    ("model", "version"),
    openers=(
        "I bought {h}",
        "We ordered {h}",
        "Check out {h}",
        "My sister recommended {h}",
        "The shop just restocked {h}",
        "Sorry, we sold the last {h}",
    ),
    fillers=(
        "weighs 2 kg",
        "has a 2-year warranty",
        "got 4.5 stars from 300 reviewers",
        "was launched in 2022",
        "ships in 3 days",
        "fits in a backpack",
        "comes with two batteries",
    ),
    pronoun="It",
    head_forms=("{h}", "{h}", "the {h}"),
)
EVENT = Frame(
    "event",
    Attr(("event", "name", "event_name", "title"), "string", nv.event, labels=("Event", "Name")),
    (
        Attr(
            ("year", "event_year", "edition_year"),
            "integer",
            _ri(1950, 2030),
            app=("{v}", "in {v}", "of {v}"),
            pred=("took place in {v}", "was held in {v}", "will take place in {v}", "happened in {v}", "returns in {v}"),
            front=("In {v},",),
            labels=("Year",),
            pre=("{v}",),
            tail=("in {v}", "back in {v}"),
        ),
        Attr(
            ("city", "location", "venue_city", "place"),
            "string",
            nv.city,
            app=("in {v}", "held in {v}"),
            pred=("was held in {v}", "takes place in {v}", "was hosted by {v}", "came to {v}"),
            front=("In {v},",),
            labels=("City", "Location", "Where"),
            pre=("{v}'s", "{v}"),
            subj=("{v} hosted {h}", "{v} welcomed {h}", "{v} will host {h}"),
            tail=("in {v}",),
        ),
        Attr(
            ("attendees", "visitors", "participants"),
            "integer",
            _ri(20, 90000),
            app=("with {v} visitors",),
            pred=("drew {v} visitors", "had {v} participants", "attracted {v} people"),
            labels=("Attendees", "Visitors"),
        ),
        Attr(
            ("sold_out", "is_sold_out"),
            "boolean",
            _bool,
            pred=("was sold out|still had tickets", "sold out in hours|had seats left"),
            labels=("Sold out",),
        ),
    ),
    ("the annual", "this year's", "the famous", "the first"),
    ("event", "edition"),
    openers=("We went to {h}", "I watched {h}", "Thousands attended {h}", "Tickets for {h} sold fast", "Everyone remembers {h}"),
    fillers=(
        "lasted three days",
        "featured 40 speakers",
        "ended with fireworks",
        "was streamed online",
        "opened at 10 am",
        "had 12 stages",
    ),
    pronoun="It",
    head_forms=("{h}", "{h}", "the {h}"),
)
ORDER = Frame(
    "order",
    Attr(("order_id", "id", "order_number", "orderId", "reference"), "string", nv.order_id, labels=("Order", "Order ID", "Order #", "Ref")),
    (
        Attr(
            ("item", "product", "item_name", "article"),
            "string",
            nv.item,
            app=("for {v}", "({v})"),
            pred=("contains {v}", "is for {v}"),
            labels=("Item", "Product"),
        ),
        Attr(
            ("quantity", "qty", "count", "units"),
            "integer",
            _ri(1, 60),
            _int_show(0.3),
            app=("{v} units", "qty {v}", "{v} pieces"),
            pred=("has {v} units", "is for {v} pieces"),
            labels=("Quantity", "Qty"),
        ),
        Attr(
            ("total", "total_price", "amount", "sum"),
            "number",
            _price,
            nv.show_price,
            app=("total {v}", "worth {v}", "({v})"),
            pred=("comes to {v}", "totals {v}", "costs {v} in total", "was charged {v}"),
            labels=("Total", "Amount"),
        ),
        Attr(
            ("customer", "customer_name", "buyer"),
            "string",
            nv.person_name,
            app=("placed by {v}", "from {v}"),
            pred=("was placed by {v}", "belongs to {v}"),
            labels=("Customer", "Buyer"),
            subj=("{v} placed {h}", "{v} paid for {h}"),
        ),
        Attr(
            ("status", "order_status"),
            "string",
            lambda rng, _s: rng.choice(["shipped", "delivered", "pending", "cancelled", "processing", "returned"]),
            pred=("has been {v}", "is {v}", "was {v} {t}"),
            labels=("Status",),
        ),
    ),
    ("your", "my", "the latest", "the customer's"),
    ("order",),
    fillers=("will arrive in 3 to 5 days", "was paid by card", "ships from warehouse 7", "includes free shipping", "was placed at 14:32"),
    pronoun="It",
    head_forms=("{h}", "#{h}", "order #{h}", "order no. {h}", "order number {h}", "order ID {h}", "order {h}", "order {h}", "ref. {h}"),
)
COMPANY = Frame(
    "company",
    Attr(("company", "name", "company_name", "organization", "firm"), "string", nv.company, labels=("Company", "Name", "Firm")),
    (
        Attr(
            ("founded", "year_founded", "founded_year", "since"),
            "integer",
            _ri(1850, 2025),
            app=("founded in {v}", "est. {v}", "({v})"),
            pred=("was founded in {v}", "was started in {v}", "has existed since {v}", "dates from {v}"),
            front=("Founded in {v},", "In {v},", "Since {v},"),
            labels=("Founded", "Established"),
            tail=("in {v}", "back in {v}"),
        ),
        Attr(
            ("founder", "founded_by", "ceo"),
            "string",
            nv.person_name,
            app=("founded by {v}", "led by {v}"),
            pred=("was founded by {v}", "was started by {v}", "is run by {v}"),
            labels=("Founder",),
            subj=("{v} founded {h}", "{v} started {h}", "{v} set up {h}", "{v} created {h}", "{v} launched {h}", "{v}'s company {h}"),
        ),
        Attr(
            ("headquarters", "city", "hq", "location"),
            "string",
            nv.city,
            app=("based in {v}", "of {v}", "headquartered in {v}"),
            pred=("is based in {v}", "has its headquarters in {v}", "is headquartered in {v}"),
            front=("Based in {v},",),
            labels=("Headquarters", "HQ"),
            tail=("in {v}",),
        ),
        Attr(
            ("employees", "staff", "headcount"),
            "integer",
            _ri(3, 250000),
            app=("with {v} employees",),
            pred=("employs {v} people", "has {v} employees", "has a staff of {v}"),
            labels=("Employees", "Staff"),
        ),
    ),
    ("the startup", "the family firm", "the bakery chain", "the software company", "the airline", "the bank"),
    ("company", "firm", "startup"),
    openers=("I work for {h}", "Investors love {h}", "We signed a deal with {h}", "Many people shop at {h}"),
    fillers=(
        "makes bicycles",
        "sells coffee in 20 countries",
        "went public in 2015",
        "builds solar panels",
        "opened 12 new stores",
        "reported record profits last year",
    ),
    pronoun="It",
)
_WORK_ATTRS = (
    Attr(
        ("year", "published", "release_year", "publication_year"),
        "integer",
        _ri(1800, 2026),
        app=("({v})", "published in {v}", "from {v}"),
        pred=("was published in {v}", "came out in {v}", "appeared in {v}", "was released in {v}"),
        front=("In {v},",),
        labels=("Year", "Published"),
        tail=("in {v}", "({v})"),
    ),
    Attr(
        ("pages", "page_count", "length"),
        "integer",
        _ri(40, 1200),
        app=("{v} pages",),
        pred=("has {v} pages", "runs to {v} pages"),
        labels=("Pages",),
    ),
    Attr(
        ("genre",),
        "string",
        _choice(("mystery", "fantasy", "romance", "history", "science fiction", "poetry", "thriller", "memoir", "horror")),
        pre=("{v}",),
        app=("a {v}",),
        pred=("is a {v}",),
        labels=("Genre",),
    ),
)
BOOK = Frame(
    "book",
    Attr(("title", "book", "book_title", "name"), "string", nv.title, labels=("Title", "Book")),
    (
        Attr(
            ("author", "writer", "author_name", "by"),
            "string",
            nv.person_name,
            app=("by {v}", "written by {v}"),
            pred=("was written by {v}", "is by {v}"),
            front=("Written by {v},",),
            labels=("Author", "By"),
            subj=("{v} wrote {h}", "{v}'s novel {h}", "{v}'s {h}", "{v} published {h}", "{v} is the author of {h}", "{v} finished {h}"),
            tail=("by {v}",),
        ),
        *_WORK_ATTRS,
    ),
    ("the novel", "the bestseller", "the book", "the debut novel", "the memoir"),
    ("novel", "book", "story"),
    openers=("I just finished reading {h}", "My favourite book is {h}", "Our club is reading {h}", "Have you read {h}"),
    fillers=("sold a million copies", "won a prize", "is set in a small village", "was translated into 30 languages", "has 24 chapters"),
    pronoun="It",
    head_forms=("{h}", "{h}", '"{h}"', "“{h}”", "'{h}'", "_{h}_"),
)
FILM = Frame(
    "film",
    Attr(("title", "film", "movie", "movie_title", "name"), "string", nv.title, labels=("Title", "Film", "Movie")),
    (
        Attr(
            ("director", "directed_by"),
            "string",
            nv.person_name,
            app=("directed by {v}", "by {v}"),
            pred=("was directed by {v}", "is by {v}"),
            labels=("Director",),
            subj=("{v} directed {h}", "{v} made {h}", "{v}'s {h}"),
            tail=("by {v}",),
        ),
        _WORK_ATTRS[0],
        Attr(
            ("runtime_minutes", "runtime", "minutes", "duration"),
            "integer",
            _ri(60, 210),
            app=("{v} minutes",),
            pred=("runs {v} minutes", "is {v} minutes long"),
            labels=("Runtime",),
        ),
    ),
    ("the film", "the movie", "the documentary", "the thriller"),
    ("film", "movie"),
    openers=("We watched {h}", "Critics loved {h}", "I saw {h}"),
    fillers=("won three awards", "was shot in 40 days", "stars a cast of unknowns", "opened in 2,000 theaters"),
    pronoun="It",
    head_forms=("{h}", "{h}", '"{h}"', "“{h}”"),
)
PET = Frame(
    "pet",
    Attr(
        ("name", "pet_name", "petName"),
        "string",
        lambda rng, s: rng.choice(nv.split_items(nv.PET_NAMES, s)) if rng.random() < 0.6 else nv.made_up_word(rng),
        labels=("Name", "Pet"),
    ),
    (
        Attr(
            ("species", "animal", "kind"),
            "string",
            _choice(nv.SPECIES),
            app=("a {v}", "the {v}"),
            pred=("is a {v}",),
            labels=("Species", "Animal"),
        ),
        Attr(
            ("age", "age_years"),
            "integer",
            _ri(1, 19),
            _int_show(0.3),
            pre=("{v}-year-old",),
            app=("{v}", "aged {v}"),
            pred=("is {v}", "is {v} years old"),
            labels=("Age",),
        ),
        Attr(
            ("owner", "owner_name"),
            "string",
            nv.person_name,
            app=("owned by {v}",),
            pred=("belongs to {v}", "lives with {v}"),
            labels=("Owner",),
            subj=("{v} adopted {h}", "{v} walks {h} every day"),
        ),
    ),
    ("our", "my", "the neighbors'", "the shelter's"),
    ("dog", "cat", "puppy", "kitten"),
    fillers=("loves long walks", "sleeps all day", "was adopted in 2021", "weighs 4 kg", "has one blue eye"),
    pronoun="It",
)
FRAMES = (PERSON, PERSON, PERSON, CITY, PRODUCT, PRODUCT, EVENT, ORDER, COMPANY, BOOK, FILM, PET)

"""The ten domains of the demo generator: each a set of typed fields (schema, value generator,
own phrasings, how a value is written in text)."""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NamedTuple

from structgen.demo.values import (
    AIRLINES,
    CABINS,
    CATEGORIES,
    CITIES,
    EVENT_KINDS,
    GENRES,
    INDUSTRIES,
    JOB_LEVELS,
    JOB_TITLES,
    ORDER_STATUS,
    REASONS,
    ROOM_TYPES,
    SPECIALTIES,
    TAGS,
    gen_address,
    gen_adj_noun,
    gen_bool,
    gen_company,
    gen_date,
    gen_email,
    gen_int,
    gen_last,
    gen_list_of,
    gen_person,
    gen_price,
    gen_product,
    gen_title,
    pick,
    pick_open,
    show_address,
    show_date,
    show_list,
    show_price,
)


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
                gen_person,
                ["Name: {v}.", "This profile belongs to {v}.", "The person is called {v}.", "{v} is the person described here."],
            ),
            _f(
                "age",
                {"type": "integer", "minimum": 0, "maximum": 120},
                True,
                gen_int(18, 95),
                ["Age: {v}.", "They are {v} years old.", "The person's age is {v}.", "At {v}, they keep busy."],
            ),
            _f(
                "email",
                STR,
                False,
                gen_email,
                ["Email: {v}.", "You can write to {v}.", "Their email address is {v}.", "Reach them at {v}."],
            ),
            _f(
                "address",
                ADDRESS,
                False,
                gen_address,
                ["Address: {v}.", "They live at {v}.", "Home is {v}.", "Their home address is {v}."],
                show_address,
            ),
            _f(
                "is_member",
                {"type": "boolean"},
                False,
                gen_bool,
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
                gen_company,
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
                gen_int(3, 90000),
                ["Employees: {v}.", "It employs {v} people.", "The headcount is {v}.", "Staff count stands at {v}."],
            ),
            _f(
                "founded",
                {"type": "integer", "minimum": 1800, "maximum": 2030},
                False,
                gen_int(1890, 2024),
                ["Founded: {v}.", "It was founded in {v}.", "The firm dates from {v}.", "Its founding year is {v}."],
            ),
            _f(
                "headquarters",
                ADDRESS,
                False,
                gen_address,
                ["Headquarters: {v}.", "The head office is at {v}.", "It is based at {v}.", "Main office: {v}."],
                show_address,
            ),
        ),
    ),
    Domain(
        "product",
        ("Product listing.", "Catalog item:", "An item in our shop.", "Product sheet."),
        (
            _f("product", STR, True, gen_product, ["Product: {v}.", "The item is the {v}.", "We sell the {v}.", "Listing for the {v}."]),
            _f("price", PRICE, True, gen_price, ["Price: {v}.", "It costs {v}.", "The price is {v}.", "Yours for {v}."], show_price),
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
                gen_bool,
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
                gen_list_of(TAGS, 1, 3),
                ["Tags: {v}.", "It is tagged {v}.", "Labels: {v}.", "Marked as {v}."],
                show_list,
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
                gen_int(1000, 999999),
                ["Order number {v}.", "Order ID: {v}.", "This is order {v}.", "Reference {v} applies."],
            ),
            _f("customer", STR, True, gen_person, ["Customer: {v}.", "It was placed by {v}.", "The buyer is {v}.", "Ordered by {v}."]),
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
                gen_price,
                ["Total: {v}.", "The total comes to {v}.", "Amount charged: {v}.", "They paid {v}."],
                show_price,
            ),
            _f(
                "quantity",
                {"type": "integer", "minimum": 1, "maximum": 1000},
                False,
                gen_int(1, 40),
                ["Quantity: {v}.", "They bought {v} units.", "Items in the order: {v}.", "{v} pieces were ordered."],
            ),
            _f(
                "shipping_address",
                ADDRESS,
                False,
                gen_address,
                ["Ship to {v}.", "Delivery address: {v}.", "It goes to {v}.", "Send it to {v}."],
                show_address,
            ),
        ),
    ),
    Domain(
        "event",
        ("Event announcement.", "Save the date!", "Calendar entry:", "Upcoming event."),
        (
            _f("event", STR, True, gen_title, ["Event: {v}.", "Join us for {v}.", "The event is called {v}.", "Coming up: {v}."]),
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
                gen_date,
                ["Date: {v}.", "It takes place on {v}.", "Mark {v} in your calendar.", "Scheduled for {v}."],
                show_date,
            ),
            _f("city", STR, False, pick(CITIES), ["City: {v}.", "It will be held in {v}.", "Location: {v}.", "The venue is in {v}."]),
            _f(
                "capacity",
                {"type": "integer", "minimum": 1, "maximum": 100000},
                False,
                gen_int(20, 5000),
                ["Capacity: {v}.", "There are {v} seats.", "Up to {v} guests can attend.", "Room for {v} people."],
            ),
            _f(
                "free",
                {"type": "boolean"},
                False,
                gen_bool,
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
            _f(
                "passenger", STR, True, gen_person, ["Passenger: {v}.", "Booked for {v}.", "Traveller name: {v}.", "The ticket is for {v}."]
            ),
            _f("airline", STR, True, pick(AIRLINES), ["Airline: {v}.", "You fly with {v}.", "Operated by {v}.", "Carrier: {v}."]),
            _f(
                "flight_number",
                {"type": "string", "pattern": "^[A-Z]{2}[0-9]{2,4}$"},
                True,
                lambda rng, s: "".join(rng.choice("ABCDEFGHJKLMNPRSTUVWXZ") for _ in range(2)) + str(rng.randint(10, 9999)),
                ["Flight {v}.", "Flight number: {v}.", "You are on flight {v}.", "Board flight {v}."],
            ),
            _f("from_city", STR, True, pick(CITIES), ["From: {v}.", "Departing from {v}.", "Origin: {v}.", "It leaves {v}."]),
            _f("to_city", STR, True, pick(CITIES), ["To: {v}.", "Arriving in {v}.", "Destination: {v}.", "It lands in {v}."]),
            _f(
                "date", DATE, False, gen_date, ["Date: {v}.", "Departure on {v}.", "You travel on {v}.", "The flight is on {v}."], show_date
            ),
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
            _f("patient", STR, True, gen_person, ["Patient: {v}.", "The patient is {v}.", "Seen today: {v}.", "Visit for {v}."]),
            _f(
                "doctor",
                STR,
                True,
                lambda rng, s: "Dr. " + gen_last(rng, s),
                ["Doctor: {v}.", "Attending physician: {v}.", "Seen by {v}.", "{v} examined the patient."],
            ),
            _f(
                "specialty",
                _enum(SPECIALTIES),
                False,
                lambda rng, s: rng.choice(SPECIALTIES),
                ["Department: {v}.", "Specialty: {v}.", "Clinic: {v}.", "Referred to {v}."],
            ),
            _f("date", DATE, True, gen_date, ["Date: {v}.", "Visit date: {v}.", "Seen on {v}.", "The appointment was on {v}."], show_date),
            _f(
                "reason",
                STR,
                True,
                pick_open(REASONS, 0.6, max_words=2),
                ["Reason: {v}.", "Complaint: {v}.", "They came in with {v}.", "Presenting issue: {v}."],
            ),
            _f(
                "follow_up",
                {"type": "boolean"},
                False,
                gen_bool,
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
            _f("title", STR, True, gen_title, ["Title: {v}.", "The book is {v}.", "Read {v}.", "It is titled {v}."]),
            _f("author", STR, True, gen_person, ["Author: {v}.", "Written by {v}.", "It is by {v}.", "{v} wrote it."]),
            _f(
                "year",
                {"type": "integer", "minimum": 1500, "maximum": 2030},
                False,
                gen_int(1900, 2024),
                ["Year: {v}.", "Published in {v}.", "It came out in {v}.", "First printed in {v}."],
            ),
            _f(
                "pages",
                {"type": "integer", "minimum": 1, "maximum": 5000},
                False,
                gen_int(80, 1200),
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
            _f("guest", STR, True, gen_person, ["Guest: {v}.", "Reserved for {v}.", "The guest is {v}.", "Booking name: {v}."]),
            _f(
                "hotel",
                STR,
                True,
                lambda rng, s: f"Hotel {gen_adj_noun(rng, s)}",
                ["Hotel: {v}.", "You stay at {v}.", "Property: {v}.", "Booked at {v}."],
            ),
            _f("check_in", DATE, True, gen_date, ["Check-in: {v}.", "Arrival on {v}.", "You arrive {v}.", "Check in on {v}."], show_date),
            _f(
                "nights",
                {"type": "integer", "minimum": 1, "maximum": 60},
                True,
                gen_int(1, 14),
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
                gen_bool,
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
            _f("role", STR, True, pick_open(JOB_TITLES, 0.6), ["Role: {v}.", "We need a {v}.", "Position: {v}.", "Hiring a {v}."]),
            _f("company", STR, True, gen_company, ["Company: {v}.", "Employer: {v}.", "Join {v}.", "The hiring firm is {v}."]),
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
            _f("city", STR, False, pick(CITIES), ["City: {v}.", "Based in {v}.", "The office is in {v}.", "Work from {v}."]),
            _f(
                "remote",
                {"type": "boolean"},
                False,
                gen_bool,
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

"""The demo model's independent evaluation set: 200 sentences written by hand for this file (not
produced by ``structgen.demo``'s training generator), across eight schemas of 2–4 fields, each
with its gold object.  ``python benchmarks/demo_eval_set.py OUT.jsonl`` writes it as JSON lines."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

S = {"type": "string"}
I = {"type": "integer"}
N = {"type": "number"}
B = {"type": "boolean"}


def obj(**props: Any) -> dict[str, Any]:
    return {"type": "object", "properties": props, "required": list(props), "additionalProperties": False}


SCHEMAS: dict[str, dict[str, Any]] = {
    "person2": obj(name=S, age=I),
    "person3": obj(name=S, age=I, city=S),
    "city": obj(city=S, population=I),
    "product": obj(product=S, price=N, in_stock=B),
    "event": obj(event=S, year=I, city=S),
    "order": obj(order_id=S, item=S, quantity=I, total=N),
    "company": obj(company=S, founded=I, founder=S),
    "book": obj(title=S, author=S, year=I),
}

ROWS: list[tuple[str, str, dict[str, Any]]] = [
    # person2: name, age
    ("person2", "Harry Potter is 17 years old.", {"name": "Harry Potter", "age": 17}),
    ("person2", "My grandmother, Rosa Delgado, turned 88 last week.", {"name": "Rosa Delgado", "age": 88}),
    ("person2", "At 34, Kenji Watanabe is the youngest partner at the firm.", {"name": "Kenji Watanabe", "age": 34}),
    ("person2", "Amélie Laurent (29) joined the team in May.", {"name": "Amélie Laurent", "age": 29}),
    ("person2", "The patient, a 52-year-old man named Tomasz Nowak, was discharged on Friday.", {"name": "Tomasz Nowak", "age": 52}),
    ("person2", "Sean O'Brien is 45.", {"name": "Sean O'Brien", "age": 45}),
    ("person2", "Say hello to Priya Raman! She's nine.", {"name": "Priya Raman", "age": 9}),
    ("person2", "Name: Lukas Becker. Age: 23.", {"name": "Lukas Becker", "age": 23}),
    ("person2", "Our new intern is Chloé Martin, who is 21 years old.", {"name": "Chloé Martin", "age": 21}),
    ("person2", "Olu Adeyemi, aged 61, has run the bakery for three decades.", {"name": "Olu Adeyemi", "age": 61}),
    ("person2", "I met Anna-Lena Fischer yesterday; she told me she is 38.", {"name": "Anna-Lena Fischer", "age": 38}),
    ("person2", "Mohammed Al-Sayed celebrated his 70th birthday in March.", {"name": "Mohammed Al-Sayed", "age": 70}),
    ("person2", "the winner was jake turner, age 16", {"name": "jake turner", "age": 16}),
    ("person2", "Sofia Rossi is a 27-year-old architect.", {"name": "Sofia Rossi", "age": 27}),
    ("person2", "Twelve-year-old Mei Chen won the spelling bee.", {"name": "Mei Chen", "age": 12}),
    ("person2", "Ingrid Johansson, 56, spoke first at the meeting.", {"name": "Ingrid Johansson", "age": 56}),
    ("person2", "He's called Diego Fernández and he is 31.", {"name": "Diego Fernández", "age": 31}),
    ("person2", "According to the form, the applicant (Hana Novak) is 40 years of age.", {"name": "Hana Novak", "age": 40}),
    ("person2", "Meet 65-year-old retiree Frank Miller.", {"name": "Frank Miller", "age": 65}),
    ("person2", "Aisha Bello will be 19 in June; right now she is 18.", {"name": "Aisha Bello", "age": 18}),
    ("person2", "The oldest runner, Giorgos Papadopoulos, is 77.", {"name": "Giorgos Papadopoulos", "age": 77}),
    ("person2", "Emma Wilson — 33 — leads the design group.", {"name": "Emma Wilson", "age": 33}),
    ("person2", "Jean-Luc Moreau is forty-two years old, or 42 for short.", {"name": "Jean-Luc Moreau", "age": 42}),
    ("person2", "Little Noah Schmidt is only 4.", {"name": "Noah Schmidt", "age": 4}),
    ("person2", "Ravi Kumar, who is 36, fixed the server in an hour.", {"name": "Ravi Kumar", "age": 36}),
    # person3: name, age, city
    ("person3", "Maria Garcia is 34 and lives in Madrid.", {"name": "Maria Garcia", "age": 34, "city": "Madrid"}),
    ("person3", "John Smith, 58, from Chicago, retired last year.", {"name": "John Smith", "age": 58, "city": "Chicago"}),
    ("person3", "Born and raised in Lagos, Chidi Okafor is now 27.", {"name": "Chidi Okafor", "age": 27, "city": "Lagos"}),
    ("person3", "Yuki Tanaka (age 41) works in Osaka.", {"name": "Yuki Tanaka", "age": 41, "city": "Osaka"}),
    ("person3", "The 19-year-old student Lena Vogel moved to Vienna in September.", {"name": "Lena Vogel", "age": 19, "city": "Vienna"}),
    ("person3", "In Toronto lives my cousin Daniel Park, who just turned 30.", {"name": "Daniel Park", "age": 30, "city": "Toronto"}),
    ("person3", "Name: Fatima Zahra. Age: 25. City: Casablanca.", {"name": "Fatima Zahra", "age": 25, "city": "Casablanca"}),
    ("person3", "Pierre Dubois is a 63-year-old baker in Lyon.", {"name": "Pierre Dubois", "age": 63, "city": "Lyon"}),
    ("person3", "Ana Souza, 22, São Paulo.", {"name": "Ana Souza", "age": 22, "city": "São Paulo"}),
    ("person3", "We interviewed Liam O'Connor (37) at his home in Dublin.", {"name": "Liam O'Connor", "age": 37, "city": "Dublin"}),
    ("person3", "Sven Larsson lives in Gothenburg; he is 48 years old.", {"name": "Sven Larsson", "age": 48, "city": "Gothenburg"}),
    ("person3", "At 71, Helen Brooks still teaches piano in Edinburgh.", {"name": "Helen Brooks", "age": 71, "city": "Edinburgh"}),
    ("person3", "Karim Haddad is 29. He grew up in Beirut but lives in Paris now.", {"name": "Karim Haddad", "age": 29, "city": "Paris"}),
    ("person3", "From Kraków: Zofia Wiśniewska, aged 35.", {"name": "Zofia Wiśniewska", "age": 35, "city": "Kraków"}),
    ("person3", "Nguyen Van An, a 44-year-old engineer, commutes daily in Hanoi.", {"name": "Nguyen Van An", "age": 44, "city": "Hanoi"}),
    ("person3", "Our host in Reykjavik was Gudrun Sigurdardottir, 50.", {"name": "Gudrun Sigurdardottir", "age": 50, "city": "Reykjavik"}),
    ("person3", "Tom Hughes (26, Cardiff) won the quiz.", {"name": "Tom Hughes", "age": 26, "city": "Cardiff"}),
    ("person3", "Isabella Conti lives in Milan and is 39 years old.", {"name": "Isabella Conti", "age": 39, "city": "Milan"}),
    ("person3", "Meet Arjun Mehta: 32 years old, based in Bangalore.", {"name": "Arjun Mehta", "age": 32, "city": "Bangalore"}),
    ("person3", "The mayor of the village near Porto, Rui Costa, is 55.", {"name": "Rui Costa", "age": 55, "city": "Porto"}),
    ("person3", "Elif Yılmaz, who is 28, studies in Istanbul.", {"name": "Elif Yılmaz", "age": 28, "city": "Istanbul"}),
    ("person3", "greta hansen is 31 and lives in copenhagen", {"name": "greta hansen", "age": 31, "city": "copenhagen"}),
    ("person3", "Carlos Mendoza, 47, relocated from Lima to Bogotá in 2019.", {"name": "Carlos Mendoza", "age": 47, "city": "Bogotá"}),
    ("person3", "Seoul-based designer Ji-woo Kim is 24.", {"name": "Ji-woo Kim", "age": 24, "city": "Seoul"}),
    ("person3", "Olga Petrova is 60 years old and she lives in Riga.", {"name": "Olga Petrova", "age": 60, "city": "Riga"}),
    # city: city, population
    ("city", "Paris has a population of 2100000 people.", {"city": "Paris", "population": 2100000}),
    ("city", "About 880000 people live in Amsterdam.", {"city": "Amsterdam", "population": 880000}),
    ("city", "Reykjavik, population 139000, is the capital of Iceland.", {"city": "Reykjavik", "population": 139000}),
    ("city", "The population of Zurich is 421000.", {"city": "Zurich", "population": 421000}),
    ("city", "With 3300000 residents, Berlin is Germany's largest city.", {"city": "Berlin", "population": 3300000}),
    ("city", "Lyon is home to 522000 inhabitants.", {"city": "Lyon", "population": 522000}),
    ("city", "City: Kyoto. Population: 1460000.", {"city": "Kyoto", "population": 1460000}),
    ("city", "Nairobi now counts 4400000 residents, up from 3100000 a decade ago.", {"city": "Nairobi", "population": 4400000}),
    ("city", "Some 95000 people call Bath home.", {"city": "Bath", "population": 95000}),
    ("city", "Montreal (pop. 1780000) hosted the games in 1976.", {"city": "Montreal", "population": 1780000}),
    ("city", "The census counted 674000 people in Lisbon.", {"city": "Lisbon", "population": 674000}),
    ("city", "Valparaíso has roughly 296000 inhabitants.", {"city": "Valparaíso", "population": 296000}),
    ("city", "In 2020, Oslo had a population of 697000.", {"city": "Oslo", "population": 697000}),
    ("city", "Tallinn: 454000 people.", {"city": "Tallinn", "population": 454000}),
    ("city", "Approximately 1200000 people live in Prague.", {"city": "Prague", "population": 1200000}),
    ("city", "The small town of Hallstatt has only 750 residents.", {"city": "Hallstatt", "population": 750}),
    ("city", "São Luís, with 1100000 inhabitants, lies on an island.", {"city": "São Luís", "population": 1100000}),
    ("city", "Winnipeg's population reached 750000 this year.", {"city": "Winnipeg", "population": 750000}),
    ("city", "Around 12000 people live in the village of Zermatt... no, 5800.", {"city": "Zermatt", "population": 5800}),
    ("city", "Auckland is the largest city in New Zealand, with 1700000 people.", {"city": "Auckland", "population": 1700000}),
    ("city", "Population of Gdańsk: 486000.", {"city": "Gdańsk", "population": 486000}),
    ("city", "There are 2700000 people in Toronto.", {"city": "Toronto", "population": 2700000}),
    ("city", "Bruges, a city of 118000, is famous for its canals.", {"city": "Bruges", "population": 118000}),
    ("city", "Marrakesh has 929000 residents.", {"city": "Marrakesh", "population": 929000}),
    ("city", "Helsinki's population is 658000.", {"city": "Helsinki", "population": 658000}),
    # product: product, price, in_stock
    ("product", "The Aeron chair costs $1395 and is in stock.", {"product": "Aeron chair", "price": 1395, "in_stock": True}),
    ("product", "Kindle Paperwhite: 139.99, currently out of stock.", {"product": "Kindle Paperwhite", "price": 139.99, "in_stock": False}),
    ("product", "We have the blue ceramic mug available for 12.50.", {"product": "blue ceramic mug", "price": 12.5, "in_stock": True}),
    (
        "product",
        "Sorry, the Trail Runner 3 shoes (89.95) are sold out.",
        {"product": "Trail Runner 3 shoes", "price": 89.95, "in_stock": False},
    ),
    ("product", "Price of the espresso machine: 249. Available now.", {"product": "espresso machine", "price": 249, "in_stock": True}),
    (
        "product",
        "The Moleskine notebook sells for 19.90 and we have plenty left.",
        {"product": "Moleskine notebook", "price": 19.9, "in_stock": True},
    ),
    (
        "product",
        "Noise-cancelling headphones, 299 dollars, back in stock next month.",
        {"product": "Noise-cancelling headphones", "price": 299, "in_stock": False},
    ),
    ("product", "In stock: cast-iron skillet at 45.", {"product": "cast-iron skillet", "price": 45, "in_stock": True}),
    ("product", "The 4K monitor is listed at 329.99 but none are left.", {"product": "4K monitor", "price": 329.99, "in_stock": False}),
    ("product", "Yoga mat — 25 — available.", {"product": "Yoga mat", "price": 25, "in_stock": True}),
    (
        "product",
        "Our best seller, the lavender soap, is 6.75 and still on the shelves.",
        {"product": "lavender soap", "price": 6.75, "in_stock": True},
    ),
    ("product", "The standing desk (price: 499) is currently unavailable.", {"product": "standing desk", "price": 499, "in_stock": False}),
    ("product", "Get the wireless mouse for just 24.99 — in stock today!", {"product": "wireless mouse", "price": 24.99, "in_stock": True}),
    ("product", "Product: garden hose. Price: 34.50. Stock: none.", {"product": "garden hose", "price": 34.5, "in_stock": False}),
    ("product", "We still have the Lego castle set, priced at 119.", {"product": "Lego castle set", "price": 119, "in_stock": True}),
    ("product", "The electric kettle costs 39 and is out of stock.", {"product": "electric kettle", "price": 39, "in_stock": False}),
    ("product", "Rain jacket, size M, 79.00, available.", {"product": "Rain jacket", "price": 79, "in_stock": True}),
    (
        "product",
        "Unfortunately the vintage record player at 210 has been sold out.",
        {"product": "vintage record player", "price": 210, "in_stock": False},
    ),
    ("product", "Chef's knife: 64.95, ships today.", {"product": "Chef's knife", "price": 64.95, "in_stock": True}),
    ("product", "The travel pillow is 15 and we're out of it.", {"product": "travel pillow", "price": 15, "in_stock": False}),
    ("product", "Available now: the Pixel charger for 29.", {"product": "Pixel charger", "price": 29, "in_stock": True}),
    ("product", "The oak bookshelf costs 180; it is not in stock.", {"product": "oak bookshelf", "price": 180, "in_stock": False}),
    ("product", "Bluetooth speaker at 59.99, in stock.", {"product": "Bluetooth speaker", "price": 59.99, "in_stock": True}),
    ("product", "No more green tea sampler left (it was 18.25).", {"product": "green tea sampler", "price": 18.25, "in_stock": False}),
    ("product", "The hiking backpack is available for 99.", {"product": "hiking backpack", "price": 99, "in_stock": True}),
    # event: event, year, city
    ("event", "The 1992 Summer Olympics were held in Barcelona.", {"event": "Summer Olympics", "year": 1992, "city": "Barcelona"}),
    ("event", "Web Summit 2023 took place in Lisbon.", {"event": "Web Summit", "year": 2023, "city": "Lisbon"}),
    ("event", "In 1889 Paris hosted the Exposition Universelle.", {"event": "Exposition Universelle", "year": 1889, "city": "Paris"}),
    ("event", "The Jazz Festival returns to Montreux in 2025.", {"event": "Jazz Festival", "year": 2025, "city": "Montreux"}),
    ("event", "Event: Berlinale. Year: 2024. City: Berlin.", {"event": "Berlinale", "year": 2024, "city": "Berlin"}),
    ("event", "Edinburgh hosted the Fringe Festival again in 2022.", {"event": "Fringe Festival", "year": 2022, "city": "Edinburgh"}),
    (
        "event",
        "The World Cup final of 2014 was played in Rio de Janeiro.",
        {"event": "World Cup final", "year": 2014, "city": "Rio de Janeiro"},
    ),
    ("event", "PyCon US 2019 was in Cleveland.", {"event": "PyCon US", "year": 2019, "city": "Cleveland"}),
    ("event", "Vienna's New Year's Concert of 2021 had no audience.", {"event": "New Year's Concert", "year": 2021, "city": "Vienna"}),
    ("event", "The marathon will be held in Boston in 2026.", {"event": "marathon", "year": 2026, "city": "Boston"}),
    ("event", "In 1969, Woodstock drew huge crowds near Bethel.", {"event": "Woodstock", "year": 1969, "city": "Bethel"}),
    ("event", "Eurovision 2016 — Stockholm.", {"event": "Eurovision", "year": 2016, "city": "Stockholm"}),
    ("event", "The climate summit (COP21) met in Paris in 2015.", {"event": "COP21", "year": 2015, "city": "Paris"}),
    ("event", "Salzburg's music festival celebrated its centenary in 2020.", {"event": "music festival", "year": 2020, "city": "Salzburg"}),
    ("event", "The tech meetup is happening in Nairobi in 2024.", {"event": "tech meetup", "year": 2024, "city": "Nairobi"}),
    ("event", "In 2010, Shanghai hosted the World Expo.", {"event": "World Expo", "year": 2010, "city": "Shanghai"}),
    ("event", "The Carnival in Venice, 2019 edition, was crowded.", {"event": "Carnival", "year": 2019, "city": "Venice"}),
    ("event", "Cannes hosted its film festival in 1946 for the first time.", {"event": "film festival", "year": 1946, "city": "Cannes"}),
    ("event", "The book fair in Frankfurt, 2018, broke records.", {"event": "book fair", "year": 2018, "city": "Frankfurt"}),
    (
        "event",
        "Glastonbury 2017 was cancelled? No, that was 2018; the 2017 festival went ahead in Pilton.",
        {"event": "Glastonbury", "year": 2017, "city": "Pilton"},
    ),
    ("event", "The 2012 Olympics opened in London on 27 July.", {"event": "Olympics", "year": 2012, "city": "London"}),
    ("event", "Sydney celebrated Mardi Gras in 2023 with a big parade.", {"event": "Mardi Gras", "year": 2023, "city": "Sydney"}),
    ("event", "A chess olympiad was held in Chennai in 2022.", {"event": "chess olympiad", "year": 2022, "city": "Chennai"}),
    ("event", "Oktoberfest 2019 in Munich welcomed six million visitors.", {"event": "Oktoberfest", "year": 2019, "city": "Munich"}),
    ("event", "The science fair took place in Tartu in 2021.", {"event": "science fair", "year": 2021, "city": "Tartu"}),
    # order: order_id, item, quantity, total
    ("order", "Order A-1043: 3 desk lamps, total 89.97.", {"order_id": "A-1043", "item": "desk lamps", "quantity": 3, "total": 89.97}),
    (
        "order",
        "You ordered 2 bags of coffee beans (order #55821) for a total of 31.",
        {"order_id": "55821", "item": "coffee beans", "quantity": 2, "total": 31},
    ),
    (
        "order",
        "Order number ZX-77: one bicycle helmet, 54.90 in total.",
        {"order_id": "ZX-77", "item": "bicycle helmet", "quantity": 1, "total": 54.9},
    ),
    ("order", "Your order 9912 for 10 notebooks came to 25.", {"order_id": "9912", "item": "notebooks", "quantity": 10, "total": 25}),
    ("order", "Thanks! Order B77-3 (4 candles) — total: 38.", {"order_id": "B77-3", "item": "candles", "quantity": 4, "total": 38}),
    (
        "order",
        "Order ID: 30017. Item: wool socks. Quantity: 6. Total: 47.94.",
        {"order_id": "30017", "item": "wool socks", "quantity": 6, "total": 47.94},
    ),
    (
        "order",
        "We shipped 12 tennis balls (order Q-208), total 19.99.",
        {"order_id": "Q-208", "item": "tennis balls", "quantity": 12, "total": 19.99},
    ),
    (
        "order",
        "Order 4410-C contains 2 office chairs for 398 altogether.",
        {"order_id": "4410-C", "item": "office chairs", "quantity": 2, "total": 398},
    ),
    (
        "order",
        "Confirmation for order 118: five picture frames, 60 total.",
        {"order_id": "118", "item": "picture frames", "quantity": 5, "total": 60},
    ),
    (
        "order",
        "The customer bought 3 jars of honey; order K-5, total 21.75.",
        {"order_id": "K-5", "item": "jars of honey", "quantity": 3, "total": 21.75},
    ),
    (
        "order",
        "order #2024-881: 1 laptop stand, total 42.50",
        {"order_id": "2024-881", "item": "laptop stand", "quantity": 1, "total": 42.5},
    ),
    (
        "order",
        "Your order (ID 7301) of 8 bottles of olive oil totals 96.",
        {"order_id": "7301", "item": "bottles of olive oil", "quantity": 8, "total": 96},
    ),
    ("order", "Order R-19 — 2 umbrellas — 30 in total.", {"order_id": "R-19", "item": "umbrellas", "quantity": 2, "total": 30}),
    ("order", "For order 66604 we charged 149.85 for 15 towels.", {"order_id": "66604", "item": "towels", "quantity": 15, "total": 149.85}),
    (
        "order",
        "Order M-300 is 7 packs of batteries, total 55.30.",
        {"order_id": "M-300", "item": "packs of batteries", "quantity": 7, "total": 55.3},
    ),
    ("order", "Invoice for order 5002: 1 sofa, total 1299.", {"order_id": "5002", "item": "sofa", "quantity": 1, "total": 1299}),
    ("order", "Order HK-42: quantity 20, item pencils, total 8.", {"order_id": "HK-42", "item": "pencils", "quantity": 20, "total": 8}),
    ("order", "Your 3 plant pots (order 771) cost 27 in total.", {"order_id": "771", "item": "plant pots", "quantity": 3, "total": 27}),
    (
        "order",
        "Order T-9 was for 2 concert tickets, total 160.",
        {"order_id": "T-9", "item": "concert tickets", "quantity": 2, "total": 160},
    ),
    ("order", "Order 880-B: 4 phone cases; total 59.96.", {"order_id": "880-B", "item": "phone cases", "quantity": 4, "total": 59.96}),
    ("order", "We received order 12345 for 9 mugs, total 67.50.", {"order_id": "12345", "item": "mugs", "quantity": 9, "total": 67.5}),
    ("order", "Order W-01: one winter coat at 210, total 210.", {"order_id": "W-01", "item": "winter coat", "quantity": 1, "total": 210}),
    ("order", "2 rugs, order 3390, 240 in total.", {"order_id": "3390", "item": "rugs", "quantity": 2, "total": 240}),
    ("order", "Order P-77: 6 cans of paint, total 113.94.", {"order_id": "P-77", "item": "cans of paint", "quantity": 6, "total": 113.94}),
    ("order", "Your order L-4 (1 guitar) totals 549.", {"order_id": "L-4", "item": "guitar", "quantity": 1, "total": 549}),
    # company: company, founded, founder
    ("company", "Microsoft was founded in 1975 by Bill Gates.", {"company": "Microsoft", "founded": 1975, "founder": "Bill Gates"}),
    (
        "company",
        "Founded by Ingvar Kamprad in 1943, IKEA sells furniture worldwide.",
        {"company": "IKEA", "founded": 1943, "founder": "Ingvar Kamprad"},
    ),
    ("company", "Sony (founded 1946, Masaru Ibuka) started in Tokyo.", {"company": "Sony", "founded": 1946, "founder": "Masaru Ibuka"}),
    ("company", "Anita Roddick started The Body Shop in 1976.", {"company": "The Body Shop", "founded": 1976, "founder": "Anita Roddick"}),
    ("company", "Company: Spotify. Founded: 2006. Founder: Daniel Ek.", {"company": "Spotify", "founded": 2006, "founder": "Daniel Ek"}),
    ("company", "In 1998, Larry Page co-founded Google.", {"company": "Google", "founded": 1998, "founder": "Larry Page"}),
    ("company", "Coco Chanel founded Chanel in 1910.", {"company": "Chanel", "founded": 1910, "founder": "Coco Chanel"}),
    (
        "company",
        "The bakery chain Greggs dates from 1939, when John Gregg opened it.",
        {"company": "Greggs", "founded": 1939, "founder": "John Gregg"},
    ),
    (
        "company",
        "Netflix, founded by Reed Hastings in 1997, began by mailing DVDs.",
        {"company": "Netflix", "founded": 1997, "founder": "Reed Hastings"},
    ),
    (
        "company",
        "Lego was started by Ole Kirk Christiansen in 1932.",
        {"company": "Lego", "founded": 1932, "founder": "Ole Kirk Christiansen"},
    ),
    ("company", "Ferrari — founded 1939 — Enzo Ferrari.", {"company": "Ferrari", "founded": 1939, "founder": "Enzo Ferrari"}),
    ("company", "Jack Ma and his partners launched Alibaba in 1999.", {"company": "Alibaba", "founded": 1999, "founder": "Jack Ma"}),
    ("company", "Adidas was registered in 1949 by Adi Dassler.", {"company": "Adidas", "founded": 1949, "founder": "Adi Dassler"}),
    (
        "company",
        "Patagonia's founder, Yvon Chouinard, started it in 1973.",
        {"company": "Patagonia", "founded": 1973, "founder": "Yvon Chouinard"},
    ),
    ("company", "In 2004 Mark Zuckerberg created Facebook.", {"company": "Facebook", "founded": 2004, "founder": "Mark Zuckerberg"}),
    (
        "company",
        "Nintendo was founded by Fusajiro Yamauchi in 1889.",
        {"company": "Nintendo", "founded": 1889, "founder": "Fusajiro Yamauchi"},
    ),
    (
        "company",
        "Estée Lauder founded her company, Estée Lauder, in 1946.",
        {"company": "Estée Lauder", "founded": 1946, "founder": "Estée Lauder"},
    ),
    ("company", "Tata Group: founded 1868 by Jamsetji Tata.", {"company": "Tata Group", "founded": 1868, "founder": "Jamsetji Tata"}),
    ("company", "Amazon began in 1994 in Jeff Bezos's garage.", {"company": "Amazon", "founded": 1994, "founder": "Jeff Bezos"}),
    ("company", "Rolex was founded in London in 1905 by Hans Wilsdorf.", {"company": "Rolex", "founded": 1905, "founder": "Hans Wilsdorf"}),
    (
        "company",
        "Samsung traces back to 1938, when Lee Byung-chul set it up.",
        {"company": "Samsung", "founded": 1938, "founder": "Lee Byung-chul"},
    ),
    (
        "company",
        "Levi Strauss & Co. was founded in 1853 by Levi Strauss.",
        {"company": "Levi Strauss & Co.", "founded": 1853, "founder": "Levi Strauss"},
    ),
    ("company", "Henri Nestlé founded Nestlé in 1866.", {"company": "Nestlé", "founded": 1866, "founder": "Henri Nestlé"}),
    ("company", "Airbnb (2008) was co-founded by Brian Chesky.", {"company": "Airbnb", "founded": 2008, "founder": "Brian Chesky"}),
    (
        "company",
        "Zara's parent was founded by Amancio Ortega in 1975; the company is Inditex.",
        {"company": "Inditex", "founded": 1975, "founder": "Amancio Ortega"},
    ),
    # book: title, author, year
    (
        "book",
        "Pride and Prejudice was written by Jane Austen in 1813.",
        {"title": "Pride and Prejudice", "author": "Jane Austen", "year": 1813},
    ),
    ("book", "George Orwell published 1984 in 1949.", {"title": "1984", "author": "George Orwell", "year": 1949}),
    (
        "book",
        "In 1967, Gabriel García Márquez released One Hundred Years of Solitude.",
        {"title": "One Hundred Years of Solitude", "author": "Gabriel García Márquez", "year": 1967},
    ),
    ("book", "Title: Beloved. Author: Toni Morrison. Year: 1987.", {"title": "Beloved", "author": "Toni Morrison", "year": 1987}),
    ("book", "The Hobbit (1937) is by J. R. R. Tolkien.", {"title": "The Hobbit", "author": "J. R. R. Tolkien", "year": 1937}),
    (
        "book",
        "Chinua Achebe's Things Fall Apart appeared in 1958.",
        {"title": "Things Fall Apart", "author": "Chinua Achebe", "year": 1958},
    ),
    (
        "book",
        "Haruki Murakami wrote Norwegian Wood, published in 1987.",
        {"title": "Norwegian Wood", "author": "Haruki Murakami", "year": 1987},
    ),
    ("book", "Frankenstein — Mary Shelley — 1818.", {"title": "Frankenstein", "author": "Mary Shelley", "year": 1818}),
    (
        "book",
        "Published in 1925, The Great Gatsby is F. Scott Fitzgerald's best-known novel.",
        {"title": "The Great Gatsby", "author": "F. Scott Fitzgerald", "year": 1925},
    ),
    (
        "book",
        "Astrid Lindgren's Pippi Longstocking came out in 1945.",
        {"title": "Pippi Longstocking", "author": "Astrid Lindgren", "year": 1945},
    ),
    ("book", "The novel Dune, by Frank Herbert, was first printed in 1965.", {"title": "Dune", "author": "Frank Herbert", "year": 1965}),
    ("book", "Orhan Pamuk wrote My Name Is Red (1998).", {"title": "My Name Is Red", "author": "Orhan Pamuk", "year": 1998}),
    ("book", "In 1851 Herman Melville gave us Moby-Dick.", {"title": "Moby-Dick", "author": "Herman Melville", "year": 1851}),
    (
        "book",
        "Kazuo Ishiguro's The Remains of the Day won the Booker in 1989, the year it came out.",
        {"title": "The Remains of the Day", "author": "Kazuo Ishiguro", "year": 1989},
    ),
    ("book", "Don Quixote by Miguel de Cervantes, 1605.", {"title": "Don Quixote", "author": "Miguel de Cervantes", "year": 1605}),
    ("book", "Virginia Woolf published Mrs Dalloway in 1925.", {"title": "Mrs Dalloway", "author": "Virginia Woolf", "year": 1925}),
    (
        "book",
        "The Little Prince (Antoine de Saint-Exupéry, 1943) is short.",
        {"title": "The Little Prince", "author": "Antoine de Saint-Exupéry", "year": 1943},
    ),
    (
        "book",
        "Wuthering Heights is Emily Brontë's only novel, from 1847.",
        {"title": "Wuthering Heights", "author": "Emily Brontë", "year": 1847},
    ),
    (
        "book",
        "Margaret Atwood wrote The Handmaid's Tale in 1985.",
        {"title": "The Handmaid's Tale", "author": "Margaret Atwood", "year": 1985},
    ),
    (
        "book",
        "It was 1866 when Crime and Punishment by Fyodor Dostoevsky appeared.",
        {"title": "Crime and Punishment", "author": "Fyodor Dostoevsky", "year": 1866},
    ),
    (
        "book",
        "Elena Ferrante published My Brilliant Friend in 2011.",
        {"title": "My Brilliant Friend", "author": "Elena Ferrante", "year": 2011},
    ),
    ("book", "Ulysses, James Joyce, 1922.", {"title": "Ulysses", "author": "James Joyce", "year": 1922}),
    (
        "book",
        "Khaled Hosseini's debut, The Kite Runner, was published in 2003.",
        {"title": "The Kite Runner", "author": "Khaled Hosseini", "year": 2003},
    ),
    (
        "book",
        "The Name of the Rose is a 1980 novel by Umberto Eco.",
        {"title": "The Name of the Rose", "author": "Umberto Eco", "year": 1980},
    ),
    (
        "book",
        "Lewis Carroll wrote Alice's Adventures in Wonderland in 1865.",
        {"title": "Alice's Adventures in Wonderland", "author": "Lewis Carroll", "year": 1865},
    ),
]


def rows() -> list[dict[str, Any]]:
    """Every row as ``{"group", "schema", "text", "answer"}``; raises ``ValueError`` for a gold
    object that does not validate against its schema."""
    import jsonschema

    out = []
    for group, text, answer in ROWS:
        schema = SCHEMAS[group]
        try:
            jsonschema.validate(answer, schema)
        except jsonschema.ValidationError as exc:
            raise ValueError(f"{group}: {text!r}: the gold object does not validate: {exc.message}") from None
        out.append({"group": group, "schema": schema, "text": text, "answer": answer})
    return out


if __name__ == "__main__":
    import sys

    path = Path(sys.argv[1] if len(sys.argv) > 1 else "demo_eval.jsonl")
    data = rows()
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in data))
    print(f"{len(data)} rows → {path}")

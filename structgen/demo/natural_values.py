"""Values for the demo generator's natural sentences: names from many languages (diacritics,
apostrophes, hyphens, particles), places, products, works, companies and events, number words,
and the ways people write prices, populations and years.  Each word list is split 4:1 into
training and held-out entries (:func:`structgen.demo.values.split_items`); a share of every
name is made up, so that values are copied from the text rather than recalled."""

# ruff: noqa: E501  (word lists read best one group per line)
from __future__ import annotations

import random

from structgen.demo.values import made_up_word, split_items

_FIRST_GROUPS = (
    "James Emily Oliver Charlotte Henry Grace Jack Lucy George Hannah Daniel Sarah Thomas Megan Ryan Kate Nathan Rachel Adam Laura Owen Claire Peter Alice".split(),  # English
    "Pedro Lucía Javier Carmen Alejandro Inés Álvaro Nuria Raúl Pilar Andrés Rocío Iván Marisol Joaquín Begoña Ramón Elena Sergio Paloma".split(),  # Spanish
    "Antoine Céline Jérôme Hélène François Amélie Benoît Élodie Rémi Geneviève Théo Maëlle Loïc Brigitte Étienne Noémie Gaël Solène".split(),  # French
    "Jürgen Anke Matthias Jörg Sabine Björn Ulrike Tobias Käthe Florian Greta Lars Heike Moritz Frauke Sönke Dörte Wolfgang".split(),  # German
    "Łukasz Małgorzata Wojciech Agnieszka Paweł Katarzyna Grzegorz Żaneta Jędrzej Bożena Michał Ewa Radosław Jolanta".split(),  # Polish
    "Mehmet Ayşe Mustafa Zeynep Emre Gülşen Burak Şebnem Oğuz Didem Çağrı İlkay Tolga Özlem".split(),  # Turkish
    "Hiroshi Akiko Takeshi Naoko Kenta Sakura Daisuke Haruka Ryo Emiko Shota Yumi Kazuo Mariko".split(),  # Japanese
    "Wei Xiaoling Jun Meiling Hao Yan Zhiwei Lihua Bo Qing Jian Xiu Lei Fang".split(),  # Chinese
    "Minjun Jiwoo Seojun Hayoon Dohyun Soyeon Jaehyun Eunji Taeyang Minseo".split(),  # Korean
    "Anh Linh Minh Thu Quang Huong Tuan Lan Duc Mai".split(),  # Vietnamese
    "Aarav Ananya Vikram Deepika Rohan Kavya Sanjay Meera Arun Lakshmi Nikhil Pooja Rahul Divya".split(),  # Indian
    "Ahmed Layla Youssef Noor Khalid Salma Tariq Yasmin Hassan Rania Bilal Amira Ziad Huda".split(),  # Arabic
    "Chinwe Emeka Ngozi Tunde Folake Kwame Abena Kofi Adaeze Babajide Wanjiru Otieno Zanele Thabo".split(),  # African
    "Dimitris Eleni Nikos Katerina Yannis Sophia Kostas Maria".split(),  # Greek
    "Sergei Natalia Dmitry Olga Alexei Tatiana Mikhail Irina Yuri Svetlana".split(),  # Russian
    "João Ana Luís Beatriz Gonçalo Mariana Tiago Leonor Rodrigo Conceição Thiago Fernanda".split(),  # Portuguese
    "Giulia Matteo Francesca Lorenzo Chiara Alessandro Federica Niccolò Martina Davide".split(),  # Italian
    "Sander Femke Joost Lotte Maarten Anouk Pieter Sanne".split(),  # Dutch
    "Siobhán Ciarán Aoife Seán Niamh Pádraig Caoimhe Eoin".split(),  # Irish
    "Astrid Henrik Ingrid Magnus Sigrid Øystein Solveig Åsa Mikael Linnea".split(),  # Nordic
    "Yael Avi Noa Itai Tamar Eitan".split(),  # Hebrew
    "Mateus Camila Santiago Valentina Diego Renata Emilio Ximena".split(),  # Latin American
)
_LAST_GROUPS = (
    "Walker Bennett Carter Hughes Foster Palmer Reed Morgan Harris Clarke Turner Price Mitchell Cooper Ward Russell Gray Hayes".split(),
    "Fernández Martínez Rodríguez Sánchez Gómez Díaz Muñoz Jiménez Álvarez Romero Navarro Ortiz Ruiz Herrera".split(),
    "Lefèvre Girard Bonnet Rousseau Mercier Lambert Fontaine Chevalier Dupont Leclerc Faure Gauthier".split(),
    "Schröder Hoffmann Krüger Wagner Schäfer Neumann Zimmermann Braun Hartmann Köhler Lehmann Weiß".split(),
    "Wójcik Kamiński Lewandowski Zieliński Szymański Dąbrowski Kozłowski Jankowski Mazur Krawczyk".split(),
    "Öztürk Yıldız Aydın Çelik Şahin Doğan Arslan Koç Kılıç Aslan".split(),
    "Suzuki Takahashi Watanabe Ito Yamamoto Kobayashi Nakamura Saito Matsumoto Inoue".split(),
    "Wang Zhang Liu Huang Zhao Zhou Xu Sun Ma Zhu".split(),
    "Lee Choi Jung Kang Cho Yoon Jang Lim".split(),
    "Tran Le Pham Hoang Phan Vu Dang Bui".split(),
    "Sharma Gupta Iyer Reddy Nair Banerjee Chatterjee Desai Joshi Menon Pillai Rao".split(),
    "Mansour Khalil Nasser Saleh Hamdan Aziz Rahim Farouk".split(),
    "Adebayo Okonkwo Mensah Boateng Nwosu Olawale Kamau Mwangi Ndlovu Dlamini".split(),
    "Papadakis Georgiou Nikolaidis Konstantinou Alexiou Vlachos".split(),
    "Petrov Smirnov Volkov Sokolov Kuznetsova Morozova Pavlov Lebedev".split(),
    "Oliveira Pereira Carvalho Gonçalves Araújo Ribeiro Magalhães Figueiredo".split(),
    "Bianchi Ricci Marino Colombo Bruno Gallo Esposito Ferrara Moretti".split(),
    "de Vries van Dijk Bakker Visser Smit de Jong van den Berg Mulder".split(),
    "O'Sullivan O'Neill McCarthy O'Donnell MacLeod Fitzgerald D'Angelo".split(),
    "Nilsson Andersen Halvorsen Lindgren Bergström Sørensen Åkesson Dahl".split(),
    "Cohen Levi Mizrahi Friedman Katz".split(),
    "Castillo Vargas Mendoza Rojas Gutiérrez Herrera-López García-Márquez".split(),
)
FIRST_NAMES = tuple(n for g in _FIRST_GROUPS for n in g)
LAST_NAMES = tuple(n for g in _LAST_GROUPS for n in g)
# multiword surnames whose spaces the split above broke up
LAST_NAMES = tuple(x for x in LAST_NAMES if x not in ("de", "van", "den")) + (
    "de Vries",
    "van Dijk",
    "de Jong",
    "van den Berg",
    "da Silva",
    "dos Santos",
    "Al-Amin",
    "El-Sayed",
    "Ben-David",
)
HYPHEN_FIRST = ("Marie-Claire", "Jean-Pierre", "Anne-Sophie", "Hans-Peter", "Eun-ji", "Ji-woo", "Mary-Kate", "Karl-Heinz", "Paul-Henri")

CITIES = tuple(
    "Seattle Denver Boston Austin Portland Phoenix Nashville Atlanta Baltimore Calgary Vancouver Montreal Winnipeg Halifax "
    "Guadalajara Monterrey Medellín Bogotá Quito Lima Santiago Valparaíso Córdoba Rosario Montevideo Curitiba Recife Belém "
    "Bordeaux Toulouse Marseille Nantes Strasbourg Grenoble Düsseldorf Köln Hamburg Leipzig Dresden Nürnberg Bremen Hannover "
    "Wrocław Poznań Łódź Gdańsk Szczecin Brno Ostrava Bratislava Debrecen Budapest Cluj Timișoara Ljubljana Split Sarajevo "
    "Thessaloniki Patras İzmir Ankara Bursa Antalya Trondheim Uppsala Göteborg Tromsø Odense Espoo Turku Tartu Kaunas "
    "Sevilla Valencia Zaragoza Granada Alicante Coimbra Braga Faro Bologna Firenze Palermo Bari Trieste Padova "
    "Rotterdam Eindhoven Groningen Antwerpen Liège Basel Lausanne Innsbruck Linz Glasgow Leeds Bristol Belfast Galway "
    "Nagoya Sapporo Fukuoka Kobe Sendai Busan Incheon Daegu Taipei Kaohsiung Shenzhen Chengdu Wuhan Xiamen Hangzhou "
    "Pune Chennai Hyderabad Jaipur Kochi Lucknow Dhaka Chittagong Colombo Kathmandu Lahore Karachi Cebu Davao "
    "Surabaya Bandung Penang Ipoh Nairobi Mombasa Kampala Accra Kumasi Dakar Abuja Ibadan Durban Pretoria Windhoek Lusaka "
    "Marrakesh Fès Tunis Alexandria Amman Muscat Doha Tbilisi Yerevan Baku Almaty Tashkent Perth Adelaide Brisbane Hobart "
    "Wellington Christchurch Dunedin Auckland".split()
) + (
    "New Orleans",
    "San Diego",
    "Salt Lake City",
    "Buenos Aires",
    "Rio de Janeiro",
    "Belo Horizonte",
    "Porto Alegre",
    "Cape Town",
    "Kuala Lumpur",
    "Ho Chi Minh City",
    "Tel Aviv",
    "Las Palmas",
    "Saint-Étienne",
    "Aix-en-Provence",
    "Frankfurt am Main",
    "St. Gallen",
    "Den Haag",
    "Addis Ababa",
    "Dar es Salaam",
    "Port Louis",
    "San José",
    "Mexico City",
    "Quebec City",
    "Ciudad Real",
    "Hà Nội",
    "Đà Nẵng",
)
COUNTRIES = tuple(
    "Portugal Spain France Germany Poland Turkey Japan Korea Vietnam India Egypt Nigeria Kenya Ghana Greece Brazil Chile Peru Mexico Canada Norway Sweden Finland Iceland Ireland Italy Austria Hungary Romania Morocco Tunisia Jordan Georgia Armenia Australia".split()
) + ("New Zealand", "South Africa", "Costa Rica", "Sri Lanka")

PRODUCT_ADJ = tuple(
    "wireless compact portable ergonomic stainless waterproof foldable cordless smart vintage organic bamboo ceramic leather mechanical electric insulated adjustable noise-cancelling solar".split()
)
PRODUCT_NOUN = tuple(
    "headphones kettle backpack blender lamp keyboard mouse speaker charger toaster thermos jacket umbrella tent drill monitor router camera tripod notebook pen mug chair desk scooter watch grinder fan heater humidifier".split()
)
BRANDS = tuple("Kelvo Norvik Altura Brisa Quanto Zenwick Lumo Ferro Vantix Orbia Solen Trakka Myra Pelix Hoku Tarsa".split())
COLORS = tuple("black white red blue green grey silver navy beige yellow orange purple teal olive".split())
EVENT_NOUN = tuple(
    "Festival Summit Conference Fair Marathon Expo Symposium Forum Gala Cup Championship Biennale Week Congress Hackathon Regatta".split()
)
EVENT_TOPIC = tuple(
    "Jazz Film Book Music Design Science Robotics Wine Food Lantern Light Chess Data Poetry Climate Startup Theatre Dance Comics Cycling".split()
)
BOOK_WORDS = tuple(
    "Silent River Shadows Glass Winter Orchard Salt Memory Iron Paper Garden Stars Harbor Last Lighthouse Ashes Tide Letters Secret Hours Distant Hollow North Bones Clockwork Empire Daughters Storm Velvet Kingdom".split()
)
COMMON_WORDS = tuple(
    "time year people way day man thing woman life child world school family student group country problem hand part place case week company system program question work government number night point home water room mother area money story fact month lot right study book eye job word business issue side kind head house service friend father power hour game line end member law car city community name team minute idea kid body information back parent face others level office door health person art war history party result change morning reason research girl guy moment air teacher force education foot boy age policy music market sense nation plan college interest death experience effect class control care field development role effort rate heart drug show leader light voice wife police mind price report decision son view relationship town road arm difference value building action model season society tax director position player record paper space ground form event official matter center couple site project activity star table need court oil situation cost industry figure street image phone data picture practice piece land product doctor wall patient worker news test movie north love support technology step baby computer type attention film tree source organization hair window evidence population truth song".split()
)
SMALL_WORDS = frozenset(("of", "the", "and", "in", "for"))  # left lower case inside a title
SEASONS = ("Summer", "Winter", "Spring", "Autumn", "Spring", "Night", "Midsummer", "Harvest", "Youth")
COMPANY_SUFFIX = (
    "Inc.",
    "Ltd",
    "GmbH",
    "S.A.",
    "AG",
    "Co.",
    "Corp.",
    "Group",
    "Labs",
    "Technologies",
    "Foods",
    "Motors",
    "Studios",
    "Systems",
    "Bank",
    "Airlines",
)
ITEMS = tuple(
    "laptop stand|coffee beans|running shoes|desk lamp|yoga mat|phone case|water bottle|office chair|garden hose|rain jacket|bike helmet|wool scarf|USB cable|printer ink|tea kettle|board game|winter boots|sunglasses|pillow|blanket".split(
        "|"
    )
)
JOBS = tuple(
    "nurse|teacher|architect|engineer|baker|pilot|lawyer|chef|dentist|journalist|photographer|pharmacist|electrician|accountant|librarian|plumber|farmer|designer|programmer|veterinarian|firefighter|translator|carpenter|surgeon".split(
        "|"
    )
)
SPECIES = ("dog", "cat", "rabbit", "parrot", "hamster", "horse", "turtle", "goldfish")
PET_NAMES = tuple("Biscuit Luna Max Pepper Mochi Simba Coco Rocky Daisy Ziggy Nala Bruno Olive Ginger Milo Peanut".split())

ONES = "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen seventeen eighteen nineteen".split()
TENS = "_ _ twenty thirty forty fifty sixty seventy eighty ninety".split()


def number_word(n: int) -> str:
    """``n`` (0–99) in English words: ``"forty-two"``.  Raises ``ValueError`` outside 0–99."""
    if not 0 <= n <= 99:
        raise ValueError(f"number_word covers 0-99, got {n}")
    if n < 20:
        return ONES[n]
    return TENS[n // 10] + ("" if n % 10 == 0 else "-" + ONES[n % 10])


def ordinal(n: int) -> str:
    """``n`` as an English ordinal in digits: ``"21st"``, ``"70th"``, ``"112th"``."""
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def made_up_name_part(rng: random.Random) -> str:
    """A made-up capitalized word, sometimes with a letter carrying a diacritic, so that copied
    values include bytes beyond ASCII."""
    w = made_up_word(rng)
    if rng.random() < 0.25:
        i = rng.randrange(1, len(w))
        w = w[:i] + rng.choice("áéíóúàèñçãõüöäøåłśżğışčřžđ") + w[i + 1 :]
    return w


def person_name(rng: random.Random, split: str) -> str:
    """A full name: real first and last names of many languages, made-up parts (a third),
    hyphenated first names, surnames with apostrophes and particles, middle names."""
    first = rng.choice(split_items(HYPHEN_FIRST, split)) if rng.random() < 0.08 else rng.choice(split_items(FIRST_NAMES, split))
    last = rng.choice(split_items(LAST_NAMES, split))
    if rng.random() < 0.33:
        first = made_up_name_part(rng)
    if rng.random() < 0.33:
        last = made_up_name_part(rng)
    if rng.random() < 0.06:
        prefix = rng.choice(["Al-", "El-", "Ben-", "Abu-", "Mc", "O'", "D'"])
        last = prefix + last
    if rng.random() < 0.05:  # initials: "J. R. Okafor", "A. Lindqvist"
        first = " ".join(f"{rng.choice('ABCDEFGHJKLMNPRSTW')}." for _ in range(rng.randint(1, 3)))
    parts = [first, last]
    if rng.random() < 0.08:
        parts.insert(1, rng.choice(split_items(FIRST_NAMES, split)))
    return " ".join(parts)


def city(rng: random.Random, split: str) -> str:
    """A city: real names of many countries (diacritics, several words) or a made-up one."""
    if rng.random() < 0.3:
        w = made_up_name_part(rng)
        return w if rng.random() < 0.8 else f"{rng.choice(['San', 'Port', 'New', 'Santa', 'Bad'])} {w}"
    return rng.choice(split_items(CITIES, split))


def country(rng: random.Random, split: str) -> str:
    return made_up_name_part(rng) if rng.random() < 0.25 else rng.choice(split_items(COUNTRIES, split))


def product(rng: random.Random, split: str) -> str:
    """A product name: brand + model, adjective + noun, or a brand with a model number."""
    brand = made_up_name_part(rng) if rng.random() < 0.4 else rng.choice(split_items(BRANDS, split))
    noun = rng.choice(split_items(PRODUCT_NOUN, split))
    kind = rng.randrange(7)
    if kind == 6:  # "Paper Star 3 lamp", "Kelvo 7 kettle", "5X tripod"
        lead = (
            f"{rng.choice(split_items(COMMON_WORDS, split)).title()} {rng.choice(split_items(COMMON_WORDS, split)).title()}"
            if rng.random() < 0.5
            else brand
        )
        return (
            f"{lead} {rng.randint(1, 12)} {noun}" if rng.random() < 0.7 else f"{rng.randint(2, 8)}{rng.choice(['G', 'X', '-in-1'])} {noun}"
        )
    if kind >= 4:  # a plain description: "blue ceramic mug", "espresso machine"
        return " ".join(
            [rng.choice(split_items(COLORS, split))] * (rng.random() < 0.3)
            + [rng.choice(split_items(PRODUCT_ADJ, split))] * (rng.random() < 0.5)
            + [noun]
        )
    if kind == 0:
        return f"{brand} {rng.choice(split_items(PRODUCT_ADJ, split))} {noun}"
    if kind == 1:
        return f"{rng.choice(split_items(PRODUCT_ADJ, split))} {noun}"
    if kind == 2:
        return f"{brand} {rng.choice(['X', 'Pro', 'Air', 'Max', 'S', 'One', 'Mini'])}{rng.choice(['', ' ', '-'])}{rng.randint(1, 99)}"
    return f"{brand} {noun}"


def event(rng: random.Random, split: str) -> str:
    """An event name: ``Lisbon Jazz Festival``, ``Data Summit 2019`` style, or made-up."""
    topic = made_up_name_part(rng) if rng.random() < 0.3 else rng.choice(split_items(EVENT_TOPIC, split))
    noun = rng.choice(split_items(EVENT_NOUN, split))
    r = rng.random()
    if r < 0.1:  # "Winter Games", "Night Market"
        return f"{rng.choice(SEASONS)} {rng.choice(['Games', 'Market', 'Festival', 'Concert', 'Parade', 'Fair'])}"
    if r < 0.18:
        return f"{topic} {noun} {rng.choice(['final', 'opening night', 'closing ceremony', 'finals'])}"
    if r < 0.3:  # one word: "Zorvafest", "Kelvocon"
        return made_up_name_part(rng) + rng.choice(["", "", "fest", "con", "Fest", " Live", str(rng.randint(10, 30))])
    if r < 0.35:
        return f"{topic} {rng.choice(split_items(COMMON_WORDS, split)).title()} {noun}"
    if r < 0.5:
        return f"{rng.choice(['International', 'Global', 'European', 'National', 'Annual'])} {topic} {noun}"
    return f"{topic} {noun}"


def title(rng: random.Random, split: str) -> str:
    """A book or film title: ``The Silent Orchard``, ``Letters from Tartu``, ``Nights of Ash``."""

    def w() -> str:
        return made_up_name_part(rng) if rng.random() < 0.25 else rng.choice(split_items(BOOK_WORDS, split))

    def c() -> str:
        return rng.choice(split_items(COMMON_WORDS, split))

    k = rng.randrange(9)
    if k == 5:  # any short phrase of ordinary words: "Things of the Night", "Paper Year"
        words = [c() for _ in range(rng.randint(1, 4))]
        glue = rng.choice([" ", " ", " of the ", " and ", " in the ", " for "])
        half = len(words) // 2 or 1
        phrase = glue.join([" ".join(words[:half]), " ".join(words[half:])]).strip()
        return " ".join(w if i and w in SMALL_WORDS else w.capitalize() for i, w in enumerate(phrase.split()))
    if k == 6:
        return (
            str(rng.randint(2100, 2999))
            if rng.random() < 0.5
            else f"{rng.choice(['One', 'Two', 'Three', 'Seven', 'A Hundred', 'Ten Thousand'])} {c().title()}s"
        )
    if k == 7:
        return f"{c().title()} {rng.choice(['of', 'and', 'without', 'after', 'before'])} {c().title()}"
    if k == 8:
        return f"The {c().title()}"
    if k == 0:
        return f"The {w()} {w()}"
    if k == 1:
        return f"{w()} of {w()}"
    if k == 2:
        return f"The {w()}"
    if k == 3:
        return f"{w()} from {city(rng, split)}"
    return f"A {w()} for {w()}"


def company(rng: random.Random, split: str) -> str:
    """A company name: a made-up or family name with a legal or trade suffix, or an acronym."""
    root = made_up_name_part(rng) if rng.random() < 0.6 else rng.choice(split_items(LAST_NAMES, split))
    r = rng.random()
    if r < 0.15:
        return "".join(rng.choice("ABCDEFGHKLMNPRSTVXZ") for _ in range(rng.randint(2, 4)))
    if r < 0.3:
        return f"{root} & {rng.choice(split_items(LAST_NAMES, split))}"
    if r < 0.38:
        return f"The {rng.choice(split_items(COMMON_WORDS, split)).title()} {rng.choice(['Company', 'Store', 'Club', 'Kitchen', 'Works'])}"
    return f"{root} {rng.choice(COMPANY_SUFFIX)}" if rng.random() < 0.75 else root


def item(rng: random.Random, split: str) -> str:
    return product(rng, split).lower() if rng.random() < 0.3 else rng.choice(split_items(ITEMS, split))


def order_id(rng: random.Random, _split: str) -> str:
    """An order reference: digits, letters and digits, dashes."""
    k = rng.randrange(5)
    digits = str(rng.randint(1000, 9999999))
    if k == 0:
        return digits
    if k == 1:
        return f"{rng.choice(['A', 'B', 'X', 'ORD', 'PO', 'INV', 'SO'])}{rng.choice(['', '-'])}{digits}"
    if k == 2:
        return f"{rng.choice(['ORD', 'ORDER', 'PO'])}-{rng.randint(2015, 2026)}-{rng.randint(1, 9999):04d}"
    if k == 3:
        return "".join(rng.choice("ABCDEFGHJKLMNPQRSTUVWXYZ0123456789") for _ in range(rng.randint(6, 10)))
    return f"{rng.choice('ABCDEFGHJK')}{rng.randint(10, 99)}-{rng.randint(100, 999)}"


def price_value(rng: random.Random) -> float:
    """A price in currency units: whole or with cents, from 1 to a few thousand."""
    whole = rng.choice([rng.randint(1, 30), rng.randint(1, 300), rng.randint(1, 3000)])
    if rng.random() < 0.3:
        return whole  # a whole price is written and answered as an integer: "$12", 12
    return round(whole + rng.choice([0.99, 0.95, 0.5, 0.49, rng.randint(1, 99) / 100]), 2)


def price_text(rng: random.Random, v: float) -> str:
    """``v`` written as people write prices: ``$19.99``, ``19.99 dollars``, ``€5``, ``EUR 12.50``,
    ``£1,299.00``."""
    num = f"{v:.2f}" if v != int(v) or rng.random() < 0.3 else str(int(v))
    if v >= 1000 and rng.random() < 0.5:
        whole, _, cents = num.partition(".")
        num = f"{int(whole):,}" + (f".{cents}" if cents else "")
    k = rng.randrange(8)
    return [f"${num}", f"${num}", f"€{num}", f"£{num}", f"{num} dollars", f"{num} euros", f"EUR {num}", f"{num} USD"][k]


def int_text(rng: random.Random, n: int, words: float = 0.15) -> str:
    """An integer as digits, sometimes in words (0–99)."""
    return number_word(n) if n <= 99 and rng.random() < words else str(n)


def population_value(rng: random.Random) -> int:
    k = rng.randrange(4)
    if k == 0:
        return rng.randint(800, 99_999)
    if k == 1:
        return rng.randint(100, 9_999) * 100
    if k == 2:
        return rng.randint(101, 999) * 10_000
    return rng.randint(11, 399) * 100_000


def population_text(rng: random.Random, n: int) -> str:
    """``n`` as digits, with thousands separators, or as ``2.1 million`` when it is a round
    number of hundred-thousands."""
    if n >= 1_000_000 and n % 10_000 == 0 and rng.random() < 0.5:
        return f"{n / 1_000_000:g} million"
    return f"{n:,}" if rng.random() < 0.6 else str(n)

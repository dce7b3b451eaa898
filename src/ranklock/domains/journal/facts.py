"""The fact tables the journal and its questions are both written from.

Everything a question asks about is a row here; the note generator writes each
row into one note (or two, for a decision reversed later) with its own
wording, and the question generator asks about the same row with separate
templates.  Names are deliberately rare (an embedder has seen them seldom, if
ever) and no name, codename or identifier shares a word with another.
"""

from __future__ import annotations

__all__ = [
    "CITIES",
    "IBERIAN_FACTS",
    "FILLER_DISHES",
    "FILLER_WEATHER",
    "HOSTS",
    "IBERIAN_PEOPLE",
    "PARAPHRASE_EPISODES",
    "PEOPLE",
    "PERSON_FACTS",
    "PLACES",
    "PROJECTS",
    "ROOT_CAUSES",
    "UNKNOWN_CODENAMES",
    "UNKNOWN_IDENTIFIERS",
    "UNKNOWN_PEOPLE",
    "UNSTATED_QUESTIONS",
    "VENUES",
]

#: (full name, pronoun) of the English-journal people.
PEOPLE: tuple[tuple[str, str], ...] = (
    ("Ottoline Vasquez-Brandt", "she"),
    ("Zebulon Okonkwo", "he"),
    ("Perpetua Lindqvist", "she"),
    ("Thaddeus Mbeki-Rowe", "he"),
    ("Leocadia Farrow", "she"),
    ("Evander Quist", "he"),
    ("Philippa Strand-Oyelaran", "she"),
    ("Cosimo Haverkamp", "he"),
    ("Wilhelmina Tsosie", "she"),
    ("Anselm Drummond", "he"),
    ("Griselda Papadakis", "she"),
    ("Barnaby Ekwueme", "he"),
    ("Isolde Marchetti", "she"),
    ("Lysander Volkov", "he"),
    ("Clementine Achterberg", "she"),
    ("Osric Fairweather", "he"),
    ("Fenella Castellanos", "she"),
    ("Tiberius Nakamura", "he"),
    ("Ravenna Oduya", "she"),
    ("Horatio Szabo", "he"),
    ("Eulalia Brennan", "she"),
    ("Casimir Adeyemi", "he"),
    ("Theodora Kowalczyk", "she"),
    ("Leopold Umarov", "he"),
    ("Araminta Sjoberg", "she"),
    ("Ignatius Moreau", "he"),
    ("Henrietta Oyelowo", "she"),
    ("Benedikt Yamamoto", "he"),
    ("Seraphina Dlamini", "she"),
    ("Cornelius Rasmussen", "he"),
    ("Marguerite Okafor", "she"),
    ("Aurelio Lindgren", "he"),
    ("Ottilie Brannigan", "she"),
    ("Peregrine Mwangi", "he"),
    ("Rosalind Iwu", "she"),
    ("Ambrose Kettleborough", "he"),
    ("Dorothea Zielinski", "she"),
    ("Fitzroy Abernathy", "he"),
    ("Winifred Sandoval", "she"),
    ("Caspian Thorvaldsen", "he"),
)

#: (kind, note sentence after "<Pronoun> ", question template, values).  The
#: note says ``{pron_cap} {sentence}``; the question names the person.
PERSON_FACTS: tuple[tuple[str, str, str, tuple[str, ...]], ...] = (
    (
        "allergy",
        "mentioned being allergic to {v}.",
        "What is {name} allergic to?",
        ("hazelnuts", "penicillin", "shellfish", "bee stings", "latex", "sesame", "kiwi fruit"),
    ),
    (
        "instrument",
        "has started lessons on the {v}.",
        "Which instrument is {name} learning?",
        ("cello", "bassoon", "theremin", "harpsichord", "oboe", "sitar", "euphonium"),
    ),
    (
        "moving",
        "is relocating to {v} next spring.",
        "Where is {name} moving to?",
        ("Tromsø", "Hobart", "Tbilisi", "Ljubljana", "Nagoya", "Windhoek", "Quito"),
    ),
    (
        "marathon",
        "is training hard for the {v} marathon.",
        "Which marathon is {name} preparing for?",
        ("Boston", "Berlin", "Kyoto", "Chicago", "Athens", "Rotterdam"),
    ),
    (
        "book",
        "recommended {v} as the best novel of the decade.",
        "Which novel did {name} recommend?",
        ("The Leopard", "Middlemarch", "Pedro Páramo", "Stoner", "The Makioka Sisters", "Hadji Murat"),
    ),
    (
        "pet",
        "brought home a rescued {v} last weekend.",
        "What animal did {name} rescue?",
        ("tortoise", "ferret", "parrot", "hedgehog", "axolotl", "chinchilla"),
    ),
)

#: Portuguese- and Spanish-speaking people: (full name, lang, gender m/f), and
#: their facts in their language: (kind, values).
IBERIAN_PEOPLE: tuple[tuple[str, str, str], ...] = (
    ("Joaquim Valadares", "pt", "m"),
    ("Conceição Meireles", "pt", "f"),
    ("Baltasar Quintela", "pt", "m"),
    ("Iolanda Sarmento", "pt", "f"),
    ("Teodoro Bragança", "pt", "m"),
    ("Marisol Arriaga", "es", "f"),
    ("Eusebio Carvajal", "es", "m"),
    ("Remedios Ibarrola", "es", "f"),
    ("Gumersindo Olaechea", "es", "m"),
    ("Inmaculada Zubizarreta", "es", "f"),
)

#: Per language: kind -> (note sentence, question, values).  ``{alergico}`` is
#: the adjective in the person's gender.
IBERIAN_FACTS: dict[str, dict[str, tuple[str, str, tuple[str, ...]]]] = {
    "pt": {
        "moving": (
            "Jantar com {name} em {place}. Vai mudar-se para {v} em setembro.",
            "Para onde vai mudar-se {name}?",
            ("Macau", "Funchal", "Maputo", "Recife", "Ponta Delgada"),
        ),
        "instrument": (
            "{name} contou-me que está a aprender a tocar {v}.",
            "Que instrumento está {name} a aprender a tocar?",
            ("violoncelo", "cavaquinho", "acordeão", "bandolim", "fagote"),
        ),
        "allergy": (
            "Almoço com {name}: é {alergico} a {v}, cuidado nos jantares de equipa.",
            "A que é {alergico} {name}?",
            ("amendoins", "camarão", "morangos", "glúten", "mostarda"),
        ),
    },
    "es": {
        "moving": (
            "Cena con {name} en {place}. Se va a mudar a {v} en septiembre.",
            "¿Adónde se va a mudar {name}?",
            ("Montevideo", "Cusco", "Oaxaca", "Asunción", "Cartagena"),
        ),
        "instrument": (
            "{name} me dijo que está aprendiendo a tocar el {v}.",
            "¿Qué instrumento está aprendiendo a tocar {name}?",
            ("violonchelo", "charango", "acordeón", "bandoneón", "arpa"),
        ),
        "allergy": (
            "Comida con {name}: es {alergico} a {v}, ojo en las cenas del equipo.",
            "¿A qué es {alergico} {name}?",
            ("cacahuetes", "gambas", "fresas", "nueces", "mostaza"),
        ),
    },
}

#: (codename, identifier) of the projects.  Identifiers look like ticket or
#: part numbers; the embedder's tokenizer splits them into meaningless pieces.
PROJECTS: tuple[tuple[str, str], ...] = (
    ("Halyard", "XJ-900"),
    ("Quillmark", "QM-214"),
    ("Tarnhelm", "TH-3071"),
    ("Glasswing", "GW-58"),
    ("Petrichor", "PX-7700"),
    ("Larkspur", "LS-412"),
    ("Cinderpath", "CP-1966"),
    ("Marrowbone", "MB-305"),
    ("Sundial", "SD-88"),
    ("Bluefinch", "BF-2290"),
    ("Kestrelgate", "KG-613"),
    ("Ossuary", "OS-45"),
    ("Wickerwork", "WW-1170"),
    ("Driftglass", "DG-932"),
    ("Foxglove", "FG-5008"),
    ("Tamarack", "TK-77"),
    ("Nightjar", "NJ-4410"),
    ("Brackenridge", "BR-269"),
    ("Saltmarsh", "SM-1383"),
    ("Umbrafold", "UF-606"),
)

#: The root cause recorded for each project's identifier (one per project, in order).
ROOT_CAUSES: tuple[str, ...] = (
    "a leap-second bug in the scheduler",
    "an expired TLS certificate",
    "a race in the cache warmer",
    "a misconfigured cron job",
    "clock skew between replicas",
    "a full disk on the build agent",
    "an integer overflow in the invoice counter",
    "a stale DNS record",
    "a missing database index",
    "a memory leak in the image resizer",
    "a timezone mix-up in the billing export",
    "a deadlock between two migrations",
    "an unpinned dependency upgrade",
    "a rate limit at the payment gateway",
    "a corrupted backup manifest",
    "a firewall rule dropping health checks",
    "an off-by-one error in pagination",
    "a retry storm after a network blip",
    "a wrong feature flag default",
    "a truncated log rotation",
)

#: Hosting providers a decision picks (and a later note reverses).
HOSTS: tuple[str, ...] = ("Hetzner", "OVHcloud", "Scaleway", "Linode", "Vultr", "Exoscale", "UpCloud", "Infomaniak")

#: Cities for trips (one trip a month) and the places notes happen in.
CITIES: tuple[str, ...] = (
    "Valparaíso",
    "Gdańsk",
    "Tallinn",
    "Bergen",
    "Trieste",
    "Plovdiv",
    "Kraków",
    "Seville",
    "Porto",
    "Marseille",
    "Ghent",
    "Salzburg",
    "Bilbao",
    "Aarhus",
    "Cluj-Napoca",
    "Bratislava",
    "Lyon",
)
PLACES: tuple[str, ...] = (
    "Café Aurora",
    "the Lisbon office",
    "the riverside canteen",
    "the rooftop meeting room",
    "Bar Vesuvio",
    "the co-working loft",
    "the north atrium",
    "Pastelaria Versailles",
)

#: Places named without an English article, for notes in Portuguese and Spanish.
VENUES: tuple[str, ...] = ("Café Aurora", "Bar Vesuvio", "Pastelaria Versailles", "Mercado da Ribeira")

FILLER_WEATHER: tuple[str, ...] = ("grey and drizzly", "bright and cold", "windy", "humid", "clear", "foggy")
FILLER_DISHES: tuple[str, ...] = (
    "a lentil curry",
    "mushroom risotto",
    "a tray of roast vegetables",
    "pho",
    "shakshuka",
)

#: Names, codenames and identifiers the journal never mentions (for unanswerable questions).
UNKNOWN_PEOPLE: tuple[str, ...] = (
    "Bartholomew Quince",
    "Hyacinth Oberholzer",
    "Mortimer Vashchenko",
    "Gwendolyn Ashdown",
    "Ezekiel Tranquada",
    "Prudence Okwuosa",
    "Lazarus Penhaligon",
    "Cordelia Wexford",
    "Florian Mbatha",
    "Temperance Holloway",
)
UNKNOWN_CODENAMES: tuple[str, ...] = ("Moonraker", "Gallowglass", "Pennyroyal", "Starwort", "Thistledown")
UNKNOWN_IDENTIFIERS: tuple[str, ...] = ("ZQ-4040", "YV-118", "RN-7321", "HC-555", "PL-9090")

#: Questions no note answers although most of their words are the journal's (bicycle, plumber, visitors,
#: Reykjavik...), written once by hand in the three languages: (lang, question).  They name no
#: person, codename or identifier, so only the generator's own evidence can tell it has no answer,
#: and the extractive generator's abstention threshold is chosen on them (issue 26).
UNSTATED_QUESTIONS: tuple[tuple[str, str], ...] = (
    ("en", "Which bus should visitors take?"),
    ("en", "What colour did we paint the kitchen?"),
    ("en", "How much did the new bicycle cost?"),
    ("en", "Which vet treated the dog's ear infection?"),
    ("en", "What did the plumber say about the boiler?"),
    ("en", "Which hotel did we stay at in Reykjavik?"),
    ("en", "How many guests came to my grandmother's party?"),
    ("en", "Which school does our daughter attend?"),
    ("en", "What time does the bakery open on Sundays?"),
    ("en", "Which language course did I sign up for?"),
    ("en", "Who repaired the laptop screen?"),
    ("en", "Which vegetables grow in the allotment?"),
    ("en", "What did the doctor prescribe for my back pain?"),
    ("en", "Where did we celebrate our son's birthday?"),
    ("en", "Which airline lost our luggage?"),
    ("en", "How long is the commute to the office by train?"),
    ("en", "What is the name of the neighbour's cat?"),
    ("en", "Which film did we watch at the cinema?"),
    ("en", "How much is the monthly parking permit?"),
    ("en", "Who won the chess tournament at the club?"),
    ("pt", "Que autocarro devem apanhar os visitantes?"),
    ("pt", "De que cor pintámos a sala?"),
    ("pt", "Quanto custou a bicicleta nova?"),
    ("pt", "Qual é o nome do gato da vizinha?"),
    ("pt", "Onde jantámos no aniversário do meu pai?"),
    ("es", "¿Qué autobús deben tomar los visitantes?"),
    ("es", "¿De qué color pintamos la cocina?"),
    ("es", "¿Cuánto costó la bicicleta nueva?"),
    ("es", "¿Cómo se llama el gato de la vecina?"),
    ("es", "¿Dónde cenamos en el cumpleaños de mi padre?"),
)

#: Episodes for the paraphrase class: (note text, question, gold answer).  The
#: question shares no content word with the note (tests/test_journal.py checks
#: it after lower-casing and suffix stripping); the answer is quoted from the note.
PARAPHRASE_EPISODES: tuple[tuple[str, str, str], ...] = (
    (
        "Somebody stole my bicycle outside the municipal library during the thunderstorm.",
        "Where was my two-wheeler pinched?",
        "municipal library",
    ),
    (
        "Finally adopted a rescue greyhound from the shelter; we named him Biscuit.",
        "What do we call the hound we brought home?",
        "Biscuit",
    ),
    (
        "The dentist extracted a wisdom tooth this morning; recovery will take about ten days.",
        "How long until my mouth heals after the molar was pulled?",
        "ten days",
    ),
    (
        "Burst pipe flooded the basement overnight; the plumber charged 480 euros.",
        "What did the repairman bill us when water leaked into the cellar?",
        "480 euros",
    ),
    (
        "Passed the driving test on the second attempt; the examiner was strict about mirrors.",
        "On which try did I get my licence to operate a car?",
        "second attempt",
    ),
    (
        "Sold the old piano to a neighbour for 300 pounds.",
        "How much money did I get for the keyboard instrument I parted with?",
        "300 pounds",
    ),
    (
        "Sprained my ankle playing squash; the physiotherapist says no running for six weeks.",
        "For how long must I avoid jogging after twisting my foot on the court?",
        "six weeks",
    ),
    (
        "Our landlord is raising the rent by nine percent from April.",
        "By what share will the flat's owner increase what we pay monthly?",
        "nine percent",
    ),
    (
        "Mum was admitted to hospital with pneumonia; visiting hours end at eight.",
        "Which lung infection put my mother in the clinic?",
        "pneumonia",
    ),
    (
        "The solar panels produced 412 kilowatt hours in July.",
        "How much energy did the sun-powered modules make in midsummer?",
        "412 kilowatt hours",
    ),
    (
        "Lost my passport at the airport in Frankfurt; the consulate issued an emergency travel document.",
        "Where did I misplace my identity papers for crossing borders?",
        "Frankfurt",
    ),
    (
        "Got promoted to principal engineer; the raise starts next quarter.",
        "What senior title was I given at work?",
        "principal engineer",
    ),
    (
        "The boiler broke again, so we showered at the gym all week.",
        "Where did we wash while the hot-water heater was dead?",
        "gym",
    ),
    (
        "Planted three apple trees and a fig along the garden fence.",
        "Which fruit saplings did I put in the yard?",
        "apple trees",
    ),
    (
        "Cancelled the gym membership because the monthly fee doubled.",
        "Why did I quit the fitness club?",
        "fee doubled",
    ),
    (
        "My grandmother turned ninety-five; the whole family gathered for cake.",
        "How old is granny?",
        "ninety-five",
    ),
    (
        "Burned the lasagne while on a call with the bank.",
        "Which dish did I char while phoning the lender?",
        "lasagne",
    ),
    (
        "Switched the car insurance to a cheaper provider, saving 210 a year.",
        "How much less do I spend annually to protect the vehicle after changing companies?",
        "210",
    ),
    (
        "Our daughter lost her first milk tooth at breakfast.",
        "When did the little girl's baby teeth start falling out?",
        "breakfast",
    ),
    (
        "Neighbours complained about the barking, so we hired a trainer.",
        "What did we do after the people next door grumbled about the noise the pet made?",
        "hired a trainer",
    ),
    (
        "Finished reading War and Peace after fourteen months.",
        "How long did that huge Tolstoy novel take me?",
        "fourteen months",
    ),
    (
        "A hailstorm dented the roof of the car parked on Rua Augusta.",
        "Where was the automobile sitting when ice pellets damaged it?",
        "Rua Augusta",
    ),
    (
        "Ran the half marathon in one hour fifty-two minutes.",
        "What was my finishing time over 21 kilometres?",
        "one hour fifty-two minutes",
    ),
    (
        "The laptop screen cracked when it fell off the kitchen counter.",
        "What happened to the notebook computer's display after the drop?",
        "cracked",
    ),
    (
        "Booked flights to Reykjavik for the anniversary in October.",
        "Which city will we visit by plane to celebrate our wedding date?",
        "Reykjavik",
    ),
    (
        "Stopped drinking coffee; the headaches lasted four days.",
        "For how long did withdrawal from caffeine make my head hurt?",
        "four days",
    ),
    (
        "The bakery on the corner closed after forty years.",
        "How long had the bread shop down the street been open?",
        "forty years",
    ),
    (
        "Won the pub quiz with a question about medieval falconry.",
        "Which topic helped us take first prize at trivia night in the bar?",
        "medieval falconry",
    ),
    (
        "Replaced every light bulb in the flat with LEDs to cut the electricity bill.",
        "What did I swap all the lamps for to lower power costs?",
        "LEDs",
    ),
    (
        "Our son broke his wrist falling off the trampoline.",
        "How did the boy fracture his arm joint?",
        "trampoline",
    ),
)

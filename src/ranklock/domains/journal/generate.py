"""A seeded generator of a personal journal: about 2,000 dated notes over three years.

``generate_journal(seed)`` returns the same notes, byte for byte, on every
machine and under every ``PYTHONHASHSEED``: one ``random.Random(seed)`` drives
every choice, the fact tables are tuples, and nothing iterates a set.

The notes are of two sorts:

* **fact notes**, one per row of :mod:`.facts` (a person's allergy, a project's
  lead, the root cause behind an identifier, a hosting decision and the later
  note that reverses it, a trip per month, a personal episode, Portuguese and
  Spanish notes about Portuguese- and Spanish-speaking people).  Each is
  recorded as a :class:`Fact` with the ids of its notes, so the question
  generator can ask about it;
* **filler notes** (meetings, one-to-ones, ticket triage, walks, dinners, in the
  three languages) that mention the same people, codenames and identifiers
  without stating any fact, so a question naming someone must find the one
  note that answers it among dozens that mention them.

Note ids are ``<date>-<n>`` (``2024-03-14-2``: the second note of that day),
given after all notes are sorted by date, so they read like a journal's.

    >>> j = generate_journal()
    >>> j.notes[0].doc_id
    '2023-01-01-1'
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass, field
from datetime import date, timedelta
from typing import Any

from . import facts as F

__all__ = ["DEFAULT_SEED", "END", "START", "Fact", "Journal", "Note", "generate_journal"]

DEFAULT_SEED = 12
DEFAULT_NOTES = 2000
START = date(2023, 1, 1)
END = date(2025, 12, 31)
_DAYS = (END - START).days + 1
_MONTHS = ("January", "February", "March", "April", "May", "June", "July", "August", "September", "October",
           "November", "December")  # fmt: skip


@dataclass(frozen=True)
class Note:
    """One journal note and its typed fields (see :mod:`.schema`)."""

    doc_id: str
    date: date
    text: str
    people: tuple[str, ...]
    tags: tuple[str, ...]
    lang: str

    def record(self) -> dict[str, Any]:
        """The JSONL record ``ranklock ingest`` reads: ``id``, ``text`` and the typed fields in ``metadata``."""
        return {
            "id": self.doc_id,
            "text": self.text,
            "metadata": {
                "date": self.date.isoformat(),
                "people": list(self.people),
                "tags": list(self.tags),
                "lang": self.lang,
            },
        }


@dataclass(frozen=True)
class Fact:
    """A row of the fact tables as written into the journal: which notes state it, and its values."""

    key: str
    kind: str
    note_ids: tuple[str, ...]
    data: dict[str, Any] = field(default_factory=dict)


@dataclass
class Journal:
    """The generated notes (sorted by date, then id) and the facts they state."""

    seed: int
    notes: list[Note]
    facts: list[Fact]

    def note(self, doc_id: str) -> Note:
        return self._by_id()[doc_id]

    def _by_id(self) -> dict[str, Note]:
        return {n.doc_id: n for n in self.notes}

    def jsonl(self) -> str:
        """The corpus as JSONL, one note a line, keys sorted: the bytes the determinism test compares."""
        return "".join(json.dumps(n.record(), ensure_ascii=False, sort_keys=True) + "\n" for n in self.notes)

    def documents(self) -> list[Any]:
        """The notes as :class:`ranklock.ingest.loaders.Document` objects, ready for ``Engine.ingest``."""
        from ...ingest.loaders import Document

        return [Document(n.doc_id, "", n.text, n.record()["metadata"]) for n in self.notes]


@dataclass
class _Draft:
    day: date
    text: str
    people: tuple[str, ...]
    tags: tuple[str, ...]
    lang: str = "en"
    fact: str | None = None  # the fact key this note states, if any


def _day(rng: random.Random, lo: date = START, hi: date = END) -> date:
    return lo + timedelta(days=rng.randrange((hi - lo).days + 1))


def _cap(pronoun: str) -> str:
    return pronoun[:1].upper() + pronoun[1:]


def _tag(codename: str) -> str:
    return codename.lower()


def _fact_drafts(rng: random.Random) -> tuple[list[_Draft], list[tuple[str, str, dict[str, Any]]]]:
    """The notes that state facts, and the facts (key, kind, data) in table order."""
    drafts: list[_Draft] = []
    facts: list[tuple[str, str, dict[str, Any]]] = []

    # People: one fact each, cycling through the fact kinds.
    for i, (name, pron) in enumerate(F.PEOPLE):
        kind, sentence, _q, values = F.PERSON_FACTS[i % len(F.PERSON_FACTS)]
        value = values[(i // len(F.PERSON_FACTS)) % len(values)]
        opener = rng.choice(("Coffee", "Lunch", "A long walk", "Drinks"))
        place = rng.choice(F.PLACES)
        key = f"person:{name}"
        text = f"{opener} with {name} at {place}. {_cap(pron)} {sentence.format(v=value)}"
        drafts.append(_Draft(_day(rng), text, (name,), ("personal", kind), fact=key))
        facts.append((key, "person", {"name": name, "fact": kind, "value": value}))

    # Portuguese and Spanish speakers: three facts each, in their language.
    per_lang: dict[str, int] = {"pt": 0, "es": 0}
    for name, lang, gender in F.IBERIAN_PEOPLE:
        idx = per_lang[lang]
        per_lang[lang] += 1
        alergico = {"pt": {"m": "alérgico", "f": "alérgica"}, "es": {"m": "alérgico", "f": "alérgica"}}[lang][gender]
        for kind, (sentence, _q, values) in F.IBERIAN_FACTS[lang].items():
            value = values[idx % len(values)]
            key = f"iberian:{name}:{kind}"
            text = sentence.format(name=name, v=value, place=rng.choice(F.VENUES), alergico=alergico)
            drafts.append(_Draft(_day(rng), text, (name,), ("personal", kind), lang=lang, fact=key))
            facts.append((key, "iberian", {"name": name, "lang": lang, "fact": kind, "value": value,
                                           "alergico": alergico}))  # fmt: skip

    # Projects: a kickoff naming the lead, a postmortem naming the root cause
    # behind the identifier, and a hosting decision reversed a year later.
    for j, (code, ident) in enumerate(F.PROJECTS):
        lead = F.PEOPLE[(j * 7 + 3) % len(F.PEOPLE)][0]
        sponsor = F.PEOPLE[(j * 11 + 5) % len(F.PEOPLE)][0]
        kickoff = _day(rng, date(2023, 1, 1), date(2023, 6, 30))
        drafts.append(
            _Draft(
                kickoff,
                f"{code} kickoff in {rng.choice(F.PLACES)}: {lead} will lead the project; {sponsor} sponsors it.",
                (lead, sponsor),
                ("meeting", _tag(code)),
                fact=f"lead:{code}",
            )
        )
        facts.append((f"lead:{code}", "lead", {"codename": code, "lead": lead}))
        cause = F.ROOT_CAUSES[j]
        drafts.append(
            _Draft(
                _day(rng, date(2023, 7, 1), END),
                f"Postmortem for {ident} ({code}): the root cause was {cause}. The fix shipped the same week.",
                (),
                ("incident", _tag(code)),
                fact=f"cause:{ident}",
            )
        )
        facts.append((f"cause:{ident}", "cause", {"codename": code, "identifier": ident, "cause": cause}))
        year = 2023 if j < len(F.PROJECTS) // 2 else 2024
        first, second = F.HOSTS[j % len(F.HOSTS)], F.HOSTS[(j + 3) % len(F.HOSTS)]
        d1 = _day(rng, date(year, 1, 1), date(year, 11, 30))
        d2 = _day(rng, date(year + 1, 1, 1), date(year + 1, 11, 30))
        reason = rng.choice(("egress costs", "an outage in their Frankfurt region", "support response times"))
        drafts.append(
            _Draft(
                d1,
                f"Decision on {code}: we will host it on {first}, agreed with {lead}.",
                (lead,),
                ("decision", _tag(code)),
                fact=f"host1:{code}",
            )
        )
        drafts.append(
            _Draft(
                d2,
                f"Reversing the earlier {code} call: the hosting moves from {first} to {second} because of {reason}.",
                (),
                ("decision", _tag(code)),
                fact=f"host2:{code}",
            )
        )
        facts.append((f"hosting:{code}", "hosting", {"codename": code, "first": first, "second": second, "year": year}))

    # One trip a month, to a city that differs from the previous two months'.
    for m in range(36):
        year, month = 2023 + m // 12, m % 12 + 1
        city = F.CITIES[(m * 5) % len(F.CITIES)]
        code = F.PROJECTS[rng.randrange(len(F.PROJECTS))][0]
        day = date(year, month, rng.randint(1, 28))
        key = f"trip:{year}-{month:02d}"
        text = f"Flew to {city} for the {code} workshop; stayed two nights near the station."
        drafts.append(_Draft(day, text, (), ("travel", _tag(code)), fact=key))
        facts.append((key, "trip", {"city": city, "year": year, "month": month}))

    # Personal episodes, each worded only here (the paraphrase questions avoid every word).
    for i, (text, _q, _a) in enumerate(F.PARAPHRASE_EPISODES):
        key = f"episode:{i}"
        drafts.append(_Draft(_day(rng), text, (), ("personal",), fact=key))
        facts.append((key, "episode", {"index": i}))
    return drafts, facts


def _filler(rng: random.Random) -> _Draft:
    """A note that mentions people, codenames or identifiers but states no fact."""
    p1, p2 = (F.PEOPLE[i][0] for i in rng.sample(range(len(F.PEOPLE)), 2))
    code, ident = F.PROJECTS[rng.randrange(len(F.PROJECTS))]
    place = rng.choice(F.PLACES)
    roll = rng.random()
    if roll < 0.05:
        ib, lang, _g = F.IBERIAN_PEOPLE[rng.randrange(len(F.IBERIAN_PEOPLE))]
        if lang == "pt":
            text = f"Reunião sobre o projeto {code} com {ib} e {p1}; revimos o plano, nada decidido."
        else:
            text = f"Reunión del proyecto {code} con {ib} y {p1}; revisamos el plan, sin decisiones."
        return _Draft(_day(rng), text, (ib, p1), ("meeting", _tag(code)), lang=lang)
    if roll < 0.08:
        text = rng.choice(
            (
                "Dia tranquilo; passeio à beira-rio e um café com bolo.",
                "Día tranquilo; paseo por el parque y una siesta larga.",
            )
        )
        return _Draft(_day(rng), text, (), ("personal",), lang="pt" if text.startswith("Dia") else "es")
    if roll < 0.35:
        topic = rng.choice(("the backlog", "the roadmap", "the open risks", "the staffing plan", "the metrics"))
        text = f"Weekly sync on {code} with {p1} and {p2}; went through {topic}, nothing decided."
        return _Draft(_day(rng), text, (p1, p2), ("meeting", _tag(code)))
    if roll < 0.50:
        text = f"Triaged {ident} with {p1}; still investigating, next check on Thursday."
        return _Draft(_day(rng), text, (p1,), ("incident", _tag(code)))
    if roll < 0.65:
        subject = rng.choice(("career growth", "the on-call rota", "conference talks", "the hiring loop"))
        text = f"One-to-one with {p1} at {place}: talked about {subject} and the {code} timeline."
        return _Draft(_day(rng), text, (p1,), ("meeting", _tag(code)))
    if roll < 0.75:
        text = f"Met {p1} and {p2} at {place} to review the {code} dashboards."
        return _Draft(_day(rng), text, (p1, p2), ("meeting", _tag(code)))
    if roll < 0.88:
        text = f"Went for a walk along the river; the weather was {rng.choice(F.FILLER_WEATHER)}."
        return _Draft(_day(rng), text, (), ("personal",))
    text = f"Cooked {rng.choice(F.FILLER_DISHES)} for dinner and read a few chapters before bed."
    return _Draft(_day(rng), text, (), ("personal",))


def generate_journal(seed: int = DEFAULT_SEED, notes: int = DEFAULT_NOTES) -> Journal:
    """The journal for ``seed``: fact notes plus filler up to ``notes`` notes, sorted by date.

    The same ``(seed, notes)`` gives the same notes, ids and facts on every run.
    """
    rng = random.Random(seed)
    drafts, fact_rows = _fact_drafts(rng)
    while len(drafts) < notes:
        drafts.append(_filler(rng))
    # Sort by date; a stable sort keeps generation order within a day, so ids are reproducible.
    drafts.sort(key=lambda d: d.day)
    out: list[Note] = []
    ids_by_fact: dict[str, list[str]] = {}
    per_day: dict[date, int] = {}
    for d in drafts:
        per_day[d.day] = per_day.get(d.day, 0) + 1
        doc_id = f"{d.day.isoformat()}-{per_day[d.day]}"
        out.append(Note(doc_id, d.day, d.text, tuple(sorted(set(d.people))), tuple(sorted(set(d.tags))), d.lang))
        if d.fact is not None:
            # host1/host2 are the two notes of one "hosting" fact.
            key = d.fact.replace("host1:", "hosting:").replace("host2:", "hosting:")
            ids_by_fact.setdefault(key, []).append(doc_id)
    facts = [Fact(key, kind, tuple(ids_by_fact[key]), data) for key, kind, data in fact_rows]
    return Journal(seed=seed, notes=out, facts=facts)

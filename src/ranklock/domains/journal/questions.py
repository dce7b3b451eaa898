"""The labelled question set over the journal, generated from the same fact tables.

Each question carries its class, the gold note ids, a short gold answer and,
for date-bounded questions, the filter that bounds them.  The questions use
their own templates (never the notes' sentences); for the ``paraphrase`` class
they share no content word with their gold note at all.

Classes (:data:`QUESTION_CLASSES`):

* ``person``: a fact about someone named by their rare full name;
* ``codename``: who leads a codename, what caused an identifier's incident,
  where a project is hosted now (after a reversed decision);
* ``date``: bounded by a ``date`` filter (where a project was hosted in a given
  year, before the reversal; which city I flew to in a given month);
* ``paraphrase``: a personal episode asked in other words;
* ``multi``: the answer needs several notes (both hosting providers; the cities
  of a quarter's trips); every part of the answer must be given;
* ``pt_es``: asked in Portuguese or Spanish about a note in that language;
* ``unanswerable``: about people, codenames or identifiers the journal never
  mentions, or a year it does not cover, or (:data:`facts.UNSTATED_QUESTIONS`)
  everyday matters in the journal's own words that no note states; gold ids
  empty, the right answer is to abstain.

A gold answer with several parts separates them with ``"; "``.

The shipped file ``questions.jsonl`` next to this module (rewritten by ``python -m ranklock.domains.journal``) is
``questions_jsonl(generate_questions(generate_journal()))``; a test keeps the
two equal.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from . import facts as F
from .generate import _MONTHS, Journal

__all__ = [
    "ANSWER_SEPARATOR",
    "QUESTION_CLASSES",
    "Question",
    "generate_questions",
    "load_questions",
    "questions_jsonl",
    "shipped_questions_path",
]

QUESTION_CLASSES = ("person", "codename", "date", "paraphrase", "multi", "pt_es", "unanswerable")
ANSWER_SEPARATOR = "; "


@dataclass(frozen=True)
class Question:
    """One labelled question.  ``gold`` is empty and ``answer`` is "" for unanswerable ones."""

    id: str
    cls: str
    question: str
    gold: tuple[str, ...]
    answer: str
    lang: str = "en"
    filter: str | None = None

    def record(self) -> dict[str, Any]:
        d = asdict(self)
        d["class"] = d.pop("cls")
        d["gold"] = list(self.gold)
        return d

    @classmethod
    def from_record(cls, rec: dict[str, Any]) -> Question:
        return cls(
            id=str(rec["id"]),
            cls=str(rec["class"]),
            question=str(rec["question"]),
            gold=tuple(str(g) for g in rec["gold"]),
            answer=str(rec["answer"]),
            lang=str(rec.get("lang", "en")),
            filter=rec.get("filter"),
        )


def _between(lo: str, hi: str) -> str:
    return f'date between "{lo}" and "{hi}"'


def _month_end(year: int, month: int) -> str:
    days = (31, 29 if year % 4 == 0 else 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31)[month - 1]
    return f"{year}-{month:02d}-{days:02d}"


def generate_questions(journal: Journal) -> list[Question]:
    """Every question of the set, in class order, numbered ``<class>-<n>`` within the class."""
    by_kind: dict[str, list[Any]] = {}
    for f in journal.facts:
        by_kind.setdefault(f.kind, []).append(f)
    out: dict[str, list[tuple[str, tuple[str, ...], str, str, str | None]]] = {c: [] for c in QUESTION_CLASSES}
    templates = {kind: q for kind, _s, q, _v in F.PERSON_FACTS}

    for f in by_kind["person"]:
        out["person"].append(
            (templates[f.data["fact"]].format(name=f.data["name"]), f.note_ids, f.data["value"], "en", None)
        )

    for f in by_kind["lead"]:
        out["codename"].append((f"Who heads project {f.data['codename']}?", f.note_ids, f.data["lead"], "en", None))
    for f in by_kind["cause"]:
        out["codename"].append((f"What caused {f.data['identifier']}?", f.note_ids, f.data["cause"], "en", None))
    for f in by_kind["hosting"]:
        first, second = f.note_ids
        code, year = f.data["codename"], f.data["year"]
        out["codename"].append((f"Which provider hosts {code} today?", (second,), f.data["second"], "en", None))
        out["date"].append(
            (
                f"Which provider hosted {code} in {year}?",
                (first,),
                f.data["first"],
                "en",
                _between(f"{year}-01-01", f"{year}-12-31"),
            )
        )
        out["multi"].append(
            (
                f"Which providers has {code} been hosted on, first and now?",
                (first, second),
                f.data["first"] + ANSWER_SEPARATOR + f.data["second"],
                "en",
                None,
            )
        )

    trips = by_kind["trip"]
    for f in trips[::2]:
        y, m = f.data["year"], f.data["month"]
        out["date"].append(
            (
                f"Which city did I fly to in {_MONTHS[m - 1]} {y}?",
                f.note_ids,
                f.data["city"],
                "en",
                _between(f"{y}-{m:02d}-01", _month_end(y, m)),
            )
        )
    for q in range(12):
        quarter = trips[q * 3 : q * 3 + 3]
        y, m0 = quarter[0].data["year"], quarter[0].data["month"]
        out["multi"].append(
            (
                f"Which cities did I travel to in Q{q % 4 + 1} {y}?",
                tuple(i for t in quarter for i in t.note_ids),
                ANSWER_SEPARATOR.join(t.data["city"] for t in quarter),
                "en",
                _between(f"{y}-{m0:02d}-01", _month_end(y, m0 + 2)),
            )
        )

    for f in by_kind["episode"]:
        _text, question, answer = F.PARAPHRASE_EPISODES[f.data["index"]]
        out["paraphrase"].append((question, f.note_ids, answer, "en", None))

    for f in by_kind["iberian"]:
        lang = f.data["lang"]
        template = F.IBERIAN_FACTS[lang][f.data["fact"]][1]
        text = template.format(name=f.data["name"], alergico=f.data["alergico"])
        out["pt_es"].append((text, f.note_ids, f.data["value"], lang, None))

    for i, name in enumerate(F.UNKNOWN_PEOPLE):
        template = F.PERSON_FACTS[i % len(F.PERSON_FACTS)][2]
        out["unanswerable"].append((template.format(name=name), (), "", "en", None))
    for code in F.UNKNOWN_CODENAMES:
        out["unanswerable"].append((f"Who heads project {code}?", (), "", "en", None))
    for ident in F.UNKNOWN_IDENTIFIERS:
        out["unanswerable"].append((f"What caused {ident}?", (), "", "en", None))
    for code, _ident in F.PROJECTS[:5]:
        # The journal starts in 2023: the filter leaves nothing to retrieve.
        out["unanswerable"].append(
            (f"Which provider hosted {code} in 2022?", (), "", "en", _between("2022-01-01", "2022-12-31"))
        )
    for lang, text in F.UNSTATED_QUESTIONS:
        out["unanswerable"].append((text, (), "", lang, None))

    questions: list[Question] = []
    for cls in QUESTION_CLASSES:
        for n, (text, gold, answer, lang, flt) in enumerate(out[cls], 1):
            questions.append(Question(f"{cls}-{n:03d}", cls, text, tuple(gold), answer, lang, flt))
    return questions


def questions_jsonl(questions: list[Question]) -> str:
    """The question set as JSONL (keys sorted, UTF-8 unescaped): the shipped file's exact bytes."""
    return "".join(json.dumps(q.record(), ensure_ascii=False, sort_keys=True) + "\n" for q in questions)


def shipped_questions_path() -> Path:
    """The question set shipped with the package (``questions.jsonl`` beside this module)."""
    return Path(str(resources.files("ranklock.domains.journal") / "questions.jsonl"))


def load_questions(path: str | Path) -> list[Question]:
    """Read a question set (this module's JSONL format, or a folder holding ``questions.jsonl``)."""
    from ...errors import InputError

    p = Path(path)
    if p.is_dir():
        p = p / "questions.jsonl"
    try:
        lines = p.read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise InputError(
            f"cannot read question set {str(p)!r}: {exc.strerror}; give a questions.jsonl file or its folder."
        ) from None
    out: list[Question] = []
    for lineno, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
            out.append(Question.from_record(rec))
        except (json.JSONDecodeError, KeyError, TypeError, AttributeError) as exc:
            raise InputError(
                f"{p}:{lineno}: not a question record ({type(exc).__name__}: {exc}); each line needs "
                '"id", "class", "question", "gold" (a list of note ids) and "answer".'
            ) from None
        if out[-1].cls not in QUESTION_CLASSES:
            raise InputError(
                f"{p}:{lineno}: unknown question class {out[-1].cls!r}; use one of {', '.join(QUESTION_CLASSES)}."
            )
    if not out:
        raise InputError(f"question set {str(p)!r} is empty; add at least one question.")
    return out

"""Parse a resume (Markdown, plain text or JSON) into typed fields, free text and display-only data.

The split is the point of this module:

* ``Document.metadata``: typed values from the closed vocabularies of
  :mod:`ranklock.domains.resumes.schema` (years of experience, skills, locations, ...);
  these become SQL columns and hard constraints.
* ``Document.title`` / ``Document.body``: the free text that is chunked,
  indexed and embedded; it is what the ranker sees.
* ``Document.display``: name, e-mail, phone, links, photo and personal
  details (date of birth, gender, nationality, marital status, ...).  They are
  stored so a recruiter can contact the candidate, and never enter the body:
  every occurrence of the candidate's name, every e-mail address, phone
  number and URL is scrubbed from the free text, and gendered pronouns and
  honorifics are neutralised, so two resumes that differ only in who wrote
  them produce byte-identical bodies.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from typing import Any

from ...errors import IngestError
from ...ingest.loaders import Document
from ...ingest.normalize import normalize
from ...plan.vocab import ValueTable, find_values, value_table
from .schema import DEGREES, EMPLOYER_TYPES, LANGUAGES, LOCATIONS, SENIORITY, SKILL_ALIASES, SKILLS, WORK_AUTHORIZATION

__all__ = ["NAME_PLACEHOLDER", "find_vocabulary", "parse_resume", "scrub_text"]

NAME_PLACEHOLDER = "[name]"

EMAIL = re.compile(r"[\w.+-]+@[\w-]+(?:\.[\w-]+)+")
URL = re.compile(r"(?:https?://|www\.)\S+|\b(?:linkedin|github)\.com/\S+", re.IGNORECASE)
PHONE_CANDIDATE = re.compile(r"(?<![\w.])\+?\(?\d[\d\s().-]{6,}\d(?![\w.])")
REMOVED_MARKERS = re.compile(r"\[(?:email|phone) removed\]", re.IGNORECASE)

# Keys whose values identify a person or state a protected attribute.  Their
# lines go to ``display`` and are dropped from the text the ranker sees.
IDENTITY_KEYS = {
    "name": "name",
    "full name": "name",
    "candidate": "name",
    "email": "email",
    "e-mail": "email",
    "mail": "email",
    "phone": "phone",
    "mobile": "phone",
    "tel": "phone",
    "telephone": "phone",
    "contact": "contact",
    "address": "address",
    "linkedin": "links",
    "github": "links",
    "website": "links",
    "links": "links",
    "photo": "photo",
    "picture": "photo",
    "date of birth": "date_of_birth",
    "dob": "date_of_birth",
    "d.o.b": "date_of_birth",
    "birth date": "date_of_birth",
    "age": "age",
    "gender": "gender",
    "sex": "gender",
    "nationality": "nationality",
    "citizenship": "nationality",
    "marital status": "marital_status",
    "religion": "religion",
    "caste": "religion",
    "father's name": "family",
    "father name": "family",
    "mother's name": "family",
    "husband's name": "family",
    "place of birth": "place_of_birth",
    "passport": "passport",
    "passport no": "passport",
}

PRONOUNS = {
    "he": "they",
    "she": "they",
    "him": "them",
    "his": "their",
    "her": "their",
    "hers": "theirs",
    "himself": "themselves",
    "herself": "themselves",
}
HONORIFIC = re.compile(r"\b(?:Mr|Mrs|Ms|Miss|Mx)\.?\s+(?=[A-Z])")

KEY_LINE = re.compile(r"^\s*[-*]?\s*([A-Za-z][A-Za-z' .-]{0,30}?)\s*[:：]\s*(.*)$")
WORK_AUTH_WORDS = {
    "eu": "eu",
    "european union": "eu",
    "uk": "uk",
    "united kingdom": "uk",
    "us": "us",
    "usa": "us",
    "united states": "us",
    "canada": "canada",
    "india": "india",
    "singapore": "singapore",
    "switzerland": "switzerland",
}
DEGREE_PATTERNS: tuple[tuple[str, str], ...] = (
    ("phd", r"\bph\.?\s?d\b|\bdoctor(?:ate|al)\b"),
    ("master", r"\bm\.?\s?sc\b|\bmaster'?s?\b|\bm\.?\s?tech\b|\bmba\b|\bm\.?\s?e\.?\b(?=\s)|\bm\.?c\.?a\b|\bllm\b"),
    (
        "bachelor",
        r"\bb\.?\s?sc\b|\bbachelor'?s?\b|\bb\.?\s?tech\b|\bb\.?\s?e\b|\bb\.?\s?a\b|\bb\.?c\.?a\b|\bb\.?com\b|\bllb\b",
    ),
    ("associate", r"\bassociate degree\b|\bdiploma\b"),
)
EMPLOYER_PATTERNS: tuple[tuple[str, str], ...] = (
    ("agency", r"\bagency\b|\bstaffing\b"),
    ("consultancy", r"\bconsult(?:ancy|ing)\b"),
    ("startup", r"\bstart-?up\b"),
    ("government", r"\bgovernment\b|\bpublic sector\b|\bministry\b"),
    ("nonprofit", r"\bnon-?profit\b|\bngo\b"),
)
_SKILL_SECTION = re.compile(
    r"(?im)^[#*\s-]*(?:technical |key |core )?skills?(?: details| set| summary)?\b((?:[^\n]*)(?:\n(?![ \t]*\n)[^\n]*)*)"
)
SKILL_MONTHS = re.compile(r"\bexp(?:e)?rience\s*-\s*(\d+)\s*months?\b", re.IGNORECASE)
YEARS_PATTERNS = (
    re.compile(r"total experience\s*[:-]?\s*(\d+(?:\.\d+)?)\s*(years?|yrs?|months?)", re.IGNORECASE),
    re.compile(
        r"(\d+(?:\.\d+)?)\s*\+?\s*(years?|yrs?|months?)\s+(?:of\s+)?(?:total\s+|professional\s+|work\s+)?"
        r"experience",
        re.IGNORECASE,
    ),
    re.compile(r"experience\s+of\s+(\d+(?:\.\d+)?)\s*\+?\s*(years?|yrs?|months?)", re.IGNORECASE),
)


_SKILL_TABLE = value_table(SKILLS, SKILL_ALIASES)
_LOCATION_TABLE = value_table(LOCATIONS, {"new york": ("nyc",), "bangalore": ("bengaluru",)})
_LANGUAGE_TABLE = value_table(LANGUAGES, {"mandarin": ("chinese",)})


def find_vocabulary(text: str, table: ValueTable) -> list[str]:
    """Vocabulary values mentioned in ``text``, each once, sorted."""
    return sorted({v for _, _, v in find_values(text, table)})


def _is_phone(s: str) -> bool:
    digits = sum(c.isdigit() for c in s)
    return digits >= 10 or (s.lstrip().startswith("+") and digits >= 8)


def scrub_text(text: str, names: Iterable[str] = ()) -> str:
    """Remove identifying details from free text: names, e-mails, URLs, phone numbers, pronouns.

    >>> scrub_text("Ana Ruiz (ana@x.org) said she leads. Ana codes.", ["Ana Ruiz"])
    '[name] said they leads. [name] codes.'
    """
    out = EMAIL.sub("", text)
    out = URL.sub("", out)
    out = REMOVED_MARKERS.sub("", out)
    out = PHONE_CANDIDATE.sub(lambda m: "" if _is_phone(m.group(0)) else m.group(0), out)
    out = HONORIFIC.sub("", out)
    tokens: list[str] = []
    for n in names:
        n = n.strip()
        if n:
            tokens.append(n)
            tokens.extend(t for t in re.split(r"[\s,]+", n) if len(t) >= 2)
    for t in sorted(set(tokens), key=lambda t: (-len(t), t)):
        out = re.sub(rf"(?<!\w){re.escape(t)}(?!\w)", NAME_PLACEHOLDER, out)
    out = re.sub(rf"{re.escape(NAME_PLACEHOLDER)}(?:\s+{re.escape(NAME_PLACEHOLDER)})+", NAME_PLACEHOLDER, out)

    def pronoun(m: re.Match[str]) -> str:
        w = m.group(0)
        rep = PRONOUNS[w.lower()]
        return rep.capitalize() if w[0].isupper() else rep

    out = re.sub(r"\b(?:he|she|him|his|her|hers|himself|herself)\b", pronoun, out, flags=re.IGNORECASE)
    # Tidy what the removals left behind: separators with nothing between them, runs of spaces.
    out = re.sub(r"\(\s*(?:[,;|/]\s*)*\)", "", out)
    out = re.sub(r"(?m)^[ \t|·•,;-]+$", "", out)
    out = re.sub(r"[ \t]*\|[ \t]*(?=\||$)", "", out, flags=re.MULTILINE)
    out = re.sub(r"[ \t]{2,}", " ", out)
    out = re.sub(r"\n{3,}", "\n\n", out)
    return normalize(out)


def _years(text: str) -> float | None:
    for pat in YEARS_PATTERNS:
        m = pat.search(text)
        if m:
            n = float(m.group(1))
            years = n / 12 if m.group(2).lower().startswith("month") else n
            return round(years, 2)
    # Per-skill experience ("Python- Exprience - 24 months", as in the Kaggle set): the longest is a
    # lower bound of the total, which is the best the text says.
    months = [int(m.group(1)) for m in SKILL_MONTHS.finditer(text)]
    return round(max(months) / 12, 2) if months else None


def _seniority(headline: str, years: float | None) -> str | None:
    words = headline.lower()
    for level, pat in (
        ("intern", r"\bintern(?:ship)?\b|\btrainee\b"),
        ("principal", r"\bprincipal\b|\bstaff\b"),
        ("lead", r"\blead\b|\bhead of\b"),
        ("senior", r"\bsenior\b|\bsr\.?\b"),
        ("junior", r"\bjunior\b|\bjr\.?\b|\bentry[- ]level\b"),
    ):
        if re.search(pat, words):
            return level
    if years is None:
        return None
    # No level word in the headline: band by years, the same bands the generator writes.
    bands = ((1, "intern"), (3, "junior"), (6, "mid"), (10, "senior"), (14, "lead"))
    return next((lvl for lim, lvl in bands if years < lim), "principal")


def _degree(text: str) -> str | None:
    low = text.lower()
    if re.search(r"no formal degree", low):
        return "none"
    for level, pat in DEGREE_PATTERNS:
        if re.search(pat, low):
            return level
    return None


def _employer_types(text: str) -> list[str]:
    found = set(re.findall(r"\((" + "|".join(re.escape(e) for e in EMPLOYER_TYPES) + r")\)", text))
    low = text.lower()
    for kind, pat in EMPLOYER_PATTERNS:
        if re.search(pat, low):
            found.add(kind)
    return sorted(found)


def _work_auth(value: str) -> list[str]:
    low = value.lower()
    return sorted({v for k, v in WORK_AUTH_WORDS.items() if re.search(rf"\b{re.escape(k)}\b", low)})


def _yes(value: str) -> bool | None:
    low = value.strip().lower()
    if re.match(r"(?:yes|true|required|needed|open|y)\b", low):
        return True
    if re.match(r"(?:no|false|not required|not needed|none|n)\b", low):
        return False
    return None


def _number(value: str) -> int | None:
    m = re.search(r"(\d[\d,.]*)\s*(k)?\b", value.lower())
    if not m:
        return None
    n = float(m.group(1).replace(",", ""))
    return int(n * 1000) if m.group(2) else int(n)


def _days(value: str) -> int | None:
    m = re.search(r"(\d+)\s*(day|week|month)s?", value.lower())
    if m:
        return int(m.group(1)) * {"day": 1, "week": 7, "month": 30}[m.group(2)]
    if re.search(r"\bimmediate", value.lower()):
        return 0
    return None


def _clean_metadata(meta: dict[str, Any]) -> dict[str, Any]:
    """Drop empty values: a field the resume does not state is NULL, never a guessed default."""
    return {k: v for k, v in sorted(meta.items()) if v is not None and v != []}


def _from_json(doc_id: str, obj: dict[str, Any]) -> Document:
    display: dict[str, Any] = {}
    texts: list[str] = []
    meta: dict[str, Any] = {}
    names: list[str] = []
    for key in sorted(obj):
        value = obj[key]
        k = key.lower().replace("_", " ")
        if k in ("id", "_id"):
            continue
        if k in IDENTITY_KEYS or k in ("first name", "last name", "links", "photo url"):
            display[key] = value
            if k in ("name", "full name", "first name", "last name") and isinstance(value, str):
                names.append(value)
    headline = str(obj.get("headline") or obj.get("title") or "")
    for key in ("summary", "about", "profile"):
        if isinstance(obj.get(key), str):
            texts.append(obj[key])
    skills_in = obj.get("skills")
    if isinstance(skills_in, list):
        texts.append("Skills: " + ", ".join(str(s) for s in skills_in))
    for job in obj.get("experience") or []:
        if isinstance(job, dict):
            parts = [str(job.get(k)) for k in ("title", "company", "employer_type", "description") if job.get(k)]
            texts.append("- " + ", ".join(parts))
        elif isinstance(job, str):
            texts.append("- " + job)
    for edu in obj.get("education") or []:
        texts.append(str(edu) if not isinstance(edu, dict) else ", ".join(str(v) for v in edu.values()))
    body_raw = "\n".join(texts)

    # Typed values: taken as given when they are in the vocabulary, else parsed from the text.
    def vocab_list(key: str, vocab: Iterable[str], table: ValueTable | None) -> list[str]:
        raw = obj.get(key)
        if isinstance(raw, list):
            allowed = set(vocab)
            vals = sorted({str(v).strip().lower() for v in raw} & allowed)
            if table is not None:
                vals = sorted(set(vals) | set(find_vocabulary(" , ".join(str(v) for v in raw), table)))
            return vals
        return []

    meta["skills"] = vocab_list("skills", SKILLS, _SKILL_TABLE) or find_vocabulary(body_raw, _SKILL_TABLE)
    meta["locations"] = vocab_list("locations", LOCATIONS, _LOCATION_TABLE)
    meta["languages"] = vocab_list("languages", LANGUAGES, _LANGUAGE_TABLE)
    meta["work_authorization"] = vocab_list("work_authorization", WORK_AUTHORIZATION, None)
    y = obj.get("years_experience")
    meta["years_experience"] = float(y) if isinstance(y, (int, float)) and not isinstance(y, bool) else _years(body_raw)
    for bkey in ("visa_sponsorship", "remote"):
        if isinstance(obj.get(bkey), bool):
            meta[bkey] = obj[bkey]
    for ikey in ("notice_days", "salary_expectation"):
        v = obj.get(ikey)
        if isinstance(v, int) and not isinstance(v, bool):
            meta[ikey] = v
    deg = str(obj.get("degree") or "").lower()
    meta["degree"] = deg if deg in DEGREES else _degree(body_raw)
    sen = str(obj.get("seniority") or "").lower()
    meta["seniority"] = sen if sen in SENIORITY else _seniority(headline, meta["years_experience"])
    tagged = {str(j.get("employer_type", "")).lower() for j in obj.get("experience") or [] if isinstance(j, dict)}
    meta["employer_types"] = sorted((tagged & set(EMPLOYER_TYPES)) | set(_employer_types(body_raw)))
    title = scrub_text(headline, names)
    body = scrub_text(body_raw, names)
    return Document(doc_id, title, body, _clean_metadata(meta), display)


def _from_text(doc_id: str, text: str, *, markdown: bool) -> Document:
    lines = normalize(text).split("\n")
    display: dict[str, Any] = {}
    names: list[str] = []
    kept: list[str] = []
    headline = ""
    fields: dict[str, str] = {}
    first_content = next((i for i, ln in enumerate(lines) if ln.strip()), None)
    if first_content is not None:
        first = lines[first_content].strip()
        near = "\n".join(lines[first_content + 1 : first_content + 4])
        looks_like_name = re.fullmatch(r"(?:[A-Z][\w'’-]+\.?\s+){1,3}[A-Z][\w'’-]+", first.lstrip("# ").strip())
        if (markdown and first.startswith("# ")) or (
            looks_like_name and (EMAIL.search(near) or PHONE_CANDIDATE.search(near))
        ):
            names.append(first.lstrip("# ").strip())
            display["name"] = names[0]
            lines[first_content] = ""
    for ln in lines:
        m = KEY_LINE.match(ln)
        if m:
            key = m.group(1).strip().lower().rstrip(".")
            value = m.group(2).strip()
            if key in IDENTITY_KEYS:
                slot = IDENTITY_KEYS[key]
                if slot == "name":
                    names.append(value)
                display[slot] = value if slot not in display else f"{display[slot]}; {value}"
                continue
            if key in ("headline", "title", "current title", "position"):
                headline = value
                continue
            fields[key] = value
        kept.append(ln)
    joined = "\n".join(kept)
    emails = sorted(set(EMAIL.findall(joined)))
    urls = sorted(set(URL.findall(joined)))
    phones = sorted({p.strip() for p in PHONE_CANDIDATE.findall(joined) if _is_phone(p)})
    if emails:
        display["email"] = emails[0] if len(emails) == 1 else emails
    if phones:
        display["phone"] = phones[0] if len(phones) == 1 else phones
    if urls:
        display["links"] = urls
    body = scrub_text(joined, names)
    if markdown:
        body = re.sub(r"(?m)^#{1,6}\s*", "", body)
    meta: dict[str, Any] = {}
    # Skills come from a Skills section or "Skills:" line when the resume has one
    # (what the candidate claims), else from anywhere in the text.
    sections = [m.group(1) for m in _SKILL_SECTION.finditer(joined)]
    skills_src = "\n".join(v for k, v in fields.items() if "skill" in k) + "\n" + "\n".join(sections)
    meta["skills"] = find_vocabulary(skills_src if skills_src.strip() else joined, _SKILL_TABLE)
    loc = next((v for k, v in fields.items() if k in ("location", "locations", "city", "based in")), None)
    meta["locations"] = find_vocabulary(loc, _LOCATION_TABLE) if loc else []
    lang = next((v for k, v in fields.items() if k in ("languages", "language", "spoken languages")), None)
    if lang is None:
        sentences = [s for s in re.split(r"[.\n]", joined) if re.search(r"\blanguages?\b", s, re.IGNORECASE)]
        lang = " ".join(sentences)
    meta["languages"] = find_vocabulary(lang, _LANGUAGE_TABLE)
    auth = next(
        (v for k, v in fields.items() if k in ("work authorization", "work authorisation", "authorized to work")), None
    )
    meta["work_authorization"] = _work_auth(auth) if auth else []
    for key, slot in (("visa sponsorship", "visa_sponsorship"), ("remote", "remote")):
        if key in fields:
            meta[slot] = _yes(fields[key])
    if "notice period" in fields:
        meta["notice_days"] = _days(fields["notice period"])
    if "salary expectation" in fields:
        meta["salary_expectation"] = _number(fields["salary expectation"])
    meta["years_experience"] = _years(joined)
    edu = re.search(r"(?ims)^#*\s*education\b[^\n]*\n(.*)", joined)
    stated = fields.get("degree", "").lower()
    meta["degree"] = stated if stated in DEGREES else _degree(stated or (edu.group(1) if edu else joined))
    sen = fields.get("seniority", "").lower()
    meta["seniority"] = sen if sen in SENIORITY else _seniority(headline, meta["years_experience"])
    exp = re.search(
        r"(?ims)^#*\s*(?:experience|company details|work history)\b[^\n]*\n(.*?)(?:^#*\s*education\b|\Z)", joined
    )
    meta["employer_types"] = _employer_types(exp.group(1) if exp else joined)
    return Document(doc_id, scrub_text(headline, names), body, _clean_metadata(meta), display)


def parse_resume(doc_id: str, content: str | dict[str, Any], fmt: str = "markdown") -> Document:
    """Parse one resume into a :class:`Document` (typed metadata, scrubbed text, display-only identity).

    ``fmt`` is ``markdown``, ``text`` or ``json`` (``content`` may then be the parsed object).

    >>> d = parse_resume("c1", "# Ana Ruiz\\nana@x.org\\n\\n## Skills\\nPython, SQL\\n")
    >>> d.metadata["skills"], d.display["name"], "Ana" in d.body
    (['python', 'sql'], 'Ana Ruiz', False)
    """
    if fmt == "json":
        if isinstance(content, str):
            try:
                obj = json.loads(content)
            except json.JSONDecodeError as exc:
                raise IngestError(f"resume {doc_id!r}: not valid JSON ({exc.msg}); fix the file.") from exc
        else:
            obj = content
        if not isinstance(obj, dict):
            raise IngestError(f"resume {doc_id!r}: a JSON resume must be an object, got {type(obj).__name__}.")
        return _from_json(doc_id, obj)
    if fmt not in ("markdown", "text"):
        raise IngestError(f"unknown resume format {fmt!r}; use json, markdown or text.")
    if not isinstance(content, str):
        raise IngestError(f"resume {doc_id!r}: {fmt} content must be text.")
    return _from_text(doc_id, content, markdown=fmt == "markdown")

"""What the planner knows about the resume fields: cue words, aliases, the order of degrees and levels.

Handed to the planner inside the resume :class:`~ranklock.plan.pack.DomainPack`
(:mod:`ranklock.domains.resumes.pack`); only collections that declare the resume
fields get them.
"""

from __future__ import annotations

from ...plan.pack import FieldHints
from .schema import DEGREES, SENIORITY, SKILL_ALIASES

__all__ = ["RESUME_HINTS"]

#: Hints by field name.
RESUME_HINTS: dict[str, FieldHints] = {
    "years_experience": FieldHints(cues=("experience", "experienced", "exp", "years"), unit="years", bare_op=">="),
    "skills": FieldHints(cues=("skills", "skill", "knows", "know", "using"), aliases=SKILL_ALIASES),
    "locations": FieldHints(
        cues=("based in", "located in", "location", "living in", "lives in", "city", "in"),
        aliases={"new york": ("nyc",), "bangalore": ("bengaluru",)},
    ),
    "work_authorization": FieldHints(
        cues=(
            "authorized to work",
            "authorised to work",
            "authorization",
            "authorisation",
            "eligible to work",
            "right to work",
            "work permit",
            "permit",
        ),
        aliases={
            "us": ("united states", "usa", "u.s."),
            "uk": ("united kingdom", "u.k."),
            "eu": ("european union",),
        },
    ),
    "visa_sponsorship": FieldHints(
        cues=("sponsorship", "sponsor"),
        true_cues=(
            r"\b(?:need|needs|needing|require|requires|requiring)\s+(?:a\s+)?(?:visa\s+)?sponsor(?:ship)?",
            r"\bvisa sponsorship\b",
            r"\bsponsorship\b",
        ),
    ),
    "remote": FieldHints(
        cues=("remote", "remotely"),
        true_cues=(
            r"\b(?:open to |willing to work |able to work |works? )?remote(?:ly)?\b",
            r"\bwork(?:ing)? from home\b",
            r"\bwfh\b",
        ),
    ),
    "seniority": FieldHints(
        cues=("seniority", "level"),
        ordinal=SENIORITY,
        aliases={
            "junior": ("entry-level", "entry level", "jr"),
            "senior": ("sr",),
            "mid": ("mid-level", "mid level"),
        },
    ),
    "languages": FieldHints(
        cues=("speaks", "speak", "speaking", "fluent in", "fluent", "language", "languages"),
        aliases={"mandarin": ("chinese",)},
        value_cues=("speaks", "speak", "speaking", "fluent in"),
    ),
    "degree": FieldHints(
        cues=("degree", "educated", "education"),
        ordinal=DEGREES,
        aliases={
            "phd": ("ph.d.", "ph.d", "doctorate", "doctoral degree"),
            "master": ("masters", "master's", "msc", "m.sc.", "ms degree", "mba"),
            "bachelor": ("bachelors", "bachelor's", "bsc", "b.sc.", "ba degree", "undergraduate degree"),
            "associate": ("associate degree", "associate's"),
        },
    ),
    "employer_types": FieldHints(
        cues=("employer", "employers", "worked at", "worked for", "background"),
        aliases={
            "agency": ("agencies", "staffing"),
            "startup": ("startups", "start-up", "start-ups"),
            "consultancy": ("consultancies", "consulting"),
            "nonprofit": ("non-profit", "nonprofits", "ngo"),
            "government": ("public sector",),
        },
    ),
    "notice_days": FieldHints(
        cues=("notice", "available", "availability", "start", "join", "joining"), unit="days", bare_op="<="
    ),
    "salary_expectation": FieldHints(
        cues=("salary", "expects", "expecting", "expectation", "compensation", "pay", "budget"),
        unit="money",
        bare_op="<=",
    ),
}

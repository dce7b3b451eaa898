"""A seeded generator of realistic synthetic resumes.

Demo, tests and benchmarks need nothing from outside: ``generate_resumes(n,
seed)`` returns the same ``n`` raw resumes (Markdown, plain text or JSON,
with names, contact details and photo links like real ones) for the same
seed, on every machine.  Each carries the typed values it was written from
(``truth``), so tests can check that the parser recovers them.

Names are drawn from lists that share no word with the skill, location or
language vocabularies, so swapping names between resumes can never change a
word the ranker sees.
"""

from __future__ import annotations

import json
import random
import re
from dataclasses import dataclass, field
from typing import Any

from .names import FIRST_NAMES, LAST_NAMES
from .schema import EMPLOYER_TYPES, LANGUAGES, LOCATIONS, WORK_AUTHORIZATION

__all__ = ["RawResume", "generate_resumes", "swap_identities"]

# Roles, with the skills their holders tend to have and the phrases their work is described with.
ROLES: dict[str, dict[str, Any]] = {
    "Backend Engineer": {
        "skills": [
            "python",
            "java",
            "go",
            "postgresql",
            "docker",
            "kubernetes",
            "kafka",
            "redis",
            "aws",
            "distributed systems",
            "django",
            "flask",
            "spring",
            "sql",
            "linux",
            "graphql",
            "rust",
        ],
        "work": [
            "designed and operated REST and GraphQL APIs serving millions of requests a day",
            "migrated a monolith to services with clear ownership and on-call runbooks",
            "cut p99 latency of the payments service by a third through query and cache tuning",
            "built an event pipeline with exactly-once processing and replay",
        ],
    },
    "Frontend Engineer": {
        "skills": ["javascript", "typescript", "react", "angular", "css", "html", "graphql", "figma", "node.js"],
        "work": [
            "rebuilt the checkout flow as accessible, responsive components",
            "introduced a design system shared by four product teams",
            "improved Lighthouse performance scores from 60 to 95 on the main pages",
            "set up visual regression tests and a component library",
        ],
    },
    "Data Scientist": {
        "skills": [
            "python",
            "r",
            "machine learning",
            "deep learning",
            "pandas",
            "sql",
            "pytorch",
            "tensorflow",
            "nlp",
            "spark",
            "tableau",
            "data analysis",
        ],
        "work": [
            "built churn and lifetime-value models used in weekly planning",
            "ran A/B tests and wrote the experimentation guidelines for product teams",
            "trained text classifiers for support ticket routing",
            "forecast demand for a retail network with hierarchical time-series models",
        ],
    },
    "DevOps Engineer": {
        "skills": [
            "kubernetes",
            "docker",
            "terraform",
            "ansible",
            "aws",
            "azure",
            "gcp",
            "linux",
            "jenkins",
            "python",
            "git",
        ],
        "work": [
            "moved deployments to GitOps with automated rollbacks",
            "ran the Kubernetes platform for forty services across three regions",
            "reduced cloud spend by a quarter through rightsizing and reserved capacity",
            "wrote infrastructure as code for every environment",
        ],
    },
    "Mobile Developer": {
        "skills": ["swift", "kotlin", "ios", "android", "react", "javascript", "git", "graphql"],
        "work": [
            "shipped a banking app rated 4.8 in both stores",
            "introduced offline sync and push notifications",
            "halved app start time by deferring work and trimming dependencies",
        ],
    },
    "QA Engineer": {
        "skills": ["selenium", "test automation", "manual testing", "python", "java", "jenkins", "sql"],
        "work": [
            "built an end-to-end test suite that runs on every merge",
            "defined release criteria and regression plans",
            "cut flaky tests from twelve percent to under one",
        ],
    },
    "Data Analyst": {
        "skills": ["sql", "excel", "tableau", "power bi", "python", "data analysis", "pandas"],
        "work": [
            "built the weekly revenue dashboards for leadership",
            "automated reporting that used to take two days a month",
            "analysed funnel drop-off and proposed fixes adopted by product",
        ],
    },
    "Recruiter": {
        "skills": ["recruiting", "sourcing", "negotiation", "salesforce", "excel"],
        "work": [
            "filled sixty engineering roles a year with a strong offer acceptance rate",
            "built sourcing pipelines for hard-to-fill technical roles",
            "ran structured interviews and trained hiring managers",
        ],
    },
    "Accountant": {
        "skills": ["accounting", "excel", "sap", "payroll", "power bi"],
        "work": [
            "closed the monthly books in four working days",
            "prepared statutory accounts and supported external audits",
            "ran payroll for three hundred employees",
        ],
    },
    "Marketing Specialist": {
        "skills": ["seo", "content marketing", "data analysis", "excel", "figma"],
        "work": [
            "grew organic traffic by half in one year",
            "ran campaigns across search, social and email",
            "wrote the content strategy for a product launch",
        ],
    },
    "Machine Learning Engineer": {
        "skills": [
            "python",
            "pytorch",
            "tensorflow",
            "machine learning",
            "deep learning",
            "kubernetes",
            "docker",
            "airflow",
            "spark",
            "nlp",
            "aws",
        ],
        "work": [
            "served ranking models at low latency behind a feature store",
            "built training pipelines with reproducible data snapshots",
            "fine-tuned language models for document search",
        ],
    },
    "Project Manager": {
        "skills": ["project management", "excel", "salesforce", "sap", "data analysis"],
        "work": [
            "delivered an ERP rollout across six countries on budget",
            "ran agile ceremonies for three teams",
            "managed vendor contracts and stakeholder reporting",
        ],
    },
}

COMPANY_STEMS = (
    "Northwind",
    "Bluepeak",
    "Ostara",
    "Kelvin",
    "Larkspur",
    "Meridian",
    "Quillon",
    "Tessel",
    "Corvid",
    "Halcyon",
    "Brightwater",
    "Vantor",
    "Solenne",
    "Petrel",
    "Arbor",
    "Fjordline",
)
COMPANY_KIND_WORDS = {
    "agency": "Talent Agency",
    "consultancy": "Consulting",
    "enterprise": "Group",
    "government": "Public Services",
    "in-house": "Retail",
    "nonprofit": "Foundation",
    "startup": "Labs",
}
UNIVERSITIES = ("Technical University", "State University", "Polytechnic Institute", "University College")
DEGREE_TEXT = {
    "associate": "Associate degree in Applied Computing",
    "bachelor": "BSc in Computer Science",
    "master": "MSc in Computer Science",
    "phd": "PhD in Computer Science",
}
WORK_AUTH_TEXT = {
    "eu": "EU",
    "uk": "UK",
    "us": "US",
    "canada": "Canada",
    "india": "India",
    "singapore": "Singapore",
    "switzerland": "Switzerland",
}
PERSONAL_EXTRAS = (
    "Date of Birth: 14/03/1991",
    "Gender: Female",
    "Gender: Male",
    "Marital Status: Married",
    "Marital Status: Single",
    "Nationality: Indian",
    "Nationality: Brazilian",
)


@dataclass
class RawResume:
    """One raw resume as a person would send it, plus the typed values it was written from."""

    doc_id: str
    format: str  # "markdown", "text" or "json"
    content: str  # the raw file content (JSON text for "json")
    truth: dict[str, Any] = field(default_factory=dict)
    identity: dict[str, str] = field(default_factory=dict)

    @property
    def suffix(self) -> str:
        return {"markdown": ".md", "text": ".txt", "json": ".json"}[self.format]


SKILL_DISPLAY = {
    "r": "R",
    "go": "Go",
    "c": "C",
    "c#": "C#",
    "c++": "C++",
    "swift": "Swift",
    "rust": "Rust",
    "spring": "Spring",
    "excel": "Excel",
    "react": "React",
}


def _skill_text(skills: list[str]) -> str:
    return ", ".join(SKILL_DISPLAY.get(s, s) for s in skills)


def _seniority_for(years: float) -> str:
    if years < 1:
        return "intern"
    if years < 3:
        return "junior"
    if years < 6:
        return "mid"
    if years < 10:
        return "senior"
    if years < 14:
        return "lead"
    return "principal"


def _years_phrase(years: float) -> str:
    if years < 1:
        return f"{round(years * 12)} months"
    if years != int(years):
        return f"{years:g} years"
    return f"{int(years)} years" if years != 1 else "1 year"


def _identity(rng: random.Random, i: int) -> dict[str, str]:
    first, last = rng.choice(FIRST_NAMES), rng.choice(LAST_NAMES)
    handle = f"{first}.{last}".lower()
    return {
        "name": f"{first} {last}",
        "email": f"{handle}{i}@example.com",
        "phone": f"+44 20 7946 {rng.randrange(1000, 9999)}",
        "linkedin": f"https://www.linkedin.com/in/{first.lower()}-{last.lower()}-{i}",
        "photo": f"https://photos.example.com/{first.lower()}{i}.jpg",
    }


def _one(rng: random.Random, i: int) -> RawResume:
    role = rng.choice(sorted(ROLES))
    spec = ROLES[role]
    r = rng.random()
    years: float = 0.5 if r < 0.04 else (1.5 if r < 0.08 else float(rng.randint(1, 18)))
    seniority = _seniority_for(years)
    skills = sorted(set(rng.sample(spec["skills"], k=min(len(spec["skills"]), rng.randint(3, 7)))))
    home = rng.choice(LOCATIONS)
    locations = sorted({home, *rng.sample(LOCATIONS, k=rng.choice((0, 0, 1, 2)))})
    auth = sorted(set(rng.sample(WORK_AUTHORIZATION, k=rng.choice((1, 1, 2)))))
    sponsorship = rng.random() < 0.2
    remote = rng.random() < 0.5
    langs = sorted({"english", *rng.sample(LANGUAGES, k=rng.choice((0, 1, 1, 2)))})
    degree = rng.choice(("bachelor", "bachelor", "master", "master", "phd", "associate", "none"))
    n_jobs = 1 if years < 3 else rng.randint(2, 3)
    employer_types = sorted(
        set(rng.sample(EMPLOYER_TYPES, k=n_jobs))
        if role != "Recruiter"
        else {rng.choice(("agency", "in-house")), *rng.sample(EMPLOYER_TYPES, k=n_jobs - 1)}
    )
    notice = rng.choice((0, 14, 30, 30, 60, 90))
    salary = rng.randrange(30, 160) * 1000
    ident = _identity(rng, i)
    first = ident["name"].split()[0]
    title = f"{seniority.capitalize()} {role}" if seniority not in ("mid", "intern") else role
    if seniority == "intern":
        title = f"{role} (intern)"
    work = rng.sample(spec["work"], k=min(len(spec["work"]), 2))
    lead = f"{first} is a" if rng.random() < 0.3 else "A"
    summary = (
        f"{lead} {role.lower()} with {_years_phrase(years)} of experience in "
        f"{_skill_text(skills[:3])}. Comfortable with {_skill_text([rng.choice(skills)])} in production and "
        f"{'happy to work remotely' if remote else 'prefers working on site'}."
    )
    jobs = []
    kinds = list(employer_types)
    for j in range(n_jobs):
        kind = kinds[j % len(kinds)]
        company = f"{rng.choice(COMPANY_STEMS)} {COMPANY_KIND_WORDS[kind]}"
        jobs.append((company, kind, work[j % len(work)]))
    truth: dict[str, Any] = {
        "years_experience": years,
        "skills": skills,
        "locations": locations,
        "work_authorization": auth,
        "visa_sponsorship": sponsorship,
        "remote": remote,
        "seniority": seniority,
        "languages": langs,
        "degree": degree,
        "employer_types": employer_types,
        "notice_days": notice,
        "salary_expectation": salary,
    }
    personal = rng.choice(PERSONAL_EXTRAS) if rng.random() < 0.15 else None
    fmt = "json" if i % 10 == 9 else ("text" if i % 10 == 8 else "markdown")
    doc_id = f"cand-{i:05d}"
    if fmt == "json":
        obj: dict[str, Any] = {
            "id": doc_id,
            "name": ident["name"],
            "email": ident["email"],
            "phone": ident["phone"],
            "links": [ident["linkedin"]],
            "photo": ident["photo"],
            "headline": title,
            "summary": summary,
            # The typed values, in the same order; employer types come from the experience list.
            **{key: value for key, value in truth.items() if key != "employer_types"},
            "experience": [{"company": c, "employer_type": k, "description": w} for c, k, w in jobs],
        }
        if personal:
            key, val = personal.split(": ", 1)
            obj[key.lower().replace(" ", "_")] = val
        return RawResume(doc_id, fmt, json.dumps(obj, ensure_ascii=False), truth, ident)
    h1, h2 = ("# ", "## ") if fmt == "markdown" else ("", "")
    lines = [
        f"{h1}{ident['name']}",
        f"{ident['email']} | {ident['phone']} | {ident['linkedin']}",
        f"Photo: {ident['photo']}",
    ]
    if personal:
        lines.append(personal)
    lines += [
        f"Headline: {title}",
        f"Location: {', '.join(x.title() for x in locations)}",
        f"Work authorization: {', '.join(WORK_AUTH_TEXT[a] for a in auth)}",
        f"Visa sponsorship: {'required' if sponsorship else 'not required'}",
        f"Remote: {'yes' if remote else 'no'}",
        f"Languages: {', '.join(x.title() for x in langs)}",
        f"Notice period: {notice} days",
        f"Salary expectation: {salary}",
        "",
        f"{h2}Summary",
        summary,
        "",
        f"{h2}Skills",
        _skill_text(skills),
        "",
        f"{h2}Experience",
        f"Total experience: {_years_phrase(years)}",
    ]
    for company, kind, w in jobs:
        lines.append(f"- {role}, {company} ({kind}): {w}.")
    lines += ["", f"{h2}Education"]
    if degree != "none":
        lines.append(f"{DEGREE_TEXT[degree]}, {rng.choice(UNIVERSITIES)}")
    else:
        lines.append("No formal degree; self-taught through open-source work")
    return RawResume(doc_id, fmt, "\n".join(lines) + "\n", truth, ident)


def generate_resumes(n: int, seed: int = 7) -> list[RawResume]:
    """``n`` synthetic resumes, the same for the same ``seed``.

    >>> [r.doc_id for r in generate_resumes(2)]
    ['cand-00000', 'cand-00001']
    """
    rng = random.Random(seed)
    return [_one(rng, i) for i in range(n)]


def swap_identities(resumes: list[RawResume], seed: int = 1) -> list[RawResume]:
    """The same resumes with names, e-mails, phones, links and photos permuted between candidates.

    Used by the name-swap test: ranking must not change by a single byte.
    """
    rng = random.Random(seed)
    order = list(range(len(resumes)))
    rng.shuffle(order)
    out = []
    for r, j in zip(resumes, order, strict=True):
        other = resumes[j].identity
        content = r.content
        mine = r.identity
        # Longest first, so a full name is replaced before its first name alone.
        pairs = [(mine[k], other[k]) for k in ("linkedin", "photo", "email", "phone", "name")]
        pairs.append((mine["name"].split()[0], other["name"].split()[0]))
        tokens = {}
        for n, (a, b) in enumerate(pairs):
            tok = f"\x00{n}\x00"
            content = re.sub(rf"(?<!\w){re.escape(a)}(?!\w)", tok, content)
            tokens[tok] = b
        for tok, b in tokens.items():
            content = content.replace(tok, b)
        out.append(RawResume(r.doc_id, r.format, content, r.truth, other))
    return out

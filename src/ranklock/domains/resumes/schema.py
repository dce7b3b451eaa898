"""The resume collection's typed fields and the closed vocabularies behind them.

Every typed value a resume can carry is drawn from (or normalised into) one of
these vocabularies, lower-case, so that a hard constraint such as
``skills has "python"`` compares exact strings and never a spelling variant.
The planner reads the same vocabularies (through the collection's schema),
so a request and a resume always meet on the same spelling.
"""

from __future__ import annotations

__all__ = [
    "DEGREES",
    "EMPLOYER_TYPES",
    "LANGUAGES",
    "LOCATIONS",
    "RESUME_FIELDS",
    "SENIORITY",
    "SKILLS",
    "SKILL_ALIASES",
    "WORK_AUTHORIZATION",
    "resume_vocabulary",
]

#: The schema a resume collection is created with (``Engine.create_collection(fields=...)``).
RESUME_FIELDS: tuple[str, ...] = (
    "years_experience:float",
    "skills:keyword[]",
    "locations:keyword[]",
    "work_authorization:keyword[]",
    "visa_sponsorship:bool",
    "remote:bool",
    "seniority:keyword",
    "languages:keyword[]",
    "degree:keyword",
    "employer_types:keyword[]",
    "notice_days:int",
    "salary_expectation:int",
)

SKILLS: tuple[str, ...] = (
    "airflow",
    "android",
    "angular",
    "ansible",
    "aws",
    "azure",
    "c",
    "c#",
    "c++",
    "css",
    "data analysis",
    "deep learning",
    "distributed systems",
    "django",
    "docker",
    "elasticsearch",
    "excel",
    "figma",
    "flask",
    "gcp",
    "git",
    "go",
    "graphql",
    "hadoop",
    "html",
    "ios",
    "java",
    "javascript",
    "jenkins",
    "kafka",
    "kotlin",
    "kubernetes",
    "linux",
    "machine learning",
    "mongodb",
    "mysql",
    "nlp",
    "node.js",
    "pandas",
    "php",
    "postgresql",
    "power bi",
    "project management",
    "python",
    "pytorch",
    "r",
    "react",
    "redis",
    "rust",
    "salesforce",
    "sap",
    "scala",
    "selenium",
    "spark",
    "spring",
    "sql",
    "swift",
    "tableau",
    "tensorflow",
    "terraform",
    "typescript",
    "recruiting",
    "sourcing",
    "payroll",
    "accounting",
    "seo",
    "content marketing",
    "negotiation",
    "autocad",
    "manual testing",
    "test automation",
)

#: Spellings met in requests and resumes, mapped to the vocabulary value.  Short or
#: ordinary-word skills ("go", "r", "c") are matched only through these aliases or in
#: the exact case they are written in, so "willing to go" never means Go.
SKILL_ALIASES: dict[str, tuple[str, ...]] = {
    "go": ("golang", "go lang", "go language"),
    "javascript": ("js", "ecmascript"),
    "typescript": ("ts",),
    "kubernetes": ("k8s",),
    "postgresql": ("postgres", "psql"),
    "node.js": ("nodejs", "node js", "node"),
    "machine learning": ("ml",),
    "deep learning": ("dl",),
    "nlp": ("natural language processing",),
    "c#": ("csharp", "c sharp"),
    "c++": ("cpp",),
    "aws": ("amazon web services",),
    "gcp": ("google cloud",),
    "react": ("reactjs", "react.js"),
    "angular": ("angularjs",),
    "power bi": ("powerbi",),
    "test automation": ("automation testing",),
    "excel": ("ms excel", "microsoft excel"),
}

LOCATIONS: tuple[str, ...] = (
    "amsterdam",
    "austin",
    "bangalore",
    "barcelona",
    "berlin",
    "boston",
    "chicago",
    "dublin",
    "hamburg",
    "lisbon",
    "london",
    "madrid",
    "manchester",
    "munich",
    "new york",
    "paris",
    "pune",
    "san francisco",
    "seattle",
    "singapore",
    "stockholm",
    "toronto",
    "vienna",
    "warsaw",
    "zurich",
)

LANGUAGES: tuple[str, ...] = (
    "arabic",
    "dutch",
    "english",
    "french",
    "german",
    "hindi",
    "italian",
    "japanese",
    "mandarin",
    "polish",
    "portuguese",
    "spanish",
    "swedish",
)

#: Regions a candidate is authorised to work in (a legal fact, not an origin).
WORK_AUTHORIZATION: tuple[str, ...] = ("canada", "eu", "india", "singapore", "switzerland", "uk", "us")

#: Ordered from lowest to highest: "at least a master" means master or phd.
DEGREES: tuple[str, ...] = ("none", "associate", "bachelor", "master", "phd")
SENIORITY: tuple[str, ...] = ("intern", "junior", "mid", "senior", "lead", "principal")

EMPLOYER_TYPES: tuple[str, ...] = (
    "agency",
    "consultancy",
    "enterprise",
    "government",
    "in-house",
    "nonprofit",
    "startup",
)


def resume_vocabulary() -> dict[str, list[str]]:
    """The closed vocabulary of every keyword field of the resume schema."""
    return {
        "skills": sorted(SKILLS),
        "locations": sorted(LOCATIONS),
        "languages": sorted(LANGUAGES),
        "work_authorization": sorted(WORK_AUTHORIZATION),
        "degree": list(DEGREES),
        "seniority": list(SENIORITY),
        "employer_types": sorted(EMPLOYER_TYPES),
    }

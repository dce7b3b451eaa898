"""Resumes: the first shipped structured collection (schema, parser, synthetic generator, loaders)."""

from __future__ import annotations

from .generate import RawResume, generate_resumes, swap_identities
from .parse import parse_resume, scrub_text
from .schema import RESUME_FIELDS, resume_vocabulary

__all__ = [
    "RESUME_FIELDS",
    "RawResume",
    "generate_resumes",
    "parse_resume",
    "resume_vocabulary",
    "scrub_text",
    "swap_identities",
]

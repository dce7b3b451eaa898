"""The resume domain pack: what the planner knows about resume collections.

A collection gets it when it declares :data:`SIGNATURE` (``skills`` and
``years_experience``, which every resume collection has: :data:`RESUME_FIELDS`
and the CSV loader's fields).  A collection that only happens to have a field
called ``skills`` keeps the generic planner: "k8s" is not "kubernetes" there.
"""

from __future__ import annotations

from ...plan.pack import DomainPack
from .hints import RESUME_HINTS
from .schema import resume_vocabulary

__all__ = ["PACK", "SIGNATURE"]

#: The fields that make a collection a resume collection.
SIGNATURE = frozenset({"skills", "years_experience"})

PACK = DomainPack("resumes", signature=SIGNATURE, vocabulary=resume_vocabulary(), hints=RESUME_HINTS)

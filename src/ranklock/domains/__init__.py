"""Domain packages: generated corpora, their schemas, labelled question sets and planner packs.

A domain knows its own data and nothing of the engine: it produces documents
and questions; the caller ingests and evaluates them.  Its ``PACK`` (a
:class:`~ranklock.plan.pack.DomainPack`) is what the planner may know about
collections of that domain; :func:`pack_for` picks it.
"""

from __future__ import annotations

from collections.abc import Iterable

from ..collection import CollectionInfo, FieldSpec, parse_field_spec
from ..plan.pack import GENERIC, DomainPack

__all__ = ["pack_for", "packs"]


def packs() -> tuple[DomainPack, ...]:
    """Every domain pack, in the order :func:`pack_for` tries them."""
    from .journal.pack import PACK as JOURNAL
    from .resumes.pack import PACK as RESUMES

    return (RESUMES, JOURNAL)


def pack_for(coll: CollectionInfo | Iterable[str | FieldSpec]) -> DomainPack:
    """The first pack whose signature the collection (or list of fields) declares, else the generic one.

    >>> pack_for(["years_experience:float", "skills:keyword[]", "remote:bool"]).name
    'resumes'
    >>> pack_for(["skills:keyword[]"]).name
    'generic'
    """
    fields = coll.fields if isinstance(coll, CollectionInfo) else coll
    names = {(f if isinstance(f, FieldSpec) else parse_field_spec(f)).name for f in fields}
    return next((p for p in packs() if p.fits(names)), GENERIC)

"""The journal collection's schema: its typed fields and text-search language.

Language: the collection is ``english`` with accents folded (``insensitive``).
BM25 stemming is chosen per collection, not per document, and about nine notes
in ten are English, so English stemming serves most of the text.  The
Portuguese and Spanish notes still match on what their questions share with
them word for word (names, places, codenames, the same inflected words, since
the question goes through the same English stemmer as the note, which only
strips endings it knows), and folding accents lets a question typed without
them ("reuniao", "Tromso") match the note that has them.  A ``simple``
(unstemmed) collection would lose every English plural and tense; one collection
per language would split a person's notes across collections.
"""

from __future__ import annotations

from typing import Any

__all__ = ["JOURNAL_COLLECTION", "JOURNAL_CREATE", "JOURNAL_FIELDS", "JOURNAL_LANGUAGES"]

JOURNAL_COLLECTION = "journal"

#: ``date``: the day the note was written; ``people``: full names mentioned;
#: ``tags``: kind of note and project codenames (lower case); ``lang``: en, pt or es.
JOURNAL_FIELDS = ("date:date!", "people:keyword[]", "tags:keyword[]", "lang:keyword!")

JOURNAL_LANGUAGES = ("en", "es", "pt")

#: Arguments for ``Engine.create_collection`` (through ``ingest(create=...)``).
JOURNAL_CREATE: dict[str, Any] = {"fields": list(JOURNAL_FIELDS), "language": "english", "accent": "insensitive"}

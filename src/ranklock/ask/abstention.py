"""Knowing when the notes do not answer: one rule for every generator, and abstentions that say why.

The rule every generator that follows it applies to its draft (extractive-v4 as it selects;
``openai`` and ``local`` to the model's reply, :func:`checked_reply`):

1. **Titles and headings are no answer.**  A note's title (its file name, front-matter title or
   first heading, which the chunker puts first: ranklock.ingest.chunker) and Markdown heading
   lines say what a note is about, never what it says of it: a quote lying inside them answers
   nothing, and no answer-type token is read from them (:func:`quotable_text`).
2. **The answer has the type asked for.**  A question whose answer type
   (ranklock.ask.answer_type) is not ``any`` is answered only by quotes holding a token of that
   type that the question does not hold itself.  A draft whose quotes hold none abstains.
3. **An abstention says what it looked for** (:func:`abstention_text`), and cites nothing (so it
   names a passage as "passage 2", never "[2]"): it is
   :data:`~ranklock.ask.model.ABSTAIN`, then one sentence naming the kind of answer looked for,
   the question's words it was looked for beside, and why none was given::

       The journal does not say. Looked for a date or a time about “car”, “inspection” (the
       question asks “when”): none of the 8 passages has one.

Deterministic: the same question and passages give the same text.  The lists of rule 2 are
hashed into :data:`RULE_VERSION`, which each generator records in its parameters; the model
generators read the latest edition of the answer-type rule (ranklock.ask.answer_type), an
extractive rule the edition it was pinned with (:data:`RULE_VERSIONS`).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from .answer_type import EDITION, EDITIONS, AnswerType, answer_type, has_type, lower_case_stems, topic_terms
from .model import ABSTAIN, AskChunk, Draft, GenerationRequest, is_abstention
from .terms import fold, terms
from .validate import find_quote

__all__ = ["HEADING", "REASONS", "RULE_VERSION", "RULE_VERSIONS", "abstention_text", "checked_reply", "quotable_text"]

#: Recorded in each generator's parameters: the answer-type edition it reads, with its lists' hash.
RULE_VERSIONS = {edition: f"answer-type/{edition} {sha[:16]}" for edition, sha in EDITIONS.items()}
#: The latest, which the model generators' check (:func:`checked_reply`) reads.
RULE_VERSION = RULE_VERSIONS[EDITION]

#: Why an answer was withheld, each with the sentence that says it.
REASONS = {
    "no_passages": "no passage was found for the question",
    "no_terms": "the question has no word to look for",
    "unnamed": "none of the {n} passages mentions {names}",
    "no_type": "none of the {n} passages has one",
    "not_close": "passage {best} comes closest but does not say it",
    "model": "the model found it in none of the {n} passages",
    "model_type": "the passages the model quoted hold none",
}

#: A Markdown heading line ("## Brightwater").
HEADING = re.compile(r"^[ \t]{0,3}#{1,6}[ \t][^\n]*$", re.MULTILINE)
_WORD = re.compile(r"[^\W_]+(?:[-_][^\W_]+)*")


def quotable_text(chunk: AskChunk) -> str:
    """``chunk.text`` with its title and Markdown heading lines blanked (same length, so offsets hold; rule 1)."""
    text = chunk.text
    end = chunk.title_end()
    if end:
        text = " " * end + text[end:]
    return HEADING.sub(lambda m: " " * len(m.group(0)), text)


def _as_written(question: str, folded: Sequence[str]) -> list[str]:
    """The question's own spelling of each folded term (its first occurrence)."""
    seen: dict[str, str] = {}
    for w in _WORD.findall(question):
        seen.setdefault(fold(w), w)
    return [seen.get(t, t) for t in folded]


def _quoted(words: Sequence[str]) -> str:
    return ", ".join(f"“{w}”" for w in words)


def abstention_text(
    question: str,
    reason: str,
    *,
    n: int = 0,
    best: int | None = None,
    names: Sequence[str] = (),
    kind: AnswerType | None = None,
    opener: str = ABSTAIN,
) -> str:
    """The abstention for ``question``: ``opener`` (:data:`ABSTAIN`; extractive-v6 names what was searched,
    :func:`~ranklock.ask.model.abstention_opener`) and what was looked for (rule 3).

    >>> abstention_text("When is the car due for its inspection?", "no_type", n=8)
    'The journal does not say. Looked for a date or a time about “car”, “due”, “inspection” (the question asks “When”): none of the 8 passages has one.'
    """
    why = REASONS[reason].format(n=n, best=best, names=_quoted(_as_written(question, names)))
    if reason in ("no_passages", "no_terms", "unnamed"):
        return f"{opener} {why[0].upper()}{why[1:]}."
    kind = kind or answer_type(question)
    topic = topic_terms(question, kind)
    about = f" about {_quoted(_as_written(question, topic))}" if topic else ""
    cue = ""
    if kind.cue:
        first = kind.cue.split()[0]
        written = next((w for w in _WORD.findall(question) if fold(w) == first), first)
        cue = f" (the question asks “{written}{kind.cue[len(first) :]}”)"
    return f"{opener} Looked for {kind.describe()}{about}{cue}: {why}."


def checked_reply(request: GenerationRequest, draft: Draft) -> Draft:
    """A model's parsed reply under rules 1 to 3: a draft that does not answer becomes an abstention.

    The draft's citations are checked against the chunks later (ranklock.ask.validate); here a
    quote is looked for in its passage with titles and headings blanked, case- and space-insensitively.
    """
    n = len(request.chunks)
    kind = answer_type(request.question)
    if is_abstention(draft.answer):
        return Draft(abstention_text(request.question, "model", n=n, kind=kind), (), True, draft.raw)
    question_terms = frozenset(terms(request.question))
    answering = []
    for c in draft.citations:
        if not 1 <= c.n <= n:
            return draft  # validation rejects it, naming the passage
        chunk = request.chunks[c.n - 1]
        found = find_quote(c.quote, chunk.text)
        if found is None:
            return draft  # not in the passage: validation rejects it, quoting it
        at = chunk.text.find(found)
        body = quotable_text(chunk)[at : at + len(found)]
        if body.strip():  # blank: the quote is a title or a heading, which answers nothing
            answering.append(body)
    common = lower_case_stems(request.question, *(quotable_text(c) for c in request.chunks))
    if not answering or not any(has_type(kind.kind, q, question_terms, common) for q in answering):
        return Draft(abstention_text(request.question, "model_type", n=n, kind=kind), (), True, draft.raw)
    return draft

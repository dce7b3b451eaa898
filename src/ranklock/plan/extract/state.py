"""The request being read: which pass claimed each character, and for what (its owner)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..partition import is_stop_word, words
from ..schema import PlanSchema


@dataclass(eq=False)
class _Mention:
    start: int
    end: int
    field: str
    value: Any
    kind: str  # "value", "number", "year", "bool", "text" (soft words)
    op: str | None = None  # numbers: the comparison; values: ordinal direction ("up"/"down")
    negated: bool = False
    soft: bool = False


@dataclass(eq=False)
class _Issue:
    """A phrase the planner cannot turn into a constraint with certainty: it becomes a question."""

    pos: int
    phrase: str
    question: str


@dataclass(eq=False)
class _Note:
    """Words claimed on purpose for no effect: "ignored" (shown as a part) or "dropped" (the opening)."""

    role: str
    note: str


_Owner = _Mention | _Issue | _Note


_DROPPED = _Note("dropped", "the request's opening")


@dataclass
class _State:
    """The request being read: which pass claimed each character, and for what (its owner)."""

    text: str
    schema: PlanSchema
    owner: list[int] = field(default_factory=list)  # per character: index into owners, -1 when free
    owners: list[_Owner] = field(default_factory=list)
    mentions: list[_Mention] = field(default_factory=list)
    issues: list[_Issue] = field(default_factory=list)
    _ids: dict[int, int] = field(default_factory=dict)  # id(owner) -> index into owners

    def __post_init__(self) -> None:
        self.owner = [-1] * len(self.text)

    def _index(self, who: _Owner) -> int:
        if id(who) not in self._ids:
            self._ids[id(who)] = len(self.owners)
            self.owners.append(who)
        return self._ids[id(who)]

    def claim(self, start: int, end: int, who: _Owner) -> None:
        """Give the free characters of ``[start, end)`` to ``who``; claimed ones keep their owner."""
        idx = self._index(who)
        for i in range(max(start, 0), min(end, len(self.text))):
            if self.owner[i] < 0:
                self.owner[i] = idx

    def force(self, start: int, end: int, who: _Owner) -> None:
        """Give every character of ``[start, end)`` to ``who``, whoever claimed it before."""
        idx = self._index(who)
        for i in range(max(start, 0), min(end, len(self.text))):
            self.owner[i] = idx

    def owner_of(self, start: int, end: int) -> _Owner | None:
        """The owner of the first claimed character of ``[start, end)``; None when all are free."""
        for i in range(start, end):
            if self.owner[i] >= 0:
                return self.owners[self.owner[i]]
        return None

    def free(self, start: int, end: int) -> bool:
        return all(o < 0 for o in self.owner[start:end])

    def mention(self, m: _Mention) -> _Mention:
        """Record ``m`` and claim its characters for it."""
        self.mentions.append(m)
        self.claim(m.start, m.end, m)
        return m

    def ask(self, start: int, end: int, question: str, phrase: str | None = None, *, force: bool = False) -> _Issue:
        """Record a question about ``[start, end)`` and claim those characters for it."""
        issue = _Issue(start, self.text[start:end].strip() if phrase is None else phrase, question)
        self.issues.append(issue)
        (self.force if force else self.claim)(start, end, issue)
        return issue


def _content_words(st: _State, start: int, end: int) -> list[tuple[int, int]]:
    out = []
    for s, e in words(st.text, start, end):
        if st.free(s, e) and not is_stop_word(st.text[s:e]):
            out.append((s, e))
    return out

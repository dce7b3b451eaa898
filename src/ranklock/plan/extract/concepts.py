"""Requirements no typed field expresses ("near the office", "culture fit"): asked about, never ranked.

The table applies to every collection, whatever its domain pack (a "senior" on a product
catalogue is a question too); a pack's ``concepts`` are asked about after these.
"""

from __future__ import annotations

from ..pack import Concept, concept
from ..schema import PlanSchema
from .numbers import _numeric_fields
from .scopes import _extend
from .state import _State

# Asked when a concept's question would suggest a field the collection does not have.
_NO_FIELD_QUESTION = (
    "{phrase!r} is a requirement that no typed field records (fields: {fields}). Should it be ranking text, or dropped?"
)


# Requirements that read like filters but name something no typed field holds.
_CONCEPTS: tuple[Concept, ...] = (
    concept(
        "proximity",
        r"\b(?:near(?:by)?|close to|close by|walking distance|commut\w*|within \d+\s*(?:km|kilometers|kilometres|"
        r"miles|mi|minutes|mins)|local(?:ly)?|on-?site|in[- ]office|in the office|relocat\w*)\b",
        "{phrase!r} is not a field. Which locations should count (the locations field holds cities, "
        "e.g. 'in berlin or hamburg')?",
        needs="locations",
        extend=True,
    ),
    concept(
        "judgement",
        r"\b(?:(?:good |great |strong )?(?:culture|cultural|team) fit|good fit|fits? (?:in|with) (?:the|our) "
        r"(?:team|culture)|personality|attitude|vibes?|team players?|passionate|rock ?stars?|ninjas?|hungry|"
        r"hard[- ]working|top (?:talent|performers?)|high performers?|job[- ]hopp\w*|gaps? in (?:their |the )?"
        r"(?:cv|resume|employment)|over-?qualified|under-?qualified|loyal|reliable|(?:good |great |strong |excellent )?"
        r"communication skills|communicators?|self-starters?|go-getters?|smart|brilliant|best)\b",
        "{phrase!r} is a judgement that no typed field records. Which checkable requirement should stand for "
        "it (fields: {fields}), or should it be dropped?",
        extend=True,
    ),
    concept(
        "seniority",
        r"\b(?:senior|junior|entry[- ]level|mid[- ]level|principal|staff)\b",
        "{phrase!r} is not a typed value here. How many years of experience should it mean "
        "(e.g. 'at least 5 years of experience')?",
        ("seniority",),
        needs="years",
    ),
    concept(
        "experienced",
        r"\b(?:experienced|seasoned|veteran)\b",
        "{phrase!r} has no exact meaning. How many years of experience should it mean (e.g. 'at least 5 years "
        "of experience')?",
        needs="years",
    ),
    concept(
        "availability",
        r"\b(?:available (?:immediately|now|asap|soon|right away)|immediately available|asap|"
        r"start (?:immediately|asap|soon|right away)|immediate joiners?|short notice)\b",
        "{phrase!r} has no exact meaning. What is the longest notice period to accept (e.g. 'notice under 30 days')?",
        needs="days",
    ),
    concept(
        "salary",
        r"\b(?:cheap|affordable|inexpensive|low salary|low cost|within (?:our|the) budget|reasonable salary)\b",
        "{phrase!r} has no exact meaning. What is the highest {field} to accept (e.g. '{field} under 80k')?",
        needs="money",
    ),
    concept(
        "education",
        r"\b(?:(?:a |any )?(?:university |college )?degree|graduated?|university|college|diploma|educated)\b",
        "{phrase!r} is not one typed value. Which degree is the minimum ({fields})?",
        needs="degree",
    ),
    concept(
        "clearance",
        r"\b(?:(?:active |valid |current )?(?:security|government|secret|top[- ]secret|ts/sci|sc|dv|nv1|nv2|baseline) )?"
        r"clearances?\b|\b(?:security[- ])?cleared\b",
        "{phrase!r}: no typed field records a security clearance (fields: {fields}). Should it be ranking text, "
        "or dropped?",
        ("clearance", "clearances", "security_clearance"),
        extend=True,
    ),
    concept(
        "licence",
        r"\b(?:(?:valid |clean |full )?(?:driver'?s|driving|drivers|commercial driving|cdl|forklift|pilot'?s?) "
        r"licen[cs]es?|licen[cs]ed)\b",
        "{phrase!r}: no typed field records licences (fields: {fields}). Should it be ranking text, or dropped?",
        ("licenses", "licences", "license", "licence"),
        extend=True,
    ),
    concept(
        "shifts",
        r"\b(?:(?:available|availability|able|willing|open) (?:for|to work|to do) )?(?:(?:night|day|evening|weekend|"
        r"early|late|rotating|split|double) shifts?|shift work|on[- ]call(?: duty)?|weekend work|"
        r"(?:work(?:ing)? )?(?:nights|weekends))\b",
        "{phrase!r}: no typed field records shift availability (fields: {fields}). Should it be ranking text, "
        "or dropped?",
        ("shifts", "shift_availability", "availability"),
    ),
    concept(
        "start_date",
        r"\b(?:(?:who )?(?:can|could|able to|available to|ready to) )?(?:start|join|begin)(?:s|ing)? "
        r"(?:next|this|in|within|by|on|from|before|early|mid|end of) (?:\w+ ){0,2}?"
        r"(?:week|weeks|month|months|monday|tuesday|wednesday|thursday|friday|january|february|march|april|may|"
        r"june|july|august|september|october|november|december|spring|summer|autumn|fall|winter|year|days?)\b|"
        r"\bavailable (?:from|next|this|by|in) (?:\w+ ){0,2}?(?:week|month|monday|january|february|march|april|may|"
        r"june|july|august|september|october|november|december|year)\b",
        "{phrase!r} is a start date, and no field records one (fields: {fields}); a notice period is not the same "
        "thing. Should it be a notice period (e.g. 'notice under 14 days'), ranking text, or dropped?",
        ("start_date", "available_from"),
    ),
    concept(
        "certification",
        r"\b(?:certified|certifications?|certificates?)\b",
        "{phrase!r}: certifications are not a typed field. Should it be ranking text rather than a requirement?",
        ("certifications", "certification", "certificates"),
        extend=True,
    ),
)


def _concepts(st: _State) -> None:
    # The general table applies to every collection; a domain pack can add concepts, never remove one.
    for c in (*_CONCEPTS, *st.schema.pack.concepts):
        if any(st.schema.field(f) is not None for f in c.fields):
            continue  # the schema can express it; an unmatched word is just text
        for m in c.pattern.finditer(st.text):
            if not st.free(m.start(), m.end()):
                continue
            end = _extend(st, m.end()) if c.extend else m.end()
            phrase = st.text[m.start() : end].strip()
            fields = ", ".join(st.schema.names()) or "none"
            home = _home_field(st.schema, c.needs)
            question = c.question if c.needs is None or home is not None else _NO_FIELD_QUESTION
            if c.name == "education" and home is not None:
                order = st.schema.hints["degree"].ordinal or tuple(st.schema.vocab.get("degree", []))
                fields = "degree: " + " < ".join(order)
            text = question.format(phrase=phrase, fields=fields, field=(home or "").replace("_", " "))
            st.ask(m.start(), end, text, phrase)


def _home_field(schema: PlanSchema, needs: str | None) -> str | None:
    """The field a concept's question can point to: one of unit ``needs``, or the field named ``needs``."""
    if needs is None:
        return None
    if schema.field(needs) is not None:
        return needs
    return next((n for n in _numeric_fields(schema) if schema.unit(n) == needs), None)

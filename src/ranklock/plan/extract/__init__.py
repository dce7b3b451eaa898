"""The deterministic, schema-driven extractor: request text -> :class:`Plan`.

The same request against the same schema always gives the same plan.  It
works in passes over the request, each claiming the characters it explains:

1. protected attributes and their proxies -> ``refusal`` (checked first: a
   request that selects on age is refused whatever else it says);
2. calendar years with a direction ("since 2019", "from 2020 or later") ->
   the one field holding years or dates (:mod:`ranklock.plan.dates`); then
   numbers with units and comparators ("2+ years", "under 90k", "between 3
   and 5 years", "within 2 weeks") -> numeric fields, chosen by unit and by the
   nearest cue word ("experience", "notice", "salary");
3. vocabulary values ("python", "berlin", "master's") -> keyword fields,
   cue phrases ("remote", "sponsorship") -> bool fields, and a keyword field
   named with a value after it ("tagged parts") -> that field, or a question
   when the value is known not to be one of its values;
4. scopes: negation ("no", "without", "except") flips what it covers,
   preference words ("ideally", "a plus") turn what they cover into soft
   preferences;
5. what is left: phrases that state a requirement no field can express
   ("near the office", "culture fit", "must know cobol"), and vocabulary
   values written as ordinary words that no context settles ("team lead") ->
   a ``clarification_request`` naming the phrase; other content words become
   the ranking text.

Each claim records its owner (a mention that becomes a constraint or a
preference, a question, or a deliberate no-op), so the plan's ``parts`` say
where every word of the request went (:mod:`ranklock.plan.partition`).

Every constraint the extractor emits names a declared field and an operator
valid for its type; :func:`ranklock.plan.validate.validate_plan` checks that
again, so plans proposed by other extractors meet the same bar.
"""

from __future__ import annotations

from .assemble import RuleExtractor, extract_plan

__all__ = ["RuleExtractor", "extract_plan"]

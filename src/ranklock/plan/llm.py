"""An optional extractor that asks an OpenAI-compatible chat endpoint to propose a plan.

It is never the last word: its JSON goes through the same
:func:`ranklock.plan.validate.validate_plan` as the rule extractor's plans, so
a constraint on an undeclared field, an operator the field's type does not
have, a value outside the field's vocabulary, or a request touching a
protected attribute can never reach the search.  With ``temperature = 0`` and
a fixed prompt the same model usually answers the same way, but only the
rule extractor is deterministic by construction; use it where replay matters.

Configuration: ``RANKLOCK_PLAN_LLM_URL`` (base URL ending in ``/v1``),
``RANKLOCK_PLAN_LLM_MODEL`` and, if the server wants one, ``RANKLOCK_PLAN_LLM_KEY``.
"""

from __future__ import annotations

import json
from typing import Any

import httpx
from pydantic import ValidationError

from ..errors import ConfigError, QueryError
from ..settings import env
from .model import OPS, Plan
from .schema import PlanSchema

__all__ = ["LLMExtractor", "build_prompt"]

_INSTRUCTIONS = """You turn a recruiter's request into a search plan for a typed collection.
Answer with ONE JSON object and nothing else:
{"kind": "answer" | "clarification_request" | "refusal",
 "constraints": [{"field": F, "op": OP, "value": V, "negate": false, "phrase": "words of the request"}],
 "ranking_text": "free words to rank by", "preferences": [{"kind": "preferred_value", "field": F, "value": V}],
 "phrase": "...", "question": "...", "reason": "...", "attribute": "..."}
Rules: a constraint must use one of the fields below, an operator valid for its type, and for keyword fields a
value from the listed vocabulary. Requirements that no field can express -> kind clarification_request with the
phrase and one concrete question. Any selection or ranking on gender, race, ethnicity, religion, age, disability,
pregnancy, marital status, national origin, names or appearance (or proxies such as 'young' or 'native speaker')
-> kind refusal with the attribute and the reason. Preferences ("ideally", "a plus") are never constraints."""


def build_prompt(request: str, schema: PlanSchema) -> list[dict[str, str]]:
    """The chat messages sent for ``request``: instructions, the schema, the request."""
    lines = []
    for f in schema.fields:
        vocab = schema.vocab.get(f.name)
        extra = f"; values: {', '.join(vocab[:200])}" if vocab else ""
        unit = schema.unit(f.name)
        lines.append(f"- {f.name} ({f.type}{', unit ' + unit if unit else ''}){extra}")
    system = _INSTRUCTIONS + f"\nOperators: {', '.join(OPS)}.\nFields:\n" + "\n".join(lines)
    return [{"role": "system", "content": system}, {"role": "user", "content": request}]


class LLMExtractor:
    """Proposes plans through ``POST {url}/chat/completions``; httpx, one client per call."""

    def __init__(
        self, url: str | None = None, model: str | None = None, *, api_key: str | None = None, timeout: float = 30.0
    ) -> None:
        self.url = (url or env("RANKLOCK_PLAN_LLM_URL")).rstrip("/")
        self.model = model or env("RANKLOCK_PLAN_LLM_MODEL")
        self.api_key = api_key if api_key is not None else (env("RANKLOCK_PLAN_LLM_KEY") or None)
        self.timeout = timeout
        if not self.url or not self.model:
            raise ConfigError(
                "the LLM extractor needs an endpoint and a model; set RANKLOCK_PLAN_LLM_URL (e.g. "
                "http://127.0.0.1:8000/v1) and RANKLOCK_PLAN_LLM_MODEL, or use the default rule extractor."
            )
        self.name = f"llm:{self.model}"

    def _complete(self, messages: list[dict[str, str]]) -> str:
        body = json.dumps(
            {"model": self.model, "messages": messages, "temperature": 0, "response_format": {"type": "json_object"}}
        ).encode("utf-8")
        headers = {"Content-Type": "application/json"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        try:
            # content=, not json=: the body is serialised above, so the bytes sent stay what they were.
            with httpx.Client(timeout=self.timeout) as client:
                resp = client.post(f"{self.url}/chat/completions", content=body, headers=headers)
                resp.raise_for_status()  # urllib raised on 4xx/5xx; httpx must be asked to
                payload: Any = json.loads(resp.content.decode("utf-8"))
        except httpx.HTTPError as exc:
            raise ConfigError(
                f"cannot reach the LLM endpoint {self.url}/chat/completions ({exc}); check "
                "RANKLOCK_PLAN_LLM_URL, or plan without --llm."
            ) from exc
        except json.JSONDecodeError as exc:
            raise QueryError(f"the LLM endpoint {self.url} answered with non-JSON ({exc.msg}).") from exc
        try:
            content = payload["choices"][0]["message"]["content"]
        except (KeyError, IndexError, TypeError) as exc:
            raise QueryError(
                f"the LLM endpoint {self.url} answered without choices[0].message.content; is it OpenAI-compatible?"
            ) from exc
        if not isinstance(content, str):
            raise QueryError(f"the LLM endpoint {self.url} returned non-text content.")
        return content

    def extract(self, request: str, schema: PlanSchema, collection: str | None = None) -> Plan:
        """The model's plan for ``request``, parsed; the caller validates it against the schema."""
        content = self._complete(build_prompt(request, schema))
        text = content.strip()
        if text.startswith("```"):
            text = text.strip("`").removeprefix("json").strip()
        try:
            obj = json.loads(text)
        except json.JSONDecodeError as exc:
            raise QueryError(
                f"the LLM extractor ({self.model}) did not answer with a JSON plan ({exc.msg}): {content[:200]!r}; "
                "retry, or plan without --llm."
            ) from exc
        if not isinstance(obj, dict):
            raise QueryError(f"the LLM extractor ({self.model}) answered {type(obj).__name__}, not a JSON object.")
        obj.update({"request": request, "collection": collection, "extractor": self.name})
        try:
            return Plan.model_validate(obj)
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(x) for x in first["loc"])
            raise QueryError(
                f"the LLM extractor ({self.model}) proposed a malformed plan: {where}: {first['msg']}; "
                "retry, or plan without --llm."
            ) from exc

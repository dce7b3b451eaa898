"""The ``openai`` generator: any OpenAI-compatible chat-completions endpoint.

Configured from the environment (or the constructor):

- ``RANKLOCK_LLM_URL``: the API base, e.g. ``http://localhost:8080/v1`` (``/chat/completions``
  is appended unless the URL already ends with it);
- ``RANKLOCK_LLM_MODEL``: the model name sent in each request;
- ``RANKLOCK_LLM_API_KEY``: sent as a bearer token when set; never logged or recorded.

Every request is greedy (``temperature`` 0) and carries a fixed ``seed``; both
are recorded in the answer's generator record with the template version.  The reply
goes through the abstention rule every generator shares (ranklock.ask.abstention), whose
version is recorded too.
A remote model's weights cannot be checked, so its checksum is ``null``; the
reply's ``system_fingerprint``, when the server sends one, is not recorded
because it may change between identical calls.
"""

from __future__ import annotations

import json
import os
from typing import Any

import httpx

from ...errors import ConfigError, GenerationError
from ..abstention import RULE_VERSION as ABSTENTION_RULE
from ..abstention import checked_reply
from ..model import Draft, GenerationRequest, GeneratorInfo
from ..prompt import TEMPLATE_VERSION
from .reply import parse_reply

__all__ = ["OpenAIGenerator"]


class OpenAIGenerator:
    """Chat completions over HTTP (httpx), temperature 0, a recorded seed."""

    name = "openai"

    def __init__(
        self,
        url: str | None = None,
        model: str | None = None,
        *,
        api_key: str | None = None,
        seed: int = 0,
        max_tokens: int = 512,
        timeout: float = 120.0,
    ) -> None:
        url = url or os.environ.get("RANKLOCK_LLM_URL") or None
        model = model or os.environ.get("RANKLOCK_LLM_MODEL") or None
        if not url:
            raise ConfigError(
                "the openai generator needs an endpoint and RANKLOCK_LLM_URL is not set; set it to an "
                "OpenAI-compatible API base such as http://localhost:8080/v1, or use --generator extractive."
            )
        if not url.startswith(("http://", "https://")):
            raise ConfigError(f"RANKLOCK_LLM_URL {url!r} is not an http(s) URL; e.g. http://localhost:8080/v1.")
        if not model:
            raise ConfigError(
                "the openai generator needs a model name and RANKLOCK_LLM_MODEL is not set; set it to the "
                "model the endpoint serves, or use --generator extractive."
            )
        base = url.rstrip("/")
        self.endpoint = base if base.endswith("/chat/completions") else base + "/chat/completions"
        self.model = model
        self.seed = seed
        self.max_tokens = max_tokens
        self.timeout = timeout
        self._api_key = api_key if api_key is not None else os.environ.get("RANKLOCK_LLM_API_KEY") or None

    def info(self) -> GeneratorInfo:
        return GeneratorInfo(
            name=self.name,
            model=self.model,
            checksum=None,
            params={
                "url": self.endpoint,
                "temperature": 0,
                "seed": self.seed,
                "max_tokens": self.max_tokens,
                "template": TEMPLATE_VERSION,
                "abstention": ABSTENTION_RULE,
            },
        )

    def body(self, request: GenerationRequest) -> dict[str, Any]:
        """The JSON body sent for ``request``."""
        return {
            "model": self.model,
            "messages": [dict(m) for m in request.prompt.messages],
            "temperature": 0,
            "seed": self.seed,
            "max_tokens": self.max_tokens,
        }

    def generate(self, request: GenerationRequest) -> Draft:
        headers = {"Authorization": f"Bearer {self._api_key}"} if self._api_key else {}
        try:
            resp = httpx.post(self.endpoint, json=self.body(request), headers=headers, timeout=self.timeout)
        except httpx.TimeoutException:
            raise GenerationError(
                f"the LLM endpoint {self.endpoint} did not answer within {self.timeout:g} s; check that it runs "
                "and is not overloaded, or use --generator extractive."
            ) from None
        except httpx.HTTPError as exc:
            raise GenerationError(
                f"cannot reach the LLM endpoint {self.endpoint}: {exc}; check RANKLOCK_LLM_URL and that the "
                "server runs, or use --generator extractive."
            ) from None
        if resp.status_code != 200:
            raise GenerationError(
                f"the LLM endpoint {self.endpoint} answered HTTP {resp.status_code}: {resp.text[:200]!r}; "
                "check RANKLOCK_LLM_MODEL and RANKLOCK_LLM_API_KEY, or use --generator extractive."
            )
        try:
            payload: Any = resp.json()
            content = payload["choices"][0]["message"]["content"]
        except (json.JSONDecodeError, KeyError, IndexError, TypeError):
            raise GenerationError(
                f"the LLM endpoint {self.endpoint} did not return an OpenAI chat completion: {resp.text[:200]!r}; "
                "check that RANKLOCK_LLM_URL points at an OpenAI-compatible API (…/v1)."
            ) from None
        if not isinstance(content, str):
            raise GenerationError(
                f"the LLM endpoint {self.endpoint} returned a completion without text content: {resp.text[:200]!r}; "
                "check that the model is a chat model."
            )
        # The abstention rule of every generator (ranklock.ask.abstention): a reply quoting no answer of the
        # type asked for, or only a title, abstains, saying what was looked for.
        return checked_reply(request, parse_reply(content, source=f"model {self.model!r} at {self.endpoint}"))

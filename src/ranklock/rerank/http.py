"""An HTTP reranker for the common ``/rerank`` API shape.

Two request shapes, one reply parser:

* ``api="tei"`` (Text Embeddings Inference): ``POST {url}/rerank`` with
  ``{"query", "texts", "raw_scores": false, "truncate": true}``; the reply is a
  list ``[{"index", "score"}]``;
* ``api="cohere"`` (Cohere, Jina, and servers that copy them): ``POST {url}/rerank``
  with ``{"model", "query", "documents", "top_n", "return_documents": false}``;
  the reply is ``{"results": [{"index", "relevance_score"}]}``.

Either reply is accepted from either API.  Every index must be given exactly
once: a reply that skips or repeats one, or is not JSON, fails at once with
the reply shown (a reranker that silently dropped a candidate would make the
result quietly shorter).  A remote model's weights cannot be checked, so the
pin is the model name (and TEI's ``/info`` ``model_id`` and ``model_sha`` when
the server tells them), with ``weights_sha256`` null.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import httpx

from ..errors import ConfigError, RerankError
from .base import RerankerInfo

__all__ = ["APIS", "HttpReranker", "parse_scores"]

APIS = ("tei", "cohere")


def _bad(url: str, text: str, why: str) -> RerankError:
    return RerankError(
        f"the reranker at {url} did not return a ranking ({why}): {text[:200]!r}; check that "
        "RANKLOCK_RERANKER points at a /rerank endpoint and RANKLOCK_RERANK_API (tei or cohere) matches it."
    )


def parse_scores(payload: Any, count: int, *, url: str, text: str) -> list[float]:
    """One score per candidate, in the order sent, from a TEI list or a Cohere/Jina ``results`` object."""
    items = payload.get("results") if isinstance(payload, dict) else payload
    if not isinstance(items, list):
        raise _bad(url, text, "neither a list nor an object with 'results'")
    scores: list[float | None] = [None] * count
    for item in items:
        if not isinstance(item, dict):
            raise _bad(url, text, "an entry is not an object")
        index, score = item.get("index"), item.get("score", item.get("relevance_score"))
        if isinstance(index, bool) or not isinstance(index, int) or not 0 <= index < count:
            raise _bad(url, text, f"index {index!r} is not one of 0..{count - 1}")
        if isinstance(score, bool) or not isinstance(score, (int, float)) or score != score:
            raise _bad(url, text, f"the score of index {index} is {score!r}, not a number")
        if scores[index] is not None:
            raise _bad(url, text, f"index {index} is scored twice")
        scores[index] = float(score)
    missing = [i for i, s in enumerate(scores) if s is None]
    if missing:
        raise _bad(url, text, f"{len(missing)} of {count} candidates have no score (first: index {missing[0]})")
    return [s for s in scores if s is not None]


class HttpReranker:
    """``POST {url}/rerank`` (TEI, Cohere or Jina shape) with httpx."""

    name = "http"

    def __init__(
        self,
        url: str,
        *,
        model: str | None = None,
        api: str = "tei",
        api_key: str | None = None,
        timeout: float = 30.0,
    ) -> None:
        if not url.startswith(("http://", "https://")):
            raise ConfigError(f"reranker URL {url!r} is not an http(s) URL; e.g. http://localhost:8080.")
        if api not in APIS:
            raise ConfigError(f"unknown reranker API {api!r}; use one of {', '.join(APIS)}.")
        if api == "cohere" and not model:
            raise ConfigError(
                "a cohere-shaped reranker needs a model name and none was given; set RANKLOCK_RERANK_MODEL, "
                "or use RANKLOCK_RERANK_API=tei."
            )
        base = url.rstrip("/")
        self.endpoint = base if base.endswith("/rerank") else base + "/rerank"
        self.base = self.endpoint[: -len("/rerank")]
        self.model = model
        self.api = api
        self.timeout = timeout
        self._api_key = api_key
        self._served: dict[str, Any] | None = None

    def _headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self._api_key}"} if self._api_key else {}

    def _server_info(self) -> dict[str, Any]:
        """TEI's ``GET /info`` (model_id, model_sha), once; empty for servers without it."""
        if self._served is None:
            self._served = {}
            if self.api == "tei":
                try:
                    resp = httpx.get(self.base + "/info", headers=self._headers(), timeout=self.timeout)
                    body = resp.json() if resp.status_code == 200 else {}
                except (httpx.HTTPError, json.JSONDecodeError):
                    body = {}
                if isinstance(body, dict):
                    self._served = {k: body[k] for k in ("model_id", "model_sha") if isinstance(body.get(k), str)}
        return self._served

    def info(self) -> RerankerInfo:
        served = self._server_info()
        return RerankerInfo(
            name=self.name,
            model=self.model or served.get("model_id") or self.endpoint,
            weights_sha256=None,
            params={
                "url": self.endpoint,
                "api": self.api,
                **({"revision": served["model_sha"]} if "model_sha" in served else {}),
            },
        )

    def body(self, query: str, texts: Sequence[str]) -> dict[str, Any]:
        """The JSON body sent for ``query`` and ``texts``."""
        if self.api == "tei":
            return {"query": query, "texts": list(texts), "raw_scores": False, "truncate": True}
        return {
            "model": self.model,
            "query": query,
            "documents": list(texts),
            "top_n": len(texts),
            "return_documents": False,
        }

    def score(self, query: str, texts: Sequence[str]) -> list[float]:
        if not texts:
            return []
        try:
            resp = httpx.post(
                self.endpoint, json=self.body(query, texts), headers=self._headers(), timeout=self.timeout
            )
        except httpx.TimeoutException:
            raise RerankError(
                f"the reranker at {self.endpoint} did not answer within {self.timeout:g} s; check that it runs, "
                "or search without --rerank."
            ) from None
        except httpx.HTTPError as exc:
            raise RerankError(
                f"cannot reach the reranker at {self.endpoint}: {exc}; check RANKLOCK_RERANKER and that the server "
                "runs, or search without --rerank."
            ) from None
        if resp.status_code != 200:
            raise RerankError(
                f"the reranker at {self.endpoint} answered HTTP {resp.status_code}: {resp.text[:200]!r}; check "
                "RANKLOCK_RERANK_MODEL and RANKLOCK_RERANK_API_KEY, or search without --rerank."
            )
        try:
            payload = resp.json()
        except json.JSONDecodeError:
            raise _bad(self.endpoint, resp.text, "not JSON") from None
        return parse_scores(payload, len(texts), url=self.endpoint, text=resp.text)

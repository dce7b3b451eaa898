"""Ask generators, one protocol (:class:`ranklock.ask.model.Generator`).

- ``extractive`` (default): no model, deterministic, verbatim sentences.
- ``openai``: any OpenAI-compatible chat endpoint (RANKLOCK_LLM_URL, RANKLOCK_LLM_MODEL, RANKLOCK_LLM_API_KEY).
- ``local``: SmolLM2-135M-Instruct on the CPU (``ranklock[local-llm]``); small and often wrong.
"""

from __future__ import annotations

from ...errors import ConfigError
from ..model import Generator

__all__ = ["NAMES", "resolve_generator"]

NAMES = ("extractive", "local", "openai")


def resolve_generator(spec: str | Generator) -> Generator:
    """A generator by name, or ``spec`` itself when it already is one."""
    if not isinstance(spec, str):
        if isinstance(spec, Generator):
            return spec
        raise ConfigError(f"{spec!r} is not a generator (it needs name, info() and generate()); pass a name.")
    if spec == "extractive":
        from .extractive import ExtractiveGenerator

        return ExtractiveGenerator()
    if spec == "openai":
        from .openai import OpenAIGenerator

        return OpenAIGenerator()
    if spec == "local":
        from .local import LocalGenerator

        return LocalGenerator()
    raise ConfigError(f"unknown generator {spec!r}; use one of {', '.join(NAMES)}.")

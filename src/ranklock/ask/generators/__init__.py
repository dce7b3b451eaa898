"""Ask generators, one protocol (:class:`ranklock.ask.model.Generator`).

- ``extractive`` (default): deterministic, verbatim spans of the answer's type chosen by meaning and words,
  inside one unit of the note's structure, gathered for a list question, abstaining with what it looked for
  in the collection's words (extractive-v6);
- ``extractive-v5``, ``extractive-v4``, ``extractive-v3`` and ``extractive-v2``: the rules of issue 40's two
  rounds and of issues 26 and 12, for replaying answers they gave and side-by-side benchmarks;
- ``openai``: any OpenAI-compatible chat endpoint (RANKLOCK_LLM_URL, RANKLOCK_LLM_MODEL, RANKLOCK_LLM_API_KEY).
- ``local``: SmolLM2-135M-Instruct on the CPU (``ranklock[local-llm]``); small and often wrong.
"""

from __future__ import annotations

from ...errors import ConfigError
from ..model import Generator

__all__ = ["NAMES", "PAID", "logged_generator", "resolve_generator"]

NAMES = ("extractive", "extractive-v5", "extractive-v4", "extractive-v3", "extractive-v2", "local", "openai")

#: Generators whose every call is billed to the operator (an LLM API key): a served request needs the
#: token scope ``paid-generator`` to choose one (ranklock.http).
PAID = frozenset({"openai"})


def resolve_generator(spec: str | Generator) -> Generator:
    """A generator by name, or ``spec`` itself when it already is one."""
    if not isinstance(spec, str):
        if isinstance(spec, Generator):
            return spec
        raise ConfigError(f"{spec!r} is not a generator (it needs name, info() and generate()); pass a name.")
    if spec == "extractive":
        from .extractive import ExtractiveGenerator

        return ExtractiveGenerator()
    if spec == "extractive-v5":
        from .extractive_v5 import ExtractiveV5Generator

        return ExtractiveV5Generator()
    if spec == "extractive-v4":
        from .extractive_v4 import ExtractiveV4Generator

        return ExtractiveV4Generator()
    if spec == "extractive-v3":
        from .extractive_v3 import ExtractiveV3Generator

        return ExtractiveV3Generator()
    if spec == "extractive-v2":
        from .extractive_v2 import ExtractiveV2Generator

        return ExtractiveV2Generator()
    if spec == "openai":
        from .openai import OpenAIGenerator

        return OpenAIGenerator()
    if spec == "local":
        from .local import LocalGenerator

        return LocalGenerator()
    raise ConfigError(f"unknown generator {spec!r}; use one of {', '.join(NAMES)}.")


def logged_generator(record: dict[str, object]) -> Generator:
    """The generator a logged answer names: by name, and for ``extractive`` by its rule version.

    An answer the extractive generator gave under an earlier rule is replayed with that rule,
    so the replay compares like with like and a rule change never reads as drift.
    """
    if record.get("name") == "extractive" and record.get("model") in (
        "extractive-v2",
        "extractive-v3",
        "extractive-v4",
        "extractive-v5",
    ):
        return resolve_generator(str(record["model"]))
    return resolve_generator(str(record.get("name")))

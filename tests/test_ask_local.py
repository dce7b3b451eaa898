"""The ``local`` generator runs the real SmolLM2-135M-Instruct (few tokens, so it stays short).

It needs the ``local-llm`` extra (``make check`` installs it before the tests: ``make test-deps``).
Without it this test fails with the generator's own instruction instead of skipping: the model must
really run in ``make check``.
"""

from __future__ import annotations

import hashlib

import pytest

from fakes import use_hash_embedder
from ranklock import Engine
from ranklock.ask.abstention import RULE_VERSION as ABSTENTION_RULE
from ranklock.ask.generators.local import LABEL, LocalGenerator, gguf_path
from ranklock.ask.model import ABSTAIN
from ranklock.errors import GenerationError
from test_ask import journal

MESSAGES = [
    {"role": "system", "content": "Answer in one short sentence."},
    {"role": "user", "content": "What colour is the sky on a clear day?"},
]


@pytest.mark.slow
def test_local_model_runs_greedy_and_is_recorded(engine: Engine, capfd: pytest.CaptureFixture[str]) -> None:
    gen = LocalGenerator(max_new_tokens=6)
    info = gen.info()  # loads the model: no progress bar may reach the user's stderr
    assert "it/s" not in capfd.readouterr().err
    assert info.name == "local" and info.model == LABEL == "SmolLM2-135M-Instruct: small and often wrong"
    assert info.checksum == hashlib.sha256(gguf_path().read_bytes()).hexdigest()
    assert info.params == {
        "max_new_tokens": 6,
        "decoding": "greedy",
        "template": "ask-v2",
        "abstention": ABSTENTION_RULE,  # the abstention rule every generator shares (ranklock.ask.abstention)
    }
    first = gen.complete(MESSAGES)
    assert first.strip() and 1 <= gen.last["tokens"] <= 6
    assert gen.complete(MESSAGES) == first  # greedy decoding: the same prompt gives the same reply
    # A reply that does not open a JSON object stops there: it is rejected at once, not after 64 tokens.
    long = LocalGenerator(max_new_tokens=64)
    long.complete(MESSAGES)
    assert long.last["tokens"] <= 3

    # Through Ask: a validated answer, or a rejection that says why (6 tokens never hold the JSON).
    name = "t_ask_local"
    engine.create_collection(name, fields=["lang:keyword", "date:date"], embedder=use_hash_embedder(engine))
    engine.ingest(name, journal(), replace=True)
    try:
        ans = engine.ask(name, "Where did Oksana Vrell move?", chunks=1, generator=gen)
    except GenerationError as exc:
        assert str(exc).startswith(f"the reply of {LABEL} is not the JSON object the prompt asks for")
        row = engine.db.fetchone(
            "SELECT status, error FROM ranklock.answer_log WHERE collection = %s ORDER BY id DESC LIMIT 1", [name]
        )
        assert row == {"status": "rejected", "error": str(exc)}
    else:
        assert ans.generator == info and (ans.citations or ans.answer.startswith(ABSTAIN))

"""Languages and accent policy: Portuguese and Spanish with diacritics, recorded with the snapshot."""

from __future__ import annotations

import pytest

from lexical_helpers import lexical, use_hash_embedder
from ranklock import ConfigError, Document, Engine

PT = [
    Document("pt-1", "Plano de ação", "A ação rápida da equipe de manutenção evitou a falha."),
    Document("pt-2", "Relatório", "O relatório descreve a acao corretiva, escrita sem acentos."),
    Document("pt-3", "Outro", "Informações sobre o orçamento anual da organização."),
]
ES = [
    Document("es-1", "Canción", "La canción del niño ganó el concurso de música."),
    Document("es-2", "Cancion", "Una cancion para ninos, escrita sin tildes."),
    Document("es-3", "Otro", "El presupuesto de la organización para el próximo año."),
]


def make(engine: Engine, name: str, docs: list[Document], language: str, accent: str) -> str:
    emb = use_hash_embedder(engine)
    engine.ingest(
        name, docs, replace=True, create={"embedder": emb, "index": "exact", "language": language, "accent": accent}
    )
    return name


def ids(engine: Engine, name: str, query: str) -> list[str]:
    return sorted(d for d, _, _ in lexical(engine, name, query))


def test_portuguese_accent_insensitive_matches_both_spellings(engine: Engine, cname: str) -> None:
    name = make(engine, cname, PT, "portuguese", "insensitive")
    assert ids(engine, name, "acao") == ["pt-1", "pt-2"]
    assert ids(engine, name, "ação") == ["pt-1", "pt-2"]
    # Stemming is Portuguese: "orcamentos" finds "orçamento"; "manutencao" finds "manutenção".
    assert ids(engine, name, "orcamentos") == ["pt-3"]
    assert ids(engine, name, "manutencao") == ["pt-1"]
    # Portuguese stop words are dropped: "da" and "de" alone are no query.
    res = engine.search(name, "da de o", k=3, mode="hybrid")
    assert res.warnings == ["query has only stop words: the lexical branch was skipped"]


def test_portuguese_accent_sensitive_keeps_them_apart(engine: Engine, cname: str) -> None:
    name = make(engine, cname, PT, "portuguese", "sensitive")
    assert ids(engine, name, "acao") == ["pt-2"]
    assert ids(engine, name, "ação") == ["pt-1"]


def test_spanish_accent_insensitive_and_sensitive(engine: Engine, cname: str) -> None:
    ins = make(engine, cname + "_i", ES, "spanish", "insensitive")
    assert ids(engine, ins, "cancion") == ["es-1", "es-2"]
    assert ids(engine, ins, "nino") == ["es-1", "es-2"]
    assert ids(engine, ins, "niños") == ["es-1", "es-2"]
    sen = make(engine, cname + "_s", ES, "spanish", "sensitive")
    assert ids(engine, sen, "niño") == ["es-1"]
    assert ids(engine, sen, "ninos") == ["es-2"]
    # The Spanish Snowball stemmer itself strips acute accents (á é í ó ú), so even an
    # accent-sensitive collection finds "canción" for "cancion"; ñ is a letter of its own.
    assert ids(engine, sen, "cancion") == ["es-1", "es-2"]


def test_language_and_accent_are_recorded(engine: Engine, cname: str) -> None:
    name = make(engine, cname, ES, "spanish", "insensitive")
    res = engine.search(name, "canción", k=2, mode="lexical")
    assert (res.params["language"], res.params["accent"]) == ("spanish", "insensitive")
    snap = engine.db.fetchone(
        "SELECT manifest FROM ranklock.snapshots WHERE id = %s", [engine.collection(name).active_snapshot_id]
    )
    assert snap is not None
    ts = snap["manifest"]["text_search"]
    assert (ts["language"], ts["accent"], ts["analyzer"]) == ("spanish", "insensitive", "pg-ts/2")


def test_any_text_search_configuration_and_a_clear_error_otherwise(engine: Engine, cname: str) -> None:
    name = make(engine, cname, PT, "simple", "sensitive")
    # 'simple' neither stems nor drops stop words: "da" is a term here.
    assert "pt-1" in ids(engine, name, "da")
    with pytest.raises(ConfigError) as exc:
        engine.create_collection(cname + "_x", language="klingon")
    assert str(exc.value).startswith("text-search language 'klingon' is not a PostgreSQL text-search configuration")

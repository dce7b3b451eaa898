"""Domain packs: the planner knows a domain only through the pack the Engine hands it.

Only a collection that declares the resume pack's signature gets the resume hints and
vocabularies ("k8s" is "kubernetes" there); a collection that merely has a field called
``skills`` keeps the generic planner.  Protected attributes are refused whatever the pack:
a pack can add a rule, never remove one.
"""

from __future__ import annotations

import pytest

from fakes import use_hash_embedder
from ranklock import Engine
from ranklock.domains import pack_for
from ranklock.domains.journal.schema import JOURNAL_FIELDS
from ranklock.domains.resumes.load import CSV_FIELDS
from ranklock.domains.resumes.pack import PACK as RESUME_PACK
from ranklock.domains.resumes.schema import RESUME_FIELDS
from ranklock.ingest.loaders import Document
from ranklock.plan import build_schema, extract_plan, validate_plan
from ranklock.plan.pack import GENERIC, DomainPack, concept

K8S = {"field": "skills", "op": "has", "value": "kubernetes"}


@pytest.mark.parametrize(
    ("fields", "pack"),
    [
        (list(RESUME_FIELDS), "resumes"),
        (list(CSV_FIELDS), "resumes"),
        ([f for f in RESUME_FIELDS if not f.startswith("seniority")], "resumes"),
        (list(JOURNAL_FIELDS), "journal"),
        (["skills:keyword[]"], "generic"),
        (["year:int", "tags:keyword[]"], "generic"),
    ],
)
def test_pack_for_picks_the_pack_whose_signature_the_collection_declares(fields: list[str], pack: str) -> None:
    assert pack_for(fields).name == pack


def _ingest(engine: Engine, name: str, fields: list[str]) -> None:
    engine.create_collection(name, fields=fields, embedder=use_hash_embedder(engine))
    meta = {"skills": ["kubernetes", "python"], "years_experience": 6.0}
    meta = {k: v for k, v in meta.items() if any(f.startswith(k + ":") for f in fields)}
    engine.ingest(name, [Document("c1", "", "Platform engineer running kubernetes clusters.", meta)])


def test_only_a_resume_collection_reads_k8s_as_kubernetes(engine: Engine, cname: str) -> None:
    _ingest(engine, cname + "_r", ["skills:keyword[]", "years_experience:float"])
    _ingest(engine, cname + "_d", ["skills:keyword[]"])

    resumes = engine.plan(cname + "_r", "k8s engineers")
    assert resumes.kind == "answer" and resumes.filter == K8S

    docs = engine.plan(cname + "_d", "k8s engineers")
    assert docs.kind == "answer"
    assert docs.constraints == []
    assert docs.ranking_text == "k8s engineers"


def test_the_resume_vocabulary_is_known_before_a_value_is_stored_only_in_resume_collections() -> None:
    vocab = {"skills": RESUME_PACK.vocabulary["skills"]}
    with_pack = build_schema(["skills:keyword[]", "years_experience:float"], vocab, RESUME_PACK)
    assert validate_plan(extract_plan("k8s", with_pack), with_pack).filter == K8S
    generic = build_schema(["skills:keyword[]"], vocab)
    assert generic.pack is GENERIC
    assert extract_plan("k8s", generic).constraints == []


def test_a_pack_adds_protected_rules_and_cannot_remove_the_general_ones() -> None:
    caste = DomainPack("castes", protected=(("caste", r"\bcaste\b"),))
    schema = build_schema(["skills:keyword[]"], {"skills": ["python"]}, caste)
    plan = extract_plan("python developers of a high caste", schema)
    assert (plan.kind, plan.attribute, plan.phrase) == ("refusal", "caste", "caste")
    assert plan.reason == (
        "caste is a protected attribute; ranklock never selects or ranks candidates on it. "
        "Describe the job-related skills or experience you need instead."
    )
    # The same request under the generic pack is no refusal: the rule came from the pack.
    assert extract_plan("python developers of a high caste", build_schema(["skills:keyword[]"])).kind != "refusal"
    # The general rules hold under every pack, a pack with no rules of its own included.
    for pack in (GENERIC, caste, RESUME_PACK, DomainPack("empty")):
        young = extract_plan("young python developers", build_schema(["skills:keyword[]"], {}, pack))
        assert (young.kind, young.attribute) == ("refusal", "age")


def test_a_pack_adds_concepts_and_the_general_ones_still_ask() -> None:
    pets = DomainPack(
        "pets",
        concepts=(concept("temperament", r"\bfriendly\b", "{phrase!r} is not recorded (fields: {fields}). Drop it?"),),
    )
    schema = build_schema(["species:keyword"], {"species": ["cat", "dog"]}, pets)
    plan = extract_plan("friendly dog", schema)
    assert (plan.kind, plan.phrase, plan.question) == (
        "clarification_request",
        "friendly",
        "'friendly' is not recorded (fields: species). Drop it?",
    )
    assert extract_plan("friendly dog", build_schema(["species:keyword"], {"species": ["cat", "dog"]})).kind == "answer"
    # The general table (a vague "senior") applies under the pack as under the generic one.
    for pack in (GENERIC, pets):
        senior = extract_plan("senior dog", build_schema(["species:keyword"], {"species": ["cat", "dog"]}, pack))
        assert (senior.kind, senior.phrase) == ("clarification_request", "senior")

-- Typed fields inferred at a collection's first ingest (issue 28): which fields the metadata
-- agreed on, and each key left untyped with the reason.  NULL for a collection whose fields
-- were declared (`collection create`, `--field`, `create={"fields": [...]}`).  Written into
-- every manifest of the collection, so how its fields came about is part of what it pins.
ALTER TABLE ranklock.collections ADD COLUMN field_inference jsonb;

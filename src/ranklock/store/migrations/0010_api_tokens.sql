-- API tokens (issue 27): who may call `ranklock serve` when it listens beyond loopback.
--
-- A token is shown once, when it is created; only the sha256 of its secret is
-- stored.  The secret is 256 random bits, so a plain hash is as strong as a slow
-- one here: nobody can guess the preimage of a random 256-bit value.  `prefix`
-- (the token's first characters) lets `token list` and the server log name a
-- token without showing it.  A revoked token stays, so a request that presents
-- it is told it was revoked, not that it never existed.
CREATE TABLE ranklock.api_tokens (
    id             bigserial PRIMARY KEY,
    name           text NOT NULL,
    prefix         text NOT NULL,
    secret_sha256  text NOT NULL UNIQUE,
    scopes         text[] NOT NULL CHECK (cardinality(scopes) > 0 AND scopes <@ ARRAY['read', 'paid-generator']),
    created_at     timestamptz NOT NULL DEFAULT now(),
    revoked_at     timestamptz
);

-- One live token per name; a revoked name can be given to a new token.
CREATE UNIQUE INDEX api_tokens_live_name ON ranklock.api_tokens (name) WHERE revoked_at IS NULL;

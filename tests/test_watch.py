"""`ranklock ingest FOLDER --watch` and Ctrl-C during an ingest, as real processes on real files.

Each test starts `ranklock` as a user would, with an embedding endpoint of the test's own
(tests/fakes.HashEmbeddingServer: a process cannot be handed a Python embedder), changes files,
watches searches follow in this process, and sends SIGINT as a terminal's Ctrl-C does.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from fakes import HashEmbeddingServer
from ranklock import Engine
from ranklock.errors import NotFound

RANKLOCK = str(Path(sys.executable).parent / "ranklock")


def _env() -> dict[str, str]:
    # No command service: the process under test is the one that gets the signal.
    return {**os.environ, "RANKLOCK_CLI_SERVICE": "0", "NO_COLOR": "1", "COLUMNS": "200"}


class Lines:
    """A process's output, read as it comes (so a full pipe never blocks it)."""

    def __init__(self, stream: object) -> None:
        self.lines: list[str] = []
        self.thread = threading.Thread(target=self._read, args=(stream,), daemon=True)
        self.thread.start()

    def _read(self, stream: object) -> None:
        for line in stream:  # type: ignore[attr-defined]
            self.lines.append(line)

    @property
    def text(self) -> str:
        return "".join(self.lines)


def _until(what: str, check: Callable[[], bool], timeout: float = 90.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            pytest.fail(f"waited {timeout:g} s for {what}")
        time.sleep(0.1)


def _hits(engine: Engine, name: str, query: str) -> list[str]:
    return [h.doc_id for h in engine.search(name, query, mode="lexical", k=10).hits]


def test_watch_follows_the_folder_until_ctrl_c(engine: Engine, rl_home: Path, tmp_path: Path) -> None:
    name = f"watched{os.getpid()}"
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "kiln.md").write_text("Bisque firing at cone 04 takes eight hours.", encoding="utf-8")
    (notes / "glaze.md").write_text("Celadon glaze needs a reduction atmosphere.", encoding="utf-8")
    with HashEmbeddingServer() as emb:
        proc = subprocess.Popen(
            [RANKLOCK, "ingest", name, str(notes), "--watch", "--home", str(rl_home), "--embedder", emb.spec],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=_env(),
        )
        out, err = Lines(proc.stdout), Lines(proc.stderr)
        try:
            _until("the watch to start", lambda: "watching " in out.text or proc.poll() is not None)
            assert proc.poll() is None, err.text
            assert _hits(engine, name, "celadon") == ["glaze.md"]
            # A new note, a changed one, a deleted one: each searchable (or gone) a moment later.
            (notes / "clay.md").write_text("Slake dry clay scraps in water to recycle them.", encoding="utf-8")
            _until("the new note", lambda: _hits(engine, name, "slake") == ["clay.md"])
            (notes / "kiln.md").write_text("Glaze firing at cone 6 takes ten hours.", encoding="utf-8")
            _until(
                "the changed note",
                lambda: _hits(engine, name, "cone") == ["kiln.md"] and not _hits(engine, name, "bisque"),
            )
            (notes / "glaze.md").unlink()
            _until("the deleted note to go", lambda: _hits(engine, name, "celadon") == [])
            _until("the report of the deletion", lambda: "removed 1 (gone from" in out.text)  # after its merge
            # Hidden folders (an editor's state) are not watched: no snapshot for them.
            active = engine.collection(name).active_snapshot_id
            (notes / ".obsidian").mkdir()
            (notes / ".obsidian" / "workspace.json").write_text("{}", encoding="utf-8")
            time.sleep(1.5)
            assert engine.collection(name).active_snapshot_id == active
        finally:
            proc.send_signal(signal.SIGINT)
            rc = proc.wait(timeout=60)
            for lines, stream in ((out, proc.stdout), (err, proc.stderr)):
                lines.thread.join(timeout=10)
                stream.close()  # type: ignore[union-attr]
    assert rc == 0, err.text
    text = " ".join(out.text.split())
    # Each change cost what it changed: one document written, the others shared with the parent.
    assert "added 1, changed 0, removed 0, unchanged 2; embedded 1," in text
    assert "added 0, changed 1, removed 0, unchanged 2; embedded 1," in text
    assert "added 0, changed 0, removed 1, unchanged 2; embedded 0," in text
    assert f"removed 1 (gone from {os.path.realpath(notes)}): glaze.md" in text
    last = out.lines[-1].strip()
    assert re.fullmatch(
        rf"stopped watching {re.escape(os.path.realpath(notes))} after \d+s: 3 changes ingested \(added 1, changed 1, "
        rf"removed 1\); '{name}' has snapshot {active} active\.",
        last,
    ), last
    assert "Traceback" not in err.text


def test_ctrl_c_during_an_ingest_says_what_it_kept_and_leaves_no_collection(
    engine: Engine, rl_home: Path, tmp_path: Path
) -> None:
    name = f"interrupted{os.getpid()}"
    notes = tmp_path / "notes"
    notes.mkdir()
    for i in range(100):
        (notes / f"n{i:03}.md").write_text(f"Note {i}: a line of its own about firing number {i}.", encoding="utf-8")
    with HashEmbeddingServer(delay=0.4) as emb:
        proc = subprocess.Popen(
            [RANKLOCK, "ingest", name, str(notes), "--home", str(rl_home), "--embedder", emb.spec],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=_env(),
        )
        # The first batch (32 chunks) is embedded and committed, the second asked for: Ctrl-C then.
        _until("two embedding batches", lambda: emb.requests >= 2 or proc.poll() is not None)
        proc.send_signal(signal.SIGINT)
        _, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 130, stderr
    last = stderr.strip().splitlines()[-1]
    assert re.fullmatch(
        rf"interrupted while embedding \((\d+)/100\): the new collection '{name}' was not created; the \1 vectors "
        r"computed are kept in the embedding cache, so the next ingest starts from there\.",
        last,
    ), stderr
    assert "Traceback" not in stderr
    with pytest.raises(NotFound):
        engine.collection(name)

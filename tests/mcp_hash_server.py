"""`ranklock mcp` exactly as installed, in a process that can also resolve the tests' HashEmbedder by its id.

The MCP tests' collections are embedded with tests/fakes.py's HashEmbedder; a
subprocess cannot be monkeypatched from the test, so this launcher does what
the in-process CLI tests' ``cli_hash_embedder`` fixture does, then hands over
to the real command line: ``python tests/mcp_hash_server.py mcp --home H``.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import ranklock.embed.loaded
from fakes import HashEmbedder
from ranklock.cli import main

_real = ranklock.embed.loaded.resolve_embedder
ranklock.embed.loaded.resolve_embedder = lambda spec: HashEmbedder() if spec == HashEmbedder.id else _real(spec)  # type: ignore[assignment]

if __name__ == "__main__":
    main()

"""The lock file that says a local service is alive: held by the service for its life, probed by clients.

An ``flock`` on the service's lock file, which the kernel drops when the process dies, so a killed
service never leaves a stale one.  The embedding service (ranklock.embed.service) and the command
service and its client (ranklock.cli.service, ranklock.cli.client) use it.  Standard library only,
and ``fcntl`` imported where it is used: the command client is what the ``ranklock`` entry point
imports, and it must import on any platform.
"""

from __future__ import annotations

import os
import time

__all__ = ["held", "take"]


def held(path: str | os.PathLike[str]) -> bool:
    """Whether a process holds the lock of ``path`` (False when the file cannot be opened)."""
    import fcntl

    try:
        fh = open(path, "a+")  # noqa: SIM115 - closed below, after the probe
    except OSError:
        return False
    with fh:
        try:
            fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        fcntl.flock(fh.fileno(), fcntl.LOCK_UN)
    return False


def take(fd: int) -> bool:
    """The lock of the open file ``fd`` for this process, or False when another process holds it.

    A few tries: :func:`held` takes the lock for a moment to probe it, and a service started in
    that moment must not take the probe for a rival and exit.
    """
    import fcntl

    for _ in range(25):
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return True
        except BlockingIOError:
            time.sleep(0.02)
    return False

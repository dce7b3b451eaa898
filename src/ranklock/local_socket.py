"""A Unix socket only its owner reaches: how ranklock's local services listen and how their clients connect.

The embedding service (ranklock.embed.service) and the command service (ranklock.cli.service) each
listen on a socket in a folder of the data directory.  What keeps another user of the machine out
is written once, here:

* the folder is this user's, mode 0700 (:func:`private_dir`), and the socket is born 0600
  (:func:`listen`);
* a client connects only to a socket of this user in such a folder, and checks after connecting
  that the process at the other end runs as this user (SO_PEERCRED, :func:`peer_uid`), which no
  renaming between the checks can fool (:func:`connect`);
* a service answers only clients of its own user (the same check, from its side).

Standard library only: the command client is what the ``ranklock`` entry point imports.
"""

from __future__ import annotations

import contextlib
import os
import socket
import stat
import struct
from collections.abc import Iterator

__all__ = ["address", "connect", "listen", "make_private_dir", "peer_pid", "peer_uid", "private_dir"]


@contextlib.contextmanager
def address(path: str | os.PathLike[str]) -> Iterator[str]:
    """An address for ``path`` that fits AF_UNIX's 107 bytes.

    A long data directory (a test's temporary folder) is reached through ``/proc/self/fd``: the folder
    is opened and the socket named relative to that descriptor.
    """
    path = os.fspath(path)
    if len(os.fsencode(path)) < 100:
        yield path
        return
    fd = os.open(os.path.dirname(path), os.O_PATH | os.O_DIRECTORY)
    try:
        yield f"/proc/self/fd/{fd}/{os.path.basename(path)}"
    finally:
        os.close(fd)


def private_dir(path: str | os.PathLike[str]) -> bool:
    """Whether ``path`` is a real folder of this user that nobody else may enter (mode 0700 or stricter)."""
    try:
        st = os.lstat(path)
    except OSError:
        return False
    return stat.S_ISDIR(st.st_mode) and st.st_uid == os.geteuid() and not st.st_mode & 0o077


def make_private_dir(path: str | os.PathLike[str]) -> bool:
    """Create ``path`` (and its parents) mode 0700 if it is missing; whether it is then :func:`private_dir`.

    An existing folder of this user is made 0700; one of another user is left as it is (and is not private).
    """
    with contextlib.suppress(OSError):
        os.makedirs(path, mode=0o700, exist_ok=True)
        if os.lstat(path).st_uid == os.geteuid():
            os.chmod(path, 0o700)
    return private_dir(path)


def peer_uid(sock: socket.socket) -> int:
    """The user id of the process at the other end of a connected Unix socket (SO_PEERCRED)."""
    creds = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    return int(struct.unpack("3i", creds)[1])


def peer_pid(sock: socket.socket) -> int | None:
    """The pid of the process at the other end of ``sock`` (SO_PEERCRED), or None."""
    try:
        pid, _uid, _gid = struct.unpack("3i", sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, 12))
    except (OSError, AttributeError, struct.error):
        return None
    return int(pid) or None


def connect(path: str | os.PathLike[str], timeout: float) -> socket.socket | None:
    """A connection to the service of this user listening on ``path``, or None.

    None also when the folder or the socket is not this user's: a socket planted by someone else
    would receive what we send (our texts, our environment, our terminal).
    """
    path = os.fspath(path)
    try:
        st = os.lstat(path)
    except OSError:
        return None
    if not private_dir(os.path.dirname(path)) or not stat.S_ISSOCK(st.st_mode) or st.st_uid != os.geteuid():
        return None
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(timeout)
    try:
        with address(path) as addr:
            sock.connect(addr)
        if peer_uid(sock) != os.geteuid():
            raise OSError("the service runs as another user")
    except OSError:  # a stale socket (ECONNREFUSED), a full backlog, another user's service
        sock.close()
        return None
    return sock


def listen(path: str | os.PathLike[str], backlog: int = 64) -> socket.socket:
    """A socket listening on ``path``, born mode 0600 (the caller holds the service's lock and removed a stale file)."""
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    old_umask = os.umask(0o177)
    try:
        with address(path) as addr:
            listener.bind(addr)
    except BaseException:
        listener.close()
        raise
    finally:
        os.umask(old_umask)
    listener.listen(backlog)
    return listener

"""The ranklock home: the data directory a command works in, found as git finds its repository.

A command run from another folder must find the collections the user made, not start a new empty
server where it happens to run.  So, the first rule that applies:

1. a home given (``--home``, ``Engine(home=...)``, ``RANKLOCK_HOME``): that folder, relative to the
   working folder;
2. the nearest folder named ``.ranklock`` in the working folder or one above it, as git finds
   ``.git`` (so a project keeps its own home: ``--home .ranklock`` on its first command);
3. the per-user home, ``$XDG_DATA_HOME/ranklock`` (by default ``~/.local/share/ranklock``).

A home *exists* once its embedded server has been initialised (``pgdata/PG_VERSION``).  Commands
that only read refuse a home that does not exist (:func:`missing_home_message`) instead of
creating one, so ``search --home /typo/path`` starts nothing and leaves nothing behind.

Standard library only: the ``ranklock`` entry point (ranklock.cli.client) resolves the home before it
imports anything else.

    >>> find_home(start="/work/project/notes", environ={"HOME": "/home/ana"})   # doctest: +SKIP
    Home(path=PosixPath('/home/ana/.local/share/ranklock'), how='per-user default: no .ranklock folder in ...')
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

__all__ = ["HOME_DIR", "HOME_ENV", "PER_USER", "Home", "find_home", "home_exists", "missing_home_message", "user_home"]

#: The folder name a project's home has, looked for upward from the working folder.
HOME_DIR = ".ranklock"
#: The environment variable that names the home (settings.ENV declares it).
HOME_ENV = "RANKLOCK_HOME"
#: How :func:`find_home` says it fell back to :func:`user_home`.
PER_USER = "per-user default"


@dataclass(frozen=True)
class Home:
    """A resolved home: its absolute path and which rule chose it (said by ``ranklock db status``)."""

    path: Path
    #: ``given`` (an option or argument), ``RANKLOCK_HOME``, ``found upward from <folder>``, or
    #: ``per-user default: no .ranklock folder in <folder> or above it``.
    how: str


def user_home(environ: Mapping[str, str] | None = None) -> Path:
    """The per-user home: ``$XDG_DATA_HOME/ranklock``, else ``~/.local/share/ranklock`` (the XDG base-directory rule)."""
    env = os.environ if environ is None else environ
    data = env.get("XDG_DATA_HOME") or ""
    # The XDG rule: a relative XDG_DATA_HOME is invalid and ignored.
    if not os.path.isabs(data):
        data = os.path.join(env.get("HOME") or os.path.expanduser("~"), ".local", "share")
    return Path(data) / "ranklock"


def find_home(
    given: str | os.PathLike[str] | None = None,
    *,
    start: str | os.PathLike[str] | None = None,
    environ: Mapping[str, str] | None = None,
) -> Home:
    """The home a command uses (see the module docstring), from ``given``, the environment and ``start`` (the cwd)."""
    env = os.environ if environ is None else environ
    cwd = Path(os.path.abspath(start if start is not None else os.getcwd()))
    if given is not None and os.fspath(given) != "":
        return Home(_absolute(cwd, given), "given")
    if env.get(HOME_ENV):
        return Home(_absolute(cwd, env[HOME_ENV]), HOME_ENV)
    for folder in (cwd, *cwd.parents):
        if (folder / HOME_DIR).is_dir():
            return Home(folder / HOME_DIR, f"found upward from {cwd}")
    return Home(user_home(env), f"{PER_USER}: no {HOME_DIR} folder in {cwd} or above it")


def _absolute(cwd: Path, path: str | os.PathLike[str]) -> Path:
    return Path(os.path.normpath(cwd / os.path.expanduser(os.fspath(path))))


def home_exists(path: str | os.PathLike[str]) -> bool:
    """Whether ``path`` is a home with a database: its embedded server initialised (a first write made it),
    or a local Citus cluster (``ranklock db cluster create``)."""
    return (Path(path) / "pgdata" / "PG_VERSION").is_file() or (Path(path) / "cluster.json").is_file()


def missing_home_message(home: Home) -> str:
    """Why a read command stops on a home that does not exist, and what to do (nothing was created)."""
    where = f"no ranklock home at {home.path} ({home.how})"
    return (
        f"{where}; nothing was created. Check the path (--home, RANKLOCK_HOME), or make the home with a first "
        "write: `ranklock ingest NAME FILE` (or `ranklock demo`)."
    )

"""Composition results kept on disk, so a fresh process can skip Hydra's cold first composition.

Hydra's first composition in a process (building the defaults list from ~40 files, then merging them)
is most of the CLI's start-up. Its results depend only on the bytes of the config files, the config
store and the versions of the code that reads them, so they are kept between processes under
``${XDG_CACHE_HOME:-~/.cache}/verl_roles/compose-v1/``, one file per result.

An entry's name is the SHA-256 of its key, and the key is a digest of everything the result depends
on (:func:`files_digest`, :func:`config_store_digest`) plus the inputs of the step (config name, group
choices...). Content, not modification times: an edited file gives a new key, so a stale entry is
never found. Each entry starts with a format line and carries its full key, and is read only when it
is a regular file of the current user in a directory only that user can write; anything else (a
corrupt, truncated, foreign or unreadable entry) counts as a miss and is computed again. Entries are
written atomically (a temporary file, then a rename); when the directory cannot be written the cache
is skipped silently.

Entries are pickles, which is why the cache lives in the user's own cache directory and nowhere
shared. ``VERL_ROLES_NO_DISK_CACHE=1`` turns this cache off (the in-process caches stay);
``VERL_ROLES_NO_CACHE=1`` turns off every cache.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import os
import pickle
import platform
import stat
import sys
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import Any

# Set VERL_ROLES_NO_DISK_CACHE=1 to keep nothing on disk (each process composes from the files).
NO_DISK_CACHE_ENV = "VERL_ROLES_NO_DISK_CACHE"

_FORMAT = b"verl_roles composition cache 1\n"
_SUBDIR = "compose-v1"
# Past this many entries the oldest are removed on the next write (an entry is ~10-100 KB).
_MAX_ENTRIES = 256
_KEEP_ENTRIES = 192


def enabled() -> bool:
    """False when ``VERL_ROLES_NO_DISK_CACHE`` is set (to anything but ``0``), and on a system without
    user ids to check an entry's owner against."""
    return os.environ.get(NO_DISK_CACHE_ENV, "") in ("", "0") and hasattr(os, "getuid")


def cache_directory() -> Path | None:
    """``$XDG_CACHE_HOME/verl_roles/compose-v1``, with ``~/.cache`` when ``XDG_CACHE_HOME`` is unset;
    None when that is not an absolute path (no home directory, or a relative ``XDG_CACHE_HOME``, which
    the XDG specification says to ignore)."""
    base = os.environ.get("XDG_CACHE_HOME") or ""
    if not os.path.isabs(base):
        base = os.path.join(os.path.expanduser("~"), ".cache")
    if not os.path.isabs(base):
        return None
    return Path(base) / "verl_roles" / _SUBDIR


@functools.cache
def _code_versions() -> tuple[str, ...]:
    """Versions of everything that reads or composes the files, and our own composition code."""
    import hydra
    import omegaconf
    import yaml

    from verl_roles import __version__

    own = hashlib.sha256()
    for module in ("hydra_context.py", "disk_cache.py"):
        own.update(Path(__file__).with_name(module).read_bytes())
    return (
        __version__,
        own.hexdigest(),
        hydra.__version__,
        omegaconf.__version__,
        yaml.__version__,
        str(getattr(yaml, "__with_libyaml__", False)),
        platform.python_implementation(),
        sys.version,
    )


def tree_digest(directory: str) -> str:
    """SHA-256 over the relative path of every folder and the relative path and bytes of every file
    under ``directory`` (Python's ``__pycache__`` folders aside: Hydra never reads them)."""
    digest = hashlib.sha256()
    for root, dirs, files in os.walk(directory):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__")
        relative = os.path.relpath(root, directory)
        digest.update(b"D" + relative.encode("utf-8", "surrogateescape") + b"\0")
        for name in sorted(files):
            data = Path(root, name).read_bytes()
            digest.update(b"F" + os.path.join(relative, name).encode("utf-8", "surrogateescape") + b"\0")
            digest.update(len(data).to_bytes(8, "little") + data)
    return digest.hexdigest()


def config_store_digest() -> str | None:
    """SHA-256 of Hydra's config store (what ``structured://`` sources read), or None when something
    in it cannot be pickled."""
    from hydra.core.config_store import ConfigStore

    try:
        data = pickle.dumps(ConfigStore.instance().repo, protocol=4)
    except Exception:  # noqa: BLE001 - any object a user stored; not cacheable then
        return None
    return hashlib.sha256(data).hexdigest()


def files_digest(sources: Iterable[tuple[str, str, str, str | None]]) -> str | None:
    """The digest of everything but the config store that a composition depends on, for config sources
    given as ``(scheme, provider, path, directory)``, ``directory`` being the folder a file-backed
    source reads.

    Covers the code versions, each source in search-path order and the bytes of every file of every
    source folder (the config store, ``structured://``, is named here and read by
    :func:`config_store_digest`). None when another kind of source contributes (its content cannot be
    checked, so nothing is cached for it) or a file cannot be read.
    """
    try:
        digest = hashlib.sha256(repr(_code_versions()).encode())
    except OSError:  # our own sources cannot be read (e.g. a zipped install): nothing to key on
        return None
    for scheme, provider, path, directory in sources:
        if directory is not None:
            try:
                content = tree_digest(directory)
            except OSError:
                return None
        elif scheme == "structured":
            content = "config store"
        else:
            return None
        digest.update(repr((scheme, provider, path, directory, content)).encode())
    return digest.hexdigest()


def _private_directory(create: bool) -> Path | None:
    """The cache folder when it is ours alone (created 0700 if asked), else None."""
    directory = cache_directory()
    if directory is None:
        return None
    try:
        if create:
            directory.mkdir(parents=True, exist_ok=True, mode=0o700)
        info = directory.stat()
    except OSError:
        return None
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid() or info.st_mode & 0o022:
        return None
    return directory


def _entry_name(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest() + ".pickle"


def load(key: str) -> Any | None:
    """The payload stored under ``key``, or None for a missing, unreadable, corrupt or foreign entry."""
    if not enabled():
        return None
    directory = _private_directory(create=False)
    if directory is None:
        return None
    try:
        fd = os.open(directory / _entry_name(key), os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    except OSError:
        return None
    try:
        with os.fdopen(fd, "rb") as handle:
            info = os.fstat(handle.fileno())
            if not stat.S_ISREG(info.st_mode) or info.st_uid != os.getuid():
                return None
            data = handle.read()
        if not data.startswith(_FORMAT):
            return None
        # Our own file in our own 0700 folder (checked above), written by store() below.
        stored_key, payload = pickle.loads(data[len(_FORMAT):])  # noqa: S301
    except Exception:  # noqa: BLE001 - a damaged pickle can raise nearly anything: recompute
        return None
    return payload if stored_key == key else None


def store(key: str, payload: Any) -> None:
    """Keep ``payload`` under ``key``; silently nothing when the folder cannot be written."""
    if not enabled():
        return
    try:
        data = _FORMAT + pickle.dumps((key, payload), protocol=pickle.HIGHEST_PROTOCOL)
    except Exception:  # noqa: BLE001 - not picklable: simply not cached
        return
    directory = _private_directory(create=True)
    if directory is None:
        return
    tmp = None
    try:
        fd, tmp = tempfile.mkstemp(prefix=".tmp-", dir=directory)
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        os.replace(tmp, directory / _entry_name(key))
        tmp = None
        _prune(directory)
    except OSError:
        pass
    finally:
        if tmp is not None:
            with contextlib.suppress(OSError):
                os.unlink(tmp)


def _prune(directory: Path) -> None:
    """Remove the least recently written entries once there are more than ``_MAX_ENTRIES``."""
    entries = [entry for entry in os.scandir(directory) if entry.name.endswith(".pickle")]
    if len(entries) <= _MAX_ENTRIES:
        return
    entries.sort(key=lambda entry: entry.stat().st_mtime_ns)
    for entry in entries[: len(entries) - _KEEP_ENTRIES]:
        with contextlib.suppress(OSError):
            os.unlink(entry.path)

"""Files reach the disk whole: a set of files appears all at once, a user's file is replaced atomically
(or written into, when it is a FIFO or a device), and a failure leaves nothing half-written."""


from __future__ import annotations

import contextlib
import errno
import os
import shutil
import stat
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from verl_roles.base.errors import ConfigError, Problem

# Tests stop a run at a named point of a write (tests/test_run_dirs.py): when this variable names the
# point, the process says so on stderr and waits to be killed. Points: ``temp:NAME`` (the temporary file
# of NAME is written), ``renamed:NAME`` (NAME is in place), ``staged`` (every file of a run is in its
# staging folder), ``swap:aside`` (an old run was renamed aside, the new one not yet in place).
PAUSE_ENV = "VERL_ROLES_TEST_PAUSE_AT"
# Read once, when the process starts: a config cannot set it for a job (hydra.job.env_set).
_PAUSE_AT = os.environ.get(PAUSE_ENV)


def pause_point(name: str) -> None:
    if name == _PAUSE_AT:
        print(f"verl_roles: paused at {name}", file=sys.stderr, flush=True)
        time.sleep(120)


def make_dirs(folder: Path) -> list[Path]:
    """Create ``folder`` and its missing parents; return the ones created, outermost first."""
    missing = []
    while not folder.is_dir() and folder != folder.parent:
        missing.append(folder)
        folder = folder.parent
    created: list[Path] = []
    try:
        for made in reversed(missing):
            made.mkdir()
            created.append(made)
    except OSError as error:
        remove_created(created)
        raise unwritable(error, made) from None
    return created


def remove_tree(folder: Path) -> None:
    """Remove a folder of the protocol's own and everything in it, also when a umask (``umask 777``) gave
    its folders modes that forbid listing them: those are opened up first (they are ours)."""
    shutil.rmtree(folder, ignore_errors=True)
    if not os.path.lexists(folder) or os.path.islink(folder):
        return  # a link is never the protocol's own folder, and a mode is never changed through one
    _open_up(folder)
    shutil.rmtree(folder, ignore_errors=True)


def _open_up(folder: str | Path) -> None:
    with contextlib.suppress(OSError):
        os.chmod(folder, 0o700)
    with contextlib.suppress(OSError), os.scandir(folder) as entries:
        for entry in entries:
            if entry.is_dir(follow_symlinks=False):
                _open_up(entry.path)


def remove_created(created: Sequence[Path]) -> None:
    for folder in reversed(created):
        with contextlib.suppress(OSError):
            folder.rmdir()


def write_atomic(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` through a temporary file and a rename: no half-written file, and no
    temporary file left when it fails. A failure is a :class:`ConfigError` naming the path."""
    write_all_or_nothing([(path, text)])


def write_all_or_nothing(files: Sequence[tuple[Path, str]]) -> list[Path]:
    """Write every ``(path, text)``, in order, or none of them; returns the paths written.

    Each text first goes to a temporary file next to its path (``.NAME.XXXX.tmp``); only when every one
    is written are they renamed over their paths, in order, so the last path appears last. On any
    failure every temporary file is removed, and so is every path this call already renamed into place,
    and every folder it created.
    """
    created_dirs: list[Path] = []
    staged: list[tuple[Path, Path]] = []
    renamed: list[Path] = []
    current: Path | None = None
    try:
        for path, text in files:
            current = path
            created_dirs += make_dirs(path.parent)
            staged.append((_write_temporary(path, text), path))
            pause_point(f"temp:{path.name}")
        for tmp, path in staged:
            current = path
            os.replace(tmp, path)
            renamed.append(path)
            pause_point(f"renamed:{path.name}")
    except BaseException as error:
        for tmp, _ in staged:
            tmp.unlink(missing_ok=True)
        for path in renamed:
            path.unlink(missing_ok=True)
        remove_created(created_dirs)
        if isinstance(error, OSError):
            raise unwritable(error, current) from error
        raise
    return renamed


def _write_temporary(path: Path, text: str, mode: int | None = None) -> Path:
    fd, name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    tmp = Path(name)
    try:
        # mkstemp creates the file 0600; give it the mode an ordinary write would (umask applied).
        os.chmod(tmp, mode if mode is not None else 0o666 & ~current_umask())
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as handle:
            handle.write(text)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return tmp


def write_user_file(path: Path, text: str) -> Path:
    """Write ``text`` to a file the user named (``-o FILE``); returns the file written.

    A symbolic link is followed (the link stays, the file it names gets the text); a FIFO, a character
    device or a socket is written into, never replaced, and so is a file with other hard links or in a
    folder this user cannot write (as ``> FILE`` would); any other regular file is replaced atomically
    and keeps its permissions; a missing file is created (its folder must exist). A file this user may
    not write is refused, as ``> FILE`` refuses it (replacing it would get round its permissions), and
    so is a FIFO nobody reads yet (writing would wait for a reader forever).
    """
    target = Path(os.path.realpath(path)) if path.is_symlink() else path
    try:
        info = target.stat()
    except FileNotFoundError:
        info = None
    except OSError as error:
        raise unwritable(error, path) from None
    if info is not None and stat.S_ISDIR(info.st_mode):
        raise unwritable(OSError(errno.EISDIR, os.strerror(errno.EISDIR)), path)
    try:
        if info is not None and not os.access(target, os.W_OK):
            raise OSError(errno.EACCES, os.strerror(errno.EACCES))
        in_place = info is not None and (
            not stat.S_ISREG(info.st_mode)  # a FIFO, a device: written into, never replaced
            or info.st_nlink > 1  # a hard link: every name of the file sees the new text
            or not os.access(target.parent, os.W_OK | os.X_OK)  # a writable file in a folder that is not
        )
        if in_place:
            _write_into(target, text)
            return target
        if not target.parent.is_dir():
            raise OSError(errno.ENOENT, f"no folder {target.parent}")
        tmp = _write_temporary(target, text, stat.S_IMODE(info.st_mode) if info is not None else None)
        try:
            pause_point(f"temp:{target.name}")
            os.replace(tmp, target)
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise
        pause_point(f"renamed:{target.name}")
    except OSError as error:
        raise unwritable(error, path) from None
    return target


def _write_into(target: Path, text: str) -> None:
    """``text`` written into an existing file, FIFO or device. Opened without waiting: a FIFO that no
    process reads yet is refused (ENXIO) instead of waiting for a reader forever."""
    try:
        fd = os.open(target, os.O_WRONLY | os.O_TRUNC | os.O_NONBLOCK)
    except OSError as error:
        if error.errno == errno.ENXIO:
            what = "a FIFO (a named pipe) that no process is reading" if stat.S_ISFIFO(
                os.stat(target).st_mode) else "a socket or a device that cannot be opened for writing"
            raise OSError(errno.ENXIO, f"it is {what}") from None
        raise
    os.set_blocking(fd, True)
    with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as handle:
        handle.write(text)


def unwritable(error: OSError, path: Path | None = None) -> ConfigError:
    """A write that failed (full disk, read-only or missing folder...), as one paragraph naming the path
    and what to do."""
    where = path or error.filename
    reason = error.strerror or str(error)
    if error.errno == errno.ENOSPC:
        fix = "free some space on that disk, or write elsewhere (hydra.run.dir=DIR for the main job)"
    elif error.errno in (errno.EROFS, errno.EACCES, errno.EPERM):
        fix = "write to another folder (hydra.run.dir=DIR for the main job), or make this one writable"
    elif error.errno == errno.EFBIG:
        fix = "raise the file size limit (`ulimit -f`), or write elsewhere"
    elif error.errno in (errno.EISDIR, errno.ENOTDIR, errno.EEXIST):
        fix = "choose a path whose folders are folders and whose file name is not taken by a folder"
    elif error.errno == errno.ENAMETOOLONG:
        fix = "choose a shorter folder or file name (each part of a path is at most 255 bytes)"
    elif error.errno == errno.ENXIO:
        fix = "write to a regular file, or (a FIFO) start the process that reads it first (`cat FILE &`)"
    else:
        fix = "check the path, the disk and the permissions, then run again"
    key = str(where) if where else "the output folder (hydra.run.dir)"
    return ConfigError([Problem(key=key, message=f"cannot be written: {reason}", fix=fix)])


def current_umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask

"""The lock of a run folder: a file beside it, held with ``flock`` for as long as a claim lives. The
kernel drops it when the process ends, however it ends, so a killed run never leaves a folder locked."""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import stat
import time
from dataclasses import dataclass
from pathlib import Path

from verl_roles.base.errors import ConfigError, Problem
from verl_roles.runs.write_protocol.files import unwritable
from verl_roles.runs.write_protocol.marks import lock_path, read_small

_BUSY = (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES)


@dataclass
class Lock:
    path: Path
    fd: int

    def release(self) -> None:
        with contextlib.suppress(OSError):
            # Unlink while holding it: a run waiting on the old file sees it gone and takes a new one.
            if os.fstat(self.fd).st_ino == os.stat(self.path).st_ino:
                self.path.unlink()
        with contextlib.suppress(OSError):
            os.close(self.fd)


# How long a claim waits for a lock held only for a moment (another claim tidying up beside it, see
# verl_roles/runs/write_protocol/recovery.py) before it takes the holder for a run writing the folder.
_MOMENT = 0.5


def take(target: Path) -> Lock:
    """The lock of ``target``; a :class:`ConfigError` when another run holds it."""
    lock = try_take(target)
    waited = 0.0
    while lock is None and waited < _MOMENT:
        time.sleep(0.05)
        waited += 0.05
        lock = try_take(target)
    if lock is None:
        raise ConfigError([Problem(
            key=str(target),
            message=f"another verl_roles run{holder(target)} is writing this folder right now; nothing was "
            "written",
            fix="wait until that run ends, or write elsewhere (hydra.run.dir=DIR, or a new sweep "
            "folder with hydra.sweep.dir=DIR)",
        )])
    return lock


def try_take(target: Path) -> Lock | None:
    """The lock of ``target``, or None when another process holds it."""
    path = lock_path(target)
    while True:
        try:
            # Never through a link, never a FIFO or device: a lock file is truncated and written.
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK, 0o644)
        except OSError as error:
            raise _not_a_lock(error, path) from None
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            os.close(fd)
            raise _not_a_lock(OSError(errno.EEXIST, "it is not a regular file"), path)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as error:
            os.close(fd)
            if error.errno not in _BUSY:
                raise unwritable(error, target) from None
            return None
        try:
            same = os.fstat(fd).st_ino == os.stat(path).st_ino
        except FileNotFoundError:
            same = False
        if same:
            os.ftruncate(fd, 0)
            os.write(fd, f"{os.getpid()}\n".encode())
            return Lock(path, fd)
        os.close(fd)  # the file was replaced between open and lock: take the new one


def _not_a_lock(error: OSError, path: Path) -> ConfigError:
    if error.errno in (errno.ELOOP, errno.EEXIST, errno.ENXIO):
        return ConfigError([Problem(
            key=str(path),
            message="is where verl_roles keeps the lock of the folder beside it, but it is a link, a FIFO or "
            "another special file, which verl_roles never writes through; nothing was written",
            fix="remove it (it is not verl_roles' own), or write the run elsewhere",
        )])
    return unwritable(error, path)


def held(target: Path) -> bool:
    """Whether a process holds the lock of ``target`` now (nothing is created to find out)."""
    try:
        fd = os.open(lock_path(target), os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return False
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return False
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except OSError as error:
        return error.errno in _BUSY
    finally:
        os.close(fd)
    return False


def holder(target: Path) -> str:
    """`` (process N)`` naming the process that holds the lock of ``target``, if it wrote its number."""
    text = (read_small(lock_path(target), 32) or "").strip()
    return f" (process {text})" if text.isdigit() else ""

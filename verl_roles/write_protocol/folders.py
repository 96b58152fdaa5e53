"""Run folders: claimed under a lock, built in a staging folder beside their place, swapped in whole.
See :mod:`verl_roles.write_protocol` for the protocol."""


from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import shutil
import signal
import tempfile
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType

from verl_roles.errors import ConfigError, Problem
from verl_roles.write_protocol.files import current_umask, make_dirs, pause_point, remove_created, unwritable

# The file that marks a folder as written by verl_roles, and what it holds ("run" or "sweep").
MARKER = ".verl_roles"
RUN, SWEEP = "run", "sweep"
# Files that mark a folder written by an earlier verl_roles, from before the marker existed.
_LEGACY_MARKS = {RUN: "resolved.yaml", SWEEP: "sweep_summary.csv"}

_STAGING = ".verl_roles-staging-"
_REPLACED = ".verl_roles-replaced-"
_LOCK = ".verl_roles-lock"

# --- what a folder holds ---------------------------------------------------------------------------


def folder_kind(folder: Path) -> str | None:
    """``"run"`` or ``"sweep"`` for a folder verl_roles wrote, ``"empty"`` for an empty folder, ``""``
    for a folder holding anything else, None when there is no folder."""
    if not folder.is_dir():
        return None
    try:
        # What a killed run of ours left (a staging folder, a run set aside) does not count.
        names = {entry.name for entry in os.scandir(folder) if not entry.name.startswith(".verl_roles-")}
    except OSError as error:
        raise unwritable(error, folder) from None
    if not names:
        return "empty"
    if MARKER in names:
        try:
            kind = json.loads((folder / MARKER).read_text(encoding="utf-8")).get("kind")
        except (OSError, ValueError, AttributeError):
            kind = None
        if kind in (RUN, SWEEP):
            return str(kind)
    for kind, mark in _LEGACY_MARKS.items():
        if mark in names:
            return kind
    return ""


def marker_text(kind: str) -> str:
    return json.dumps({"kind": kind, "written_by": "verl_roles"}, sort_keys=True) + "\n"


# --- signals ---------------------------------------------------------------------------------------


class Interrupted(SystemExit):
    """SIGTERM or SIGHUP while a folder is claimed: raised in the main thread so that the claim's clean-up
    runs; exits as a shell reports a signal (128 + N)."""


_SIGNALS = (signal.SIGTERM, signal.SIGHUP)


def _raise_interrupted(signum: int, frame: FrameType | None) -> None:
    raise Interrupted(128 + signum)


@contextlib.contextmanager
def signals_raise() -> Iterator[None]:
    """While inside, SIGTERM and SIGHUP raise :class:`Interrupted` (Ctrl-C raises KeyboardInterrupt as
    always), so ``finally`` blocks clean up. Only the main thread can take signals; elsewhere a no-op."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    saved = {number: signal.getsignal(number) for number in _SIGNALS}
    for number in _SIGNALS:
        if saved[number] in (signal.SIG_DFL, None):
            signal.signal(number, _raise_interrupted)
    try:
        yield
    finally:
        for number, handler in saved.items():
            signal.signal(number, handler if handler is not None else signal.SIG_DFL)


# --- the lock --------------------------------------------------------------------------------------


@dataclass
class _Lock:
    path: Path
    fd: int

    def release(self) -> None:
        with contextlib.suppress(OSError):
            # Unlink while holding it: a run waiting on the old file sees it gone and takes a new one.
            if os.fstat(self.fd).st_ino == os.stat(self.path).st_ino:
                self.path.unlink()
        with contextlib.suppress(OSError):
            os.close(self.fd)


def _lock(target: Path) -> _Lock:
    """The lock of ``target``: a file beside it, held with ``flock`` for as long as the claim lives."""
    path = target.parent / f".{target.name}{_LOCK}"
    while True:
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as error:
            raise unwritable(error, target) from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as error:
            holder = _holder(fd)
            os.close(fd)
            if error.errno not in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                raise unwritable(error, target) from None
            raise ConfigError([Problem(
                key=str(target),
                message=f"another verl_roles run{holder} is writing this folder right now; nothing was "
                "written",
                fix="wait until that run ends, or write elsewhere (hydra.run.dir=DIR, or a new sweep "
                "folder with hydra.sweep.dir=DIR)",
            )]) from None
        try:
            same = os.fstat(fd).st_ino == os.stat(path).st_ino
        except FileNotFoundError:
            same = False
        if same:
            os.ftruncate(fd, 0)
            os.write(fd, f"{os.getpid()}\n".encode())
            return _Lock(path, fd)
        os.close(fd)  # the file was replaced between open and lock: take the new one


def _holder(fd: int) -> str:
    try:
        text = os.pread(fd, 32, 0).decode().strip()
    except (OSError, UnicodeDecodeError):
        return ""
    return f" (process {text})" if text.isdigit() else ""


# --- claiming a folder -----------------------------------------------------------------------------


@dataclass
class _Swap:
    """The renames of one commit, and how to undo them: ``aside`` holds the old run while it is out of
    place; ``moved_in`` / ``moved_out`` the entries moved in and out of a mount-point target."""

    target: Path
    staging: Path
    aside: Path | None = None
    old_out: bool = False
    moved_in: list[Path] = field(default_factory=list)
    moved_out: list[Path] = field(default_factory=list)

    def replace_whole(self) -> None:
        """Old run aside (one rename), new run in (one rename); the old one is deleted by :meth:`finish`."""
        self.aside = Path(tempfile.mkdtemp(prefix=f".{self.target.name}{_REPLACED}", dir=self.target.parent))
        os.replace(self.target, self.aside)
        self.old_out = True
        pause_point("swap:aside")
        os.replace(self.staging, self.target)
        self.old_out = False

    def move_up(self, replace: bool) -> None:
        """Into a target that is a mount point (it cannot be renamed): an old run's entries go aside inside
        it, then the staged entries move up one by one, the completeness markers (``resolved.yaml``, the
        marker file) last, so a folder holding them holds everything."""
        old = [e for e in self.target.iterdir()
               if e != self.staging and not e.name.startswith(".verl_roles-")]
        if old and replace:
            self.aside = Path(tempfile.mkdtemp(prefix=_REPLACED, dir=self.target))
            for entry in old:
                os.replace(entry, self.aside / entry.name)
                self.moved_out.append(entry)
            pause_point("swap:aside")
        last = {*_LEGACY_MARKS.values(), MARKER}
        for entry in sorted(self.staging.iterdir(), key=lambda e: (e.name in last, e.name == MARKER, e.name)):
            os.replace(entry, self.target / entry.name)
            self.moved_in.append(self.target / entry.name)
        self.staging.rmdir()

    def undo(self) -> None:
        """Put the target back as it was before the commit began."""
        with contextlib.suppress(OSError):
            for entry in reversed(self.moved_in):
                os.replace(entry, self.staging / entry.name)
            if self.aside is not None:
                for entry in reversed(self.moved_out):
                    os.replace(self.aside / entry.name, entry)
                if self.old_out:
                    os.replace(self.aside, self.target)
                    self.aside = None
        if self.aside is not None:
            shutil.rmtree(self.aside, ignore_errors=True)

    def finish(self) -> None:
        if self.aside is not None:
            shutil.rmtree(self.aside, ignore_errors=True)


@dataclass
class FolderClaim:
    """A claimed run or sweep folder: write into :attr:`staging`, then :meth:`commit` (or :meth:`abort`).

    Use it as a context manager: leaving it by an exception (Ctrl-C, SIGTERM, SIGHUP included) before
    the commit aborts, and leaves nothing behind.
    """

    target: Path
    kind: str
    staging: Path
    lock: _Lock
    replace: bool
    created: list[Path] = field(default_factory=list)
    done: bool = False
    # The target is a mount point: it cannot be renamed, so the run is staged inside it and moved up.
    inside: bool = False

    def commit(self) -> None:
        """Put the staged folder in place of the target (replacing an old run as a whole) and release.

        Stopped on the way (an error, Ctrl-C, SIGTERM), the target is put back as it was: the old run is
        never lost and never mixed with the new one."""
        if self.done:
            return
        (self.staging / MARKER).write_text(marker_text(self.kind), encoding="utf-8")
        pause_point("staged")
        swap = _Swap(self.target, self.staging)
        try:
            if self.inside:
                swap.move_up(replace=self.replace)
            elif self.replace and folder_kind(self.target) not in (None, "empty"):
                swap.replace_whole()
            else:
                # An empty folder is replaced by the rename itself; an absent one is created by it.
                os.replace(self.staging, self.target)
        except BaseException as error:
            swap.undo()
            self.abort()
            if isinstance(error, OSError):
                raise unwritable(error, self.target) from None
            raise
        swap.finish()
        self.done = True
        self.lock.release()

    def abort(self) -> None:
        """Remove the staging folder and every parent folder the claim made; release the lock."""
        if self.done:
            return
        self.done = True
        shutil.rmtree(self.staging, ignore_errors=True)
        self.lock.release()
        for folder in reversed(self.created):
            with contextlib.suppress(OSError):
                folder.rmdir()

    def __enter__(self) -> FolderClaim:
        return self

    def __exit__(self, kind: object, error: object, traceback: object) -> None:
        if not self.done:
            self.abort()


def claim_folder(target: Path, kind: str, *, overwrite: bool) -> FolderClaim:
    """Claim ``target`` for a new run or sweep (``kind``): the checks, the lock, a fresh staging folder.

    Refused (a :class:`ConfigError`, nothing created): a target that is a file, a folder holding
    anything but a verl_roles run or sweep, a verl_roles run or sweep unless ``overwrite``, a folder
    another run is writing right now.
    """
    target = Path(os.path.abspath(target))
    _refuse_existing(target, kind, overwrite, before_lock=True)
    created = make_dirs(target.parent)
    try:
        lock = _lock(target)
    except BaseException:
        remove_created(created)
        raise
    try:
        _recover(target)
        _refuse_existing(target, kind, overwrite, before_lock=False)
        inside = target.is_dir() and os.path.ismount(target)
        if inside:
            staging = Path(tempfile.mkdtemp(prefix=_STAGING, dir=target))
        else:
            staging = Path(tempfile.mkdtemp(prefix=f".{target.name}{_STAGING}", dir=target.parent))
        os.chmod(staging, 0o777 & ~current_umask())
    except BaseException as error:
        lock.release()
        remove_created(created)
        if isinstance(error, OSError):
            raise unwritable(error, target) from None
        raise
    return FolderClaim(target, kind, staging, lock, replace=overwrite, created=created, inside=inside)


def _refuse_existing(target: Path, kind: str, overwrite: bool, before_lock: bool) -> None:
    if target.exists() and not target.is_dir():
        raise ConfigError([Problem(
            key=str(target),
            message="is a file, not a folder, so no run can be written there; nothing was written",
            fix="choose a folder that does not exist yet (hydra.run.dir=DIR / hydra.sweep.dir=DIR)",
        )])
    held = folder_kind(target)
    if held in (None, "empty"):
        return
    what = {RUN: "the files of another run", SWEEP: "another sweep"}.get(held, "")
    if not what:
        raise ConfigError([Problem(
            key=str(target),
            message="already holds files that verl_roles did not write; a run is written only into a new "
            "or empty folder, and never mixed with other files; nothing was written",
            fix="choose a folder that does not exist yet (hydra.run.dir=DIR for a run, hydra.sweep.dir=DIR "
            "for a sweep)",
        )])
    if held != kind and overwrite:
        raise ConfigError([Problem(
            key=str(target),
            message=f"holds {what}, and this {kind} would replace it with a {kind}; nothing was written",
            fix="choose another folder, or remove that one yourself if you mean it",
        )])
    if not overwrite:
        raise ConfigError([Problem(
            key=str(target),
            message=f"already holds {what}; nothing was written",
            fix="choose a new folder (leave hydra.run.dir / hydra.sweep.dir at their default, which is new "
            "for every run), or add --overwrite to replace the old one as a whole",
        )])


def _recover(target: Path) -> None:
    """Under the lock: what a killed run left beside ``target``. A swap cut between its two renames (the
    target gone, an old run aside) is undone; staging folders and runs set aside are removed."""
    parent = target.parent
    prefix = f".{target.name}"
    if target.is_dir() and os.path.ismount(target):
        for path in target.iterdir():
            if path.name.startswith((_STAGING, _REPLACED)) and path.is_dir():
                shutil.rmtree(path, ignore_errors=True)
        return
    try:
        left = sorted(p for p in parent.iterdir() if p.name.startswith(prefix) and p.is_dir())
    except OSError:
        return
    for path in left:
        rest = path.name[len(prefix):]
        if rest.startswith(_REPLACED) and not target.exists():
            os.replace(path, target)
        elif rest.startswith((_REPLACED, _STAGING)):
            shutil.rmtree(path, ignore_errors=True)

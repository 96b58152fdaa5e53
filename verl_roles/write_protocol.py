"""How a run reaches the disk: the one write protocol of verl_roles.

Everything verl_roles writes goes through here, so a run never mixes with or deletes another run, even
when interrupted or racing:

- **A run folder is claimed, built beside its place, then swapped in.** :func:`claim_folder` takes a
  lock next to the target folder (a second run on the same folder is refused while the first holds
  it), checks the target (absent, empty, or a verl_roles run or sweep that ``overwrite`` allows to
  replace; any other content is never touched), and makes a fresh staging folder beside it. The run
  is written into the staging folder; :meth:`FolderClaim.commit` renames it into place (an old run is
  renamed aside first and deleted after, so the target holds the old run or the new one, never a
  mix). Any failure, Ctrl-C, SIGTERM or SIGHUP before the commit removes the staging folder, the lock
  and the parent folders the claim created: a refused or interrupted run leaves nothing.
- **A set of files appears all at once.** :func:`write_all_or_nothing` writes each file to a temporary
  file and renames them into place only when all are written (the last one last).
- **A single file named by the user** (``export-slime -o FILE``): :func:`write_user_file` replaces a
  regular file atomically, writes *into* a FIFO or device (never replacing it with a regular file), and
  follows a symbolic link to the file it names.

A process killed outright (SIGKILL, power loss) can leave a staging folder or a temporary file: their
names start with a dot and carry ``verl_roles``, they never count as a run, and the next claim of the
same folder removes them (a swap cut in the middle is completed first: the old run is put back).
The lock is ``fcntl.flock``, so verl_roles writes run folders on POSIX systems.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import shutil
import signal
import stat
import sys
import tempfile
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType

from verl_roles.errors import ConfigError, Problem

# The file that marks a folder as written by verl_roles, and what it holds ("run" or "sweep").
MARKER = ".verl_roles"
RUN, SWEEP = "run", "sweep"
# Files that mark a folder written by an earlier verl_roles, from before the marker existed.
_LEGACY_MARKS = {RUN: "resolved.yaml", SWEEP: "sweep_summary.csv"}

_STAGING = ".verl_roles-staging-"
_REPLACED = ".verl_roles-replaced-"
_LOCK = ".verl_roles-lock"

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
    created = _make_dirs(target.parent)
    try:
        lock = _lock(target)
    except BaseException:
        _remove_created(created)
        raise
    try:
        _recover(target)
        _refuse_existing(target, kind, overwrite, before_lock=False)
        inside = target.is_dir() and os.path.ismount(target)
        if inside:
            staging = Path(tempfile.mkdtemp(prefix=_STAGING, dir=target))
        else:
            staging = Path(tempfile.mkdtemp(prefix=f".{target.name}{_STAGING}", dir=target.parent))
        os.chmod(staging, 0o777 & ~_umask())
    except BaseException as error:
        lock.release()
        _remove_created(created)
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


def _make_dirs(folder: Path) -> list[Path]:
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
        _remove_created(created)
        raise unwritable(error, made) from None
    return created


def _remove_created(created: Sequence[Path]) -> None:
    for folder in reversed(created):
        with contextlib.suppress(OSError):
            folder.rmdir()


# --- files -----------------------------------------------------------------------------------------


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
            created_dirs += _make_dirs(path.parent)
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
        _remove_created(created_dirs)
        if isinstance(error, OSError):
            raise unwritable(error, current) from error
        raise
    return renamed


def _write_temporary(path: Path, text: str, mode: int | None = None) -> Path:
    fd, name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    tmp = Path(name)
    try:
        # mkstemp creates the file 0600; give it the mode an ordinary write would (umask applied).
        os.chmod(tmp, mode if mode is not None else 0o666 & ~_umask())
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
    and keeps its permissions; a missing file is created (its folder must exist).
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
        in_place = info is not None and (
            not stat.S_ISREG(info.st_mode)  # a FIFO, a device: written into, never replaced
            or info.st_nlink > 1  # a hard link: every name of the file sees the new text
            or not os.access(target.parent, os.W_OK | os.X_OK)  # a writable file in a folder that is not
        )
        if in_place:
            with open(target, "w", encoding="utf-8", newline="\n") as handle:
                handle.write(text)
            return target
        if not target.parent.is_dir():
            raise OSError(errno.ENOENT, f"no folder {target.parent}")
        tmp = _write_temporary(target, text, stat.S_IMODE(info.st_mode) if info is not None else None)
        try:
            os.replace(tmp, target)
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise
    except OSError as error:
        raise unwritable(error, path) from None
    return target


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
    else:
        fix = "check the path, the disk and the permissions, then run again"
    key = str(where) if where else "the output folder (hydra.run.dir)"
    return ConfigError([Problem(key=key, message=f"cannot be written: {reason}", fix=fix)])


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask

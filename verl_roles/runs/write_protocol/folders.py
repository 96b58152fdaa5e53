"""Run folders: claimed under a lock, built in a staging folder beside their place, swapped in whole.
See :mod:`verl_roles.runs.write_protocol` for the protocol."""


from __future__ import annotations

import contextlib
import os
import signal
import tempfile
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType

from verl_roles.base.errors import ConfigError, Problem
from verl_roles.runs.write_protocol.files import (
    current_umask,
    make_dirs,
    pause_point,
    remove_created,
    remove_tree,
    unwritable,
)
from verl_roles.runs.write_protocol.locks import Lock, held, holder, take
from verl_roles.runs.write_protocol.marks import (
    MARKER,
    RUN,
    STAGING,
    SWEEP,
    folder_kind,
    inside_entry,
    marker,
    marker_text,
    nested_runs,
    own_entry,
)
from verl_roles.runs.write_protocol.recovery import is_mount, left_behind, recover, recover_neighbours
from verl_roles.runs.write_protocol.swap import Swap

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


# --- claiming a folder -----------------------------------------------------------------------------


@dataclass
class FolderClaim:
    """A claimed run or sweep folder: write into :attr:`staging`, then :meth:`commit` (or :meth:`abort`).

    Use it as a context manager: leaving it by an exception (Ctrl-C, SIGTERM, SIGHUP included) before
    the commit aborts, and leaves nothing behind.
    """

    target: Path
    kind: str
    staging: Path
    lock: Lock
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
        swap = Swap(self.target, self.staging)
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
        remove_tree(self.staging)
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
    anything but a verl_roles run or sweep, a verl_roles run or sweep unless ``overwrite`` (and even
    then one that holds another run inside it), a folder inside another run's or sweep's folder, a
    folder another run is writing right now (or one inside it). A symbolic link is followed: the run
    goes where it points, and the link stays. What a killed claim of the folder left is recovered first
    (:mod:`verl_roles.runs.write_protocol.recovery`), also when the claim is then refused.
    """
    typed = Path(os.path.abspath(target))
    try:
        return _claim(Path(os.path.realpath(typed)), kind, overwrite)
    except OSError as error:
        raise unwritable(error, typed) from None


def _claim(target: Path, kind: str, overwrite: bool) -> FolderClaim:
    if not (target.parent.is_dir() and left_behind(target)):
        _refuse(target, kind, overwrite)  # before anything exists
    created = make_dirs(target.parent)
    try:
        lock = take(target)
    except BaseException:
        remove_created(created)
        raise
    try:
        recover(target)
        _refuse(target, kind, overwrite)
        recover_neighbours(target)
        inside = is_mount(target)
        if inside:
            staging = Path(tempfile.mkdtemp(prefix=STAGING, dir=target))
        else:
            staging = Path(tempfile.mkdtemp(prefix=f".{target.name}{STAGING}", dir=target.parent))
        os.chmod(staging, 0o777 & ~current_umask())
    except BaseException as error:
        lock.release()
        remove_created(created)
        if isinstance(error, OSError):
            raise unwritable(error, target) from None
        raise
    return FolderClaim(target, kind, staging, lock, replace=overwrite, created=created, inside=inside)


_CHOOSE = ("choose a folder that does not exist yet (hydra.run.dir=DIR for a run, hydra.sweep.dir=DIR for a "
           "sweep)")


def _refuse(target: Path, kind: str, overwrite: bool) -> None:
    if target.exists() and not target.is_dir():
        raise ConfigError([Problem(
            key=str(target),
            message="is a file, not a folder, so no run can be written there; nothing was written",
            fix="choose a folder that does not exist yet (hydra.run.dir=DIR / hydra.sweep.dir=DIR)",
        )])
    _refuse_inside_another(target)
    held = folder_kind(target)
    if held in (None, "empty"):
        return
    what = {RUN: "the files of another run", SWEEP: "another sweep"}.get(held, "")
    if not what:
        raise ConfigError([Problem(
            key=str(target),
            message="already holds files that verl_roles did not write; a run is written only into a new "
            "or empty folder, and never mixed with other files; nothing was written",
            fix=_CHOOSE,
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
    others = nested_runs(target, own_jobs=held == SWEEP)
    if others:
        raise ConfigError([Problem(
            key=str(target),
            message=f"holds {what}, and inside it another verl_roles run or sweep ({others[0]}"
            + (f" and {len(others) - 1} more" if len(others) > 1 else "")
            + "), which --overwrite would delete with it; nothing was written",
            fix="move that run out of the folder first, or choose another folder",
        )])


def _refuse_inside_another(target: Path) -> None:
    """A run is never written inside another run's or sweep's folder (replacing that one would delete it,
    and a sweep's folder holds its own jobs only), nor inside a folder another run is writing now, nor
    into a folder of the protocol's own (a run being built, or set aside)."""
    own = next((part for part in target.parts if own_entry(part) or inside_entry(part)), None)
    if own is not None:
        raise ConfigError([Problem(
            key=str(target),
            message=f"goes through {own!r}, a folder verl_roles keeps a run in while it is being written or "
            "replaced; nothing was written",
            fix=_CHOOSE,
        )])
    for folder in target.parents:
        record = marker(folder)
        if record is not None:
            what = "a sweep" if record["kind"] == SWEEP else "a run"
            raise ConfigError([Problem(
                key=str(target),
                message=f"is inside {folder}, the folder of {what} of verl_roles; a run is never written "
                "into another run's folder (replacing that one would delete this one with it); nothing was "
                "written",
                fix="choose a folder outside it, e.g. next to it",
            )])
        if held(folder):
            raise ConfigError([Problem(
                key=str(target),
                message=f"is inside {folder}, which another verl_roles run{holder(folder)} is writing "
                "right now; nothing was written",
                fix="choose a folder outside it, or wait until that run ends",
            )])

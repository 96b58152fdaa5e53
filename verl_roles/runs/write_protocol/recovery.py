"""What a killed claim left, put right by the next claim (under the lock of the folder it recovers).

A run killed outright (SIGKILL, a power cut) runs no clean-up. Beside its folder it can leave a staging
folder (removed), and, cut in the middle of replacing an old run, the old run set aside: put back when
the folder is gone or empty, deleted only once the folder holds the new, whole run. Inside a mount-point
folder the commit's journal tells a cut move (the moved entries go, the old run comes back) from a
finished one. Nothing is deleted that is not the protocol's own: names are matched exactly
(:mod:`verl_roles.runs.write_protocol.marks`), and an old run that cannot be put back is left where it is.

A claim also recovers what killed claims of other folders left beside its own (the next run of the
day in ``outputs/<date>/`` tidies up after one killed earlier), each under that folder's lock, and
never a claim that is still alive."""

from __future__ import annotations

import contextlib
import json
import os
from pathlib import Path

from verl_roles.base.errors import ConfigError
from verl_roles.runs.write_protocol.files import remove_tree
from verl_roles.runs.write_protocol.locks import try_take
from verl_roles.runs.write_protocol.marks import (
    JOURNAL,
    REPLACED,
    RUN,
    STAGING,
    SWEEP,
    folder_kind,
    inside_entry,
    own_entry,
    read_small,
)


def is_mount(target: Path) -> bool:
    return target.is_dir() and os.path.ismount(target)


def left_behind(target: Path) -> bool:
    """Whether a killed claim of ``target`` left anything (beside it, or inside a mount point)."""
    if is_mount(target):
        with contextlib.suppress(OSError):
            return any(inside_entry(e.name) or e.name == JOURNAL for e in os.scandir(target))
        return False
    return bool(_beside(target))


def recover(target: Path) -> None:
    """Under the lock of ``target``: undo or finish what a killed claim of it left."""
    if is_mount(target):
        _recover_inside(target)
    else:
        _recover_beside(target)


def recover_neighbours(target: Path) -> None:
    """What killed claims of other folders left beside ``target``, each recovered under its own lock."""
    try:
        names = {own[0] for entry in os.scandir(target.parent) if (own := own_entry(entry.name))}
    except OSError:
        return
    for name in sorted(names - {target.name}):
        other = target.parent / name
        with contextlib.suppress(ConfigError, OSError):
            lock = try_take(other)
            if lock is None:
                continue  # alive: its own run cleans up
            try:
                _recover_beside(other)
            finally:
                lock.release()


def _beside(target: Path) -> dict[Path, str]:
    try:
        entries = list(os.scandir(target.parent))
    except OSError:
        return {}
    found = {}
    for entry in entries:
        own = own_entry(entry.name)
        if own is not None and own[0] == target.name and entry.is_dir(follow_symlinks=False):
            found[Path(entry.path)] = own[1]
    return found


def _recover_beside(target: Path) -> None:
    left = _beside(target)
    for path, what in left.items():
        if what == "staging":
            remove_tree(path)
    for path in sorted(p for p, what in left.items() if what == "replaced"):
        kind = folder_kind(target)
        if kind == "empty":
            target.rmdir()
            kind = None
        if kind is None:
            os.replace(path, target)  # cut between the two renames: the old run goes back
        elif kind in (RUN, SWEEP):
            remove_tree(path)  # the swap was done: this is the old run
        # else: the folder now holds something else; the old run stays where it is, never deleted


def _recover_inside(target: Path) -> None:
    journal = target / JOURNAL
    try:
        record = json.loads(read_small(journal, 1 << 20) or "null")
    except ValueError:
        record = None
    keep: set[str] = set()
    if isinstance(record, dict):
        staging = target / str(record.get("staging"))
        aside = target / str(record["aside"]) if record.get("aside") else None
        if inside_entry(staging.name) and staging.is_dir():
            # Cut while the staged entries moved up: those in place go, the old ones come back.
            for name in record.get("entries", []):
                if isinstance(name, str) and name not in ("", ".", "..") and os.sep not in name:
                    _remove(target / name)
            if aside is not None and inside_entry(aside.name) and not _put_back(aside, target):
                keep.add(aside.name)
        journal.unlink(missing_ok=True)
    else:
        for entry in list(target.iterdir()):
            if inside_entry(entry.name) != "replaced":
                continue
            paired = target / (STAGING + entry.name[len(REPLACED):])
            # Its staging folder still there: cut while the old run moved aside; it comes back.
            if paired.is_dir() and not _put_back(entry, target):
                keep.add(entry.name)
    for entry in list(target.iterdir()):
        if inside_entry(entry.name) and entry.name not in keep:
            remove_tree(entry)


def _put_back(aside: Path, target: Path) -> bool:
    """The old run's entries from ``aside`` back into ``target``; False when one could not go back."""
    whole = True
    for entry in list(aside.iterdir()):
        if os.path.lexists(target / entry.name):
            whole = False
            continue
        os.replace(entry, target / entry.name)
    return whole


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        remove_tree(path)
    else:
        path.unlink(missing_ok=True)

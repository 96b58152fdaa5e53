"""What a folder holds, as the write protocol reads it: the marker of a verl_roles run or sweep, and the
names of what a write in progress (or a killed one) keeps beside or inside its folder.

Every name the protocol gives a folder or file of its own carries ``.verl_roles-`` and is matched
exactly (:func:`own_entry`), so no folder a user names is ever taken for one of them."""

from __future__ import annotations

import json
import os
import re
import stat
from pathlib import Path

from verl_roles.runs.write_protocol.files import unwritable

# The file that marks a folder as written by verl_roles, and what it holds ("run" or "sweep").
MARKER = ".verl_roles"
RUN, SWEEP = "run", "sweep"
# Files that mark a folder written by an earlier verl_roles, from before the marker existed.
LEGACY_MARKS = {RUN: "resolved.yaml", SWEEP: "sweep_summary.csv"}

STAGING = ".verl_roles-staging-"
REPLACED = ".verl_roles-replaced-"
LOCK = ".verl_roles-lock"
# The record of a commit into a mount point that moves entries one by one
# (verl_roles/runs/write_protocol/swap.py).
JOURNAL = ".verl_roles-moving"
# What tempfile.mkdtemp appends to a prefix.
_RANDOM = r"[a-z0-9_]{8}"
_OWN = re.compile(rf"^\.(?P<target>.+)\.verl_roles-(?P<what>staging|replaced)-{_RANDOM}$")
_INSIDE = re.compile(rf"^\.verl_roles-(?P<what>staging|replaced)-{_RANDOM}$")


def own_entry(name: str) -> tuple[str, str] | None:
    """For an entry beside a target: (target name, "staging" or "replaced") when ``name`` is a staging
    folder or a run set aside by a claim of that target, else None."""
    found = _OWN.match(name)
    return (found["target"], found["what"]) if found else None


def inside_entry(name: str) -> str | None:
    """For an entry inside a mount-point target: "staging" or "replaced", else None."""
    found = _INSIDE.match(name)
    return found["what"] if found else None


def lock_path(target: Path) -> Path:
    return target.parent / f".{target.name}{LOCK}"


def marker_text(kind: str) -> str:
    return json.dumps({"kind": kind, "written_by": "verl_roles"}, sort_keys=True) + "\n"


def read_small(path: Path, limit: int = 4096) -> str | None:
    """The text of a small regular file of the protocol's (a marker, a lock); None for anything else: a
    FIFO or a device someone put there is never opened for reading (that could wait forever), a link
    never followed."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW)
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        return os.read(fd, limit).decode("utf-8", "replace")
    except OSError:
        return None
    finally:
        os.close(fd)


def marker(folder: Path) -> dict[str, object] | None:
    """The marker record of ``folder`` (``{"kind": "run" | "sweep", ...}``), None when it has none."""
    text = read_small(folder / MARKER)
    if text is None:
        return None
    try:
        record = json.loads(text)
    except ValueError:
        return None
    return record if isinstance(record, dict) and record.get("kind") in (RUN, SWEEP) else None


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
        record = marker(folder)
        if record is not None:
            return str(record["kind"])
    for kind, mark in LEGACY_MARKS.items():
        if mark in names:
            return kind
    return ""


def nested_runs(folder: Path, *, own_jobs: bool) -> list[Path]:
    """Folders below ``folder`` that hold a verl_roles run or sweep of their own. With ``own_jobs`` (the
    folder is a sweep's) the jobs of a sweep, whose markers record their outcome, are its own."""
    found = []
    for root, dirs, _files in os.walk(folder, onerror=None):
        dirs[:] = [d for d in dirs if not d.startswith(".verl_roles-")]
        here = Path(root)
        if here == folder:
            continue
        record = marker(here)
        if record is not None and not (own_jobs and record.get("kind") == RUN and "status" in record):
            found.append(here)
            dirs[:] = []
    return found

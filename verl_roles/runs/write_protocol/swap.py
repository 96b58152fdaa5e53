"""The commit of a claimed folder: the staged run put in place of the target, an old run replaced as a
whole, and how each step is undone (in the process, when it is stopped) or recovered (by the next claim,
when it was killed: :mod:`verl_roles.runs.write_protocol.recovery`).

Beside the target (the usual case) the commit is two renames: the old run aside, the new one in. A
target that is a mount point cannot be renamed, so its entries move one by one: the old run's into a
folder set aside inside the target, then the staged ones up. Before the first staged entry moves, a
journal inside the target names the staging folder, the folder set aside and the entries about to move,
so the next claim can tell a cut move from a finished one and put the old run back whole."""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from verl_roles.runs.write_protocol.files import pause_point, remove_tree, write_atomic
from verl_roles.runs.write_protocol.marks import JOURNAL, LEGACY_MARKS, MARKER, REPLACED, STAGING


@dataclass
class Swap:
    """The renames of one commit, and how to undo them: ``aside`` holds the old run while it is out of
    place; ``moved_in`` / ``moved_out`` the entries moved in and out of a mount-point target."""

    target: Path
    staging: Path
    aside: Path | None = None
    old_out: bool = False
    moved_in: list[Path] = field(default_factory=list)
    moved_out: list[Path] = field(default_factory=list)
    journal: Path | None = None

    def replace_whole(self) -> None:
        """Old run aside (one rename), new run in (one rename); the old one is deleted by :meth:`finish`."""
        self.aside = Path(tempfile.mkdtemp(prefix=f".{self.target.name}{REPLACED}", dir=self.target.parent))
        os.replace(self.target, self.aside)
        self.old_out = True
        pause_point("swap:aside")
        os.replace(self.staging, self.target)
        self.old_out = False

    def move_up(self, replace: bool) -> None:
        """Into a target that is a mount point (it cannot be renamed): an old run's entries go aside inside
        it, then the staged entries move up one by one, the completeness markers (``resolved.yaml``, the
        marker file) last, so a folder holding them holds everything."""
        old = [e for e in self.target.iterdir() if not e.name.startswith(".verl_roles-")]
        if old and replace:
            # Named after the staging folder: recovery pairs them.
            self.aside = self.target / (REPLACED + self.staging.name[len(STAGING):])
            self.aside.mkdir()
            for entry in old:
                os.replace(entry, self.aside / entry.name)
                self.moved_out.append(entry)
            pause_point("swap:aside")
        last = {*LEGACY_MARKS.values(), MARKER}
        entries = sorted(self.staging.iterdir(), key=lambda e: (e.name in last, e.name == MARKER, e.name))
        self.journal = self.target / JOURNAL
        write_atomic(self.journal, json.dumps({
            "staging": self.staging.name,
            "aside": self.aside.name if self.aside is not None else None,
            "entries": [entry.name for entry in entries],
        }) + "\n")
        for entry in entries:
            os.replace(entry, self.target / entry.name)
            self.moved_in.append(self.target / entry.name)
            pause_point(f"moved:{entry.name}")
        self.staging.rmdir()
        self.journal.unlink()
        self.journal = None

    def undo(self) -> None:
        """Put the target back as it was before the commit began."""
        with contextlib.suppress(OSError):
            for entry in reversed(self.moved_in):
                os.replace(entry, self.staging / entry.name)
            self.moved_in.clear()
            if self.aside is not None:
                for entry in reversed(self.moved_out):
                    os.replace(self.aside / entry.name, entry)
                self.moved_out.clear()
                if self.old_out:
                    os.replace(self.aside, self.target)
                    self.old_out = False
                    self.aside = None
            if self.journal is not None:
                self.journal.unlink(missing_ok=True)
                self.journal = None
        if self.aside is not None and not self.moved_out and not self.old_out:
            remove_tree(self.aside)

    def finish(self) -> None:
        if self.aside is not None:
            remove_tree(self.aside)

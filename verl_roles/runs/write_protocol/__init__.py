"""How a run reaches the disk: the one write protocol of verl_roles.

Everything verl_roles writes goes through here, so a run never mixes with or deletes another run, even
when interrupted or racing:

- **A run folder is claimed, built beside its place, then swapped in.** :func:`claim_folder` takes a
  lock next to the target folder (a second run on the same folder is refused while the first holds
  it), checks the target (absent, empty, or a verl_roles run or sweep that ``overwrite`` allows to
  replace, unless another run sits inside it; any other content is never touched; never a folder
  inside another run's or sweep's folder, or inside one being written), and makes a fresh staging
  folder beside it. A symbolic link is followed (the run goes where it points). The run is written
  into the staging folder; :meth:`FolderClaim.commit` renames it into place (an old run is renamed
  aside first and deleted after, so the target holds the old run or the new one, never a mix). Any
  failure, Ctrl-C, SIGTERM or SIGHUP before the commit removes the staging folder, the lock and the
  parent folders the claim created: a refused or interrupted run leaves nothing.
- **A set of files appears all at once.** :func:`write_all_or_nothing` writes each file to a temporary
  file and renames them into place only when all are written (the last one last).
- **A single file named by the user** (``export-slime -o FILE``): :func:`write_user_file` replaces a
  regular file atomically, writes *into* a FIFO or device (never replacing it with a regular file), and
  follows a symbolic link to the file it names.

A process killed outright (SIGKILL, power loss) can leave a staging folder or a temporary file: their names
start with a dot and carry ``verl_roles``, they never count as a run, and the next claim of the same folder
(refused or not), or of any folder beside it, removes them; a swap cut in the middle is undone first, the old
run put back whole, also inside a mount point (:mod:`verl_roles.runs.write_protocol.recovery`). The lock is
``fcntl.flock``, so verl_roles writes run folders on POSIX systems.
"""

from verl_roles.runs.write_protocol.files import (
    PAUSE_ENV,
    pause_point,
    unwritable,
    write_all_or_nothing,
    write_atomic,
    write_user_file,
)
from verl_roles.runs.write_protocol.folders import FolderClaim, Interrupted, claim_folder, signals_raise
from verl_roles.runs.write_protocol.marks import MARKER, RUN, SWEEP, folder_kind, marker_text

__all__ = [
    "MARKER", "PAUSE_ENV", "RUN", "SWEEP", "FolderClaim", "Interrupted", "claim_folder", "folder_kind",
    "marker_text", "pause_point", "signals_raise", "unwritable", "write_all_or_nothing", "write_atomic",
    "write_user_file",
]

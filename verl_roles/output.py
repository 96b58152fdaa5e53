"""Files a run writes: the whole resolved config and one file per role.

All or nothing: every file is rendered first, written to a temporary file, and only then renamed into
place, ``resolved.yaml`` last; a failure removes what the run wrote and is a :class:`ConfigError`.
"""

from __future__ import annotations

import contextlib
import errno
import os
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from omegaconf import DictConfig, OmegaConf

from verl_roles import paths
from verl_roles.errors import ConfigError, Problem
from verl_roles.layout import ROLE_SECTIONS
from verl_roles.omegaconf_adapter.yaml_dialect import dump

# The file whose presence says a run's file set is complete (written last).
RESOLVED = "resolved.yaml"


def to_yaml(cfg: DictConfig) -> str:
    """The canonical text of a resolved config: same input, byte-identical output.

    The same text as ``OmegaConf.to_yaml(cfg, resolve=True)`` (tests/test_output_yaml.py checks it).
    """
    return dump(OmegaConf.to_container(cfg, resolve=True, enum_to_str=True))


def write_atomic(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` through a temporary file and a rename: no half-written file, and no
    temporary file left when it fails. A failure is a :class:`ConfigError` naming the path."""
    write_all_or_nothing([(path, text)])


def write_all_or_nothing(files: Sequence[tuple[Path, str]]) -> list[Path]:
    """Write every ``(path, text)``, in order, or none of them; returns the paths written.

    Each text first goes to a temporary file next to its path (``.NAME.XXXX.tmp``); only when every one
    is written are they renamed over their paths, in order, so the last path appears last (the main
    job lists ``resolved.yaml`` last: a folder that has it has every other file too). On any failure
    every temporary file is removed, and so is every path this call already renamed into place. A
    temporary file left by a killed process has a name of its own and never disturbs a later write.
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
            _pause_point(f"temp:{path.name}")
        for tmp, path in staged:
            current = path
            os.replace(tmp, path)
            renamed.append(path)
            _pause_point(f"renamed:{path.name}")
    except BaseException as error:
        for tmp, _ in staged:
            tmp.unlink(missing_ok=True)
        for path in renamed:
            path.unlink(missing_ok=True)
        for folder in reversed(created_dirs):
            with contextlib.suppress(OSError):
                folder.rmdir()
        if isinstance(error, OSError):
            raise unwritable(error, current) from error
        raise
    return renamed


def _make_dirs(folder: Path) -> list[Path]:
    """Create ``folder`` and its missing parents; return the ones created, outermost first."""
    missing = []
    while not folder.is_dir() and folder != folder.parent:
        missing.append(folder)
        folder = folder.parent
    for made in reversed(missing):
        made.mkdir()
    return list(reversed(missing))


def _write_temporary(path: Path, text: str) -> Path:
    fd, name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    tmp = Path(name)
    try:
        # mkstemp creates the file 0600; give it the mode an ordinary write would (umask applied).
        os.chmod(tmp, 0o666 & ~_umask())
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as handle:
            handle.write(text)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return tmp


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
    else:
        fix = "check the path, the disk and the permissions, then run again"
    key = str(where) if where else "the output folder (hydra.run.dir)"
    return ConfigError([Problem(key=key, message=f"cannot be written: {reason}", fix=fix)])


# Tests kill a run at a named point of a write (tests/test_run_dirs.py): when this variable names the
# point (``temp:NAME`` once the temporary file of NAME is written, ``renamed:NAME`` once it is in
# place), the process says so on stderr and waits to be killed.
PAUSE_ENV = "VERL_ROLES_TEST_PAUSE_AT"


def _pause_point(name: str) -> None:
    if os.environ.get(PAUSE_ENV) == name:
        print(f"verl_roles: paused at {name}", file=sys.stderr, flush=True)
        time.sleep(120)


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def run_files(resolved: DictConfig) -> dict[str, str]:
    """Relative file name -> text, for everything a run writes: the role files, then ``resolved.yaml``
    (written last, so its presence means the set is complete)."""
    container = OmegaConf.to_container(resolved, resolve=True, enum_to_str=True)
    files = {f"roles/{role}.yaml": dump(paths.get(container, section))
             for role, section in ROLE_SECTIONS.items()}
    files[RESOLVED] = dump(container)
    return files


def write_run_files(resolved: DictConfig, out_dir: Path, *, replace_a_run: bool = True) -> list[Path]:
    """Render every file first, then write them all or none; returns the paths written.

    With ``replace_a_run=False`` (the folder was not chosen by the user), a folder that already holds
    another run's ``resolved.yaml`` is refused before anything is written.
    """
    files = run_files(resolved)
    if not replace_a_run and (out_dir / RESOLVED).exists():
        raise ConfigError([Problem(
            key=str(out_dir),
            message="already holds the files of another run; nothing was written",
            fix=f"pass hydra.run.dir={out_dir} to replace them on purpose, or run again for a new folder",
        )])
    return write_all_or_nothing([(out_dir / name, text) for name, text in files.items()])

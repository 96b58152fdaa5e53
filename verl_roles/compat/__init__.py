"""The compatibility seam: everything verl_roles borrows from Hydra's and OmegaConf's private API.

Nothing outside this package imports ``hydra._internal``, ``omegaconf._*``, ``omegaconf.base``,
``omegaconf.grammar`` or ``omegaconf.vendor``, reads or writes a private attribute of a library object,
overrides a private hook of a library class, swaps a library module global, names a library file or
class by its path, or reads a library's error text (``tests/test_layers.py`` fails when one does).

- :mod:`verl_roles.compat.hydra`: Hydra's loader, repositories and config sources (subclassed through
  base classes that give each private hook a public name of ours), the functions ``@hydra.main`` runs,
  the two module globals swapped for one call, the file paths and class paths we recognise.
- :mod:`verl_roles.compat.omegaconf`: OmegaConf's node internals (content, raw value, metadata, parent),
  its YAML loader and dumper, its interpolation check and one-key resolution.
- :mod:`verl_roles.compat.messages`: the library error texts we read, one pattern each.

Each entry of those modules is listed in its ``BORROWED`` table: its kind, what it uses, the public
behaviour it stands for, and the test that guards it (``tests/test_compat.py`` checks that every guard
exists and counts the entries). Where Hydra 1.3 and 1.4 (OmegaConf 2.3 and 2.4) differ, the entry
branches on the flags below; each was checked on the stacks in :data:`CHECKED_ON`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from hydra import __version__ as _hydra_version
from omegaconf import __version__ as _omegaconf_version


def _release(text: str) -> tuple[int, int]:
    """(major, minor) of a version string (``1.4.0rc3`` -> (1, 4))."""
    match = re.match(r"(\d+)\.(\d+)", text)
    if match is None:
        raise ValueError(f"unrecognised version {text!r}")
    return int(match.group(1)), int(match.group(2))


HYDRA_VERSION: tuple[int, int] = _release(_hydra_version)
OMEGACONF_VERSION: tuple[int, int] = _release(_omegaconf_version)
# Hydra 1.4 (with OmegaConf 2.4: Hydra 1.4 requires it, Hydra 1.3 refuses it).
HYDRA_1_4: bool = HYDRA_VERSION >= (1, 4)
OMEGACONF_2_4: bool = OMEGACONF_VERSION >= (2, 4)

# What to pass to Hydra's public entry points (``hydra.main``, ``initialize_config_dir``...) for its current
# behaviour: ``version_base=None`` on Hydra 1.3; nothing on 1.4, which deprecates the parameter (it warns)
# and always behaves as its own version.
VERSION_BASE: dict[str, None] = {} if HYDRA_1_4 else {"version_base": None}

# The topics of Hydra's ``--info`` flag, as its parser lists them: Hydra 1.4 adds ``aliases`` (hydra.aliases).
HYDRA_INFO_TOPICS: tuple[str, ...] = (
    "all", *(("aliases",) if HYDRA_1_4 else ()), "config", "defaults", "defaults-tree", "plugins",
    "searchpath",
)

# The stacks every entry was checked on (hydra-core, omegaconf): the suite runs on both (.ci/run).
CHECKED_ON: tuple[tuple[str, str], ...] = (("1.3.8", "2.3.1"), ("1.4.0rc3", "2.4.1rc1"))

# The kinds of entry: a private symbol imported (IMP), a private class subclassed (SUB), a private method
# overridden (HOOK), called (CALL), a private attribute read or written (ATTR), a module global swapped
# (SWAP), a file/class path or traceback frame recognised (INTRO), a library error text read (TEXT).
KINDS = ("IMP", "SUB", "HOOK", "CALL", "ATTR", "SWAP", "INTRO", "TEXT")


@dataclass(frozen=True)
class Borrowed:
    """One thing borrowed from a library's private API."""

    kind: str
    uses: str
    public: str
    guard: str

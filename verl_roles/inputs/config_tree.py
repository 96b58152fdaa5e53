"""The config tree on disk: where the shipped tree is, and which config groups a search path offers.

Hydra sorts an override into the defaults list when its key names a config group, i.e. a directory
of a config source on the search path (``model_engine``, ``role/critic``, ``hydra/launcher``). The
command-line model (:mod:`verl_roles.inputs.cmdline`) asks :class:`ConfigTree` the same question, so it
classifies ``model_engine=megatron`` as a group choice and ``trainer.nnodes=2`` as a key without
composing anything.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cache, cached_property
from importlib import resources
from pathlib import Path

from hydra.core.config_store import ConfigStore
from hydra.core.plugins import Plugins

from verl_roles.base.errors import ConfigError, Problem
from verl_roles.base.installation import PACKAGE_DIR
from verl_roles.base.layout import SELECTABLE_GROUPS


def _find_conf_dir() -> Path:
    """The config tree of the package that is running: ``verl_roles/conf`` next to this file.

    In an installed wheel that is the shipped copy; in a source checkout it is the symlink to the
    top-level ``conf/`` (resolved, so files are named by their real path). The working directory
    never matters: an installed package reads its own tree even when run inside a checkout.
    A checkout without the symlink (an archive that dropped it) falls back to ``../conf``.
    """
    package_dir = PACKAGE_DIR
    for candidate in (package_dir / "conf", package_dir.parent / "conf"):
        if (candidate / "ppo_trainer.yaml").is_file():
            return candidate.resolve()
    raise FileNotFoundError(f"verl_roles: no config tree (ppo_trainer.yaml) next to {package_dir}")


CONF_DIR = _find_conf_dir()

# Hydra's own config source (pkg://hydra.conf): its directories are Hydra's groups (hydra,
# hydra/launcher, hydra/sweeper, ...), which launcher plugins add options to.
HYDRA_CONF = "pkg://hydra.conf"


def source_directory(url: str) -> Path | None:
    """The directory of a search-path entry (``file://DIR``, ``pkg://module``, or a plain path).

    A ``pkg://`` entry names its directory only when the package is already loaded: looking up a package
    that is not would import it, i.e. run its code (the gate refuses such an entry)."""
    if url.startswith("pkg://"):
        module = url[len("pkg://"):]
        if module not in sys.modules:
            return None
        try:
            root = resources.files(module)
        except (ModuleNotFoundError, TypeError, ValueError):
            return None
        return Path(str(root)) if os.path.isdir(str(root)) else None
    path = url[len("file://"):] if url.startswith("file://") else url
    return Path(path).expanduser().resolve() if path else None


def _sub_directories(tops: Iterable[Path]) -> set[str]:
    found: set[str] = set()
    for top in tops:
        for root, dirs, _ in os.walk(top):
            relative = Path(root).relative_to(top).as_posix()
            found.update(name if relative == "." else f"{relative}/{name}" for name in dirs)
    return found


def _config_store_entries() -> tuple[set[str], dict[str, set[str]]]:
    """The groups registered in Hydra's config store (``hydra/launcher``, ``hydra/sweeper``, and those
    of launcher and sweeper plugins, which register on plugin discovery), and each one's options."""
    Plugins.instance()
    groups: set[str] = set()
    options: dict[str, set[str]] = {}

    def walk(node: dict, group: str) -> None:
        for name, child in node.items():
            if isinstance(child, dict):
                path = f"{group}/{name}" if group else name
                groups.add(path)
                walk(child, path)
            elif group and name.endswith(".yaml"):
                options.setdefault(group, set()).add(name[: -len(".yaml")])

    walk(ConfigStore.instance().repo, "")
    return groups, options


def _config_store_groups() -> set[str]:
    return _config_store_entries()[0]


@cache
def _shipped_groups() -> frozenset[str]:
    return frozenset(_sub_directories([CONF_DIR]))


def is_internal_group(name: str) -> bool:
    """A directory of the shipped tree that the engine and role options mount (``actor``, ``engine``,
    ``optim``...), never chosen on the command line: neither a selectable group nor a folder holding one."""
    selectable = name in SELECTABLE_GROUPS or any(g.startswith(name + "/") for g in SELECTABLE_GROUPS)
    return name in _shipped_groups() and not selectable


def config_dir_path(typed: str) -> str:
    """The absolute path of a user's ``--config-dir`` as typed; a :class:`ConfigError` when it is not
    a directory, or when it or one of its group folders cannot be read (Hydra would skip such a folder
    without a word, and a role option in it would silently not apply)."""
    path = os.path.abspath(os.path.expanduser(typed))
    if not os.path.isdir(path):
        raise ConfigError(
            [
                Problem(
                    key="--config-dir",
                    message=f"{typed!r} is not a directory",
                    fix="pass the directory holding your own config files (e.g. role/critic/NAME.yaml)",
                )
            ]
        )
    if not os.access(path, os.R_OK | os.X_OK):
        raise unreadable_folder(path, typed)
    return path


def unreadable_folder(folder: str, named: str | None = None) -> ConfigError:
    """A folder of config files this process cannot list or enter (permission denied): one paragraph.
    Checked where a folder is read (the ``--config-dir`` itself, a group folder a run loads from), not
    for folders no run reads."""
    where = (f"the folder {named}" if named is not None
             else "a folder of config files (of the --config-dir or a search path)")
    return ConfigError([Problem(
        key="--config-dir" if named is not None else folder,
        message=f"{where} cannot be read (permission denied), so its config files would not be found",
        fix=f"make it readable (`chmod -R u+rX {folder}`), or pass another directory",
    )])


@dataclass(frozen=True)
class ConfigTree:
    """The directories of a search path, primary tree first; their sub-directories are config groups."""

    directories: tuple[Path, ...] = (CONF_DIR,)

    @classmethod
    def with_extra(cls, extra: Iterable[str | Path | None]) -> ConfigTree:
        """The shipped tree plus each extra directory (``--config-dir``, ``hydra.searchpath`` entries)."""
        directories = [CONF_DIR]
        for entry in extra:
            directory = source_directory(str(entry)) if entry is not None else None
            if directory is not None and directory not in directories:
                directories.append(directory)
        return cls(tuple(directories))

    @cached_property
    def _groups(self) -> frozenset[str]:
        return frozenset(_sub_directories(self.directories))

    @cached_property
    def _hydra_groups(self) -> frozenset[str]:
        hydra_conf = source_directory(HYDRA_CONF)
        found = _sub_directories([hydra_conf] if hydra_conf is not None else [])
        return frozenset(found | _config_store_groups())

    def groups(self) -> frozenset[str]:
        """Every config group of the tree: each directory below a source, as a ``/`` path."""
        return self._groups

    def is_group(self, name: str) -> bool:
        """True when ``name`` is a config group: Hydra's ``group_exists`` on this search path (a
        directory of that name under a source; asked for every override, so no walk of the tree)."""
        if name.partition("/")[0] == "hydra":
            return name in self._hydra_groups
        if not name or name.startswith("/") or ".." in name.split("/"):
            return False
        return any(os.path.isdir(os.path.join(top, name)) for top in self.directories)

    def selectable_groups(self) -> dict[str, list[str]]:
        """The groups a user picks an option of, with their options: the engine and role groups
        (:data:`verl_roles.base.layout.SELECTABLE_GROUPS`, options from every directory, so a
        ``--config-dir`` role option is listed), then the groups only a user's directory has."""
        shipped = frozenset(_sub_directories([self.directories[0]]))
        found = {group: self.options(group) for group in SELECTABLE_GROUPS}
        for group in self.groups_with_options():
            if group not in shipped and group not in found:
                found[group] = self.options(group)
        return found


    def hydra_groups_with_options(self) -> dict[str, list[str]]:
        """Hydra's own groups (``hydra/launcher``, ...) that have options, and their options, sorted:
        the files of Hydra's config package and what Hydra's plugins register."""
        hydra_conf = source_directory(HYDRA_CONF)
        found: dict[str, set[str]] = {}
        if hydra_conf is not None:
            for group in _sub_directories([hydra_conf]):
                stems = {p.stem for p in (hydra_conf / group).iterdir() if p.suffix in (".yaml", ".yml")}
                if stems:
                    found.setdefault(group, set()).update(stems)
        for group, names in _config_store_entries()[1].items():
            if group.startswith("hydra/"):
                found.setdefault(group, set()).update(names)
        return {group: sorted(names) for group, names in sorted(found.items())}

    def groups_with_options(self) -> list[str]:
        """The groups a user picks an option of (a directory holding at least one config file), sorted."""
        names = set()
        for group in self.groups():
            for top in self.directories:
                folder = top / group
                if folder.is_dir() and any(p.suffix in (".yaml", ".yml") for p in folder.iterdir()):
                    names.add(group)
                    break
        return sorted(names)

    def options(self, group: str) -> list[str]:
        """The options of ``group`` (file stems), sorted."""
        found = {
            p.stem
            for top in self.directories
            if (top / group).is_dir()
            for p in (top / group).iterdir()
            if p.suffix in (".yaml", ".yml")
        }
        return sorted(found)

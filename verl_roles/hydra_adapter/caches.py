"""The composition caches of one process: parsed files, defaults lists and merged compositions.

Out of the box Hydra re-reads and re-parses every file on every composition (~40 files for the full
megatron config), rebuilds the defaults list and merges every file again. Three process-wide memos,
keyed by the set of config sources they serve:

- a file cache: every config file is loaded once and reused until a file of the tree changes (checked
  by modification time and size on every composition);
- a defaults-list memo: the defaults list of one set of group choices (Hydra's ``create_defaults_list``,
  memoized; see :func:`memoized_create_defaults_list`);
- a composition memo: the merged result of one defaults list, thawed for every later call with the
  same group choices.

Nothing is kept on disk between processes: a cached composition would freeze the values of resolvers
such as ``${now:...}`` (and with them the run directory), and reading a cache means trusting its bytes.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from importlib import resources
from typing import Any

from hydra.core.config_search_path import ConfigSearchPath
from hydra.core.default_element import ResultDefault
from hydra.core.override_parser.types import Override
from hydra.plugins.config_source import ConfigResult, ConfigSource
from omegaconf import DictConfig

from verl_roles.base.errors import ConfigError
from verl_roles.compat.hydra import (
    CallRepositoryBase,
    RepositoryBase,
    chosen_groups,
    defaults_list_with,
    defaults_lists_built_by,
    hydra_create_defaults_list,
)
from verl_roles.hydra_adapter.sources import _PACKAGE_FILES, FAST_SOURCES
from verl_roles.validation import gate


def _source_directory(source: ConfigSource) -> str | None:
    """The directory a file-backed source reads, or None (config store, zipped package)."""
    if source.scheme() == "file":
        return source.path
    if source.scheme() == "pkg":
        try:
            root = resources.files(source.path)
        except (ModuleNotFoundError, TypeError, ValueError):
            return None
        return str(root) if os.path.isdir(str(root)) else None
    return None


# The stamp of a path a cache entry depends on: (exists, modification time, size).
Stamp = tuple[bool, int, int]
_ABSENT: Stamp = (False, 0, 0)


def _stamp(path: str) -> Stamp:
    try:
        info = os.stat(path)
    except OSError:
        return _ABSENT
    return (True, info.st_mtime_ns, info.st_size)


class SourcesCache:
    """Loaded files and composed defaults lists of one set of config sources.

    Each entry records the paths it was read from (a file asked for, in every file-backed source of the
    set; a group folder looked up), and every composition checks only those: a change to one of them
    (edited, added, removed) empties the cache. The rest of a big ``--config-dir`` is never walked.
    """

    def __init__(self, sources: Sequence[ConfigSource]):
        self.directories = [d for d in (_source_directory(s) for s in sources) if d is not None]
        self.watched: dict[str, Stamp] = {}
        self.files: dict[str, ConfigResult | None] = {}
        self.groups: dict[str, bool] = {}
        self.defaults: dict[tuple[Any, ...], Any] = {}  # Hydra's DefaultsList, by group choices
        self.composed: dict[tuple[tuple[Any, ...], ...], bytes | DictConfig] = {}

    def watch_file(self, config_path: str) -> None:
        """Record what loading ``config_path`` depends on: that file in every folder of the set."""
        name = config_path if config_path.endswith((".yaml", ".yml")) else f"{config_path}.yaml"
        for directory in self.directories:
            path = os.path.join(directory, name)
            if path not in self.watched:
                self.watched[path] = _stamp(path)

    def watch_group(self, group: str) -> None:
        """Record what looking a group up depends on: its folder in every folder of the set."""
        for directory in self.directories:
            path = os.path.join(directory, group)
            if path not in self.watched:
                self.watched[path] = _stamp(path)

    def refresh(self) -> None:
        """Forget everything when a path an entry was read from was added, removed or changed."""
        if any(_stamp(path) != stamp for path, stamp in self.watched.items()):
            self.watched.clear()
            for memo in (self.files, self.groups, self.defaults, self.composed):
                memo.clear()


_CACHES: dict[tuple[tuple[str, str, str], ...], SourcesCache] = {}
_CACHES_LOCK = threading.RLock()


def sources_key(sources: Sequence[ConfigSource]) -> tuple[tuple[str, str, str], ...]:
    return tuple((type(s).__name__, s.provider, s.path) for s in sources)


def cache_for(sources: Sequence[ConfigSource]) -> SourcesCache:
    key = sources_key(sources)
    with _CACHES_LOCK:
        cache = _CACHES.get(key)
        if cache is None:
            cache = _CACHES[key] = SourcesCache(sources)
        return cache


def clear_caches() -> None:
    """Drop every cached file and composition (they are rebuilt on the next call)."""
    with _CACHES_LOCK:
        _CACHES.clear()
        _PACKAGE_FILES.clear()


class CachedRepository(RepositoryBase):
    """Hydra's config repository, reading files through the fast sources and the file cache.

    Results are shared between calls and only read to build the defaults list; a composition takes
    them over and removes them from the cache (see ``ConfigLoader.compose_defaults`` in
    :mod:`verl_roles.hydra_adapter.loader`). The cache lives outside the instance because Hydra copies its
    repository on every call.
    """

    def check_search_path(self, config_search_path: ConfigSearchPath) -> None:
        # Every config source of every composition is made here: an entry whose reading would run code
        # (a pkg:// package not loaded yet) is refused before it is touched, whatever named it.
        problems = gate.search_path_problems([str(e.path) for e in config_search_path.get_path()])
        if problems:
            raise ConfigError(problems)

    def source_for(self, source: ConfigSource, provider: Any, path: Any) -> ConfigSource:
        fast = FAST_SOURCES.get(source.scheme())
        return source if fast is None else fast(provider, path)

    def load_config(self, config_path: str) -> ConfigResult | None:
        cache = cache_for(self.get_sources())
        if config_path in cache.files:
            return cache.files[config_path]
        cache.watch_file(config_path)
        result = super().load_config(config_path)
        cache.files[config_path] = result
        return result


class CallRepository(CallRepositoryBase):
    """Hydra's per-call repository over :class:`CachedRepository`, marking a call of our loader.

    Hydra deep-copies the repository it wraps on every call; ours holds only its sources (which are
    never mutated, only replaced), so a shallow copy is enough. Group lookups are cached like files.
    """

    def group_exists(self, config_path: str) -> bool:
        cache = cache_for(self.get_sources())
        if config_path not in cache.groups:
            cache.watch_group(config_path)
            cache.groups[config_path] = self.wrapped.group_exists(config_path)
        return cache.groups[config_path]



# A group whose option is `???`, as Hydra records it among the choices when it skips the group.
_MISSING_CHOICE = "???"


def memoized_create_defaults_list(
    repo: Any,
    config_name: str | None,
    overrides_list: list[Override],
    prepend_hydra: bool,
    skip_missing: bool,
) -> Any:
    """Hydra's ``create_defaults_list``, memoized on the group choices of the command line.

    Hydra sorts an override into the defaults list when its key names a config group and its value
    is not a dict, and otherwise into the value overrides (sweep overrides are left out). The defaults
    list depends only on the former, so it is computed once per distinct set of group choices and the
    value overrides of this call are attached to it.

    ``skip_missing`` (Hydra's mode for sweeps, used by ``@hydra.main`` to read the run mode) only
    matters when a group is left at ``???``: a list computed without meeting one serves both modes,
    so a run's second composition reuses its first.
    """
    if not isinstance(repo, CallRepository):
        return hydra_create_defaults_list(repo, config_name, overrides_list, prepend_hydra, skip_missing)
    group_overrides: list[Override] = []
    value_overrides: list[Override] = []
    for override in overrides_list:
        if override.is_sweep_override():
            continue
        if isinstance(override.value(), dict) or not repo.group_exists(override.key_or_group):
            value_overrides.append(override)
        else:
            group_overrides.append(override)
    cache = cache_for(repo.get_sources())
    inputs = (config_name, tuple(o.input_line for o in group_overrides), prepend_hydra)
    keys = [(*inputs, "either"), (*inputs, skip_missing)]
    memo = next((cache.defaults[key] for key in keys if key in cache.defaults), None)
    if memo is None:
        memo = hydra_create_defaults_list(repo, config_name, group_overrides, prepend_hydra, skip_missing)
        # A group left at `???` was skipped: the list is only right in this mode.
        skipped = _MISSING_CHOICE in chosen_groups(memo).values()
        cache.defaults[keys[1] if skipped else keys[0]] = memo
    return defaults_list_with(memo, value_overrides)


@contextmanager
def defaults_list_memo() -> Iterator[None]:
    """Route Hydra's loader to :func:`memoized_create_defaults_list` for one call (put back when it
    returns). The function only memoizes for our per-call repository and hands every other caller to
    Hydra's own function unchanged."""
    with defaults_lists_built_by(memoized_create_defaults_list):
        yield


def defaults_key(defaults: Sequence[ResultDefault]) -> tuple[tuple[Any, ...], ...]:
    return tuple((d.config_path, d.package, d.is_self, d.primary) for d in defaults)

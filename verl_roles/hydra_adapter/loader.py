"""Composition through Hydra: fast, and isolated from any Hydra state of the caller.

Hydra composes in two phases. It first builds the defaults list (which file goes to which package)
from the primary config and the group overrides, then merges those files and applies the value
overrides. Out of the box both phases re-read and re-parse every file on every call (~40 files for
the full megatron config), and the merge rebuilds every node.

:class:`MemoizingConfigLoader` is Hydra's own config loader with two process-wide caches:

- a file cache: every config file is parsed once (with PyYAML's C parser when it is available)
  and reused until a file of the config tree changes (checked by modification time and size on
  every composition); the shipped tree's files are also kept across sets of config sources, so a
  new ``--config-dir`` parses only its own files;
- a composition memo: the merged result of one defaults list, copied on every later call with the
  same group choices (``model_engine=...``, ``role/critic=...``) instead of merged again.

Nothing is kept on disk between processes: a cached composition would freeze the values of
resolvers such as ``${now:...}`` (and with them the run directory), and reading a cache means
trusting its bytes. A ``@hydra.main`` run composes twice (once in Hydra's sweep mode to read the run
mode, then for the run); both use one defaults list unless a group is left at ``???``, the only case
where the two modes differ.

Everything else (override parsing, applying value overrides, Hydra's errors and warnings) is Hydra's
code, so the result is the config Hydra composes. :func:`compose_raw` uses one private loader per
search path and never touches ``GlobalHydra``; the main job (:mod:`verl_roles.hydra_adapter.app`)
hands the same loader class to Hydra, so the launchers, which call it for every job of a sweep, get
the caches too. :class:`SweepConfigLoader` is the part of it a sweep needs: a job whose overrides do
not compose fails alone.

Also here, for the commands that look inside a composition: the files of the defaults list at their
package (:func:`defaults_layers`, for ``verl-roles explain``), the key paths of a composition
(:func:`composed_key_paths`, for "did you mean"), and the shipped config of an engine
(:func:`stock_config`, which the legacy step compares a config file's values with).
"""

from __future__ import annotations

import copy
import os
import pickle
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from typing import Any

import yaml
from hydra import version as hydra_version
from hydra._internal import config_loader_impl
from hydra._internal.config_loader_impl import ConfigLoaderImpl, get_overrides_dirname
from hydra._internal.config_repository import CachingConfigRepository, ConfigRepository
from hydra._internal.core_plugins.file_config_source import FileConfigSource
from hydra._internal.core_plugins.importlib_resources_config_source import ImportlibResourcesConfigSource
from hydra._internal.defaults_list import DefaultsList
from hydra._internal.utils import create_config_search_path
from hydra.core.config_search_path import ConfigSearchPath, SearchPathQuery
from hydra.core.default_element import ResultDefault
from hydra.core.object_type import ObjectType
from hydra.core.override_parser.types import Override
from hydra.core.plugins import Plugins
from hydra.core.utils import setup_globals
from hydra.errors import HydraException
from hydra.plugins.config_source import ConfigLoadError, ConfigResult, ConfigSource
from hydra.types import RunMode
from hydra.version import VersionBase
from omegaconf import DictConfig, ListConfig, OmegaConf, open_dict, read_write
from omegaconf.errors import OmegaConfBaseException

from verl_roles import containment
from verl_roles.cmdline import hydra_parse
from verl_roles.config_tree import CONF_DIR, is_internal_group
from verl_roles.errors import ConfigError, Problem, one_paragraph
from verl_roles.layout import DEFAULT_ENGINE, ENGINE_KEY, PRIMARY_CONFIG
from verl_roles.limits import read_config_file
from verl_roles.omegaconf_adapter.nodes import key_paths
from verl_roles.omegaconf_adapter.yaml_dialect import header_line, key_lines, load_plain, load_yaml, to_config

# Set VERL_ROLES_NO_CACHE=1 to compose exactly as stock Hydra does (for benchmarks and bisecting).
NO_CACHE_ENV = "VERL_ROLES_NO_CACHE"


# --- config sources reading with the one YAML loader -----------------------------------------


# The shipped tree's files as parsed, by (file, modification time, size), pickled: shared by every set
# of config sources (each new --config-dir is a set of its own, whose caches start empty), and each
# reader gets its own copy (a composition adopts the nodes it is given).
_PACKAGE_FILES: dict[tuple[str, int, int], tuple[bytes, dict[str, str | None]]] = {}


def _file_stamp(res: Any) -> tuple[str, int, int] | None:
    """(path, modification time, size) of a resource that is a file on disk, else None (a zip)."""
    if not isinstance(res, os.PathLike):
        return None
    try:
        info = os.stat(res)
    except OSError:
        return None
    return (os.fspath(res), info.st_mtime_ns, info.st_size)


class _PackageSource(ImportlibResourcesConfigSource):
    """``pkg://`` source parsing with :func:`load_yaml`, each file once per version of it."""

    def _read_config(self, res: Any) -> ConfigResult:
        stamp = _file_stamp(res)
        parsed = _PACKAGE_FILES.get(stamp) if stamp is not None else None
        if parsed is not None:
            frozen, header = parsed
            config = _thaw(frozen)
        else:
            text = res.read_bytes().decode("utf-8")
            config = load_yaml(text, name=str(res))
            header = ConfigSource._get_header_dict(text[:512])
            frozen = _freeze(config)
            if stamp is not None and isinstance(frozen, bytes):
                _PACKAGE_FILES[stamp] = (frozen, header)
        return ConfigResult(
            config=config,
            path=f"{self.scheme()}://{self.path}",
            provider=self.provider,
            header=dict(header),
        )


class _FileSource(FileConfigSource):
    """``file://`` source (``--config-dir``, ``hydra.searchpath``) parsing with :func:`load_yaml`."""

    def load_config(self, config_path: str) -> ConfigResult:
        full_path = os.path.realpath(os.path.join(self.path, self._normalize_file_name(config_path)))
        if not os.path.exists(full_path):
            raise ConfigLoadError(f"Config not found : {full_path}")
        # A user's file: its kind, size and encoding are checked before it is parsed (verl_roles.limits),
        # and what it may set before it is merged (verl_roles.containment).
        text = read_config_file(full_path, key=full_path)
        header = _header(text, full_path)
        data = load_plain(text, full_path)
        _check_user_file(config_path, full_path, text, header, data)
        return ConfigResult(
            config=to_config(data, full_path),
            path=f"{self.scheme()}://{self.path}",
            provider=self.provider,
            header=header,
        )


def _header(text: str, file: str) -> dict[str, str | None]:
    """Hydra's reading of a file's ``# @KEY VALUE`` header lines; a malformed one names the file."""
    try:
        return ConfigSource._get_header_dict(text[:512])
    except ValueError as error:
        raise ConfigError([Problem(
            key=f"{file}, line {header_line(text)}",
            message=f"has a malformed header line: {error}",
            fix="write the header as `# @package SECTION` (one word after @package)",
        )]) from None


def _check_user_file(config_path: str, file: str, text: str, header: dict, data: Any) -> None:
    """What a file of the user's may not do (:mod:`verl_roles.containment`): be one of Hydra's own
    configs, or be a role option that reaches outside its role's section."""
    problem = containment.hydra_config_problem(config_path, file) or containment.defaults_shape_problem(
        file, data, key_lines(text)
    )
    if problem is not None:
        raise ConfigError([problem])
    group = config_path.rpartition("/")[0]
    if group in containment.ROLE_OPTION_SECTIONS:
        problems = containment.role_option_problems(
            group, file, header.get("package"), data, key_lines(text), header_line(text)
        )
        if problems:
            raise ConfigError(problems)


# Hydra's source for each scheme -> ours. Keyed by scheme: Hydra's plugin discovery may load its
# source modules a second time, so its classes are not always the ones imported here.
_FAST_SOURCES: dict[str, type[ConfigSource]] = {
    "pkg": _PackageSource,
    "file": _FileSource,
}


# --- caches ---------------------------------------------------------------------------------------


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


def _tree_stamp(directories: Sequence[str]) -> tuple[tuple[str, int, int], ...]:
    """Name, modification time and size of every YAML file under ``directories``."""
    stamp = []
    for top in directories:
        for root, dirs, files in os.walk(top):
            dirs.sort()
            for name in sorted(files):
                if name.endswith((".yaml", ".yml")):
                    path = os.path.join(root, name)
                    try:
                        info = os.stat(path)
                    except OSError:
                        continue
                    stamp.append((path, info.st_mtime_ns, info.st_size))
    return tuple(stamp)


class _SourcesCache:
    """Loaded files and composed defaults lists of one set of config sources."""

    def __init__(self, sources: Sequence[ConfigSource]):
        self.described = [(s.scheme(), s.provider, s.path, _source_directory(s)) for s in sources]
        self.directories = [d for (_, _, _, d) in self.described if d is not None]
        self.stamp = _tree_stamp(self.directories)
        self.files: dict[str, ConfigResult | None] = {}
        self.groups: dict[str, bool] = {}
        self.defaults: dict[tuple[Any, ...], DefaultsList] = {}
        self.composed: dict[tuple[tuple[Any, ...], ...], bytes | DictConfig] = {}

    def refresh(self) -> None:
        """Forget everything when a file of the tree was added, removed or changed."""
        stamp = _tree_stamp(self.directories)
        if stamp != self.stamp:
            self.stamp = stamp
            for memo in (self.files, self.groups, self.defaults, self.composed):
                memo.clear()


_CACHES: dict[tuple[tuple[str, str, str], ...], _SourcesCache] = {}
_CACHES_LOCK = threading.RLock()


def _sources_key(sources: Sequence[ConfigSource]) -> tuple[tuple[str, str, str], ...]:
    return tuple((type(s).__name__, s.provider, s.path) for s in sources)


def _cache_for(sources: Sequence[ConfigSource]) -> _SourcesCache:
    key = _sources_key(sources)
    with _CACHES_LOCK:
        cache = _CACHES.get(key)
        if cache is None:
            cache = _CACHES[key] = _SourcesCache(sources)
        return cache


def clear_caches() -> None:
    """Drop every cached file and composition (they are rebuilt on the next call)."""
    with _CACHES_LOCK:
        _CACHES.clear()
        _PACKAGE_FILES.clear()


class _CachedRepository(ConfigRepository):
    """Hydra's config repository, reading files through the fast sources and the file cache.

    Results are shared between calls and only read to build the defaults list; a composition takes
    them over and removes them from the cache (see
    :meth:`MemoizingConfigLoader._compose_config_from_defaults_list`). The cache lives outside the
    instance because Hydra copies its repository on every call.
    """

    def initialize_sources(self, config_search_path: ConfigSearchPath) -> None:
        super().initialize_sources(config_search_path)
        elements = config_search_path.get_path()
        self.sources = [
            self._fast(source, element.provider, element.path)
            for source, element in zip(self.sources, elements, strict=True)
        ]

    @staticmethod
    def _fast(source: ConfigSource, provider: Any, path: Any) -> ConfigSource:
        fast = _FAST_SOURCES.get(source.scheme())
        return source if fast is None else fast(provider, path)

    def load_config(self, config_path: str) -> ConfigResult | None:
        cache = _cache_for(self.sources)
        if config_path in cache.files:
            return cache.files[config_path]
        result = super().load_config(config_path)
        cache.files[config_path] = result
        return result


class _CallRepository(CachingConfigRepository):
    """Hydra's per-call repository over :class:`_CachedRepository`, marking a call of our loader.

    Hydra deep-copies the repository it wraps on every call; ours holds only its sources (which are
    never mutated, only replaced), so a shallow copy is enough. Group lookups are cached like files.
    """

    def __init__(self, delegate: _CachedRepository):
        self.delegate = copy.copy(delegate)
        self.cache = {}

    def group_exists(self, config_path: str) -> bool:
        groups = _cache_for(self.get_sources()).groups
        if config_path not in groups:
            groups[config_path] = self.delegate.group_exists(config_path)
        return groups[config_path]


_HYDRA_CREATE_DEFAULTS_LIST = config_loader_impl.create_defaults_list

# A group whose option is `???`, as Hydra records it among the choices when it skips the group.
_MISSING_CHOICE = "???"


def _memoized_create_defaults_list(
    repo: Any,
    config_name: str | None,
    overrides_list: list[Override],
    prepend_hydra: bool,
    skip_missing: bool,
) -> DefaultsList:
    """Hydra's ``create_defaults_list``, memoized on the group choices of the command line.

    Hydra sorts an override into the defaults list when its key names a config group and its value
    is not a dict, and otherwise into the value overrides (sweep overrides are left out). The defaults
    list depends only on the former, so it is computed once per distinct set of group choices and the
    value overrides of this call are attached to it.

    ``skip_missing`` (Hydra's mode for sweeps, used by ``@hydra.main`` to read the run mode) only
    matters when a group is left at ``???``: a list computed without meeting one serves both modes,
    so a run's second composition reuses its first.
    """
    if not isinstance(repo, _CallRepository):
        return _HYDRA_CREATE_DEFAULTS_LIST(repo, config_name, overrides_list, prepend_hydra, skip_missing)
    group_overrides: list[Override] = []
    value_overrides: list[Override] = []
    for override in overrides_list:
        if override.is_sweep_override():
            continue
        if isinstance(override.value(), dict) or not repo.group_exists(override.key_or_group):
            value_overrides.append(override)
        else:
            group_overrides.append(override)
    cache = _cache_for(repo.get_sources())
    inputs = (config_name, tuple(o.input_line for o in group_overrides), prepend_hydra)
    keys = [(*inputs, "either"), (*inputs, skip_missing)]
    memo = next((cache.defaults[key] for key in keys if key in cache.defaults), None)
    if memo is None:
        memo = _HYDRA_CREATE_DEFAULTS_LIST(repo, config_name, group_overrides, prepend_hydra, skip_missing)
        # A group left at `???` was skipped: the list is only right in this mode.
        skipped = _MISSING_CHOICE in memo.overrides.known_choices.values()
        cache.defaults[keys[1] if skipped else keys[0]] = memo
    return DefaultsList(
        defaults=memo.defaults,
        config_overrides=value_overrides,
        defaults_tree=memo.defaults_tree,
        overrides=memo.overrides,
    )


_SWAP_LOCK = threading.RLock()


@contextmanager
def _defaults_list_memo() -> Iterator[None]:
    """Route Hydra's loader to :func:`_memoized_create_defaults_list` for one call.

    The function only memoizes for our per-call repository and hands every other caller to Hydra's
    own function unchanged; it is put back when the call returns.
    """
    with _SWAP_LOCK:
        saved = config_loader_impl.create_defaults_list
        config_loader_impl.create_defaults_list = _memoized_create_defaults_list
        try:
            yield
        finally:
            config_loader_impl.create_defaults_list = saved


def _defaults_key(defaults: Sequence[ResultDefault]) -> tuple[tuple[Any, ...], ...]:
    return tuple((d.config_path, d.package, d.is_self, d.primary) for d in defaults)


# The one key of the placeholder config of a sweep job whose overrides do not compose.
FAILED_JOB_KEY = "_verl_roles_composition_error_"

# How a caller words the error of a sweep job that does not compose:
# (error, the sweep's master config, the job's task overrides) -> one paragraph.
DescribeFailure = Callable[[BaseException, DictConfig, list[str]], ConfigError]


def _plain_failure(error: BaseException, master_config: DictConfig, overrides: list[str]) -> ConfigError:
    return ConfigError([Problem(key="sweep job", message=one_paragraph(str(error)))])


class SweepConfigLoader(ConfigLoaderImpl):
    """Hydra's ``ConfigLoaderImpl``, except that one sweep job whose overrides do not compose fails
    alone: the launcher gets a placeholder config for it (:func:`failed_job_config`, the error worded
    by ``describe_failure``) instead of an exception that would end the whole sweep. It also keeps
    the sweep directory of the multirun it composed (:attr:`sweep_dir`)."""

    def __init__(
        self, config_search_path: ConfigSearchPath, describe_failure: DescribeFailure = _plain_failure
    ) -> None:
        super().__init__(config_search_path=config_search_path)
        self.describe_failure = describe_failure
        self.sweep_dir: str | None = None

    def load_configuration(
        self,
        config_name: str | None,
        overrides: list[str],
        run_mode: RunMode,
        from_shell: bool = True,
        validate_sweep_overrides: bool = True,
    ) -> DictConfig:
        problem = containment.config_name_problem(config_name or "")
        if problem is not None:
            raise ConfigError([problem])
        cfg = super().load_configuration(
            config_name, overrides, run_mode, from_shell, validate_sweep_overrides
        )
        callbacks = OmegaConf.select(cfg, "hydra.callbacks", default=None)
        problem = containment.callbacks_problem(callbacks.keys() if isinstance(callbacks, DictConfig) else ())
        if problem is not None:
            raise ConfigError([problem])
        if run_mode == RunMode.MULTIRUN and validate_sweep_overrides:
            # The master config of a multirun (Hydra's look at the run mode does not validate sweeps).
            # Resolving the directory now caches `${now:...}` in this config, so the launcher, the
            # callbacks and this value agree.
            try:
                self.sweep_dir = str(cfg.hydra.sweep.dir)
            except OmegaConfBaseException:
                self.sweep_dir = None  # Hydra reports it when the launcher resolves the directory
        return cfg

    def get_group_options(
        self,
        group_name: str,
        results_filter: ObjectType | None = ObjectType.CONFIG,
        config_name: str | None = None,
        overrides: list[str] | None = None,
    ) -> list[str]:
        """Hydra's listing of a group's options or sub-groups (what shell completion offers), without
        the internal groups the engine and role options mount: they fail when chosen."""
        options = super().get_group_options(group_name, results_filter, config_name, overrides)
        if results_filter != ObjectType.GROUP:
            return options
        return [o for o in options if not is_internal_group(f"{group_name}/{o}" if group_name else o)]

    def _parse_overrides_and_create_caching_repo(
        self, config_name: str | None, overrides: list[str]
    ) -> tuple[list[Override], Any]:
        parsed, repo = super()._parse_overrides_and_create_caching_repo(config_name, overrides)
        check_overrides(parsed, repo)
        return parsed, repo

    def _load_configuration_impl(self, *args: Any, **kwargs: Any) -> DictConfig:
        try:
            return super()._load_configuration_impl(*args, **kwargs)
        except (ValueError, IndexError, TypeError, HydraException) as error:
            problem = None if isinstance(error, ConfigError) else _override_through_a_list(error)
            if problem is None:
                raise
            raise ConfigError([problem]) from error

    def load_sweep_config(self, master_config: DictConfig, sweep_overrides: list[str]) -> DictConfig:
        try:
            return super().load_sweep_config(master_config, sweep_overrides)
        except (ConfigError, HydraException, OmegaConfBaseException, yaml.YAMLError) as error:
            task = [o for o in map(hydra_parse, sweep_overrides) if not o.is_hydra_override()]
            texts = [str(o.input_line) for o in task]
            failure = self.describe_failure(error, master_config, texts)
            return failed_job_config(master_config, task, failure)


def _override_through_a_list(error: BaseException) -> Problem | None:
    """A value override whose key goes through a list by a name or a position it does not have
    (``trainer.logger.extra=1``, ``trainer.logger.5=1``): OmegaConf raises a bare ``ValueError`` or
    ``IndexError`` for it (Hydra wraps only the second, with no key named). The override and the
    config it was applied to are read from the frame of Hydra's ``_apply_overrides_to_config``."""
    traceback = error.__traceback__
    while traceback is not None and traceback.tb_frame.f_code.co_name != "_apply_overrides_to_config":
        traceback = traceback.tb_next
    if traceback is None:
        return None
    override, cfg = traceback.tb_frame.f_locals.get("override"), traceback.tb_frame.f_locals.get("cfg")
    if not isinstance(override, Override) or not isinstance(cfg, DictConfig):
        return None
    key = override.key_or_group
    parts = key.split(".")
    for depth in range(1, len(parts)):
        prefix = ".".join(parts[:depth])
        node = OmegaConf.select(cfg, prefix, default=None, throw_on_missing=False)
        if isinstance(node, ListConfig):
            items = f"items 0 to {len(node) - 1}" if len(node) else "no items"
            return Problem(
                key=key,
                message=f"goes through {prefix}, which is a list ({items}): `{parts[depth]}` is not the "
                "number of one of its items",
                origin=f"the command line override `{override.input_line}`",
                fix=f"set the whole list (`{prefix}=[a,b]`)"
                + (f", or one existing item by its number (`{prefix}.0=...`)" if len(node) else ""),
            )
        if not isinstance(node, DictConfig):
            return None
    return None


def check_overrides(parsed: Sequence[Override], repo: Any) -> None:
    """Refuse, before Hydra uses them, the overrides :mod:`verl_roles.containment` forbids: a group
    choice that is not an option name (``critic=0``, ``model_engine=null``, a path), a list for a
    group that takes one option, and a Hydra setting that names code Hydra would call."""
    problems = []
    for override in parsed:
        if override.is_sweep_override():
            continue
        key, value = override.key_or_group, override.value()
        if key.startswith("hydra.") or key == "hydra":
            problem = containment.hydra_override_problem(str(override.input_line), key)
        elif override.is_delete() and value is not None and repo.group_exists(key):
            problem = containment.group_deletion_problem(str(override.input_line), key, value)
        elif not override.is_delete() and not isinstance(value, dict) and repo.group_exists(key):
            options = repo.get_group_options(key, results_filter=ObjectType.CONFIG)
            problem = containment.group_choice_problem(
                str(override.input_line), key, value, options, also_a_section=is_internal_group(key)
            )
        else:
            problem = None
        if problem is not None:
            problems.append(problem)
    if problems:
        raise ConfigError(problems)


def failed_job_config(
    master_config: DictConfig, task: Sequence[Override], failure: ConfigError
) -> DictConfig:
    """A placeholder config for a sweep job whose overrides do not compose.

    It carries the sweep's Hydra settings (so the launcher gives the job its directory and number as
    usual), the job's overrides, and the error (its text and its one-line headline); the main job sees
    :data:`FAILED_JOB_KEY` and reports the job as failed instead of running it.
    """
    cfg = copy.deepcopy(master_config)
    with read_write(cfg), open_dict(cfg):
        for key in [k for k in cfg if k != "hydra"]:
            del cfg[key]
        cfg[FAILED_JOB_KEY] = {"message": failure.render(), "headline": failure.headline()}
        dirname = cfg.hydra.job.config.override_dirname
        cfg.hydra.overrides.task = [str(o.input_line) for o in task]
        cfg.hydra.job.override_dirname = get_overrides_dirname(
            overrides=list(task),
            kv_sep=dirname.kv_sep,
            item_sep=dirname.item_sep,
            exclude_keys=dirname.exclude_keys,
        )
    OmegaConf.copy_cache(from_config=master_config, to_config=cfg)
    return cfg


def composition_error(cfg: DictConfig) -> tuple[str, str] | None:
    """The error of a placeholder job made by :func:`failed_job_config` (its text and its one-line
    headline), else None."""
    if FAILED_JOB_KEY in cfg and len(cfg) == 1:
        failure = cfg[FAILED_JOB_KEY]
        return str(failure.message), str(failure.headline)
    return None


class MemoizingConfigLoader(SweepConfigLoader):
    """Hydra's ``ConfigLoaderImpl`` with the file cache and the two memos."""

    def __init__(
        self, config_search_path: ConfigSearchPath, describe_failure: DescribeFailure = _plain_failure
    ) -> None:
        super().__init__(config_search_path, describe_failure)
        self.repository = _CachedRepository(config_search_path=config_search_path)

    def _load_configuration_impl(self, *args: Any, **kwargs: Any) -> DictConfig:
        with _defaults_list_memo():
            return super()._load_configuration_impl(*args, **kwargs)

    def _parse_overrides_and_create_caching_repo(
        self, config_name: str | None, overrides: list[str]
    ) -> tuple[list[Override], _CallRepository]:
        _cache_for(self.repository.get_sources()).refresh()
        parsed = [hydra_parse(text) for text in overrides]
        repo = _CallRepository(self.repository)
        self._process_config_searchpath(config_name, parsed, repo)
        if _sources_key(repo.get_sources()) != _sources_key(self.repository.get_sources()):
            # hydra.searchpath added sources: check their files too.
            _cache_for(repo.get_sources()).refresh()
        check_overrides(parsed, repo)
        return parsed, repo

    def _compose_config_from_defaults_list(self, defaults: list[ResultDefault], repo: Any) -> DictConfig:
        cache = _cache_for(repo.get_sources())
        key = _defaults_key(defaults)
        template = cache.composed.get(key)
        if template is not None:
            return _thaw(template)
        cfg = super()._compose_config_from_defaults_list(defaults, repo)
        # The merge adopts the nodes of the files it merges, as in stock Hydra: it was handed the loaded
        # files themselves, so drop them from the file cache (a later new defaults list reads them again).
        for default in defaults:
            cache.files.pop(str(default.config_path), None)
        cache.composed[key] = _freeze(cfg)
        return cfg


def _freeze(cfg: DictConfig) -> bytes | DictConfig:
    """What the composition memo stores: the pickled config (unpickling is ~5x faster than a deep
    copy), or a deep copy when something in it cannot be pickled."""
    try:
        return pickle.dumps(cfg, protocol=pickle.HIGHEST_PROTOCOL)
    except (pickle.PicklingError, TypeError, AttributeError):
        return copy.deepcopy(cfg)


def _thaw(template: bytes | DictConfig) -> DictConfig:
    """A private copy of a stored composition."""
    if isinstance(template, bytes):
        return pickle.loads(template)  # noqa: S301 - bytes we pickled ourselves in this process
    return copy.deepcopy(template)


def _caching_enabled() -> bool:
    return os.environ.get(NO_CACHE_ENV, "") in ("", "0")


def loader_class() -> type[SweepConfigLoader]:
    """:class:`MemoizingConfigLoader`, or Hydra's own composition when ``VERL_ROLES_NO_CACHE=1``."""
    return MemoizingConfigLoader if _caching_enabled() else SweepConfigLoader


# --- entry points ---------------------------------------------------------------------------------

_LOADERS: dict[tuple[type[ConfigLoaderImpl], str | None], ConfigLoaderImpl] = {}
_COMPOSE_LOCK = threading.Lock()


def search_path(config_dir: str | None = None) -> ConfigSearchPath:
    """Hydra's search path of our config tree, with ``config_dir`` where ``@hydra.main`` puts a
    ``--config-dir`` (after conf/, before the structured configs)."""
    path = create_config_search_path(str(CONF_DIR))
    if config_dir is not None:
        anchor = SearchPathQuery(provider="schema")
        path.prepend(provider="command-line", path=f"file://{config_dir}", anchor=anchor)
    return path


def _private_loader(config_dir: str | None) -> ConfigLoaderImpl:
    kind = loader_class()
    key = (kind, config_dir)
    loader = _LOADERS.get(key)
    if loader is None:
        Plugins.instance()  # discovers the config sources, as Hydra does on start-up
        setup_globals()  # Hydra's resolvers (now, hydra, python_version), as in any Hydra app
        loader = _LOADERS[key] = kind(search_path(config_dir))
    return loader


@contextmanager
def version_base_1_3() -> Iterator[None]:
    """Hydra's behaviour for ``version_base=None`` during one call; the caller's setting is put back."""
    version_base = VersionBase.instance()
    saved = version_base.version_base
    hydra_version.setbase(None)  # what @hydra.main(version_base=None) does
    try:
        yield
    finally:
        version_base.version_base = saved


def compose_raw(config_name: str, overrides: Sequence[str], config_dir: str | None = None) -> DictConfig:
    """Compose ``config_name`` with ``overrides`` and return Hydra's result (unresolved).

    ``config_dir`` (an absolute path) is searched like ``--config-dir``. Uses one private loader per
    search path and leaves no global Hydra state behind.
    """
    return compose_with_choices(config_name, overrides, config_dir)[0]


def compose_with_choices(
    config_name: str, overrides: Sequence[str], config_dir: str | None = None
) -> tuple[DictConfig, dict[str, str | None]]:
    """:func:`compose_raw`, and the option chosen for each config group (``hydra.runtime.choices``)."""
    with _COMPOSE_LOCK, version_base_1_3():
        cfg = _private_loader(config_dir).load_configuration(
            config_name=config_name, overrides=list(overrides), run_mode=RunMode.RUN, from_shell=False
        )
    choices = OmegaConf.to_container(cfg.hydra.runtime.choices)
    with open_dict(cfg):
        del cfg["hydra"]
    return cfg, {str(k): v for k, v in choices.items() if not str(k).startswith("hydra/")}


@lru_cache(maxsize=4)
def stock_config(engine: str) -> DictConfig:
    """Our own config for ``engine`` with no user input (unresolved; shared: read it, never change it).

    Composed when asked (the legacy step asks only when a config file uses a legacy key), once per
    engine per process.
    """
    return compose_raw(PRIMARY_CONFIG, [f"{ENGINE_KEY}={engine}"])


@lru_cache(maxsize=16)
def composed_key_paths(
    config_name: str, overrides: tuple[str, ...], config_dir: str | None
) -> frozenset[str]:
    """Every key path of the composition (plus ``model_engine=<value>``); empty if it fails too.

    For wording "did you mean" on the error path. Cached: a long-lived process (a notebook, the test
    suite) asks for the same few compositions again and again, and the answer only words a suggestion.
    """
    try:
        cfg = compose_raw(config_name, list(overrides), config_dir)
    except Exception:  # noqa: BLE001 - best effort: without a key set we just give no suggestion
        return frozenset()
    return frozenset([*key_paths(cfg), f"{ENGINE_KEY}={cfg.get(ENGINE_KEY, DEFAULT_ENGINE)}"])


def defaults_files(
    config_name: str, overrides: Sequence[str], config_dir: str | None = None
) -> list[tuple[str, str]]:
    """(config path, package) of every config file of the defaults list, Hydra's own excepted, in merge
    order (package ``""`` is the top level). The memoized defaults list: no file is loaded again."""
    with _COMPOSE_LOCK, version_base_1_3(), _defaults_list_memo():
        loader = _private_loader(config_dir)
        defaults = loader.compute_defaults_list(config_name, list(overrides), RunMode.RUN)
    return [
        (d.config_path, d.package or "")
        for d in defaults.defaults
        if d.config_path is not None and not d.config_path.startswith("hydra/")
    ]


@dataclass(frozen=True)
class LoadedDefault:
    """One file of a composition's defaults list, as Hydra loads it: its config path (``role/critic/
    default``), the package it is mounted at, the search-path entry it came from, and its content at
    that package."""

    config_path: str
    package: str | None
    source: str
    config: DictConfig


def defaults_layers(
    config_name: str, overrides: Sequence[str], config_dir: str | None
) -> list[LoadedDefault]:
    """Every config file of the defaults list (Hydra's own excepted), in merge order.

    Through the private loader of ``config_dir``: the defaults list is the memoized one and each file
    comes from the file cache (as a private copy: a later composition adopts the cached nodes). The
    caller composes first, so a user's file was already checked.
    """
    with _COMPOSE_LOCK, version_base_1_3(), _defaults_list_memo():
        loader = _private_loader(config_dir)
        _, repo = loader._parse_overrides_and_create_caching_repo(config_name, list(overrides))
        defaults = loader.compute_defaults_list(config_name, list(overrides), RunMode.RUN)
        layers = []
        for default in defaults.defaults:
            if default.config_path is None or default.config_path.startswith("hydra/"):
                continue
            loaded = loader._load_single_config(default=default, repo=repo)
            config = loaded.config
            if config is repo.load_config(config_path=default.config_path).config:
                # Mounted at the top level, the cached file itself: a copy (elsewhere Hydra copied it).
                config = _thaw(_freeze(config))
            layers.append(LoadedDefault(default.config_path, default.package, loaded.path, config))
    return layers

"""Composition through Hydra: fast, and isolated from any Hydra state of the caller.

Hydra composes in two phases. It first builds the defaults list (which file goes to which package)
from the primary config and the group overrides, then merges those files and applies the value
overrides. Out of the box both phases re-read and re-parse every file on every call (~40 files for
the full megatron config), and the merge rebuilds every node.

:class:`MemoizingConfigLoader` is Hydra's own config loader with two process-wide caches:

- a file cache: every config file is parsed once (with PyYAML's C parser when it is available)
  and reused until a file of the config tree changes (checked by modification time and size on
  every composition);
- a composition memo: the merged result of one defaults list, copied on every later call with the
  same group choices (``model_engine=...``, ``role/critic=...``) instead of merged again.

Nothing is kept on disk between processes: a cached composition would freeze the values of
resolvers such as ``${now:...}`` (and with them the run directory), and reading a cache means
trusting its bytes. A ``@hydra.main`` run composes twice (once in Hydra's sweep mode to read the run
mode, then for the run); both use one defaults list unless a group is left at ``???``, the only case
where the two modes differ.

Everything else (override parsing, applying value overrides, Hydra's errors and warnings) is Hydra's
code, so the result is the config Hydra composes. ``compose_raw`` uses one private loader and never
touches ``GlobalHydra``; :func:`memoized_hydra_main` makes ``@hydra.main`` (and the launchers, which
call the same loader for every job of a sweep) use it too.
"""

from __future__ import annotations

import copy
import io
import os
import pickle
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from importlib import resources
from typing import Any

import yaml
from hydra import initialize_config_dir
from hydra import version as hydra_version
from hydra._internal import config_loader_impl, defaults_list
from hydra._internal import hydra as hydra_internal
from hydra._internal.config_loader_impl import ConfigLoaderImpl
from hydra._internal.config_repository import CachingConfigRepository, ConfigRepository
from hydra._internal.core_plugins.file_config_source import FileConfigSource
from hydra._internal.core_plugins.importlib_resources_config_source import ImportlibResourcesConfigSource
from hydra._internal.defaults_list import DefaultsList
from hydra._internal.utils import create_config_search_path
from hydra.core.config_search_path import ConfigSearchPath, SearchPathQuery
from hydra.core.default_element import InputDefault, ResultDefault
from hydra.core.global_hydra import GlobalHydra
from hydra.core.override_parser.types import Override
from hydra.core.plugins import Plugins
from hydra.core.utils import JobRuntime, setup_globals
from hydra.errors import HydraException
from hydra.plugins.config_source import ConfigLoadError, ConfigResult, ConfigSource
from hydra.types import RunMode
from hydra.version import VersionBase
from omegaconf import DictConfig, ListConfig, OmegaConf, open_dict
from omegaconf._utils import get_yaml_loader
from omegaconf.errors import OmegaConfBaseException

from verl_roles.cmdline import hydra_parse
from verl_roles.config_tree import CONF_DIR

# Set VERL_ROLES_NO_CACHE=1 to compose exactly as stock Hydra does (for benchmarks and bisecting).
NO_CACHE_ENV = "VERL_ROLES_NO_CACHE"


# --- YAML -----------------------------------------------------------------------------------------

_OMEGACONF_LOADER = get_yaml_loader()


class _YamlLoader(getattr(yaml, "CSafeLoader", yaml.SafeLoader)):  # type: ignore[misc]
    """OmegaConf's YAML dialect on PyYAML's C parser: the same float rule, no timestamps, and an
    error for a duplicate key (what ``OmegaConf.load`` does, only faster)."""

    yaml_implicit_resolvers = _OMEGACONF_LOADER.yaml_implicit_resolvers

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> Any:
        seen: set[str] = set()
        for key_node, _ in node.value:
            if key_node.tag != yaml.resolver.BaseResolver.DEFAULT_SCALAR_TAG:
                continue
            if key_node.value in seen:
                raise yaml.constructor.ConstructorError(
                    "while constructing a mapping", node.start_mark,
                    f"found duplicate key {key_node.value}", key_node.start_mark,
                )
            seen.add(key_node.value)
        return super().construct_mapping(node, deep=deep)


def load_yaml(text: str, name: str = "<unicode string>") -> DictConfig | ListConfig:
    """``OmegaConf.load`` of ``text`` on the C parser; ``name`` (the file) is what YAML errors cite."""
    stream = io.StringIO(text)
    stream.name = name
    obj = yaml.load(stream, Loader=_YamlLoader)  # noqa: S506 - a SafeLoader subclass
    if obj is not None and not isinstance(obj, (list, dict, str)):
        raise OSError(f"Invalid loaded object type: {type(obj).__name__}")
    return OmegaConf.create() if obj is None else OmegaConf.create(obj)


class _PackageSource(ImportlibResourcesConfigSource):
    """``pkg://`` source parsing with :func:`load_yaml`."""

    def _read_config(self, res: Any) -> ConfigResult:
        text = res.read_bytes().decode("utf-8")
        return ConfigResult(
            config=load_yaml(text, name=str(res)),
            path=f"{self.scheme()}://{self.path}",
            provider=self.provider,
            header=ConfigSource._get_header_dict(text[:512]),
        )


class _FileSource(FileConfigSource):
    """``file://`` source (``--config-dir``, ``hydra.searchpath``) parsing with :func:`load_yaml`."""

    def load_config(self, config_path: str) -> ConfigResult:
        full_path = os.path.realpath(os.path.join(self.path, self._normalize_file_name(config_path)))
        if not os.path.exists(full_path):
            raise ConfigLoadError(f"Config not found : {full_path}")
        with open(full_path, encoding="utf-8") as handle:
            text = handle.read()
        return ConfigResult(
            config=load_yaml(text, name=full_path),
            path=f"{self.scheme()}://{self.path}",
            provider=self.provider,
            header=ConfigSource._get_header_dict(text[:512]),
        )


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
_HYDRA_CHECK_NOT_MISSING = defaults_list._check_not_missing

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
        memo = _computed_defaults_list(repo, cache, keys, group_overrides, skip_missing)
    return DefaultsList(
        defaults=memo.defaults,
        config_overrides=value_overrides,
        defaults_tree=memo.defaults_tree,
        overrides=memo.overrides,
    )


def _computed_defaults_list(
    repo: Any,
    cache: _SourcesCache,
    keys: list[tuple[Any, ...]],
    group_overrides: list[Override],
    skip_missing: bool,
) -> DefaultsList:
    config_name, _, prepend_hydra, _ = keys[0]
    skipped: list[InputDefault] = []

    def check_not_missing(repo: Any, default: InputDefault, skip_missing: bool) -> bool:
        missing = _HYDRA_CHECK_NOT_MISSING(repo=repo, default=default, skip_missing=skip_missing)
        if missing:
            skipped.append(default)
        return missing

    def compute() -> DefaultsList:
        # Swapped for this call only; _SWAP_LOCK is held for the whole composition.
        skipped.clear()
        defaults_list._check_not_missing = check_not_missing
        try:
            return _HYDRA_CREATE_DEFAULTS_LIST(
                repo, config_name, group_overrides, prepend_hydra, skip_missing
            )
        finally:
            defaults_list._check_not_missing = _HYDRA_CHECK_NOT_MISSING

    memo = compute()
    # A group left at ``???`` was skipped: the list is only right in this mode.
    cache.defaults[keys[1] if skipped else keys[0]] = memo
    return memo


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


class SweepConfigLoader(ConfigLoaderImpl):
    """Hydra's ``ConfigLoaderImpl``, except that one sweep job whose overrides do not compose fails
    alone: the launcher gets a placeholder config for it (see :func:`verl_roles.sweep.failed_job_config`)
    instead of an exception that would end the whole sweep."""

    def load_configuration(self, *args: Any, **kwargs: Any) -> DictConfig:
        """Hydra's composition, with :class:`verl_roles.sweep.SweepSummary` among the Hydra callbacks."""
        cfg = super().load_configuration(*args, **kwargs)
        from verl_roles.sweep import register_callback

        register_callback(cfg)
        return cfg

    def load_sweep_config(self, master_config: DictConfig, sweep_overrides: list[str]) -> DictConfig:
        try:
            return super().load_sweep_config(master_config, sweep_overrides)
        except (HydraException, OmegaConfBaseException, yaml.YAMLError) as error:
            from verl_roles.sweep import failed_job_config

            return failed_job_config(master_config, sweep_overrides, error)


class MemoizingConfigLoader(SweepConfigLoader):
    """Hydra's ``ConfigLoaderImpl`` with the file cache and the two memos."""

    def __init__(self, config_search_path: ConfigSearchPath) -> None:
        super().__init__(config_search_path=config_search_path)
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


def _loader_class() -> type[ConfigLoaderImpl]:
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
    loader_class = _loader_class()
    key = (loader_class, config_dir)
    loader = _LOADERS.get(key)
    if loader is None:
        Plugins.instance()  # discovers the config sources, as Hydra does on start-up
        setup_globals()  # Hydra's resolvers (now, hydra, python_version), as in any Hydra app
        loader = _LOADERS[key] = loader_class(config_search_path=search_path(config_dir))
    return loader


@contextmanager
def _version_base_1_3() -> Iterator[None]:
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
    with _COMPOSE_LOCK, _version_base_1_3():
        cfg = _private_loader(config_dir).load_configuration(
            config_name=config_name, overrides=list(overrides), run_mode=RunMode.RUN, from_shell=False
        )
    choices = OmegaConf.to_container(cfg.hydra.runtime.choices)
    with open_dict(cfg):
        del cfg["hydra"]
    return cfg, {str(k): v for k, v in choices.items() if not str(k).startswith("hydra/")}


@contextmanager
def isolated_hydra() -> Iterator[None]:
    """Initialise a stock GlobalHydra on our config tree, and put back the caller's afterwards.

    For the few callers that need Hydra's global API (e.g. ``config_loader().compute_defaults_list``
    to word an error); composition itself goes through :func:`compose_raw`.
    """
    global_hydra = GlobalHydra.instance()
    saved = global_hydra.hydra if global_hydra.is_initialized() else None
    # Initialising Hydra also renames the running job ("app"), which names a sweep job's log file.
    saved_job_name = JobRuntime.instance().get("name")
    global_hydra.clear()
    try:
        with initialize_config_dir(config_dir=str(CONF_DIR), version_base=None):
            yield
    finally:
        GlobalHydra.instance().clear()
        if saved is not None:
            GlobalHydra.instance().initialize(saved)
        JobRuntime.instance().set("name", saved_job_name)


@contextmanager
def memoized_hydra_main() -> Iterator[None]:
    """Let ``@hydra.main`` apps started inside this block compose through :class:`MemoizingConfigLoader`
    (:class:`SweepConfigLoader` when ``VERL_ROLES_NO_CACHE=1``).

    Hydra builds its loader in ``Hydra.create_main_hydra2``; the launchers reuse that loader for every
    job of a sweep (and pickle it to their worker processes), so each job after the first gets the
    cached files and composition.
    """
    saved = hydra_internal.ConfigLoaderImpl
    hydra_internal.ConfigLoaderImpl = _loader_class()
    try:
        yield
    finally:
        hydra_internal.ConfigLoaderImpl = saved


__all__ = [
    "CONF_DIR",
    "MemoizingConfigLoader",
    "SweepConfigLoader",
    "clear_caches",
    "compose_raw",
    "isolated_hydra",
    "load_yaml",
    "memoized_hydra_main",
]

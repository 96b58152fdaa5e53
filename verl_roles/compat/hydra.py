"""What verl_roles borrows from Hydra's private API: its loader and repositories (for the caches and the
gate), its config sources (for the one YAML loader), what ``@hydra.main`` runs, two module globals swapped
for one call, and the file and class paths we recognise.

Hydra offers no public hook to choose a config loader, cache a repository or read files with another
parser, so composition subclasses Hydra's own classes. The subclasses of verl_roles never name a private
hook: the base classes here give each hook Hydra calls a public name of ours (``compose_defaults``,
``load_one``, ...), and each original a public name too (``hydra_compose_defaults``, ...). Where Hydra 1.3
and 1.4 differ (1.4's ``_load_configuration``, the parsed overrides it hands on, the interpolation map it
no longer builds, ``version_base`` deprecated), the branch is here, on :data:`~verl_roles.compat.HYDRA_1_4`.
Each entry is listed in :data:`BORROWED` with the public behaviour it stands for and its guard.
"""

from __future__ import annotations

import copy
import os
import threading
import traceback
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import TracebackType
from typing import Any

from hydra import version as hydra_version
from hydra._internal import config_loader_impl
from hydra._internal import defaults_list as hydra_defaults_list
from hydra._internal import hydra as hydra_internal
from hydra._internal.config_loader_impl import ConfigLoaderImpl
from hydra._internal.config_repository import CachingConfigRepository, ConfigRepository
from hydra._internal.core_plugins.file_config_source import FileConfigSource
from hydra._internal.core_plugins.importlib_resources_config_source import ImportlibResourcesConfigSource
from hydra._internal.defaults_list import DefaultsList
from hydra._internal.utils import _run_hydra, create_config_search_path, get_args_parser
from hydra.core.config_search_path import ConfigSearchPath
from hydra.core.default_element import ResultDefault
from hydra.core.override_parser.types import Override
from hydra.core.utils import JobReturn
from hydra.plugins.config_source import ConfigResult, ConfigSource
from hydra.types import RunMode
from hydra.version import VersionBase
from omegaconf import DictConfig

from verl_roles.compat import HYDRA_1_4, Borrowed

_CACHE = "tests/test_compose_cache.py::test_cached_compose_and_fast_resolution_equal_stock_hydra"
_PLAIN = "tests/test_compose_cache.py::test_plain_composition_equals_hydras_merge_node_for_node"
_CHANGED = "tests/test_compose_cache.py::test_a_changed_config_file_is_read_again"
_INTERPOLATED = "tests/test_compose_cache.py::test_an_interpolated_default_is_resolved"
_SWEEP = "tests/test_sweep.py::test_grid_writes_every_job_and_the_summary"
_EXPLAIN = "tests/test_explain.py::test_chain_is_exact_for_every_key"
_USER_DIR = "tests/test_roles.py::test_user_role_option_from_config_dir"
_SEARCHPATH = "tests/test_gate.py"
_BAD = "tests/test_bad_inputs.py"

BORROWED: tuple[Borrowed, ...] = (
    Borrowed("IMP", "hydra._internal.config_loader_impl.ConfigLoaderImpl",
             "Hydra's config loader (compose, compose a sweep job, list a group's options)", _CACHE),
    Borrowed("SUB", "ConfigLoaderImpl -> LoaderBase",
             "composition as Hydra does it, with our caches and gate", _CACHE),
    Borrowed("HOOK", "ConfigLoaderImpl._load_configuration_impl -> LoaderBase.guard_composition",
             "one composition, its errors reworded", _BAD),
    Borrowed("HOOK", "ConfigLoaderImpl._load_configuration (1.4) / load_configuration (1.3) -> compose_run",
             "compose one run (Hydra's compose API, @hydra.main)", _CACHE),
    Borrowed("HOOK", "ConfigLoaderImpl._parse_overrides_and_create_caching_repo (1.4 adds the parsed "
             "overrides) -> LoaderBase.parse_overrides_and_make_repo",
             "parse the overrides, make the call's repository, apply hydra.searchpath", _SEARCHPATH),
    Borrowed("HOOK", "ConfigLoaderImpl._compose_config_from_defaults_list -> LoaderBase.compose_defaults",
             "merge the files of a defaults list", _PLAIN),
    Borrowed("HOOK", "ConfigLoaderImpl._load_single_config -> LoaderBase.load_one",
             "load one file at its package", _EXPLAIN),
    Borrowed("CALL", "ConfigLoaderImpl._process_config_searchpath",
             "apply hydra.searchpath to a repository", _SEARCHPATH),
    Borrowed("ATTR", "ConfigLoaderImpl.repository (replaced)", "where Hydra's loader reads files", _CACHE),
    Borrowed("IMP", "hydra._internal.config_repository.ConfigRepository",
             "Hydra's repository of config sources", _CHANGED),
    Borrowed("SUB", "ConfigRepository -> RepositoryBase (initialize_sources, .sources replaced)",
             "the config sources of a search path", _CHANGED),
    Borrowed("IMP", "hydra._internal.config_repository.CachingConfigRepository",
             "Hydra's per-call repository", _CACHE),
    Borrowed("SUB", "CachingConfigRepository -> CallRepositoryBase (.delegate, .cache; no deep copy)",
             "Hydra's per-call repository over ours", _CACHE),
    Borrowed("IMP", "hydra._internal.core_plugins.file_config_source.FileConfigSource",
             "the file:// config source", _USER_DIR),
    Borrowed("SUB", "FileConfigSource -> FileSourceBase", "file:// read by our YAML loader", _USER_DIR),
    Borrowed("IMP", "hydra._internal.core_plugins.importlib_resources_config_source."
             "ImportlibResourcesConfigSource", "the pkg:// config source", _CACHE),
    Borrowed("SUB", "ImportlibResourcesConfigSource -> PackageSourceBase",
             "pkg:// read by our YAML loader", _CACHE),
    Borrowed("HOOK", "ImportlibResourcesConfigSource._read_config -> PackageSourceBase.read_resource",
             "read one pkg:// file", _CACHE),
    Borrowed("CALL", "ConfigSource._normalize_file_name", "a config name's file (name -> name.yaml)", _PLAIN),
    Borrowed("CALL", "ConfigSource._get_header_dict", "a file's `# @package` header", _CACHE),
    Borrowed("IMP", "hydra._internal.defaults_list.DefaultsList",
             "a defaults list, built with this call's value overrides", _CACHE),
    Borrowed("ATTR", "DefaultsList.overrides.known_choices",
             "the group choices a defaults list met (??? when skipped)", _CACHE),
    Borrowed("SWAP", "hydra._internal.config_loader_impl.create_defaults_list (one call, under a lock)",
             "build the defaults list (memoized per set of group choices)", _CACHE),
    Borrowed("SWAP", "hydra._internal.defaults_list._create_interpolation_map (1.3 only; 1.4 removed it)",
             "the map an interpolated default is resolved with, built only when read", _INTERPOLATED),
    Borrowed("SWAP", "hydra._internal.hydra.ConfigLoaderImpl (a class; one app run, under a lock)",
             "Hydra builds its app's loader with ours", "tests/test_sweep.py"),
    Borrowed("IMP", "hydra._internal.utils.create_config_search_path",
             "the search path @hydra.main(config_path=...) builds", _CACHE),
    Borrowed("IMP", "hydra._internal.utils.get_args_parser", "Hydra's command-line flags",
             "tests/test_cmdline.py::test_flag_table_is_hydras"),
    Borrowed("IMP", "hydra._internal.utils._run_hydra", "what @hydra.main runs, on a given argument list",
             "tests/test_main_cli.py::test_hydra_flags_work"),
    Borrowed("ATTR", "JobReturn._return_value",
             "a job's return value or exception, without JobReturn.return_value's re-raise", _SWEEP),
    Borrowed("CALL", "Override._get_value_element_as_str", "a Python value as override text",
             "tests/test_legacy.py::test_value_translation_applies_to_every_sweep_value"),
    Borrowed("ATTR", "VersionBase.instance().version_base (1.3 only; 1.4 deprecates version_base)",
             "behave as version_base=None for one call, the caller's setting put back",
             "tests/test_compose.py"),
    Borrowed("INTRO", "the frame of ConfigLoaderImpl._apply_overrides_to_config (its locals override, cfg)",
             "which override went through a list", _BAD),
    Borrowed("INTRO", "Hydra's and its plugins' source files (HYDRA_COMPONENTS)",
             "which user setting an exception from Hydra or a plugin is about", _BAD),
    Borrowed("INTRO", "BASIC_SWEEPER, the class path hydra.sweeper._target_ names",
             "the sweeper is Hydra's basic sweeper", "tests/test_sweep.py"),
)

# --- the loader -------------------------------------------------------------------------------------


class LoaderBase(ConfigLoaderImpl):
    """Hydra's config loader with each private hook Hydra calls under a public name of ours.

    A subclass overrides ``compose_run`` (around a whole composition), ``guard_composition`` (around
    Hydra's composition proper), ``parse_overrides_and_make_repo``, ``compose_defaults`` and ``load_one``;
    Hydra's own behaviour of each is ``hydra_*``."""

    def __init__(self, config_search_path: ConfigSearchPath) -> None:
        super().__init__(config_search_path=config_search_path)

    # What a subclass overrides (the defaults are Hydra's behaviour).

    def compose_run(
        self, compose: Callable[[], DictConfig], config_name: str | None, run_mode: RunMode
    ) -> DictConfig:
        """One composition of a run or a sweep job: ``compose()`` runs Hydra's."""
        return compose()

    def guard_composition(self, compose: Callable[[], DictConfig]) -> DictConfig:
        """Hydra's composition proper (defaults list, merge, value overrides): ``compose()`` runs it."""
        return compose()

    def parse_overrides_and_make_repo(
        self, config_name: str | None, overrides: list[str], parsed: list[Override] | None = None
    ) -> tuple[list[Override], Any]:
        return self.hydra_parse_overrides_and_make_repo(config_name, overrides, parsed)

    def compose_defaults(self, defaults: list[ResultDefault], repo: Any) -> DictConfig:
        return self.hydra_compose_defaults(defaults, repo)

    def load_one(self, default: ResultDefault, repo: Any) -> ConfigResult:
        return self.hydra_load_one(default, repo)

    # Hydra's own behaviour, under public names.

    def hydra_parse_overrides_and_make_repo(
        self, config_name: str | None, overrides: list[str], parsed: list[Override] | None = None
    ) -> tuple[list[Override], Any]:
        if HYDRA_1_4:
            return super()._parse_overrides_and_create_caching_repo(config_name, overrides, parsed)
        return super()._parse_overrides_and_create_caching_repo(config_name, overrides)

    def hydra_compose_defaults(self, defaults: list[ResultDefault], repo: Any) -> DictConfig:
        return super()._compose_config_from_defaults_list(defaults, repo)

    def hydra_load_one(self, default: ResultDefault, repo: Any) -> ConfigResult:
        return super()._load_single_config(default=default, repo=repo)

    def apply_searchpath(self, config_name: str | None, parsed: list[Override], repo: Any) -> None:
        """Add the folders ``hydra.searchpath`` names (primary config, command line) to ``repo``."""
        self._process_config_searchpath(config_name, parsed, repo)

    def replace_repository(self, repository: Any) -> None:
        self.repository = repository

    # The hooks Hydra calls.

    if HYDRA_1_4:

        def load_configuration(
            self,
            config_name: str | None,
            overrides: list[str],
            run_mode: RunMode,
            from_shell: bool = True,
            validate_sweep_overrides: bool = True,
            skip_missing_defaults: bool = False,
        ) -> DictConfig:
            # Hydra 1.4 routes this, load_sweep_config and its own compose through _load_configuration.
            return super().load_configuration(
                config_name, overrides, run_mode, from_shell, validate_sweep_overrides, skip_missing_defaults)

        def _load_configuration(
            self, config_name: str | None, overrides: list[str], run_mode: RunMode, *args: Any, **kwargs: Any
        ) -> DictConfig:
            return self.compose_run(
                lambda: super(LoaderBase, self)._load_configuration(
                    config_name, overrides, run_mode, *args, **kwargs),
                config_name, run_mode)

        def _parse_overrides_and_create_caching_repo(
            self, config_name: str | None, overrides: list[str], parsed: list[Override] | None = None
        ) -> tuple[list[Override], Any]:
            return self.parse_overrides_and_make_repo(config_name, overrides, parsed)

    else:

        def load_configuration(
            self,
            config_name: str | None,
            overrides: list[str],
            run_mode: RunMode,
            from_shell: bool = True,
            validate_sweep_overrides: bool = True,
        ) -> DictConfig:
            return self.compose_run(
                lambda: super(LoaderBase, self).load_configuration(
                    config_name, overrides, run_mode, from_shell, validate_sweep_overrides),
                config_name, run_mode)

        def _parse_overrides_and_create_caching_repo(
            self, config_name: str | None, overrides: list[str]
        ) -> tuple[list[Override], Any]:
            return self.parse_overrides_and_make_repo(config_name, overrides)

    def _load_configuration_impl(self, *args: Any, **kwargs: Any) -> DictConfig:
        hydra_compose = super()._load_configuration_impl
        return self.guard_composition(lambda: hydra_compose(*args, **kwargs))

    def _compose_config_from_defaults_list(self, defaults: list[ResultDefault], repo: Any) -> DictConfig:
        return self.compose_defaults(defaults, repo)

    def _load_single_config(self, default: ResultDefault, repo: Any) -> ConfigResult:
        return self.load_one(default, repo)


def override_applied_when(error: BaseException) -> tuple[Any, Any] | None:
    """(override, config) Hydra was applying when ``error`` was raised inside its
    ``_apply_overrides_to_config``, read from that frame; None when it was raised elsewhere."""
    traceback: TracebackType | None = error.__traceback__
    while traceback is not None and traceback.tb_frame.f_code.co_name != "_apply_overrides_to_config":
        traceback = traceback.tb_next
    if traceback is None:
        return None
    return traceback.tb_frame.f_locals.get("override"), traceback.tb_frame.f_locals.get("cfg")


# --- repositories and sources -----------------------------------------------------------------------


class RepositoryBase(ConfigRepository):
    """Hydra's repository of config sources; a subclass checks a search path before any source is made
    (``check_search_path``) and may replace each source Hydra made (``source_for``)."""

    def initialize_sources(self, config_search_path: ConfigSearchPath) -> None:
        self.check_search_path(config_search_path)
        super().initialize_sources(config_search_path)
        elements = config_search_path.get_path()
        self.sources = [
            self.source_for(source, element.provider, element.path)
            for source, element in zip(self.sources, elements, strict=True)
        ]

    def check_search_path(self, config_search_path: ConfigSearchPath) -> None:
        """Raise before a source of ``config_search_path`` is made (nothing by default)."""

    def source_for(self, source: ConfigSource, provider: Any, path: Any) -> ConfigSource:
        return source


class CallRepositoryBase(CachingConfigRepository):
    """Hydra's per-call repository over ``delegate``, which it copies shallowly (Hydra deep-copies it:
    ours holds only its sources, never mutated, only replaced)."""

    def __init__(self, delegate: Any) -> None:
        self.delegate = copy.copy(delegate)
        self.cache = {}

    @property
    def wrapped(self) -> Any:
        """The repository this call reads through."""
        return self.delegate


class FileSourceBase(FileConfigSource):
    """Hydra's ``file://`` config source."""

    def file_name(self, config_path: str) -> str:
        return self._normalize_file_name(config_path)


class PackageSourceBase(ImportlibResourcesConfigSource):
    """Hydra's ``pkg://`` config source; a subclass reads a resource with ``read_resource``."""

    def read_resource(self, res: Any) -> ConfigResult:
        return super()._read_config(res)

    def _read_config(self, res: Any) -> ConfigResult:
        return self.read_resource(res)


def file_name(config_path: str) -> str:
    """The file name Hydra looks for a config name in (``name`` -> ``name.yaml``)."""
    return ConfigSource._normalize_file_name(filename=config_path)


def header_of(text: str) -> dict[str, str | None]:
    """The ``# @package`` header (and others) of a config file's first lines, as Hydra reads it."""
    return ConfigSource._get_header_dict(text)


# --- the defaults list --------------------------------------------------------------------------------

hydra_create_defaults_list = config_loader_impl.create_defaults_list


def defaults_list_with(memo: DefaultsList, value_overrides: list[Override]) -> DefaultsList:
    """``memo`` with this call's value overrides."""
    return DefaultsList(defaults=memo.defaults, config_overrides=value_overrides,
                        defaults_tree=memo.defaults_tree, overrides=memo.overrides)


def chosen_groups(defaults_list: DefaultsList) -> dict[str, Any]:
    """The group choices a defaults list met (a group skipped at ``???`` holds ``???``)."""
    return dict(defaults_list.overrides.known_choices)


_HYDRA_INTERPOLATION_MAP = getattr(hydra_defaults_list, "_create_interpolation_map", None)


def _interpolation_map_when_used(overrides: Any, defaults: list[Any], self_added: bool) -> Any:
    """Hydra 1.3's map of the group choices an interpolated default is resolved with (``${model_engine}``
    in a defaults list), built only for a defaults list that has such a default: Hydra builds it for every
    config of the tree and reads it only for those (~5% of a cold run). Hydra 1.4 resolves interpolated
    defaults in a pass of its own and has no such map."""
    if any(default.is_interpolation() for default in defaults):
        return _HYDRA_INTERPOLATION_MAP(overrides, defaults, self_added)  # type: ignore[misc]
    return None


_SWAP_LOCK = threading.RLock()


@contextmanager
def defaults_lists_built_by(create: Callable[..., DefaultsList]) -> Iterator[None]:
    """Hydra's loader builds its defaults lists with ``create`` (called as Hydra's
    ``create_defaults_list(repo, config_name, overrides, prepend_hydra, skip_missing)``) for one call,
    and (Hydra 1.3) its defaults tree builds the interpolation map only when read; both put back after."""
    with _SWAP_LOCK:
        saved = config_loader_impl.create_defaults_list
        config_loader_impl.create_defaults_list = create
        if _HYDRA_INTERPOLATION_MAP is not None:
            hydra_defaults_list._create_interpolation_map = _interpolation_map_when_used
        try:
            yield
        finally:
            config_loader_impl.create_defaults_list = saved
            if _HYDRA_INTERPOLATION_MAP is not None:
                hydra_defaults_list._create_interpolation_map = _HYDRA_INTERPOLATION_MAP


# --- the app ------------------------------------------------------------------------------------------

_APP_LOCK = threading.Lock()


@contextmanager
def app_loader_class(loader_class: type) -> Iterator[None]:
    """Hydra's app (``_run_hydra``) builds its config loader from ``loader_class`` (called with the search
    path, as Hydra calls its own class) for the duration of the call."""
    with _APP_LOCK:
        saved = hydra_internal.ConfigLoaderImpl
        hydra_internal.ConfigLoaderImpl = loader_class  # type: ignore[misc]
        try:
            yield
        finally:
            hydra_internal.ConfigLoaderImpl = saved  # type: ignore[misc]


search_path_of = create_config_search_path
args_parser = get_args_parser
run_hydra = _run_hydra


def job_outcome(job_return: JobReturn) -> object:
    """A finished job's return value (its exception when it raised), read without Hydra's re-raise."""
    return job_return._return_value


@contextmanager
def current_version_base() -> Iterator[None]:
    """Hydra's behaviour for ``version_base=None`` during one call, the caller's setting put back. Hydra
    1.4 deprecates ``version_base`` (setting it warns) and always behaves as its current version."""
    if HYDRA_1_4:
        yield
        return
    version_base = VersionBase.instance()
    saved = version_base.version_base
    hydra_version.setbase(None)  # what @hydra.main(version_base=None) does
    try:
        yield
    finally:
        version_base.version_base = saved


def override_value_text(value: Any) -> str:
    """``value`` as Hydra writes an override's value (raises for what it cannot write)."""
    return Override._get_value_element_as_str(value)


# The class path ``hydra.sweeper._target_`` names for Hydra's basic sweeper.
BASIC_SWEEPER = "hydra._internal.core_plugins.basic_sweeper.BasicSweeper"

# Code of Hydra and its plugins, by source file, and the settings of the user's that reach it: an exception
# it raises (its own checks, or a library it hands the settings to) is about those settings.
HYDRA_COMPONENTS: tuple[tuple[str, str, str], ...] = (
    ("logging/config.py", "hydra.job_logging / hydra.hydra_logging", "Python's logging (set up by Hydra)"),
    ("hydra_plugins/hydra_joblib_launcher", "hydra.launcher", "the joblib launcher"),
    ("joblib/", "hydra.launcher", "joblib (the joblib launcher)"),
    ("hydra_plugins/hydra_submitit_launcher", "hydra.launcher", "the submitit launcher"),
    ("submitit/", "hydra.launcher", "submitit (the submitit launcher)"),
    ("hydra/_internal/core_plugins/basic_sweeper.py", "hydra.sweeper", "Hydra's basic sweeper"),
    ("hydra/_internal/core_plugins/basic_launcher.py", "hydra.launcher", "Hydra's basic launcher"),
    ("hydra/_internal/utils.py", "the command line", "Hydra's command line"),
    ("hydra/_internal/hydra.py", "the command line", "Hydra"),
)


def component_that_raised(error: BaseException, ours: str) -> tuple[str, str] | None:
    """(the user's settings that reach it, its name) of the code of Hydra, a plugin or a library they hand
    settings to that raised ``error``, by the source files of its traceback; None when a frame under
    ``ours`` (a folder) comes first from the innermost, or no known component is in it."""
    frames = [frame.f_code.co_filename for frame, _ in traceback.walk_tb(error.__traceback__)]
    if not frames or os.path.realpath(frames[-1]).startswith(ours):
        return None
    for filename in reversed(frames):
        if os.path.realpath(filename).startswith(ours):
            return None
        for part, settings, component in HYDRA_COMPONENTS:
            if part in filename.replace(os.sep, "/"):
                return settings, component
    return None

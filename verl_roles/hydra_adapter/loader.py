"""Composition through Hydra's own loader: fast, gated, and isolated from any Hydra state of the caller.

:class:`ConfigLoader` is Hydra's ``ConfigLoaderImpl`` (through :class:`verl_roles.compat.hydra.LoaderBase`,
which names the hooks it overrides) with

- the caches of :mod:`verl_roles.hydra_adapter.caches` (each file parsed once, one defaults list per
  set of group choices, one merge per defaults list);
- the gate on every composition (:mod:`verl_roles.validation.gate`): the command line's group choices and
Hydra
  settings are checked before Hydra uses them, every config source before it is read, and the
  composed ``hydra`` node before anyone (Hydra's logging set-up, its callbacks, a launcher) acts on
  it: a code slot holds only what a shipped config puts there;
- a *served* run (:meth:`ConfigLoader.serve`): the main job composes and validates a run (or every job
  of a sweep) before Hydra starts, then hands Hydra what it composed instead of letting it compose
  again (:mod:`verl_roles.hydra_adapter.serving`).

Everything else (override parsing, applying value overrides, Hydra's errors and warnings) is Hydra's
code, so the result is the config Hydra composes.
"""

from __future__ import annotations

import copy
import os
import threading
from collections.abc import Callable, Sequence
from dataclasses import replace
from functools import cache
from typing import Any

from hydra.core.config_search_path import ConfigSearchPath
from hydra.core.default_element import ResultDefault
from hydra.core.object_type import ObjectType
from hydra.core.override_parser.types import Override
from hydra.errors import HydraException
from hydra.types import RunMode
from omegaconf import DictConfig, ListConfig, OmegaConf

from verl_roles.base import releases
from verl_roles.base.errors import ConfigError, Problem
from verl_roles.compat.hydra import LoaderBase, override_applied_when
from verl_roles.hydra_adapter import plain_compose
from verl_roles.hydra_adapter.caches import (
    CachedRepository,
    CallRepository,
    cache_for,
    defaults_key,
    defaults_list_memo,
    sources_key,
)
from verl_roles.hydra_adapter.plain_compose import PlainComposition
from verl_roles.hydra_adapter.release_layer import Layer, for_defaults
from verl_roles.hydra_adapter.sources import freeze, is_ours, is_shipped, thaw
from verl_roles.hydra_adapter.user_files import overridden_values, shadowed_files
from verl_roles.inputs import containment
from verl_roles.inputs.cmdline import hydra_parse
from verl_roles.inputs.config_tree import is_internal_group
from verl_roles.validation import gate

Catalog = frozenset[tuple[str, str]]


class ConfigLoader(LoaderBase):
    """Hydra's config loader with our caches and the gate (see the module docstring)."""

    def __init__(self, config_search_path: ConfigSearchPath) -> None:
        super().__init__(config_search_path)
        self.replace_repository(CachedRepository(config_search_path=config_search_path))
        # The code slots the shipped files of the last composition's defaults list hold, and the files
        # of a user's folder in it (package, path, content), to name where a refused value came from.
        self._catalog: Catalog = frozenset()
        self._user_files: tuple[tuple[str, str, DictConfig], ...] = ()
        # What the main job composed before Hydra started (None: compose as usual).
        self.served: Any = None
        # The layer of the verl release the defaults list being loaded picks (None: nothing to apply).
        self.layer: Layer | None = None
        # While Hydra merges the ``hydra`` node of a plain composition: the view to load for a default
        # that also holds task keys (by ``id`` of the default).
        self._views: dict[int, Any] = {}

    # --- a served run ----------------------------------------------------------------------------

    def serve(self, served: Any) -> None:
        """Hand Hydra ``served`` (a :class:`verl_roles.hydra_adapter.serving.Served`) for every
        composition of this app run, instead of composing again."""
        self.served = served

    def __getstate__(self) -> dict[str, Any]:
        # Launchers pickle the loader to their workers: without the compositions of this process.
        state = dict(self.__dict__)
        state["served"] = None if self.served is None else self.served.for_worker()
        return state

    def compose_run(
        self, compose: Callable[[], DictConfig], config_name: str | None, run_mode: RunMode
    ) -> DictConfig:
        if self.served is not None:
            return self.served.config(run_mode)
        problem = containment.config_name_problem(config_name or "")
        if problem is not None:
            raise ConfigError([problem])
        self._catalog = frozenset()
        with defaults_list_memo():
            cfg = compose()
        self._gate_hydra_node(cfg)
        return cfg

    def load_sweep_config(self, master_config: DictConfig, sweep_overrides: list[str]) -> DictConfig:
        if self.served is not None:
            return self.served.job_config(master_config, sweep_overrides)
        return super().load_sweep_config(master_config, sweep_overrides)

    # --- the gate ---------------------------------------------------------------------------------

    def _gate_hydra_node(self, cfg: DictConfig) -> None:
        hydra = cfg.get("hydra")
        if hydra is None:
            return
        problems = gate.hydra_problems(hydra, self._catalog)
        if problems:
            # Something this composition's own shipped files do not hold: ask every shipped option.
            problems = gate.hydra_problems(hydra, shipped_catalog(self.repository))
        problems += gate.logging_problems(hydra)
        if problems:
            raise ConfigError([replace(p, origin=p.origin or self._file_setting(p.key)) for p in problems])

    def _file_setting(self, key: str) -> str:
        """"the file F" of a user's folder that sets ``key`` in the last composition, else ''."""
        for package, path, config in reversed(self._user_files):
            prefix = f"{package}." if package else ""
            if prefix and not key.startswith(prefix):
                continue
            found = OmegaConf.select(config, key[len(prefix):], default=_NOTHING, throw_on_missing=False,
                                     throw_on_resolution_failure=False)
            if found is not _NOTHING:
                return f"the file {path}"
        return ""

    def parse_overrides_and_make_repo(
        self, config_name: str | None, overrides: list[str], parsed: list[Override] | None = None
    ) -> tuple[list[Override], CallRepository]:
        cache_for(self.repository.get_sources()).refresh()
        # Hydra 1.4 hands over the overrides it parsed (its hydra.aliases expanded).
        parsed = list(parsed) if parsed is not None else [hydra_parse(text) for text in overrides]
        repo = CallRepository(self.repository)
        self.apply_searchpath(config_name, parsed, repo)
        if sources_key(repo.get_sources()) != sources_key(self.repository.get_sources()):
            # hydra.searchpath added sources: check their files too.
            cache_for(repo.get_sources()).refresh()
        check_overrides(parsed, repo)
        return parsed, repo

    def guard_composition(self, compose: Callable[[], DictConfig]) -> DictConfig:
        try:
            return compose()
        except (ValueError, IndexError, TypeError, HydraException) as error:
            problem = None if isinstance(error, ConfigError) else _override_through_a_list(error)
            if problem is None:
                raise
            raise ConfigError([problem]) from error

    def use_layer_of(self, defaults: Sequence[ResultDefault]) -> None:
        """Load the files of ``defaults`` with the layer of the verl release it picks."""
        self.layer = for_defaults(defaults)

    def load_one(self, default: ResultDefault, repo: Any) -> Any:
        view = self._views.get(id(default))
        if view is not None:
            return view
        result = self.hydra_load_one(default, repo)
        if self.layer is None or not is_ours(result):
            return result
        return self.layer.apply(default, result)

    def compose_defaults(self, defaults: list[ResultDefault], repo: Any) -> DictConfig:
        self.use_layer_of(defaults)
        cache = cache_for(repo.get_sources())
        key = (defaults_key(defaults), releases.layers_on())
        memo = cache.composed.get(key)
        if memo is not None:
            template, self._catalog, self._user_files = memo
            if isinstance(template, plain_compose.PlainComposition):
                return template.thaw()
            return thaw(template)
        loaded = [(d, repo.load_config(config_path=str(d.config_path))) for d in defaults
                  if d.config_path is not None]
        # A user's file that would do nothing: never read (a shipped file of its name comes first) or its
        # values replaced by a shipped file later in the defaults list (hydra_adapter/user_files.py).
        silent = shadowed_files(loaded, repo.get_sources()) or overridden_values(loaded)
        if silent:
            raise ConfigError(silent)
        catalog = _catalog_of((d.package or "", result) for d, result in loaded)
        user_files = tuple(
            (d.package or "", _file_path(result, str(d.config_path)), copy.deepcopy(result.config))
            for d, result in loaded if result is not None and not is_shipped(result)
        )
        composed = self._compose_plain(defaults, repo)
        if composed is not None:
            cfg, template = composed
        else:
            cfg = self.hydra_compose_defaults(defaults, repo)
            # The merge adopts the nodes of the files it merges, as in stock Hydra: it was handed the loaded
            # files themselves, so drop them from the file cache (a later new defaults list reads them
            # again).
            for default in defaults:
                cache.files.pop(str(default.config_path), None)
            template = freeze(cfg)
        cache.composed[key] = (template, catalog, user_files)
        self._catalog, self._user_files = catalog, user_files
        return cfg

    def _compose_plain(
        self, defaults: list[ResultDefault], repo: Any
    ) -> tuple[DictConfig, PlainComposition] | None:
        """The composition of ``defaults`` with its task part merged as plain data
        (:mod:`verl_roles.hydra_adapter.plain_compose`), and what the memo keeps of it; None when the
        plain merge does not model it exactly (Hydra's own merge then composes it)."""
        try:
            split = plain_compose.plan(defaults, repo, self.layer)
            task = plain_compose.built_task(split.task)
        except plain_compose.NotPlain:
            return None
        cache = cache_for(repo.get_sources())
        self._views = split.views
        try:
            root = self.hydra_compose_defaults(split.hydra_defaults, repo)
        except Exception:  # noqa: BLE001 - Hydra's own composition of the whole list raises it as Hydra does
            return None
        finally:
            self._views = {}
            for default in split.hydra_defaults:
                if id(default) not in split.views:
                    cache.files.pop(str(default.config_path), None)
        try:
            template = plain_compose.PlainComposition(root, split.task)
            return plain_compose.add_task(root, task), template
        except plain_compose.NotPlain:
            return None

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


_NOTHING = object()


def _file_path(result: Any, config_path: str) -> str:
    folder = str(result.path).partition("://")[2]
    name = config_path if config_path.endswith((".yaml", ".yml")) else f"{config_path}.yaml"
    return os.path.join(folder, name)


def _catalog_of(results: Any) -> Catalog:
    """The (key, value) pairs of the code slots in the shipped ones of ``results`` ((package, loaded
    config) pairs), each key at the package the config mounts at."""
    found: set[tuple[str, str]] = set()
    for package, result in results:
        if result is not None and is_shipped(result):
            prefix = f"{package}." if package else ""
            found.update(slot.allowed_as for slot in gate.code_slots(result.config, prefix))
    return frozenset(found)


_CATALOG_LOCK = threading.Lock()


def shipped_catalog(repository: CachedRepository) -> Catalog:
    """The code slots of every option of every Hydra group the shipped sources offer (Hydra's own
    configs, the config store its plugins fill, our tree): what a composed ``hydra`` node may name."""
    with _CATALOG_LOCK:
        return _shipped_catalog(sources_key(repository.get_sources()), repository)


@cache
def _shipped_catalog(key: object, repository: CachedRepository) -> Catalog:
    del key  # the cache key: the set of sources
    results = []
    pending = ["hydra"]
    while pending:
        group = pending.pop()
        pending += [f"{group}/{sub}" for sub in repository.get_group_options(group, ObjectType.GROUP)]
        for option in repository.get_group_options(group, ObjectType.CONFIG):
            result = repository.load_config(config_path=f"{group}/{option}")
            header = result.header.get("package") if result is not None else None
            package = header or group.replace("/", ".")
            results.append((package, result))
    return _catalog_of(results)


def _override_through_a_list(error: BaseException) -> Problem | None:
    """A value override whose key goes through a list by a name or a position it does not have
    (``trainer.logger.extra=1``, ``trainer.logger.5=1``): OmegaConf raises a bare ``ValueError`` or
    ``IndexError`` for it (Hydra wraps only the second, with no key named). The override and the
    config it was applied to are read from the frame of Hydra's ``_apply_overrides_to_config``."""
    applying = override_applied_when(error)
    if applying is None:
        return None
    override, cfg = applying
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
    """Refuse, before Hydra uses them, the group choices :mod:`verl_roles.inputs.containment` forbids: a
    choice that is not an option name (``critic=0``, ``model_engine=null``, a path) and a list for a group
    that takes one option. (What a Hydra setting names is the gate's, on the composed result.)"""
    problems = []
    for override in parsed:
        if override.is_sweep_override():
            continue
        key, value = override.key_or_group, override.value()
        if key.startswith("hydra.") or key == "hydra":
            problem = None
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

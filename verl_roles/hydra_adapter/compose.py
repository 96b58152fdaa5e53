"""The entry points of composition: what the API hands the commands.

Every call composes through one private :class:`~verl_roles.hydra_adapter.loader.ConfigLoader` per
search path (cached for the process) and leaves no global Hydra state behind. Also here, for the
commands that look inside a composition: the files of the defaults list at their package
(:func:`defaults_layers`, for ``verl-roles explain``), the user's file that sets a key
(:func:`file_origin`, for error messages), the key paths of a composition (:func:`composed_key_paths`,
for "did you mean"), and the shipped config of an engine (:func:`stock_config`).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from functools import lru_cache

from hydra.core.config_search_path import ConfigSearchPath, SearchPathQuery
from hydra.core.plugins import Plugins
from hydra.core.utils import JobRuntime, setup_globals
from hydra.types import RunMode
from omegaconf import DictConfig, OmegaConf, open_dict

from verl_roles.base import releases
from verl_roles.base.layout import DEFAULT_ENGINE, ENGINE_KEY, PRIMARY_CONFIG
from verl_roles.base.limits import read_config_file
from verl_roles.compat.hydra import current_version_base, search_path_of
from verl_roles.hydra_adapter.caches import defaults_list_memo
from verl_roles.hydra_adapter.loader import ConfigLoader
from verl_roles.hydra_adapter.sources import freeze, thaw
from verl_roles.inputs import paths
from verl_roles.inputs.config_tree import CONF_DIR
from verl_roles.omegaconf_adapter.nodes import key_paths
from verl_roles.omegaconf_adapter.yaml_dialect import key_lines

_LOADERS: dict[str | None, ConfigLoader] = {}
_COMPOSE_LOCK = threading.Lock()


def search_path(config_dir: str | None = None) -> ConfigSearchPath:
    """Hydra's search path of our config tree, with ``config_dir`` where ``@hydra.main`` puts a
    ``--config-dir`` (after conf/, before the structured configs)."""
    path = search_path_of(str(CONF_DIR))
    if config_dir is not None:
        anchor = SearchPathQuery(provider="schema")
        path.prepend(provider="command-line", path=f"file://{config_dir}", anchor=anchor)
    return path


def _private_loader(config_dir: str | None) -> ConfigLoader:
    loader = _LOADERS.get(config_dir)
    if loader is None:
        Plugins.instance()  # discovers the config sources, as Hydra does on start-up
        setup_globals()  # Hydra's resolvers (now, hydra, python_version), as in any Hydra app
        loader = _LOADERS[config_dir] = ConfigLoader(search_path(config_dir))
    return loader


# Hydra's behaviour for ``version_base=None`` during one call; the caller's setting is put back.
version_base_1_3 = current_version_base


def compose_raw(config_name: str, overrides: Sequence[str], config_dir: str | None = None) -> DictConfig:
    """Compose ``config_name`` with ``overrides`` and return Hydra's result (unresolved).

    ``config_dir`` (an absolute path) is searched like ``--config-dir``. Uses one private loader per
    search path and leaves no global Hydra state behind.
    """
    return compose_with_choices(config_name, overrides, config_dir)[0]


def compose_full(
    config_name: str,
    overrides: Sequence[str],
    config_dir: str | None = None,
    run_mode: RunMode = RunMode.RUN,
    job_name: str | None = None,
) -> DictConfig:
    """The whole composition, Hydra's own ``hydra`` node included (gated like every composition).

    ``job_name`` is the name Hydra gives the app's job (``hydra.job.name`` unless the config sets it),
    as Hydra's run loop would."""
    with _COMPOSE_LOCK, version_base_1_3(), _job_name(job_name):
        return _private_loader(config_dir).load_configuration(
            config_name=config_name, overrides=list(overrides), run_mode=run_mode, from_shell=False
        )


def compose_sweep_job(
    master: DictConfig, overrides: Sequence[str], config_dir: str | None, job_name: str | None = None
) -> DictConfig:
    """One job of a sweep whose master config is ``master``, as Hydra's launchers compose it."""
    with _COMPOSE_LOCK, version_base_1_3(), _job_name(job_name):
        return _private_loader(config_dir).load_sweep_config(master, list(overrides))


@contextmanager
def _job_name(name: str | None) -> Iterator[None]:
    """Hydra's record of the app's job name set to ``name`` for one call (the caller's is put back)."""
    if name is None:
        yield
        return
    runtime = JobRuntime.instance()
    saved = runtime.get("name")
    runtime.set("name", name)
    try:
        yield
    finally:
        runtime.set("name", saved)


def split_hydra(cfg: DictConfig) -> tuple[DictConfig, dict[str, str | None]]:
    """``cfg`` without its ``hydra`` node (in place), and the option chosen for each config group."""
    choices = OmegaConf.to_container(cfg.hydra.runtime.choices)
    with open_dict(cfg):
        del cfg["hydra"]
    return cfg, {str(k): v for k, v in choices.items() if not str(k).startswith("hydra/")}


def compose_with_choices(
    config_name: str, overrides: Sequence[str], config_dir: str | None = None
) -> tuple[DictConfig, dict[str, str | None]]:
    """:func:`compose_raw`, and the option chosen for each config group (``hydra.runtime.choices``)."""
    return split_hydra(compose_full(config_name, overrides, config_dir))


@lru_cache(maxsize=8)
def stock_config(engine: str, release: str = releases.DEFAULT_RELEASE) -> DictConfig:
    """Our own config for ``engine`` and verl ``release`` with no user input (unresolved; shared: read
    it, never change it).

    Composed when asked (the legacy step asks only when a config file uses a legacy key), once per
    engine and release per process.
    """
    return compose_raw(PRIMARY_CONFIG, [f"{ENGINE_KEY}={engine}", releases.choice(release)])


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
    with _COMPOSE_LOCK, version_base_1_3(), defaults_list_memo():
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
    config_name: str,
    overrides: Sequence[str],
    config_dir: str | None,
    from_source: Callable[[str], bool] | None = None,
) -> list[LoadedDefault]:
    """Every config file of the defaults list (Hydra's own excepted), in merge order; with
    ``from_source``, only the files whose search-path entry (``file:///...``, ``pkg://...``) it accepts.

    Through the private loader of ``config_dir``: the defaults list is the memoized one and each file
    comes from the file cache (as a private copy: a later composition adopts the cached nodes). The
    caller composes first, so a user's file was already checked.
    """
    with _COMPOSE_LOCK, version_base_1_3(), defaults_list_memo():
        loader = _private_loader(config_dir)
        _, repo = loader.parse_overrides_and_make_repo(config_name, list(overrides))
        defaults = loader.compute_defaults_list(config_name, list(overrides), RunMode.RUN)
        loader.use_layer_of(defaults.defaults)
        layers = []
        for default in defaults.defaults:
            if default.config_path is None or default.config_path.startswith("hydra/"):
                continue
            if from_source is not None:
                cached = repo.load_config(config_path=default.config_path)
                if cached is None or not from_source(cached.path):
                    continue
            loaded = loader.load_one(default, repo)
            config = loaded.config
            if config is repo.load_config(config_path=default.config_path).config:
                # Mounted at the top level, the cached file itself: a copy (elsewhere Hydra copied it).
                config = thaw(freeze(config))
            layers.append(LoadedDefault(default.config_path, default.package, loaded.path, config))
    return layers


def file_origin(config_name: str, overrides: Sequence[str], config_dir: str | None, key: str) -> str | None:
    """"the file F, line N" for the last file of a user's folder that sets ``key`` (or a section holding
    it) in this composition, else None. For error messages; a composition that fails gives None."""
    try:
        layers = defaults_layers(config_name, overrides, config_dir)
    except Exception:  # noqa: BLE001 - best effort: the message then names no file
        return None
    for layer in reversed(layers):
        scheme, _, folder = layer.source.partition("://")
        if scheme != "file" or os.path.realpath(folder) == str(CONF_DIR):
            continue
        # The layer's content sits at its package (Hydra wraps it there); the file holds it relative.
        if not _has_key(layer.config, key):
            continue
        package = f"{layer.package}." if layer.package else ""
        relative = key[len(package):] if key.startswith(package) else key
        path = os.path.join(folder, f"{layer.config_path}.yaml")
        try:
            lines = key_lines(read_config_file(path, path))
        except Exception:  # noqa: BLE001 - the message then names the file without a line
            lines = {}
        line = next((lines[k] for k in (relative, *_parents(relative)) if k in lines), None)
        return f"the file {path}" + (f", line {line}" if line else "")
    return None


def user_file_keys(config_name: str, overrides: Sequence[str], config_dir: str | None) -> dict[str, str]:
    """Every leaf key a file of the user's folders sets in this composition (its full key, at the file's
    package) -> "the file F", in merge order (the last file that sets a key names it); empty when the
    composition reads no file of the user's or fails."""
    try:
        layers = defaults_layers(config_name, overrides, config_dir, from_source=_a_users_folder)
    except Exception:  # noqa: BLE001 - best effort: only what the user is told about changes
        return {}
    found: dict[str, str] = {}
    for layer in layers:
        folder = layer.source.partition("://")[2]
        path = os.path.join(folder, f"{layer.config_path}.yaml")
        plain = OmegaConf.to_container(layer.config, resolve=False)
        for keys, _ in paths.leaves(plain):
            if keys and keys[0] != "defaults":
                found[paths.dotted(keys)] = f"the file {path}"
    return found


def _a_users_folder(source: str) -> bool:
    """``source`` (a search-path entry) is a folder of the user's, not our shipped config tree."""
    scheme, _, folder = source.partition("://")
    return scheme == "file" and os.path.realpath(folder) != str(CONF_DIR)


_NOTHING = object()


def _has_key(cfg: DictConfig, key: str) -> bool:
    found = OmegaConf.select(cfg, key, default=_NOTHING, throw_on_missing=False,
                             throw_on_resolution_failure=False)
    return found is not _NOTHING


def _parents(key: str) -> Iterator[str]:
    parts = key.split(".")
    for depth in range(len(parts) - 1, 0, -1):
        yield ".".join(parts[:depth])

"""A defaults list merged as plain data: Hydra's composition, with one OmegaConf build instead of ~40 merges.

Hydra composes by creating a DictConfig for every file, embedding it at its package (a deep copy) and
merging it into the result (OmegaConf's merge re-validates and re-parents every node): about 0.2 s of a
cold run for the ~40 files of the megatron config. The task part of those files (every top-level key but
``hydra``) is untyped YAML, and OmegaConf merges untyped data by a few fixed rules
(:mod:`verl_roles.omegaconf_adapter.plain_merge`). So a defaults list is composed in two parts:

- the ``hydra`` node: Hydra's own ``_compose_config_from_defaults_list`` on the files that have one (its
  structured schema, its checks and errors), where a file that also holds task keys (the primary config)
  is handed over as its ``hydra`` node alone;
- the task part: each file's data as read (:func:`verl_roles.hydra_adapter.sources.plain_of`), embedded
  at its package, with the verl release's layer applied, merged by the plain rules in the defaults
  list's order, then built into nodes once (:mod:`verl_roles.omegaconf_adapter.build`) and put after the
  ``hydra`` node, where Hydra's merge would have put each key.

Whatever the plain rules do not model exactly raises :class:`NotPlain` (a structured or schema-matched
config, a file that is not a mapping, a merge OmegaConf refuses, an interpolation whose resolution during
the merge could matter, a value OmegaConf would convert, a ``hydra.searchpath`` outside the primary
config, a ``hydra`` setting that refers to a task key, a defaults list that does not start with Hydra's
node), and the caller composes with Hydra's own
code instead. ``tests/test_compose_cache.py`` checks node for node that both give the same config.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from hydra.core.default_element import ResultDefault
from hydra.plugins.config_source import ConfigLoadError, ConfigResult
from omegaconf import DictConfig

from verl_roles.compat.hydra import file_name
from verl_roles.hydra_adapter.release_layer import Layer
from verl_roles.hydra_adapter.sources import freeze, is_ours, plain_of, thaw
from verl_roles.omegaconf_adapter.build import NotPlainData, build, move_children
from verl_roles.omegaconf_adapter.plain_merge import NotPlain, merge

HYDRA = "hydra"

__all__ = ["HYDRA", "NotPlain", "PlainComposition", "PlainPlan", "add_task", "built_task", "plan"]


@dataclass
class PlainPlan:
    """A defaults list split in two: the defaults Hydra merges for the ``hydra`` node (in order), the
    ``hydra``-only view of each that also holds task keys (by ``id`` of the default), and the task part
    merged as plain data."""

    hydra_defaults: list[ResultDefault]
    views: dict[int, ConfigResult]
    task: dict[str, Any]


def plan(defaults: Sequence[ResultDefault], repo: Any, layer: Layer | None) -> PlainPlan:
    """Split and merge ``defaults`` (see the module docstring); raises :class:`NotPlain`."""
    hydra_defaults: list[ResultDefault] = []
    views: dict[int, ConfigResult] = {}
    task: dict[str, Any] = {}
    for position, default in enumerate(defaults):
        if default.config_path is None:
            raise NotPlain("a default without a config path")
        result = repo.load_config(config_path=default.config_path)
        if result is None or "package" not in result.header:
            raise NotPlain("a config that does not load")
        package = default.package if default.package is not None else result.header["package"]
        data = plain_of(result)
        if data is None:
            if _top_keys(result.config, package) != {HYDRA}:
                raise NotPlain(f"{default.config_path} is not plain data")
            hydra_defaults.append(default)
            continue
        if not isinstance(data, dict):
            raise NotPlain(f"{default.config_path} is not a mapping")
        embedded = _embed(data, package)
        if layer is not None and is_ours(result):
            embedded = layer.apply_plain(default, embedded)
        if HYDRA in embedded:
            _check_searchpath(default, embedded[HYDRA])
            _check_hydra_references(embedded[HYDRA])
            if len(embedded) == 1:
                hydra_defaults.append(default)
            else:
                hydra_defaults.append(default)
                views[id(default)] = replace(result, config=_built({HYDRA: embedded[HYDRA]}))
        elif position == 0:
            raise NotPlain("the defaults list does not start with Hydra's node")
        own = {key: value for key, value in embedded.items() if key != HYDRA}
        if own:
            _check_no_schema(default, repo)
            merge(task, own, task)
    return PlainPlan(hydra_defaults, views, task)


def _top_keys(config: Any, package: str | None) -> set[Any]:
    if package:
        return {package.split(".")[0]}
    if not isinstance(config, DictConfig):
        return set()
    return set(config.keys())


def _embed(data: dict[str, Any], package: str | None) -> dict[str, Any]:
    """``data`` mounted at ``package`` (Hydra's ``_embed_result_config``; the data itself is shared)."""
    if not package:
        return data
    parts = package.split(".")
    if any(not part or "[" in part or "]" in part for part in parts):
        raise NotPlain(f"a package Hydra would read as more than dotted names: {package}")
    for part in reversed(parts):
        data = {part: data}
    return data


def _check_searchpath(default: ResultDefault, hydra: Any) -> None:
    """Hydra refuses ``hydra.searchpath`` outside the primary config: leave that error to Hydra."""
    if default.primary or default.config_path == "hydra/config":
        return
    if not isinstance(hydra, dict) or hydra.get("searchpath") is not None:
        raise NotPlain("hydra.searchpath outside the primary config")


# What follows `${` in a value of the hydra node that Hydra's merge of that node alone resolves as the
# whole composition would: a key of the hydra node itself, or a resolver's name.
_HYDRA_OWN = re.compile(r"\$\{(?:hydra[.:}]|[A-Za-z_][\w.]*:)")


def _check_hydra_references(node: Any) -> None:
    """Hydra's merge of the ``hydra`` node runs without the task keys beside it. OmegaConf resolves a
    value it merges over, and a reference from the ``hydra`` node to a task key could then find a
    section the whole composition has: leave any such reference to Hydra's merge of everything."""
    if isinstance(node, dict):
        for value in node.values():
            _check_hydra_references(value)
    elif isinstance(node, list):
        for value in node:
            _check_hydra_references(value)
    elif isinstance(node, str) and node.count("${") != len(_HYDRA_OWN.findall(node)):
        raise NotPlain(f"{node} in the hydra node refers outside it")


def _check_no_schema(default: ResultDefault, repo: Any) -> None:
    """A config the config store has a schema of the same name for is merged with it by Hydra."""
    name = file_name(str(default.config_path))
    try:
        schema = repo.get_schema_source().load_config(name)
    except ConfigLoadError:
        return
    if schema is not None:
        raise NotPlain(f"{default.config_path} has a schema in the config store")


def _built(data: dict[str, Any]) -> DictConfig:
    try:
        return build(data)
    except NotPlainData as error:
        raise NotPlain(str(error)) from None


class PlainComposition:
    """A composition as the memo keeps it: the root holding the ``hydra`` node (frozen) and the task part
    (plain data, never changed); :meth:`thaw` builds a private config from them."""

    def __init__(self, hydra_root: DictConfig, task: dict[str, Any]) -> None:
        self.hydra_root = freeze(hydra_root)
        self.task = task

    def thaw(self) -> DictConfig:
        return add_task(thaw(self.hydra_root), built_task(self.task))


def built_task(task: dict[str, Any]) -> DictConfig:
    """The task part as nodes (raises :class:`NotPlain` for a value :func:`build` does not build)."""
    return _built(task)


def add_task(root: DictConfig, task: DictConfig) -> DictConfig:
    """``root`` (Hydra's composition of the ``hydra`` node) with the task part's nodes after it."""
    if set(root.keys()) - {HYDRA}:
        raise NotPlain("Hydra's part holds task keys")
    try:
        return move_children(task, root)
    except NotPlainData as error:
        raise NotPlain(str(error)) from None

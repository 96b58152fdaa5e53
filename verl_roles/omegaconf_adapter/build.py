"""Configs built from plain data node by node: what ``OmegaConf.create`` builds, without its per-node checks.

``OmegaConf.create`` on the ~1100 keys of a full composition costs ~70 ms: every key goes through
OmegaConf's assignment path (key and value validation, wrapping, flag lookups up the tree). For plain
data read from YAML (mappings with string keys, lists, and str/int/float/bool/None values) that path
always ends in the same nodes: an untyped ``DictConfig`` or ``ListConfig`` per container and an
``AnyNode`` per value, each with default metadata, its key and its parent. This module builds those
nodes directly (:func:`build`; :func:`move_children` hangs them under another config). Anything else
(another key or value type) raises :class:`NotPlainData`, and the caller takes OmegaConf's own path.
``tests/test_plain_merge.py`` and ``tests/test_compose_cache.py`` check node for node (types, metadata,
flags, parents, values) that the result is the one ``OmegaConf.create`` gives.

A string holding ``${`` is checked as OmegaConf checks it when it creates a node (its grammar, when the
quick pattern does not match), so a malformed interpolation fails here as it would there.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from omegaconf import DictConfig

from verl_roles.compat import omegaconf as oc

_SCALARS = (str, int, float, bool, type(None))


class NotPlainData(Exception):
    """Data :func:`build` does not build (a key or value OmegaConf would treat in another way)."""


def build(data: Mapping[str, Any]) -> DictConfig:
    """``OmegaConf.create(data)`` for plain data (raises :class:`NotPlainData` otherwise)."""
    return _dict(data, None, None)


def move_children(source: DictConfig, target: DictConfig) -> DictConfig:
    """Move every child of ``source`` (from :func:`build`) to the end of ``target`` (an untyped
    DictConfig holding none of those keys), as OmegaConf's merge adds new keys; returns ``target``."""
    children = oc.content(source)
    content = oc.content(target)
    if not isinstance(content, dict) or any(key in content for key in children):
        raise NotPlainData("the target holds one of the keys")
    for key, child in children.items():
        oc.set_parent(child, target)
        content[key] = child
    oc.set_content(source, {})
    return target


def _node(value: Any, key: Any, parent: Any) -> Any:
    kind = type(value)
    if kind is dict:
        return _dict(value, key, parent)
    if kind is list:
        return _list(value, key, parent)
    if kind not in _SCALARS:
        raise NotPlainData(f"a value of type {kind.__name__}")
    if kind is str and "${" in value:
        oc.check_interpolation(value)  # raises as OmegaConf's create does
    return oc.new_leaf(value, key, parent)


def _dict(data: Mapping[str, Any], key: Any, parent: Any) -> DictConfig:
    node = oc.new_dict(key, parent)
    content = {}
    for child_key, value in data.items():
        if type(child_key) is not str:
            raise NotPlainData("a key that is not a string")
        content[child_key] = _node(value, child_key, node)
    oc.set_content(node, content)
    return node


def _list(data: list[Any], key: Any, parent: Any) -> Any:
    node = oc.new_list(key, parent)
    oc.set_content(node, [_node(value, index, node) for index, value in enumerate(data)])
    return node

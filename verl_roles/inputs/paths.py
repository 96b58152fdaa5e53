"""Dotted key paths in a config: the one helper to read, set and delete a key and to walk the leaves.

Paths are Hydra's: dot-separated names, a list item by its index (``optim.betas.0``). On an OmegaConf
config they are ``OmegaConf.select`` / ``OmegaConf.update``; on plain containers (a config turned into
dicts and lists) the same walk. The raw (unresolved) value at a path is
:func:`verl_roles.omegaconf_adapter.nodes.raw_at`.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from omegaconf import Container, OmegaConf, open_dict

from verl_roles.omegaconf_adapter.nodes import ABSENT


def get(node: Any, path: str, default: Any = ABSENT) -> Any:
    """The value at ``path`` below ``node`` (resolved), or ``default`` when there is none."""
    if isinstance(node, Container):
        return OmegaConf.select(node, path, default=default)
    for part in path.split("."):
        if isinstance(node, Mapping) and part in node:
            node = node[part]
        elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        else:
            return default
    return node


def assign(cfg: Container, path: str, value: Any, add: bool = False) -> None:
    """Set ``path`` to ``value``; ``add`` creates a missing key even in struct mode."""
    OmegaConf.update(cfg, path, value, merge=False, force_add=add)


def delete(cfg: Container, path: str) -> None:
    """Remove the key at ``path`` (its parent must exist)."""
    parent_path, _, leaf = path.rpartition(".")
    parent = OmegaConf.select(cfg, parent_path) if parent_path else cfg
    with open_dict(parent):
        del parent[leaf]


def leaves(node: Any, path: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], Any]]:
    """Every (key path, value) of a plain container; an empty mapping and any list are leaves."""
    if isinstance(node, Mapping) and node:
        for key, value in node.items():
            yield from leaves(value, (*path, str(key)))
    else:
        yield path, node


def dotted(path: tuple[str, ...]) -> str:
    return ".".join(path)


def flat_leaves(node: Any) -> dict[str, Any]:
    """``{"a.b.c": leaf}`` for every leaf of a plain container (:func:`leaves`): how the scripts freeze a
    config and the tests compare two."""
    return {dotted(path): value for path, value in leaves(node)}


def same_value(ours: Any, other: Any) -> bool:
    """Equal plain values of the same kind, at every depth: true is not 1, while 1 and 1.0 are the
    same number (as YAML and verl's dataclasses read them)."""
    if isinstance(ours, bool) or isinstance(other, bool):
        return type(ours) is type(other) and ours == other
    if isinstance(ours, Mapping) and isinstance(other, Mapping):
        return ours.keys() == other.keys() and all(same_value(ours[k], other[k]) for k in ours)
    if isinstance(ours, list) and isinstance(other, list):
        return len(ours) == len(other) and all(same_value(a, b) for a, b in zip(ours, other, strict=True))
    return ours == other and isinstance(ours, int | float) == isinstance(other, int | float)

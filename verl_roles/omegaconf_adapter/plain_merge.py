"""OmegaConf's merge of untyped configs, on plain data (dicts, lists and scalars read from YAML).

Hydra composes a config by merging ~40 files into one DictConfig; each merge walks OmegaConf nodes,
validates and re-parents them. For untyped configs (what YAML files give) the outcome of
``dest.merge_with(src)`` follows a few rules, applied key by key in the order of ``src``:

- a key ``dest`` lacks is added (at the end), with ``src``'s value;
- a mapping merged into a mapping is merged key by key; a list replaces a list;
- ``???`` in ``src`` leaves a value ``dest`` has (a mapping, a list or a scalar) as it is;
- any other value replaces what ``dest`` has: a scalar (``None`` too) replaces a mapping or a list, a
  mapping or a list replaces a scalar;
- a mapping merged into a list, or a list into a mapping, is an error (OmegaConf raises).

One more step happens before a key of ``dest`` that holds an interpolation is merged over: OmegaConf
resolves the interpolation, and when it points at a mapping or a list, that container itself is moved
to the key first. Plain data has no shared nodes, so :func:`merge` follows plain references
(``${a.b}``, ``${.b}``, ``${..b}``) through the data merged so far, and raises :class:`NotPlain` when one
reaches a container or anything it cannot follow exactly (a resolver, an escape, a key through a list,
a reference into ``hydra``); so does every error case. The caller then merges with OmegaConf itself.
``tests/test_plain_merge.py`` compares :func:`merge` with OmegaConf's merge on generated configs.

The inputs are never changed: what is taken from ``src`` is copied.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

MISSING = "???"

# One reference: optional leading dots (relative), then dotted plain names.
_REFERENCE = r"\$\{(\.*)([A-Za-z_][\w-]*(?:\.[A-Za-z_][\w-]*)*)\}"
_WHOLE_REFERENCE = re.compile(_REFERENCE)
# Text and references only (no escapes, no braces outside a reference, no nesting).
_STRING_INTERPOLATION = re.compile(r"(?:[^$\\{}]|\$(?!\{)|" + _REFERENCE + r")*")
_ONE_REFERENCE = re.compile(_REFERENCE)
# How many references a chain may follow before giving up (OmegaConf would find a cycle).
_MAX_CHAIN = 32


class NotPlain(Exception):
    """A merge that plain data does not model exactly; merge with OmegaConf instead."""


def copy_plain(value: Any) -> Any:
    """A copy of plain data (its dicts and lists new; scalars shared, they are immutable)."""
    kind = type(value)
    if kind is dict:
        return {key: copy_plain(item) for key, item in value.items()}
    if kind is list:
        return [copy_plain(item) for item in value]
    return value


def is_missing(value: Any) -> bool:
    return type(value) is str and value == MISSING


def is_interpolation(value: Any) -> bool:
    return type(value) is str and "${" in value


def merge(
    dest: dict[Any, Any], src: Mapping[Any, Any], root: dict[Any, Any], path: tuple[Any, ...] = ()
) -> None:
    """Merge ``src`` into ``dest`` (the mapping at ``path`` in ``root``), as OmegaConf merges untyped
    configs. Raises :class:`NotPlain` for what it does not model; ``dest`` may then be half merged."""
    for key, new in src.items():
        if key not in dest:
            dest[key] = copy_plain(new)
            continue
        old = dest[key]
        if is_interpolation(old):
            _dereference_is_plain(old, root, (*path, key))
        if type(old) is dict:
            if type(new) is dict:
                merge(old, new, root, (*path, key))
                continue
            if type(new) is list:
                raise NotPlain("a list merged into a mapping")
        elif type(old) is list and type(new) is dict:
            raise NotPlain("a mapping merged into a list")
        if is_missing(new):
            continue
        dest[key] = copy_plain(new)


def _dereference_is_plain(text: str, root: dict[Any, Any], path: tuple[Any, ...]) -> None:
    """Raise :class:`NotPlain` unless resolving ``text`` (the value at ``path``) leaves the merge as plain
    data models it: it does not end at a container, calls no resolver and fails nowhere unexpected."""
    whole = _WHOLE_REFERENCE.fullmatch(text)
    if whole is not None:
        if _target(whole, root, path, 0) == "container":
            raise NotPlain(f"{text} refers to a container")
        return
    if _STRING_INTERPOLATION.fullmatch(text) is None:
        raise NotPlain(f"{text} is not plain")
    for match in _ONE_REFERENCE.finditer(text):
        if _target(match, root, path, 0) == "container":
            raise NotPlain(f"{text} formats a container")


def _target(reference: re.Match[str], root: dict[Any, Any], path: tuple[Any, ...], depth: int) -> str:
    """What a reference at ``path`` ends at: "value" (a scalar), "absent" (no such key, in a mapping that
    exists) or "container"; raises :class:`NotPlain` for anything else."""
    if depth > _MAX_CHAIN:
        raise NotPlain("a chain of references too long to follow")
    dots, names = reference.group(1), reference.group(2).split(".")
    if dots:
        if len(dots) > len(path):
            raise NotPlain("a relative reference above the root")
        base = path[: len(path) - len(dots)]
    else:
        base = ()
        if names[0] == "hydra":
            raise NotPlain("a reference into the hydra node")
    node: Any = root
    for part in base:
        node = node[part]
    for position, name in enumerate(names):
        if type(node) is not dict:
            raise NotPlain("a reference through a value that is not a mapping")
        if name not in node:
            return "absent"
        node = node[name]
        if is_interpolation(node) and position < len(names) - 1:
            raise NotPlain("a reference through an interpolation")
    if type(node) in (dict, list):
        return "container"
    if is_missing(node):
        raise NotPlain("a reference to ???")
    if is_interpolation(node):
        target_path = (*base, *names)
        whole = _WHOLE_REFERENCE.fullmatch(node)
        if whole is None:
            if _STRING_INTERPOLATION.fullmatch(node) is None:
                raise NotPlain(f"{node} is not plain")
            for match in _ONE_REFERENCE.finditer(node):
                if _target(match, root, target_path, depth + 1) == "container":
                    raise NotPlain(f"{node} formats a container")
            return "value"
        return _target(whole, root, target_path, depth + 1)
    return "value"

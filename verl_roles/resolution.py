"""Resolution: replace every interpolation of a composed config by its value, in place.

OmegaConf parses each interpolation with its ANTLR grammar, which costs ~0.3 ms apiece; the full
megatron config has ~180 of them, almost all plain references to another key (``${megatron.x}``,
the per-role blocks following the engine baseline). :func:`resolve_in_place` copies those values
directly and leaves everything else (string interpolation, resolvers such as ``${oc.env:...}``,
references to sections, to missing values or to other interpolations it could not settle) to
``OmegaConf.resolve``, which therefore has the last word on every value.
"""

from __future__ import annotations

import re
from typing import Any

from omegaconf import Container, DictConfig, ListConfig, Node, OmegaConf, ValueNode
from omegaconf.errors import OmegaConfBaseException

# ${a.b.c}: an absolute key path of plain names, nothing else.
_PLAIN_REFERENCE = re.compile(r"\$\{([A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*)\}")


def resolve_in_place(cfg: DictConfig) -> DictConfig:
    """Resolve every interpolation of ``cfg`` in place and return it."""
    pending: dict[int, Container] = {}
    _copy_plain_references(cfg, cfg, pending)
    try:
        for container in pending.values():
            OmegaConf.resolve(container)
    except OmegaConfBaseException:
        # OmegaConf.resolve does not say which key failed; to_container does, so let it raise.
        OmegaConf.to_container(cfg, resolve=True, throw_on_missing=False)
        raise
    return cfg


def _copy_plain_references(root: DictConfig, container: Container, pending: dict[int, Container]) -> None:
    """Settle the plain references under ``container``; note the containers holding any other kind."""
    for key in _keys(container):
        node = container._get_node(key, validate_access=False)
        if isinstance(node, Container):
            if node._is_interpolation():
                pending[id(container)] = container
            elif not (node._is_missing() or node._is_none()):
                _copy_plain_references(root, node, pending)
        elif isinstance(node, ValueNode) and not _settle(root, node, set()):
            pending[id(container)] = container


def _keys(container: Container) -> Any:
    if isinstance(container, DictConfig):
        return list(container.keys())
    if isinstance(container, ListConfig):
        return range(len(container))
    return ()


def _settle(root: DictConfig, node: ValueNode, busy: set[int]) -> bool:
    """Give ``node`` its value if it is a plain reference to a plain value; True when it holds a value."""
    if not node._is_interpolation():
        return True
    match = _PLAIN_REFERENCE.fullmatch(str(node._value()))
    if match is None or id(node) in busy:
        return False
    target = _lookup(root, match.group(1))
    if not isinstance(target, ValueNode) or target is node:
        return False
    busy.add(id(node))
    try:
        if not _settle(root, target, busy):
            return False
    finally:
        busy.discard(id(node))
    if target._is_missing():
        return False
    node._set_value(target._value())
    return True


def _lookup(root: DictConfig, path: str) -> Node | None:
    node: Node | None = root
    for part in path.split("."):
        if not isinstance(node, DictConfig) or _is_special(node):
            return None
        node = node._get_node(part, validate_access=False, throw_on_missing_key=False)
    return node


def _is_special(node: Node) -> bool:
    return node._is_missing() or node._is_none() or node._is_interpolation()

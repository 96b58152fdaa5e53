"""OmegaConf's node internals, read directly where the public API is too slow or says too little.

- :func:`resolve_in_place`: replace every interpolation by its value, in place. OmegaConf parses each
  interpolation with its ANTLR grammar, which costs ~0.3 ms apiece; the full megatron config has ~180
  of them, almost all plain references to another key (``${megatron.x}``, the per-role blocks
  following the engine baseline). Those values are copied directly, and a plain reference to a
  plain section gets that section as OmegaConf's resolution gives it (resolved, assigned as a copy);
  everything else (string interpolation, resolvers such as ``${oc.env:...}``, references to missing
  values or to other interpolations it could not settle) is left to OmegaConf's own resolution of
  that one key (what ``OmegaConf.resolve`` does for each key of a container).
- :func:`raw_at`: the value a key holds as written (an interpolation as its text), for explain and
  the legacy step, and :func:`interpolation_on_the_way` (explain's references); :func:`key_paths`:
  every key of a composition (did-you-mean);
  :func:`missing_keys`: every ``???``, :func:`raw_items`: a container's children as written, and
  :func:`scalar_leaves`: every float and string leaf (all run on each composition, so they read the
  node contents); :func:`select_quickly`: a resolved value by key, as ``OmegaConf.select`` gives it.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from omegaconf import AnyNode, Container, DictConfig, ListConfig, Node, OmegaConf, ValueNode
from omegaconf._impl import _resolve, _resolve_container_value
from omegaconf.errors import OmegaConfBaseException

# ${a.b.c}: an absolute key path of plain names, nothing else.
_PLAIN_REFERENCE = re.compile(r"\$\{([A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*)\}")


# A resolver call inside an interpolation (``${oc.env:X}``, ``${oc.decode:...}``), as opposed to a reference
# to another key (``${trainer.project_name}``) or group choice (``${model_engine}``).
_RESOLVER_CALL = re.compile(r"\$\{\s*[\w.\-]+\s*:")


def calls_a_resolver(text: str) -> bool:
    """``text`` holds an interpolation that calls a resolver: its value comes from outside the config."""
    return _RESOLVER_CALL.search(text) is not None


def resolve_in_place(cfg: DictConfig, followed: dict[str, str] | None = None) -> DictConfig:
    """Resolve every interpolation of ``cfg`` in place and return it.

    ``followed``, when given, receives each key whose value was a plain reference to another key
    (``critic.megatron.tensor_model_parallel_size`` -> ``megatron.tensor_model_parallel_size``): after
    resolution nothing else says that a value was not set where it is read.
    """
    pending: list[tuple[Container, Any]] = []
    _copy_plain_references(cfg, cfg, pending, "", followed)
    container: Any = None
    key: Any = None
    try:
        for container, key in pending:
            if not _copy_referenced_section(cfg, container, key):
                # What OmegaConf.resolve does for each key of a container, for this key alone.
                _resolve_container_value(container, key)
    except OmegaConfBaseException as error:
        # OmegaConf's resolution does not say which key failed; to_container does, so let it raise.
        OmegaConf.to_container(cfg, resolve=True, throw_on_missing=False)
        if not getattr(error, "full_key", None) and container is not None:
            # It resolves there but cannot be put in place (a resolver's list for a single value, which
            # OmegaConf.resolve, verl's too, refuses): the key is the one being resolved.
            error.full_key = container._get_full_key(key)
        raise
    return cfg


def _copy_plain_references(
    root: DictConfig,
    container: Container,
    pending: list[tuple[Container, Any]],
    prefix: str,
    followed: dict[str, str] | None,
) -> None:
    """Settle the plain references under ``container``; note the keys holding any other kind."""
    for key in _keys(container):
        node = container._get_node(key, validate_access=False)
        if isinstance(node, Container):
            if node._is_interpolation():
                pending.append((container, key))
            elif not (node._is_missing() or node._is_none()):
                _copy_plain_references(root, node, pending, f"{prefix}{key}.", followed)
        elif isinstance(node, ValueNode):
            reference = _PLAIN_REFERENCE.fullmatch(str(node._value())) if node._is_interpolation() else None
            if not _settle(root, node, set()):
                pending.append((container, key))
            elif reference is not None and followed is not None:
                followed[f"{prefix}{key}"] = reference.group(1)


def _copy_referenced_section(root: DictConfig, container: Container, key: Any) -> bool:
    """Give ``container[key]`` the section a plain reference of it names, as OmegaConf's resolution
    does (the section resolved, then assigned as a copy), without parsing the reference; True when
    done. Only for an untyped value or a section holding the reference, and a plain section."""
    node = container._get_node(key, validate_access=False)
    if not (isinstance(node, AnyNode | Container) and node._is_interpolation()):
        return False
    match = _PLAIN_REFERENCE.fullmatch(str(node._value()))
    target = _lookup(root, match.group(1)) if match is not None else None
    if not isinstance(target, Container) or _is_special(target) or target is node:
        return False
    _resolve(target)
    if isinstance(node, ValueNode):
        container[key] = target
    else:
        node._set_value(target)
    return True


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


# --- reading resolved values ----------------------------------------------------------------------

# What select_quickly returns when the walk needs OmegaConf's own select.
ASK_OMEGACONF: Any = object()


def select_quickly(cfg: DictConfig, key: str) -> object:
    """``OmegaConf.select(cfg, key)`` for a dotted ``key`` of plain names that leads, through sections
    only, to a value that is neither an interpolation nor ``???`` (or to a section, returned as the
    node, as select does); :data:`ASK_OMEGACONF` for anything else (an absent key, a list on the way,
    a value to resolve). The rules read ~200 values of the resolved config per composition: this walks
    the node contents instead of OmegaConf's select machinery."""
    node: Any = cfg
    for part in key.split("."):
        if not isinstance(node, DictConfig):
            return ASK_OMEGACONF
        content = node.__dict__["_content"]
        if not isinstance(content, dict) or part not in content:
            return ASK_OMEGACONF
        node = content[part]
    if isinstance(node, DictConfig | ListConfig):
        return node if isinstance(node.__dict__["_content"], dict | list) else ASK_OMEGACONF
    value = node._val
    if isinstance(value, str) and (value == "???" or "${" in value):
        return ASK_OMEGACONF
    return value


# --- raw values and key paths ---------------------------------------------------------------------


class _Absent:
    """What :func:`raw_at` returns for a key the config does not hold."""

    def __repr__(self) -> str:
        return "<absent>"


ABSENT: Any = _Absent()


def raw_at(cfg: DictConfig, key: str) -> object:
    """The raw value at the dotted ``key`` (interpolations as written; a section as a plain dict), or
    :data:`ABSENT`.

    A section set to an interpolation (``mtp: ${actor_rollout_ref.model.mtp}``) is reported at the
    section: the raw value of ``...mtp.enable`` is then the interpolation of ``...mtp`` plus the rest.
    """
    node: object = cfg
    parts = key.split(".")
    for i, part in enumerate(parts):
        if not isinstance(node, DictConfig) or _is_special(node):
            return ABSENT
        child = node._get_node(part, validate_access=False)
        if child is None:
            return ABSENT
        if child._is_interpolation() and i < len(parts) - 1:
            return f"{child._value()} (then .{'.'.join(parts[i + 1:])})"
        node = child
    if isinstance(node, DictConfig | ListConfig):
        if _is_special(node):
            return node._value()
        return OmegaConf.to_container(node, resolve=False)
    return node._value()  # type: ignore[union-attr]


def interpolation_on_the_way(cfg: DictConfig, key: str) -> tuple[str, str] | None:
    """The first key on the way to the dotted ``key`` (``key`` included) whose raw value is a text
    holding ``${``, with that text; None when there is none.

    What :func:`raw_at` tells at each prefix in turn, without turning the sections on the way into
    plain dicts (explain asks this for every key it explains).
    """
    node: object = cfg
    parts = key.split(".")
    for depth, part in enumerate(parts, start=1):
        if not isinstance(node, DictConfig) or _is_special(node):
            return None
        node = node._get_node(part, validate_access=False)
        if node is None:
            return None
        if isinstance(node, DictConfig | ListConfig) and not _is_special(node):
            continue
        raw = node._value()
        if isinstance(raw, str) and "${" in raw:
            return ".".join(parts[:depth]), raw
    return None


def key_paths(cfg: DictConfig, prefix: str = "") -> Iterator[str]:
    """Every key path of ``cfg``, sections and leaves (a section's interpolation is not followed)."""
    for key in cfg:
        path = f"{prefix}{key}"
        yield path
        node = cfg._get_node(key)
        if isinstance(node, DictConfig) and not node._is_missing() and not node._is_interpolation():
            yield from key_paths(node, path + ".")


def raw_items(node: DictConfig | ListConfig) -> Iterator[tuple[Any, object]]:
    """``(key or index, value)`` of each child as written, read from the node contents (the schema
    check runs it over every key on every composition): a child holding children is the container
    itself; otherwise its raw content (None for null, the text of ``???`` or of an interpolation); a
    leaf gives its raw value."""
    content = node.__dict__["_content"]
    for key, child in content.items() if isinstance(content, dict) else enumerate(content):
        if isinstance(child, DictConfig | ListConfig):
            inner = child.__dict__["_content"]
            yield key, child if isinstance(inner, dict | list) else inner
        else:
            yield key, child._val


def missing_keys(node: DictConfig, prefix: str = "") -> Iterator[str]:
    """Every key left at ``???``.

    Reads the node contents directly (this walks every key on every composition): a container's
    ``_content`` is its children, or a string for ``???`` and interpolations; a leaf's ``_val`` is its
    raw value.
    """
    for key, child in node.__dict__["_content"].items():
        path = f"{prefix}{key}"
        if isinstance(child, DictConfig | ListConfig):
            content = child.__dict__["_content"]
            if content == "???":
                yield path
            elif isinstance(child, DictConfig) and isinstance(content, dict):
                yield from missing_keys(child, path + ".")
        elif child._val == "???":
            yield path


def scalar_leaves(node: DictConfig | ListConfig, prefix: str = "") -> Iterator[tuple[str, Any]]:
    """(dotted key, raw value) of every float and string leaf, list items included (``a.b.0``).

    Reads the node contents directly, like :func:`missing_keys` (run on each composition by the rule
    that refuses NaN and text that is not UTF-8 at any key).
    """
    content = node.__dict__["_content"]
    items = content.items() if isinstance(node, DictConfig) else enumerate(content)
    for key, child in items:
        if isinstance(child, DictConfig | ListConfig):
            if isinstance(child.__dict__["_content"], dict | list):
                yield from scalar_leaves(child, f"{prefix}{key}.")
        elif isinstance(child._val, float | str):
            yield f"{prefix}{key}", child._val

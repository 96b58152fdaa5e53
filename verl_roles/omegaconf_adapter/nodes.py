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
from omegaconf.errors import OmegaConfBaseException

from verl_roles.compat import omegaconf as oc

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

    The walk reads node contents directly (it visits every key of every composition). A value is put in
    place directly only where OmegaConf's own assignment could do nothing else: an untyped value, a plain
    value, and no flag that changes assignment on the way from the root; anything else goes through
    OmegaConf's assignment.
    """
    pending: list[tuple[Container, Any, bool]] = []
    _copy_plain_references(cfg, cfg, pending, "", followed, _plain(cfg, True))
    container: Any = None
    key: Any = None
    try:
        for container, key, plain in pending:
            if not _copy_referenced_section(cfg, container, key, plain):
                # What OmegaConf.resolve does for each key of a container, for this key alone.
                oc.resolve_one(container, key)
    except OmegaConfBaseException as error:
        # OmegaConf's resolution does not say which key failed; to_container does, so let it raise.
        OmegaConf.to_container(cfg, resolve=True, throw_on_missing=False)
        if not getattr(error, "full_key", None) and container is not None:
            # It resolves there but cannot be put in place (a resolver's list for a single value, which
            # OmegaConf.resolve, verl's too, refuses): the key is the one being resolved.
            error.full_key = oc.full_key(container, key)
        raise
    return cfg


# The flags that change what assigning a value does (OmegaConf reads them up the tree).
_ASSIGNMENT_FLAGS = ("readonly", "convert", "allow_objects", "no_deepcopy_set_nodes")
# The values an untyped node holds as they are given.
_PRIMITIVES = (str, int, float, bool, type(None))


def _plain(node: Node, parent_plain: bool) -> bool:
    """No flag on ``node`` or above it changes assignment (``parent_plain``: none above it)."""
    flags = oc.flags(node)
    return parent_plain and not (flags and any(flag in flags for flag in _ASSIGNMENT_FLAGS))


def _interpolation(raw: object) -> bool:
    """What OmegaConf's ``_is_interpolation`` says of a raw value or content."""
    return isinstance(raw, str) and "${" in raw


def _copy_plain_references(
    root: DictConfig,
    container: Container,
    pending: list[tuple[Container, Any, bool]],
    prefix: str,
    followed: dict[str, str] | None,
    plain: bool,
) -> None:
    """Settle the plain references under ``container``; note the keys holding any other kind."""
    content = oc.content(container)
    for key, node in content.items() if isinstance(content, dict) else enumerate(content):
        node_plain = _plain(node, plain)
        if isinstance(node, Container):
            inner = oc.content(node)
            if isinstance(inner, dict | list):
                _copy_plain_references(root, node, pending, f"{prefix}{key}.", followed, node_plain)
            elif _interpolation(inner):
                pending.append((container, key, node_plain))
        elif not isinstance(node, ValueNode):
            pending.append((container, key, node_plain))  # a union of types: OmegaConf's own way
        elif _interpolation(oc.raw(node)):
            reference = _settle(root, node, node_plain, set())
            if reference is None:
                pending.append((container, key, node_plain))
            elif followed is not None:
                followed[f"{prefix}{key}"] = reference


def _copy_referenced_section(root: DictConfig, container: Container, key: Any, plain: bool) -> bool:
    """Give ``container[key]`` the section a plain reference of it names, as OmegaConf's resolution
    does (the section resolved, then assigned as a copy), without parsing the reference; True when
    done. Only for an untyped value or a section holding the reference, and a plain section."""
    node = oc.child(container, key)
    if not (isinstance(node, AnyNode | Container) and oc.is_interpolation(node)):
        return False
    match = _PLAIN_REFERENCE.fullmatch(str(oc.written(node)))
    target, _ = _lookup(root, match.group(1)) if match is not None else (None, False)
    if not isinstance(target, Container) or _is_special(target) or target is node:
        return False
    _resolve_section(target)
    if not isinstance(node, ValueNode):
        oc.assign(node, target)
    elif plain and type(node) is AnyNode and oc.element_type(container) is Any:
        # What assigning a section to an untyped key does: a copy of it, hung at the key.
        section = _copy(target, container)
        oc.set_key(section, key)
        oc.content(container)[key] = section
    else:
        container[key] = target
    return True


def _resolve_section(section: Container) -> None:
    """OmegaConf's resolution of a section in place, reading the contents directly to find
    the keys that hold an interpolation."""
    content = oc.content(section)
    for key, node in content.items() if isinstance(content, dict) else enumerate(content):
        raw = oc.content(node) if isinstance(node, Container) else oc.raw_or_none(node)
        if _interpolation(raw) or not isinstance(node, Container | ValueNode):
            oc.resolve_one(section, key)
        elif isinstance(raw, dict | list):
            _resolve_section(node)


def _copy(node: Node, parent: Any) -> Any:
    """``copy.deepcopy(node)`` of a resolved section, hung under ``parent``: the same node types,
    metadata and contents (flag caches left empty: they are read again when asked)."""
    if type(node) is AnyNode or isinstance(node, Container):
        copied = oc.copy_state(node, parent)
        content = oc.content(node) if isinstance(node, Container) else None
        if isinstance(content, dict):
            oc.set_content(copied, {key: _copy(child, copied) for key, child in content.items()})
        elif isinstance(content, list):
            oc.set_content(copied, [_copy(child, copied) for child in content])
        return copied
    return oc.deepcopy_under(node, parent)


def _settle(root: DictConfig, node: ValueNode, plain: bool, busy: set[int]) -> str | None:
    """Give ``node``, which holds an interpolation, its value if that is a plain reference to a plain
    value (settled first if it is one too); the key it refers to when done, else None."""
    match = _PLAIN_REFERENCE.fullmatch(oc.raw(node))
    if match is None or id(node) in busy:
        return None
    target, target_plain = _lookup(root, match.group(1))
    if not isinstance(target, ValueNode) or target is node:
        return None
    value = oc.raw(target)
    if _interpolation(value):
        busy.add(id(node))
        try:
            if _settle(root, target, target_plain, busy) is None:
                return None
        finally:
            busy.discard(id(node))
        value = oc.raw(target)
    if value == "???":
        return None
    if plain and type(node) is AnyNode and type(value) in _PRIMITIVES:
        oc.set_raw(node, value)  # what AnyNode._set_value gives a primitive, with no flag set
    else:
        oc.assign(node, value)
    return match.group(1)


def _lookup(root: DictConfig, path: str) -> tuple[Node | None, bool]:
    """The node at the dotted ``path`` of plain names, through sections only, and whether no flag that
    changes assignment is on the way; (None, False) where OmegaConf's own lookup is needed."""
    node: Any = root
    plain = _plain(root, True)
    for part in path.split("."):
        if not isinstance(node, DictConfig):
            return None, False
        content = oc.content(node)
        if not isinstance(content, dict):
            return None, False
        node = content.get(part)
        if node is None:
            return None, False
        plain = _plain(node, plain)
    return node, plain


def _is_special(node: Node) -> bool:
    return oc.is_special(node)


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
        content = oc.content(node)
        if not isinstance(content, dict) or part not in content:
            return ASK_OMEGACONF
        node = content[part]
    if isinstance(node, DictConfig | ListConfig):
        return node if isinstance(oc.content(node), dict | list) else ASK_OMEGACONF
    value = oc.raw(node)
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
        child = oc.child(node, part)
        if child is None:
            return ABSENT
        if oc.is_interpolation(child) and i < len(parts) - 1:
            return f"{oc.written(child)} (then .{'.'.join(parts[i + 1:])})"
        node = child
    if isinstance(node, DictConfig | ListConfig):
        if _is_special(node):
            return oc.written(node)
        return OmegaConf.to_container(node, resolve=False)
    return oc.written(node)  # type: ignore[union-attr]


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
        node = oc.child(node, part)
        if node is None:
            return None
        if isinstance(node, DictConfig | ListConfig) and not _is_special(node):
            continue
        raw = oc.written(node)
        if isinstance(raw, str) and "${" in raw:
            return ".".join(parts[:depth]), raw
    return None


def key_paths(cfg: DictConfig, prefix: str = "") -> Iterator[str]:
    """Every key path of ``cfg``, sections and leaves (a section's interpolation is not followed)."""
    for key in cfg:
        path = f"{prefix}{key}"
        yield path
        node = oc.child_checked(cfg, key)
        if isinstance(node, DictConfig) and not oc.is_missing(node) and not oc.is_interpolation(node):
            yield from key_paths(node, path + ".")


def raw_items(node: DictConfig | ListConfig) -> Iterator[tuple[Any, object]]:
    """``(key or index, value)`` of each child as written, read from the node contents (the schema
    check runs it over every key on every composition): a child holding children is the container
    itself; otherwise its raw content (None for null, the text of ``???`` or of an interpolation); a
    leaf gives its raw value."""
    content = oc.content(node)
    for key, child in content.items() if isinstance(content, dict) else enumerate(content):
        if isinstance(child, DictConfig | ListConfig):
            inner = oc.content(child)
            yield key, child if isinstance(inner, dict | list) else inner
        else:
            yield key, oc.raw(child)


def missing_keys(node: DictConfig, prefix: str = "") -> Iterator[str]:
    """Every key left at ``???``.

    Reads the node contents directly (this walks every key on every composition): a container's
    ``_content`` is its children, or a string for ``???`` and interpolations; a leaf's ``_val`` is its
    raw value.
    """
    for key, child in oc.content(node).items():
        path = f"{prefix}{key}"
        if isinstance(child, DictConfig | ListConfig):
            content = oc.content(child)
            if content == "???":
                yield path
            elif isinstance(child, DictConfig) and isinstance(content, dict):
                yield from missing_keys(child, path + ".")
        elif oc.raw(child) == "???":
            yield path


def scalar_leaves(node: DictConfig | ListConfig, prefix: str = "") -> Iterator[tuple[str, Any]]:
    """(dotted key, raw value) of every float and string leaf, list items included (``a.b.0``).

    Reads the node contents directly, like :func:`missing_keys` (run on each composition by the rule
    that refuses NaN and text that is not UTF-8 at any key).
    """
    content = oc.content(node)
    items = content.items() if isinstance(node, DictConfig) else enumerate(content)
    for key, child in items:
        if isinstance(child, DictConfig | ListConfig):
            if isinstance(oc.content(child), dict | list):
                yield from scalar_leaves(child, f"{prefix}{key}.")
        elif isinstance(oc.raw(child), float | str):
            yield f"{prefix}{key}", oc.raw(child)

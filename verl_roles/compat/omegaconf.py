"""What verl_roles borrows from OmegaConf's private API: node internals, the YAML dialect, the interpolation
check, the resolution of one key.

The speed layer (:mod:`verl_roles.omegaconf_adapter`) walks every key of every composition several times;
OmegaConf's public API costs a validation and a flag lookup up the tree per access, so the walks read a
node's state through the small functions here. Each stands for a public behaviour named in
:data:`BORROWED`, and the equivalence tests named there fail when a release changes it. A node's state is
the same on OmegaConf 2.3 and 2.4: ``_metadata``, ``_parent``, ``_flags_cache`` on every node, ``_content``
on a container (a dict or list of child nodes, or the text of ``???``, ``None`` or an interpolation),
``_val`` on a leaf.
"""

from __future__ import annotations

import copy
from typing import Any

from omegaconf import MISSING, AnyNode, Container, DictConfig, ListConfig, Node, ValueNode
from omegaconf._impl import _resolve, _resolve_container_value
from omegaconf._utils import OmegaConfDumper, _get_value, get_value_kind
from omegaconf.base import ContainerMetadata, Metadata
from omegaconf.errors import InterpolationToMissingValueError

from verl_roles.compat import OMEGACONF_2_4, Borrowed

if OMEGACONF_2_4:
    from omegaconf._yaml import get_yaml_loader  # 2.4 moved it (and made its one argument keyword-only)
else:
    from omegaconf._utils import get_yaml_loader

_NODES = "tests/test_compose_cache.py::test_cached_compose_and_fast_resolution_equal_stock_hydra"
_BUILD = "tests/test_plain_merge.py::test_build_equals_omegaconf_create"
_YAML = "tests/test_compose_cache.py::test_fast_yaml_loader_keeps_omegaconf_scalar_rules"
_EXPLAIN = "tests/test_explain.py::test_chain_is_exact_for_every_key"

BORROWED: tuple[Borrowed, ...] = (
    Borrowed("IMP", "omegaconf._utils.get_yaml_loader (2.3) / omegaconf._yaml.get_yaml_loader (2.4)",
             "OmegaConf.load's scalar rules (its loader's implicit resolvers)", _YAML),
    Borrowed("IMP", "omegaconf._utils.OmegaConfDumper.str_representer",
             "OmegaConf.to_yaml's quoting of strings", "tests/test_output_yaml.py"),
    Borrowed("IMP", "omegaconf._utils.get_value_kind(strict_interpolation_validation=True)",
             "OmegaConf.create's check of an interpolation's grammar", _BUILD),
    Borrowed("IMP", "omegaconf.base.Metadata", "a leaf's metadata as OmegaConf.create makes it", _BUILD),
    Borrowed("IMP", "omegaconf.base.ContainerMetadata", "a container's metadata as OmegaConf.create makes it",
             _BUILD),
    Borrowed("IMP", "omegaconf._impl._resolve_container_value", "OmegaConf.resolve, for one key", _NODES),
    Borrowed("IMP", "omegaconf._impl._resolve, omegaconf._utils._get_value, Node._dereference_node, "
             "Container._get_child (2.4)", "OmegaConf 2.3's resolution of one key, kept on 2.4: an "
             "interpolation to ??? becomes ???, a resolver's list or mapping is refused for a single value",
             "tests/test_errors.py"),
    Borrowed("ATTR", "node.__dict__['_metadata'] (its .flags, .key, .element_type, .resolver_cache)",
             "a node's own flags, key and element type", _NODES),
    Borrowed("ATTR", "node.__dict__['_parent']", "a node's parent (copy.deepcopy detaches it)", _BUILD),
    Borrowed("ATTR", "node.__dict__['_flags_cache']", "a new node's empty flag cache", _BUILD),
    Borrowed("ATTR", "container.__dict__['_content']",
             "a container's children, or its ???/None/interpolation text", "tests/test_schema.py"),
    Borrowed("ATTR", "leaf.__dict__['_val']", "a leaf's raw value (an interpolation's text kept)", _EXPLAIN),
    Borrowed("CALL", "Container._get_node(key, validate_access=...)", "cfg[key] without resolving the value",
             _EXPLAIN),
    Borrowed("CALL", "Node._is_interpolation / _is_missing / _is_none",
             "OmegaConf.is_interpolation / is_missing, a null section", "tests/test_errors.py"),
    Borrowed("CALL", "Node._value()", "a node's value as written", _EXPLAIN),
    Borrowed("CALL", "Node._set_value(value)", "cfg[key] = value, without the container's key validation",
             _NODES),
    Borrowed("CALL", "Container._get_full_key(key)", "the dotted key an error names (error.full_key)",
             "tests/test_errors.py"),
)

# --- the YAML dialect -------------------------------------------------------------------------------

# OmegaConf's YAML loader (OmegaConf.load, Hydra's file reading): its implicit scalar resolvers.
yaml_loader = get_yaml_loader
# OmegaConf.to_yaml's representer of a string (which strings it quotes, and how).
string_representer = OmegaConfDumper.str_representer


def check_interpolation(text: str) -> None:
    """Raise as ``OmegaConf.create`` does for ``text`` (holding ``${``) when its interpolation does not
    parse."""
    get_value_kind(text, strict_interpolation_validation=True)


# --- nodes built as OmegaConf.create builds them -----------------------------------------------------


def new_leaf(value: Any, key: Any, parent: Any) -> AnyNode:
    """The untyped leaf ``OmegaConf.create`` makes for a plain value (no validation: the caller's)."""
    node = AnyNode.__new__(AnyNode)
    state = node.__dict__
    state["_metadata"] = Metadata(ref_type=Any, object_type=None, optional=True, key=key, flags={})
    state["_parent"] = parent
    state["_flags_cache"] = None
    state["_val"] = value
    return node


def new_dict(key: Any, parent: Any) -> DictConfig:
    """An untyped, empty ``DictConfig`` as ``OmegaConf.create`` makes it; fill it with :func:`set_content`."""
    node = DictConfig.__new__(DictConfig)
    state = node.__dict__
    state["_metadata"] = ContainerMetadata(
        ref_type=Any, object_type=dict, optional=True, key=key, flags={}, key_type=Any, element_type=Any)
    state["_parent"] = parent
    state["_flags_cache"] = None
    state["_content"] = {}
    return node


def new_list(key: Any, parent: Any) -> ListConfig:
    """An untyped, empty ``ListConfig`` as ``OmegaConf.create`` makes it; fill it with :func:`set_content`."""
    node = ListConfig.__new__(ListConfig)
    state = node.__dict__
    state["_metadata"] = ContainerMetadata(
        ref_type=Any, object_type=list, optional=True, key=key, flags={}, key_type=int, element_type=Any)
    state["_parent"] = parent
    state["_flags_cache"] = None
    state["_content"] = []
    return node


# --- a node's state ---------------------------------------------------------------------------------


def content(container: Any) -> Any:
    """A container's children (dict or list of nodes), or its text for ``???``/an interpolation, or None."""
    return container.__dict__["_content"]


def set_content(container: Any, children: Any) -> None:
    container.__dict__["_content"] = children


def raw(leaf: Any) -> Any:
    """A leaf's value as written (an interpolation as its text, ``???`` as the text)."""
    return leaf.__dict__["_val"]


def raw_or_none(node: Any) -> Any:
    """:func:`raw` of a leaf, None for a node without a raw value."""
    return node.__dict__.get("_val")


def set_raw(leaf: Any, value: Any) -> None:
    """What ``AnyNode._set_value`` stores for a primitive when no flag is set."""
    leaf.__dict__["_val"] = value


def flags(node: Any) -> dict[str, bool] | None:
    """The flags set on ``node`` itself (readonly, struct...), not inherited ones."""
    return node.__dict__["_metadata"].flags


def element_type(container: Any) -> Any:
    return container.__dict__["_metadata"].element_type


def set_key(node: Any, key: Any) -> None:
    node.__dict__["_metadata"].key = key


def set_parent(node: Any, parent: Any) -> None:
    node.__dict__["_parent"] = parent


def child(container: Any, key: Any) -> Node | None:
    """The child node at ``key`` (None when absent), its value neither resolved nor validated."""
    return container._get_node(key, validate_access=False)


def child_checked(container: Any, key: Any) -> Node | None:
    """The child node at ``key``, the key validated as ``cfg[key]`` validates it."""
    return container._get_node(key)


def is_interpolation(node: Any) -> bool:
    return node._is_interpolation()


def is_special(node: Any) -> bool:
    """``???``, ``None`` or an interpolation (of a section or a leaf)."""
    return node._is_missing() or node._is_none() or node._is_interpolation()


def is_missing(node: Any) -> bool:
    return node._is_missing()


def written(node: Any) -> Any:
    """A node's value as written (``Node._value()``)."""
    return node._value()


def assign(node: Any, value: Any) -> None:
    """Set a node's value through the node's own validation (``Node._set_value``)."""
    node._set_value(value)


def full_key(container: Any, key: Any) -> str:
    """The dotted key of ``container[key]`` as OmegaConf's errors name it."""
    return container._get_full_key(key)


def resolve_one(container: Any, key: Any) -> None:
    """What ``OmegaConf.resolve`` (OmegaConf 2.3's) does for the key ``key`` of ``container``.

    OmegaConf 2.4 changed two things its resolve does: an interpolation to a ``???`` raises (2.3 left the
    key at ``???``, so the run names every mandatory value left, not the first reference to one), and a
    resolver's list or mapping is made a section even where a single value stands (2.3 refused it). Both
    stacks keep 2.3's answer, so a user sees the same on either."""
    if not OMEGACONF_2_4:
        _resolve_container_value(container, key)
        return
    node = container._get_child(key)
    if not node._is_interpolation():
        _resolve(node)
        return
    try:
        resolved = node._dereference_node()
    except InterpolationToMissingValueError:
        node._set_value(MISSING)
        return
    except Exception:  # noqa: BLE001 - raised again by OmegaConf's own path, which names the key
        _resolve_container_value(container, key)
        return
    if isinstance(resolved, Container):
        _resolve(resolved)
    if isinstance(resolved, Container) and isinstance(node, ValueNode):
        container[key] = resolved
    else:
        node._set_value(_get_value(resolved))


def copy_state(node: Any, parent: Any) -> Any:
    """A node of ``node``'s type with its state, its metadata copied as ``copy.deepcopy`` copies it, hung
    under ``parent``, its flag cache empty; a container's content is the caller's to copy."""
    state = node.__dict__
    metadata = copy.copy(state["_metadata"])
    metadata.flags = dict(state["_metadata"].flags)
    metadata.resolver_cache = copy.deepcopy(state["_metadata"].resolver_cache)
    copied = type(node).__new__(type(node))
    copied.__dict__.update(state, _metadata=metadata, _parent=parent, _flags_cache=None)
    return copied


def deepcopy_under(node: Any, parent: Any) -> Any:
    """``copy.deepcopy(node)`` (without copying its parent), hung under ``parent``."""
    state = node.__dict__
    saved, state["_parent"] = state["_parent"], None
    try:
        copied = copy.deepcopy(node)
    finally:
        state["_parent"] = saved
    copied.__dict__["_parent"] = parent
    return copied

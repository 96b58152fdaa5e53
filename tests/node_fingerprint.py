"""A config node for node, to compare two configs exactly: each node's path, type, metadata (reference
type, object type, optional, key, flags, key and element types) and raw value, in order, with every
parent link checked. (Two configs that print the same YAML can still differ in node types or flags.)"""

from __future__ import annotations

from omegaconf import DictConfig, ListConfig


def fingerprint(node, parent=None, found=None, path: str = "") -> list[tuple]:
    found = [] if found is None else found
    meta = node._metadata
    described = (
        type(node).__name__, meta.ref_type, meta.object_type, meta.optional, meta.key, meta.flags,
        meta.flags_root, getattr(meta, "key_type", None), getattr(meta, "element_type", None),
        sorted(node.__dict__),
    )
    assert node._get_parent() is parent, f"{path}: parent link"
    if isinstance(node, DictConfig | ListConfig):
        content = node.__dict__["_content"]
        if isinstance(content, dict | list):
            found.append((path, described, type(content).__name__))
            items = content.items() if isinstance(content, dict) else enumerate(content)
            for key, child in items:
                fingerprint(child, node, found, f"{path}.{key}")
        else:
            found.append((path, described, repr(content)))
    else:
        found.append((path, described, type(node._val).__name__, repr(node._val)))
    return found

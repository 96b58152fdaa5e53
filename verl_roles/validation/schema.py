"""The typed schema of the composed config: which values each key accepts, and no default at all.

One source of truth per key:

- a key the chosen verl release types takes exactly the type it declares, read from the release's
  generated data (:mod:`verl_roles.base.releases`; verl's unions, ``Optional``, ``list[int]``,
  ``Literal``...);
- every other key takes its type from :mod:`verl_roles.upstream.own_types`: our own keys, and verl keys no
  dataclass of verl types (``trainer.*``, ``data.*``...), each no stricter than the verl code that
  reads it.

Defaults live only in the YAML files under ``conf/`` and, for another release than the tree's, in the
release's generated layer. A single pass over the composed config checks
every value, so ``trainer.nnodes=abc`` is caught when the config is composed, not hours later in a
worker. Keys a user adds with ``+key=value`` are not in the schema and are not checked.

The type language (also used by the generated file): ``int``; ``float`` (an int is accepted too);
``bool``; ``str`` (any scalar is accepted and read as text, as OmegaConf does); ``None``; ``Any``;
``dict`` / ``dict[T]`` (a mapping, its values of type T); ``list`` / ``list[T]``; ``tuple[A, B]``
(a list of exactly those); ``Literal["a", "b"]``; alternatives joined with `` | ``.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from functools import cache
from typing import Any

from omegaconf import DictConfig, ListConfig

from verl_roles.base.errors import Problem
from verl_roles.base.layout import ENGINE_KEY, ENGINE_TABLE, ROLES
from verl_roles.base.layout import engine as layout_engine
from verl_roles.base.releases import DEFAULT_RELEASE, reference, release_of
from verl_roles.omegaconf_adapter.nodes import ABSENT, raw_at, raw_items
from verl_roles.upstream.own_types import OWN_TYPES

Check = Callable[[object], bool]


def verl_reference(release: str = DEFAULT_RELEASE) -> dict[str, Any]:
    """The generated facts of a verl release (:func:`verl_roles.base.releases.reference`)."""
    return reference(release)


# --- the type language -----------------------------------------------------------------------------

_SCALAR_WORDS = {
    "int": ("an integer", "integers"),
    "float": ("a number", "numbers"),
    "bool": ("true or false", "booleans"),
    "str": ("a string", "strings"),
    "None": ("null", "nulls"),
    "Any": ("anything", "values"),
    "dict": ("a mapping such as {k: v}", "mappings"),
    "list": ("a list such as [a,b]", "lists"),
}


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


_SCALAR_CHECKS: dict[str, Check] = {
    "int": _is_int,
    "float": _is_number,
    "bool": lambda v: isinstance(v, bool),
    "str": lambda v: isinstance(v, str | int | float | bool),
    "None": lambda v: v is None,
    "Any": lambda v: True,
    "dict": lambda v: isinstance(v, DictConfig | Mapping),
    "list": lambda v: isinstance(v, ListConfig | list | tuple),
}


def _items(value: object) -> list[object]:
    """The elements of a list value as plain values (a nested container stays a container)."""
    if isinstance(value, ListConfig):
        return [item for _, item in raw_items(value)]
    return list(value)  # type: ignore[call-overload]


def _values(value: object) -> list[object]:
    if isinstance(value, DictConfig):
        return [item for _, item in raw_items(value)]
    return list(value.values())  # type: ignore[attr-defined]


def _unresolved(value: object) -> bool:
    return isinstance(value, str) and (value == "???" or "${" in value)


def _split(text: str, sep: str) -> list[str]:
    """``text`` split on ``sep`` outside brackets and quotes."""
    parts, depth, quoted, start = [], 0, False, 0
    for i, char in enumerate(text):
        if char == '"':
            quoted = not quoted
        elif not quoted and char == "[":
            depth += 1
        elif not quoted and char == "]":
            depth -= 1
        elif not quoted and depth == 0 and text.startswith(sep, i):
            parts.append(text[start:i])
            start = i + len(sep)
    parts.append(text[start:])
    return [p.strip() for p in parts]


@dataclass(frozen=True)
class Alternative:
    """One alternative of a type: its text, how it is worded, and the check of a value."""

    text: str
    wording: str
    plural: str
    check: Check


def _alternative(text: str) -> Alternative:
    if text in _SCALAR_CHECKS:
        singular, plural = _SCALAR_WORDS[text]
        return Alternative(text, singular, plural, _SCALAR_CHECKS[text])
    head, _, rest = text.partition("[")
    inner = rest[:-1]
    if head == "list":
        element = parse_type(inner)
        return Alternative(
            text,
            f"a list of {element.plural()}",
            f"lists of {element.plural()}",
            lambda v: _SCALAR_CHECKS["list"](v) and all(element.accepts(x) for x in _items(v)),
        )
    if head == "dict":
        element = parse_type(inner)
        return Alternative(
            text,
            f"a mapping to {element.plural()}",
            f"mappings to {element.plural()}",
            lambda v: _SCALAR_CHECKS["dict"](v) and all(element.accepts(x) for x in _values(v)),
        )
    if head == "tuple":
        members = [parse_type(m) for m in _split(inner, ",")]
        plurals = {m.plural() for m in members}
        wording = (
            f"a list of {len(members)} {plurals.pop()}"
            if len(plurals) == 1
            else f"a list of {len(members)}: {', '.join(m.describe() for m in members)}"
        )
        return Alternative(
            text,
            wording,
            f"lists of {len(members)}",
            lambda v: _SCALAR_CHECKS["list"](v)
            and len(items := _items(v)) == len(members)
            and all(m.accepts(x) for m, x in zip(members, items, strict=True)),
        )
    if head == "Literal":
        allowed = tuple(json.loads(f"[{inner}]"))
        shown = ", ".join(json.dumps(v) for v in allowed)
        return Alternative(
            text,
            f"one of {shown}",
            f"values among {shown}",
            lambda v: any(type(v) is type(a) and v == a for a in allowed),
        )
    raise ValueError(f"unknown type {text!r}")


@dataclass(frozen=True)
class KeyType:
    """The declared type of one key: the alternatives it accepts."""

    text: str
    alternatives: tuple[Alternative, ...]

    def accepts(self, value: object) -> bool:
        return any(alt.check(value) for alt in self.alternatives)

    def accepts_mapping(self) -> bool:
        return any(alt.text in ("Any", "dict") or alt.text.startswith("dict[") for alt in self.alternatives)

    def describe(self) -> str:
        return " or ".join(alt.wording for alt in self.alternatives)

    def plural(self) -> str:
        return " or ".join(alt.plural for alt in self.alternatives)


@cache
def parse_type(text: str) -> KeyType:
    """The :class:`KeyType` a type text such as ``"list[int] | None"`` stands for."""
    return KeyType(text, tuple(_alternative(part) for part in _split(text, "|")))


MAPPING = parse_type("dict")


# --- the schema -----------------------------------------------------------------------------------

MIRROR = "="


@cache
def declared_types(engine: str, release: str = DEFAULT_RELEASE) -> dict[str, KeyType]:
    """Every typed key path (leaves; sections only where a type is declared for them) under ``engine`` and
    the verl ``release``."""
    texts: dict[str, str] = {}
    for path, text in verl_reference(release)["types"].items():
        if isinstance(text, dict):
            if engine not in text:
                continue
            text = text[engine]
        texts[path] = text
    mirrors = {}
    elsewhere = _other_engines_blocks(engine)
    for path, text in OWN_TYPES.items():
        if path.startswith(elsewhere):
            continue  # a key of another engine's block: this engine has no such key
        if text.startswith(MIRROR):
            mirrors[path] = text[len(MIRROR):]
        elif texts.get(path, "Any") == "Any":
            # verl's untyped mappings (``Any``) are refined by our table; verl's own types always win.
            texts[path] = text
    for path, source in mirrors.items():
        prefix = source + "."
        for key, text in list(texts.items()):
            if key.startswith(prefix):
                texts.setdefault(path + key[len(source):], text)
    return {path: parse_type(text) for path, text in texts.items()}


def _other_engines_blocks(engine: str) -> tuple[str, ...]:
    """The baseline and role blocks (``prefix.``) of every engine but ``engine`` (from the layout table)."""
    chosen = layout_engine(engine)
    prefixes = []
    for other in ENGINE_TABLE:
        if other.name == chosen.name:
            continue
        prefixes.append(f"{other.baseline}.")
        prefixes += [f"{role.section}.{other.block(role.name)}." for role in ROLES if role.engine_block]
    own = {f"{role.section}.{chosen.block(role.name)}." for role in ROLES if role.engine_block}
    return tuple(p for p in prefixes if p not in own and p != f"{chosen.baseline}.")


Tree = dict[str, tuple[KeyType | None, "Tree | None"]]


@cache
def tree(engine: str, release: str = DEFAULT_RELEASE) -> Tree:
    """The schema as nested mappings, walked side by side with the config."""
    root: dict[str, list[Any]] = {}
    for path, key_type in declared_types(engine, release).items():
        node = root
        keys = path.split(".")
        for key in keys[:-1]:
            entry = node.setdefault(key, [None, None])
            if entry[1] is None:
                entry[1] = {}
            node = entry[1]
        node.setdefault(keys[-1], [None, None])[0] = key_type

    def freeze(node: dict[str, list[Any]]) -> Tree:
        return {k: (t, freeze(sub) if sub is not None else None) for k, (t, sub) in node.items()}

    return freeze(root)


def type_problems(cfg: DictConfig) -> Iterator[Problem]:
    """One pass over ``cfg``: a problem for each value whose type the schema does not accept.

    Interpolations are skipped (their target is checked where it is set), as are ``???`` values and
    keys a user added with ``+`` (not in the schema).
    """
    name = raw_at(cfg, ENGINE_KEY)
    engine = str(None if name is ABSENT or isinstance(name, dict) else name)
    yield from _check(cfg, tree(engine, release_of(cfg)), "")


def _check(node: DictConfig, tree: Tree, prefix: str) -> Iterable[Problem]:
    # Runs on every compose: the values come as written (raw_items), since a public accessor per key
    # costs ten times more.
    for key, value in raw_items(node):
        entry = tree.get(key)
        if entry is None:
            continue
        key_type, subtree = entry
        if isinstance(value, DictConfig | ListConfig):
            descend = subtree is not None and isinstance(value, DictConfig)
            if descend and (key_type is None or key_type.accepts_mapping()):
                yield from _check(value, subtree, f"{prefix}{key}.")
                continue
        elif _unresolved(value):
            continue
        expected = key_type if key_type is not None else MAPPING
        if not expected.accepts(value):
            yield _wrong_type(f"{prefix}{key}", value, expected)


def _wrong_type(path: str, value: object, key_type: KeyType) -> Problem:
    shown = value if not isinstance(value, DictConfig | ListConfig) else _shown(value)
    return Problem(
        key=path,
        message="has the wrong type",
        value=shown,
        show_value=True,
        expected=key_type.describe(),
        fix=f"set {path} to {key_type.describe()}",
    )


def _shown(value: DictConfig | ListConfig) -> object:
    from omegaconf import OmegaConf

    try:
        return OmegaConf.to_container(value, resolve=False)
    except Exception:  # noqa: BLE001 - a value that cannot be shown is named by its type
        return type(value).__name__


@cache
def targets(engine: str, release: str = DEFAULT_RELEASE) -> dict[str, str]:
    """Section path -> the ``_target_`` class verl builds it with, under ``engine`` and ``release``."""
    found = {}
    for path, target in verl_reference(release)["targets"].items():
        if isinstance(target, dict):
            if engine not in target:
                continue
            target = target[engine]
        found[path] = target
    return found


@cache
def converted_sections(engine: str, release: str = DEFAULT_RELEASE) -> tuple[str, ...]:
    """The sections verl builds a dataclass from under ``engine`` (``*`` stands for any one key)."""
    return tuple(path for path, engines in verl_reference(release)["converted"].items() if engine in engines)


def engine_strategies(engine: str, release: str = DEFAULT_RELEASE) -> tuple[str, ...]:
    """The ``strategy`` values a role runs ``engine`` with (what verl's engine config asserts)."""
    return tuple(verl_reference(release)["strategies"].get(engine, ()))


def verl_names(kind: str, release: str = DEFAULT_RELEASE) -> tuple[str, ...]:
    """One of verl's name lists (``adv_estimator``, ``policy_loss_mode``, ``reward_manager``,
    ``loss_agg_mode``, ...), as frozen from the verl ``release``."""
    return tuple(verl_reference(release)["names"].get(kind, ()))

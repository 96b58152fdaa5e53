"""OmegaConf's YAML dialect on PyYAML's C implementation: the one YAML loader and dumper of verl_roles.

Reading: the config tree (through our Hydra config sources), the slime per-role file and the engine
defaults the slime table reads all go through :func:`load_plain`: OmegaConf's scalar rules (``1e-5``
is a float, no timestamps), and an error naming both lines for a key written twice (PyYAML would
silently keep the last). Writing: :func:`dump` is ``OmegaConf.to_yaml``'s output (same options, same
quoting of strings that would read back as another type), about twice as fast.
"""

from __future__ import annotations

import io
from collections.abc import Mapping
from typing import Any

import yaml
from omegaconf import DictConfig, ListConfig, OmegaConf

from verl_roles.base.errors import INVISIBLE, ConfigError, Problem
from verl_roles.base.limits import MAX_NESTING, nesting_depth, too_deep, too_many_values
from verl_roles.compat import omegaconf as oc
from verl_roles.omegaconf_adapter.build import NotPlainData, build

_OMEGACONF_LOADER = oc.yaml_loader()


class _Loader(getattr(yaml, "CSafeLoader", yaml.SafeLoader)):  # type: ignore[misc]
    """OmegaConf's implicit scalar rules on PyYAML's C parser, refusing a duplicate mapping key."""

    yaml_implicit_resolvers = _OMEGACONF_LOADER.yaml_implicit_resolvers

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> Any:
        first_line: dict[str, int] = {}
        for key_node, _ in node.value:
            if key_node.tag != yaml.resolver.BaseResolver.DEFAULT_SCALAR_TAG:
                continue
            key = key_node.value
            if key in first_line:
                raise yaml.constructor.ConstructorError(
                    "while constructing a mapping",
                    node.start_mark,
                    f"found duplicate key {key!r} (first on line {first_line[key] + 1})",
                    key_node.start_mark,
                )
            first_line[key] = key_node.start_mark.line
        return super().construct_mapping(node, deep=deep)


def load_plain(text: str, name: str = "<unicode string>") -> Any:
    """The Python objects of a YAML document; ``name`` (the file) is what a YAML error cites. A
    document nested deeper than Python can construct is a :class:`ConfigError` naming the file."""
    stream = io.StringIO(text)
    stream.name = name
    try:
        data = yaml.load(stream, Loader=_Loader)  # noqa: S506 - a SafeLoader subclass
    except RecursionError:
        raise too_deep(name) from None
    error = too_many_values(data, name)
    if error is not None:
        raise error
    if nesting_depth(data) > MAX_NESTING:
        raise too_deep(name)
    return data


def load_yaml(text: str, name: str = "<unicode string>") -> DictConfig | ListConfig:
    """``OmegaConf.load`` of ``text``, on the C parser; a document that is a single value (``3``) is a
    :class:`ConfigError` naming the file (OmegaConf raises a bare ``OSError``)."""
    return to_config(load_plain(text, name), name)


def to_config(obj: Any, name: str) -> DictConfig | ListConfig:
    """The OmegaConf config of the objects :func:`load_plain` read from the file ``name``."""
    if obj is not None and not isinstance(obj, (list, dict, str)):
        raise ConfigError([Problem(
            key=name, message=f"holds a single value ({obj!r}), not a mapping of keys to values",
            fix="write `key: value` lines (a config file is a YAML mapping)",
        )])
    if obj is None:
        return OmegaConf.create()
    if isinstance(obj, dict):
        try:
            return build(obj)  # OmegaConf.create's nodes, built directly (about ten times faster)
        except NotPlainData:
            pass
    return OmegaConf.create(obj)


def key_lines(text: str) -> dict[str, int]:
    """The line (1-based) of every key of a YAML mapping document, by dotted path (list items by
    index: ``defaults.0``); empty when the text does not parse (the loader reports that)."""
    try:
        root = yaml.compose(io.StringIO(text), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    except (yaml.YAMLError, RecursionError):
        return {}
    lines: dict[str, int] = {}

    def walk(node: yaml.Node, prefix: str) -> None:
        if isinstance(node, yaml.MappingNode):
            for key_node, value_node in node.value:
                path = f"{prefix}{key_node.value}"
                lines.setdefault(path, key_node.start_mark.line + 1)
                walk(value_node, f"{path}.")
        elif isinstance(node, yaml.SequenceNode):
            for index, item in enumerate(node.value):
                lines.setdefault(f"{prefix}{index}", item.start_mark.line + 1)
                walk(item, f"{prefix}{index}.")

    if root is not None:
        walk(root, "")
    return lines


def header_line(text: str) -> int:
    """The line (1-based) of a ``# @package`` header, or 1 when there is none."""
    for number, line in enumerate(text.splitlines()[:50], 1):
        if line.lstrip().startswith("#") and "@package" in line:
            return number
    return 1


class _Dumper(getattr(yaml, "CDumper", yaml.Dumper)):  # type: ignore[misc]
    """``OmegaConf.to_yaml``'s dumper on PyYAML's C emitter."""


def _represent_str(dumper: yaml.Dumper, data: str) -> yaml.ScalarNode:
    """OmegaConf's string representer, but a string holding a character a terminal hides or acts on and
    YAML takes as plain text (:data:`verl_roles.base.errors.INVISIBLE`: the marks of text direction, the
    zero-width characters) is double-quoted: :func:`_escaped` then writes each such character as its YAML
    escape, which only a double-quoted scalar reads as that character. (The control characters the
    emitter escapes itself.)"""
    if INVISIBLE.search(data):
        return dumper.represent_scalar("tag:yaml.org,2002:str", data, style='"')
    return oc.string_representer(dumper, data)


_Dumper.add_representer(str, _represent_str)


def _escaped(text: str) -> str:
    """YAML text from :class:`_Dumper` with each character of INVISIBLE (the emitter writes them as they
    are) as its ``\\uXXXX`` escape: the text reads back to the same values, shows what it holds, and
    shows it the same in a file and on a terminal. Only a double-quoted scalar holds such a character
    (:func:`_represent_str`)."""
    if not INVISIBLE.search(text):
        return text
    return INVISIBLE.sub(lambda m: f"\\u{ord(m.group()):04X}", text)


def dump(container: object) -> str:
    """``OmegaConf.to_yaml`` of a plain container: same input, byte-identical text, but for a string
    holding a character of INVISIBLE (double-quoted, that character escaped)."""
    return _escaped(yaml.dump(container, Dumper=_Dumper, default_flow_style=False, allow_unicode=True,
                              sort_keys=False))


def dump_lines(pairs: Mapping[str, object]) -> str:
    """One ``key: value`` line per pair, quoted as :func:`dump` quotes; a list or mapping value is
    written on its line in flow style (``key: [a, b]``)."""
    lines = []
    for key, value in pairs.items():
        style = None if isinstance(value, (list, dict)) else False
        text = yaml.dump({key: value}, Dumper=_Dumper, default_flow_style=style, allow_unicode=True,
                         sort_keys=False)
        lines.append(_escaped(text))
    return "".join(lines)


def dump_flow(value: object) -> str:
    """``value`` on one line, spelt as resolved.yaml spells it (OmegaConf's YAML, in flow style):
    ``1.0e-06``, ``false``, ``null``, ``fsdp``, ``'1e-5'`` (a string that would read back as a number is
    quoted), ``[console, wandb]``, ``{k: v}``. Every view that shows a value writes it this way, so the
    views agree with each other and with the files a run writes. A string with a line break is written
    double-quoted (``"a\\nb"``); anything but plain data (a marker object of a view), as ``str`` does."""
    if not _plain(value):
        return str(value)
    value = _as_lists(value)
    try:
        text = yaml.dump(value, Dumper=_Dumper, default_flow_style=True, allow_unicode=True, sort_keys=False,
                         width=_ONE_LINE)
    except yaml.YAMLError:
        return str(value)
    text = text.removesuffix("\n").removesuffix("\n...")
    if "\n" in text:
        text = yaml.dump(value, Dumper=_Dumper, default_flow_style=True, default_style='"',
                         allow_unicode=True, sort_keys=False, width=_ONE_LINE).removesuffix("\n")
    return _escaped(text)


def _plain(value: object) -> bool:
    if isinstance(value, dict):
        return all(_plain(k) and _plain(v) for k, v in value.items())
    if isinstance(value, list | tuple):
        return all(_plain(item) for item in value)
    return value is None or isinstance(value, str | int | float)


def _as_lists(value: object) -> object:
    """Tuples as the lists a config holds (YAML would tag a tuple)."""
    if isinstance(value, dict):
        return {k: _as_lists(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_as_lists(item) for item in value]
    return value


# PyYAML's line width: long enough that no value is folded.
_ONE_LINE = 1 << 30

"""A verl release's layer over one composition: the release's data applied to the files verl_roles ships.

conf/ writes one tree; what choosing ``verl_version=<release>`` changes in it is generated data
(:func:`verl_roles.base.releases.layer`): defaults the release gives another value, keys it has that conf/
lacks, keys conf/ has that it lacks. :class:`Layer` applies that data while Hydra loads the files of a
defaults list, never after the merge: a changed default is written into the shipped file that holds it
(so every key following it follows, and an option, a user's file or the command line still replaces
it), a removed key leaves the shipped files (a user's file or command line that sets it keeps it, and
the schema names it as a key the release does not read), an added key comes with the ``verl_version``
option, after the engine's files and before the role options.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from typing import Any

from hydra.core.default_element import ResultDefault
from hydra.plugins.config_source import ConfigResult
from omegaconf import DictConfig, OmegaConf, flag_override

from verl_roles.base import releases
from verl_roles.base.layout import ENGINE_ALIASES, ENGINE_KEY
from verl_roles.omegaconf_adapter.plain_merge import copy_plain, merge

_DELETE = object()


@dataclass(frozen=True)
class _Set:
    value: Any


class Layer:
    """The layer of one (release, engine): a trie of edits keyed by the parts of each path."""

    def __init__(self, release: str, engine: str, data: dict[str, Any]) -> None:
        self.release = release
        self.option = f"{releases.VERSION_KEY}/{release}"
        self.trie: dict[str, Any] = {}
        for path in data.get("delete", ()):
            self._put(path, _DELETE)
        for path, value in data.get("set", {}).items():
            self._put(path, _Set(value))
        added: dict[str, Any] = {}
        for path, value in data.get("add", {}).items():
            node = added
            *parents, last = path.split(".")
            for part in parents:
                node = node.setdefault(part, {})
            node[last] = value
        self.added = added
        self.empty = not self.trie and not added

    def _put(self, path: str, edit: Any) -> None:
        node = self.trie
        *parents, last = path.split(".")
        for part in parents:
            node = node.setdefault(part, {})
            if not isinstance(node, dict):
                return  # a section above is edited as a whole
        node[last] = edit

    def apply(self, default: ResultDefault, result: ConfigResult) -> ConfigResult:
        """``result`` (a shipped file embedded at its package) with the layer's edits; a copy when any."""
        config = result.config
        adds = default.config_path == self.option and self.added
        if not isinstance(config, DictConfig) or not (adds or _touches(config, self.trie)):
            return result
        result = copy.copy(result)
        config = copy.deepcopy(config)
        with flag_override(config, ["struct", "readonly"], False):
            _edit(config, self.trie)
        if adds:
            config = OmegaConf.merge(config, self.added)
        result.config = config
        return result


    def apply_plain(self, default: ResultDefault, data: dict[str, Any]) -> dict[str, Any]:
        """:meth:`apply` on the plain data of a shipped file embedded at its package (``data`` is shared:
        an edited copy is returned)."""
        adds = default.config_path == self.option and self.added
        if not (adds or _touches_plain(data, self.trie)):
            return data
        data = copy_plain(data)
        _edit_plain(data, self.trie)
        if adds:
            merge(data, self.added, data)
        return data


def _touches_plain(data: dict[str, Any], trie: dict[str, Any]) -> bool:
    for key, edit in trie.items():
        if key not in data:
            continue
        if not isinstance(edit, dict):
            return True
        child = data[key]
        if type(child) is dict and _touches_plain(child, edit):
            return True
    return False


def _edit_plain(data: dict[str, Any], trie: dict[str, Any]) -> None:
    for key, edit in trie.items():
        if key not in data:
            continue
        if edit is _DELETE:
            del data[key]
        elif isinstance(edit, _Set):
            data[key] = copy.deepcopy(edit.value)
        elif type(data[key]) is dict:
            _edit_plain(data[key], edit)


def _touches(config: DictConfig, trie: dict[str, Any]) -> bool:
    for key, edit in trie.items():
        if key not in config:
            continue
        if not isinstance(edit, dict):
            return True
        if OmegaConf.is_interpolation(config, key):
            continue
        child = config[key]
        if isinstance(child, DictConfig) and _touches(child, edit):
            return True
    return False


def _edit(config: DictConfig, trie: dict[str, Any]) -> None:
    for key, edit in trie.items():
        if key not in config:
            continue
        if edit is _DELETE:
            del config[key]
        elif isinstance(edit, _Set):
            config[key] = copy.deepcopy(edit.value)
        elif not OmegaConf.is_interpolation(config, key):
            child = config[key]
            if isinstance(child, DictConfig):
                _edit(child, edit)


@cache
def _layer(release: str, engine: str) -> Layer:
    return Layer(release, engine, releases.layer(release, engine))


def for_defaults(defaults: Sequence[ResultDefault]) -> Layer | None:
    """The layer of the release and engine a defaults list picks (None: no release, or nothing to do)."""
    release = engine = None
    for default in defaults:
        group, _, name = (default.config_path or "").rpartition("/")
        if group == releases.VERSION_KEY:
            release = name
        elif group == ENGINE_KEY:
            engine = ENGINE_ALIASES.get(name, name)
    if release is None or engine is None or not releases.is_supported(release) or not releases.layers_on():
        return None
    layer = _layer(release, engine)
    return None if layer.empty else layer

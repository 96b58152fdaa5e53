"""A user's file in a composition that would silently do nothing: one never read, because a file of the
same name comes first on the search path (:func:`shadowed_files`), and one whose values a file verl_roles
ships, later in the defaults list, replaces (:func:`overridden_values`: a primary config listing
``_self_`` before ``ppo_trainer``). Asked by the loader on each new defaults list, before it is merged.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from typing import Any

from omegaconf import DictConfig, ListConfig, OmegaConf

from verl_roles.base.errors import Problem
from verl_roles.hydra_adapter.sources import _FileSource, is_shipped
from verl_roles.inputs import containment
from verl_roles.omegaconf_adapter.nodes import ABSENT, raw_at, raw_items
from verl_roles.omegaconf_adapter.yaml_dialect import dump_flow

Loaded = Sequence[tuple[Any, Any]]


def shadowed_files(loaded: Any, sources: Any) -> list[Problem]:
    """A user's file that a composition never reads because a file of the same name comes first on the
    search path (``role/critic/default.yaml`` or ``ppo_trainer.yaml`` in a ``--config-dir`` next to
    verl_roles' own, or in two of the user's folders). ``loaded``: (default, loaded result) pairs of the
    defaults list; ``sources``: the search path's config sources, in order."""
    users = [source for source in sources if isinstance(source, _FileSource) and not source.shipped]
    if not users:
        return []
    problems = []
    for default, result in loaded:
        path = str(default.config_path)
        if result is None:
            continue
        used = str(result.path)
        for source in users:
            if f"{source.scheme()}://{source.path}" == used or not source.is_config(path):
                continue
            name = path if path.endswith((".yaml", ".yml")) else f"{path}.yaml"
            shown = "verl_roles' own tree" if is_shipped(result) else used.partition("://")[2]
            problems.append(containment.shadowed_problem(os.path.join(source.path, name), path, shown))
    if len(problems) > _SHOWN_SHADOWED:
        more = len(problems) - _SHOWN_SHADOWED
        problems = [*problems[:_SHOWN_SHADOWED], Problem(
            key=", ".join(sorted({source.path for source in users})),
            message=f"holds {more} more files named like files this run reads from elsewhere (a copy of a "
            "config tree?), none of which would be read",
            fix="keep only your own files, each under a name of its own, in the folder you pass")]
    return problems


# How many shadowed files are named one by one (a copy of the whole tree would name every file).
_SHOWN_SHADOWED = 4



def overridden_values(loaded: Loaded) -> list[Problem]:
    """Each value a user's file sets that a file verl_roles (or Hydra) ships, later in the defaults list,
    sets to another value: the run uses the shipped value, and the user's never applies. ``loaded``:
    (default, loaded result) pairs of the defaults list, in merge order (the order values win in)."""
    layers = [(str(d.package or ""), str(d.config_path), result)
              for d, result in loaded if result is not None]
    if all(is_shipped(result) for _, _, result in layers):
        return []
    problems = []
    for index, (package, path, result) in enumerate(layers):
        if is_shipped(result) or not isinstance(result.config, DictConfig):
            continue
        for key, value in _leaves(result.config, f"{package}." if package else ""):
            later = _last_setting(layers[index + 1:], key)
            if later is None or not is_shipped(later[1]) or later[2] == value:
                continue
            problems.append(Problem(
                key=f"{_shown(path, result)}: {key}",
                message=f"is set to {dump_flow(value)}, but {_shown(later[0], later[1])}, later in the "
                f"defaults list, sets it to {dump_flow(later[2])}: the run uses that value, and yours never "
                "applies",
                fix="list `_self_` last in the defaults list of your primary config (after ppo_trainer), or "
                "set the key on the command line",
            ))
    return problems


def _leaves(node: DictConfig, prefix: str) -> Iterator[tuple[str, object]]:
    for key, value in raw_items(node):
        path = f"{prefix}{key}"
        if not prefix and str(key) in ("defaults", "hydra"):
            continue
        if isinstance(value, DictConfig):
            yield from _leaves(value, f"{path}.")
        else:
            plain = OmegaConf.to_container(value, resolve=False) if isinstance(value, ListConfig) else value
            yield path, plain


def _last_setting(layers: Sequence[tuple[str, str, Any]], key: str) -> tuple[str, Any, object] | None:
    """(config path, result, value) of the last layer that sets ``key``, else None."""
    for package, path, result in reversed(layers):
        prefix = f"{package}." if package else ""
        if prefix and not key.startswith(prefix):
            continue
        if not isinstance(result.config, DictConfig):
            continue
        value = raw_at(result.config, key[len(prefix):])
        if value is not ABSENT:
            return path, result, value
    return None


def _shown(config_path: str, result: Any) -> str:
    """A file of the defaults list as a user finds it."""
    scheme, _, folder = str(result.path).partition("://")
    name = config_path if config_path.endswith((".yaml", ".yml")) else f"{config_path}.yaml"
    if not is_shipped(result):
        return os.path.join(folder, name)
    return f"verl_roles' {name}" if scheme == "file" else f"Hydra's {name}"

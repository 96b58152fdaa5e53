"""Legacy keys in config files: moved to their current keys after composition (a pipeline step)."""


from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import ClassVar

from omegaconf import DictConfig, OmegaConf

from verl_roles.base import releases
from verl_roles.base.errors import ConfigError, Problem
from verl_roles.base.layout import (
    DEFAULT_ENGINE,
    ENGINE_KEY,
)
from verl_roles.base.notices import ConfigDeprecationWarning, warn
from verl_roles.inputs import paths
from verl_roles.inputs.cmdline import CommandLine
from verl_roles.legacy.tables import (
    LEGACY_KEYS,
    REMOVED_KEYS,
    LegacyKey,
    RemovedKey,
    removed_problem,
    removed_warning,
)
from verl_roles.omegaconf_adapter.nodes import ABSENT, raw_at
from verl_roles.omegaconf_adapter.override_text import element_text


@dataclass(frozen=True)
class LegacyMove:
    """A legacy key a config file set: moved to its current key (``value``), or ``dropped`` because
    the command line sets the current key."""

    old_key: str
    new_key: str
    value: object
    dropped: bool = False


@dataclass(frozen=True)
class LegacyReport:
    """What the legacy step did to the composed config."""

    moves: tuple[LegacyMove, ...] = ()
    step: ClassVar[str] = "legacy"


def _legacy_keys_in(cfg: DictConfig, release: str) -> Iterator[tuple[LegacyKey, str, object]]:
    """``(entry, old key, unresolved value)`` for every leaf present in ``cfg`` legacy under ``release``."""
    # Runs on every compose: look each parent section up once and test key membership only.
    parents: dict[str, object] = {}
    for entry in LEGACY_KEYS:
        if not entry.applies(release):
            continue
        parent_key, _, leaf = entry.old.rpartition(".")
        if parent_key not in parents:
            parents[parent_key] = OmegaConf.select(cfg, parent_key, default=None)
        parent = parents[parent_key]
        if not isinstance(parent, DictConfig) or leaf not in parent:
            continue
        value = raw_at(cfg, entry.old)
        found = paths.leaves(value, (entry.old,)) if entry.section else [((entry.old,), value)]
        for key, leaf in found:
            # A shipped legacy key (null in our config, as in verl's) is unset while it is null.
            if not (entry.shipped and leaf is None):
                yield entry, paths.dotted(key), leaf


def _removed_keys_in(cfg: DictConfig, release: str) -> Iterator[tuple[RemovedKey, str, object]]:
    """``(entry, key, unresolved value)`` for every key with no current equivalent a file set (null is
    unset: verl keeps two of them at null, and null was the Jan-2026 default of most)."""
    for entry in REMOVED_KEYS:
        if not entry.applies(release):
            continue
        value = raw_at(cfg, entry.old)
        if value is ABSENT:
            continue
        found = paths.leaves(value, (entry.old,)) if entry.section else [((entry.old,), value)]
        yield from ((entry, paths.dotted(key), leaf) for key, leaf in found if leaf is not None)


def _set_on_command_line(key: str, cli_keys: set[str]) -> bool:
    return any(key == k or key.startswith(k + ".") for k in cli_keys)


def normalize_config(
    cfg: DictConfig, command: CommandLine, stock_config: Callable[[str, str], DictConfig]
) -> LegacyReport:
    """Move every legacy key a config file put into the composed ``cfg`` to its current key.

    ``command`` is the (already translated) command line: a value set there wins over a config
    file, as always in Hydra. Otherwise the legacy value is used unless the file also set the current
    key to a different value, which is an error naming both keys. ``stock_config(engine, release)`` is
    our own config for an engine and release with no user input (it tells a value a file set from a
    default); it is asked
    only when a config file uses a legacy key.
    """
    release = releases.release_of(cfg)
    found = list(_legacy_keys_in(cfg, release))
    removed = list(_removed_keys_in(cfg, release))
    if not found and not removed:
        return LegacyReport()
    engine = str(cfg.get(ENGINE_KEY, DEFAULT_ENGINE))
    cli_keys = set(command.set_keys())
    problems: list[Problem] = []
    moves: list[LegacyMove] = []
    dropped: list[str] = []
    for entry, key, value in removed:
        if any(type(value) is type(h) and value == h for h in entry.harmless):
            warn(removed_warning(entry, key, value, release) + " (from a config file)",
                 ConfigDeprecationWarning)
            dropped.append(key)
        else:
            problems.append(removed_problem(entry, key, value, "a config file", release))
    for entry, old_key, old_value in found:
        new_key = entry.new_key_for(old_key)
        assert new_key is not None
        new_value = entry.converted(old_value)
        parent_key = new_key.rpartition(".")[0]
        parent = OmegaConf.select(cfg, parent_key, default=None)
        if not entry.open_target and not isinstance(parent, DictConfig):
            problems.append(
                Problem(
                    key=old_key,
                    message=(
                        f"is {entry.kind()} read into {new_key}, which does not exist "
                        f"under model_engine={engine}"
                    ),
                    origin="a config file",
                    fix=f"remove {old_key} from the config file, or use the engine it belongs to",
                )
            )
            continue
        if _set_on_command_line(new_key, cli_keys):
            warn(
                f"{old_key} (value {element_text(old_value)}) in a config file is {entry.kind()} for "
                f"{new_key}; it is ignored because the command line sets {new_key}. "
                + ("Remove it from the file, or set the block there." if entry.alias
                   else "Rename it in the file."),
                entry.warning,
            )
            moves.append(LegacyMove(old_key, new_key, new_value, dropped=True))
            continue
        current = raw_at(cfg, new_key)
        default = raw_at(stock_config(engine, release), new_key)
        if current not in (default, new_value):
            problems.append(
                Problem(
                    key=old_key,
                    message=(
                        f"is {entry.spelling_of(new_key)}, and the config sets both to different "
                        f"values: {old_key}={element_text(old_value)} and {new_key}={element_text(current)}"
                    ),
                    origin="a config file",
                    fix=f"keep only {new_key} and remove {old_key}",
                )
            )
            continue
        moves.append(LegacyMove(old_key, new_key, new_value))
        value_text = element_text(new_value)
        if entry.alias:
            text = (f"{old_key} in a config file is {entry.kind()}; {entry.read_into(new_key, value_text)}. "
                    "Writing the block in the file says the same.")
        else:
            text = (f"{old_key} is a deprecated key; it now sets {new_key} (value {value_text}). "
                    f"Rename it to {new_key} in your config file.")
        warn(text, entry.warning)
    if problems:
        raise ConfigError(problems)
    for move in moves:
        if not move.dropped:
            paths.assign(cfg, move.new_key, move.value, add=True)
    for entry in LEGACY_KEYS:
        if not entry.applies(release) or raw_at(cfg, entry.old) is ABSENT:
            continue
        if entry.shipped:
            # verl's config keeps its legacy reward keys (null): only the values moved are reset.
            for move in moves:
                if entry.new_key_for(move.old_key) is not None:
                    paths.assign(cfg, move.old_key, None)
        else:
            paths.delete(cfg, entry.old)
    stock = stock_config(engine, release) if dropped else None
    for key in dropped:
        if raw_at(stock, key) is ABSENT:
            paths.delete(cfg, key)
        else:
            paths.assign(cfg, key, None)
    return LegacyReport(tuple(moves))

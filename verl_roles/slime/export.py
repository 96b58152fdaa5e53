"""Writing slime's per-role YAML: the per-role differences of a composed config, under slime's names.

Every leaf of a role's Megatron and optimizer blocks that differs from the baseline, and every key of
the role's own section the table maps (``ppo_micro_batch_size_per_gpu``) that differs from the role's
default, is written: under its slime name where the table (:data:`verl_roles.slime.names.SLIME_KEYS`)
has one, else as its role-relative verl path (``megatron.param_offload``), which verl-roles reads back
and slime itself does not. A name with several paths (``offload_train``) is written when all of them
differ with one value; otherwise each path is written as itself.
``verl-roles export-slime`` (:mod:`verl_roles.commands.export_slime`) is the command.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import yaml
from omegaconf import DictConfig, ListConfig, OmegaConf

from verl_roles.base.layout import ROLE_SECTIONS, SLIME_ENGINE, SLIME_ROLES
from verl_roles.inputs import paths
from verl_roles.slime import schedule
from verl_roles.slime.checkpoint import is_iteration_folder
from verl_roles.slime.names import (
    BLOCK_FILES,
    FILE_KEY,
    KEYS_BY_NAME,
    NAME_OF_PATH,
    SECTION_PATHS,
    SLIME_KEYS,
    SLIME_PATH_KEY,
    block_defaults,
    section_default,
)
from verl_roles.slime.read import LOAD_SWITCH

# verl's key naming the class a block is built into; never a per-role setting.
TARGET_KEY = "_target_"

# Names with several paths, written only when all paths carry one value.
SHARED_NAMES = tuple(key for key in SLIME_KEYS if key.also)

# Names whose value slime counts in optimizer steps and verl in trainer steps.
COUNTED_IN_OPTIMIZER_STEPS = tuple(key for key in SLIME_KEYS if key.counts_optimizer_steps)


def _plain(value: Any) -> Any:
    if isinstance(value, (DictConfig, ListConfig)):
        return OmegaConf.to_container(value, resolve=True)
    return value


def _block_baseline(cfg: DictConfig, path: str) -> Any:
    """What a role gets for the role-relative ``path`` (inside the engine or optimizer block) when nothing
    role-specific sets it: the `megatron.*` baseline for the engine block, the optimizer defaults."""
    block, rest = path.split(".", 1)
    if block == SLIME_ENGINE.role_block:
        return _plain(paths.get(cfg, f"{SLIME_ENGINE.baseline}.{rest}", default=None))
    return paths.get(block_defaults(block), rest, default=None)


def _block_differences(cfg: DictConfig, section: dict[str, Any]) -> dict[str, Any]:
    """Role-relative path -> value for every leaf of the role's engine and optimizer blocks that differs
    from the baseline (a list is one leaf: ``optim.betas``, which no slime name sets, is a verl path)."""
    diffs: dict[str, Any] = {}
    for block in BLOCK_FILES:
        for path, value in paths.leaves(section.get(block, {}), (block,)):
            if path[-1] == TARGET_KEY:
                continue  # the class verl builds the block into: structure, not a setting
            key = paths.dotted(path)
            if value != _block_baseline(cfg, key):
                diffs[key] = value
    return diffs


def _section_differences(cfg: DictConfig, role: str, section: dict[str, Any]) -> dict[str, Any]:
    """The mapped keys of the role's own section whose value differs from the role's default."""
    return {
        path: section.get(path)
        for path in SECTION_PATHS
        if section.get(path) != section_default(cfg, role, path)
    }


def _named(diffs: dict[str, Any], as_verl_path: set[str]) -> dict[str, Any]:
    """``diffs`` under slime's names: a shared name replaces its paths when they all carry one value."""
    out: dict[str, Any] = {}
    shared: dict[str, str] = {}
    for key in SHARED_NAMES:
        values = [diffs.get(target, KeyError) for target in key.targets]
        if KeyError not in values and all(value == values[0] for value in values):
            shared.update({target: key.name for target in key.targets})
    for path, value in diffs.items():
        if path in shared:
            out.setdefault(shared[path], value)
        elif path in as_verl_path:
            out[path] = value
        else:
            out[NAME_OF_PATH.get(path, path)] = value
    return out


def _in_optimizer_steps(cfg: DictConfig, role: str, diffs: dict[str, Any]) -> set[str]:
    """Convert, in place, the schedule lengths among ``diffs`` from verl's trainer steps to slime's
    optimizer steps (:mod:`verl_roles.slime.schedule`); return the paths that cannot be (the config does
    not give a whole ratio), which are written as their verl paths, in trainer steps."""
    unconverted: set[str] = set()
    for key in COUNTED_IN_OPTIMIZER_STEPS:
        if key.path not in diffs:
            continue
        try:
            diffs[key.path] = schedule.to_optimizer_steps(cfg, role, key.path, diffs[key.path])
        except schedule.ScheduleError:
            unconverted.add(key.path)
    return unconverted


def role_differences(cfg: DictConfig, roles: Sequence[str] = SLIME_ROLES) -> dict[str, dict[str, Any]]:
    """Role -> {file key: value} for every setting of the role that differs from what it gets without
    the file (see the module docstring). A checkpoint folder verl loads is written as `load` alone when
    it is an iteration folder (``.../iter_0000100``, which slime loads as it is, and reading `load` turns
    the switch on); any other folder, or one with the switch off, as its verl paths (slime would read
    another folder as a checkpoint root or as Hugging Face weights)."""
    load_path = KEYS_BY_NAME["load"].path
    out: dict[str, dict[str, Any]] = {}
    for role in roles:
        section = _plain(OmegaConf.select(cfg, ROLE_SECTIONS[role]))
        diffs = {**_block_differences(cfg, section), **_section_differences(cfg, role, section)}
        as_verl_path: set[str] = set()
        if load_path in diffs:
            folder = diffs[load_path]
            loads = paths.get(section, LOAD_SWITCH) is True
            if loads and isinstance(folder, str) and is_iteration_folder(folder):
                diffs.pop(LOAD_SWITCH, None)
            else:
                as_verl_path.add(load_path)
        as_verl_path |= _in_optimizer_steps(cfg, role, diffs)
        named = _named(diffs, as_verl_path)
        if named:
            out[role] = named
    return out


def carried_by_a_file(key: str) -> bool:
    """Whether a file written by :func:`to_slime_yaml` carries the config ``key`` (an override of it is
    left off the command line the file is read back over): a key of a slime role's engine or optimizer
    block, a key of its own section the table maps, or the slime file's own key."""
    if key == SLIME_PATH_KEY:
        return True
    for role in SLIME_ROLES:
        section = ROLE_SECTIONS[role]
        prefixes = [f"{section}.{block}" for block in BLOCK_FILES]
        if any(key == p or key.startswith(p + ".") for p in prefixes):
            return True
        if key in (f"{section}.{path}" for path in SECTION_PATHS):
            return True
    return False


def verl_only_keys(differences: dict[str, dict[str, Any]]) -> list[tuple[str, str, Any]]:
    """(role, verl path, value) of every difference slime has no argument for."""
    return [(role, key, value) for role, values in differences.items() for key, value in values.items()
            if "." in key]


def to_slime_yaml(differences: dict[str, dict[str, Any]], header: str = "") -> str:
    """slime's file format for ``differences``; same input, byte-identical text."""
    entries = [{"name": "default", "role": role, "overrides": values} for role, values in differences.items()]
    body = yaml.safe_dump({FILE_KEY: entries}, sort_keys=False, default_flow_style=False)
    return header + body

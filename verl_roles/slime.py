"""slime's per-role Megatron YAML (``--megatron-config-path``): read it into role overrides, write it back.

The file format is slime's::

    megatron:
      - name: default          # optional label
        role: critic           # required: actor or critic
        overrides:             # `args` is accepted as an alias
          lr: 1e-5

Keys are slime/Megatron argparse attribute names. :data:`SLIME_KEYS` is the one table that maps each of
them to a path inside the role's section (``actor_rollout_ref.actor`` or ``critic``). A value is coerced
to the type of the target key's default in the config tree, so ``1e-5`` (a string to YAML) is a float
and a quoted ``"false"`` is False. Every mistake in a file is reported at once, before the file changes
anything. :func:`role_differences` and :func:`to_slime_yaml` write the reverse, the per-role differences
of a composed config (``verl-roles export-slime``, :mod:`verl_roles.commands.export_slime`).
"""

from __future__ import annotations

import difflib
import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field, replace
from functools import cache
from pathlib import Path
from typing import Any

import yaml
from omegaconf import DictConfig, ListConfig, OmegaConf

from verl_roles import paths
from verl_roles.config_tree import CONF_DIR
from verl_roles.errors import ConfigError, Problem, yaml_problem
from verl_roles.layout import OPTIM_BLOCK, ROLE_SECTIONS, SLIME_ENGINE, SLIME_ROLES
from verl_roles.limits import read_config_file
from verl_roles.omegaconf_adapter.yaml_dialect import load_plain

# Top-level key naming a slime per-role YAML file.
SLIME_PATH_KEY = "megatron_config_path"

# The top-level list of a slime file (slime's format).
FILE_KEY = "megatron"

# Fields an entry of the `megatron` list may have.
ENTRY_FIELDS: tuple[str, ...] = ("name", "role", "overrides", "args")

# Resource keys slime ignores in a role: placement follows the trainer, not the role.
RESOURCE_KEYS: tuple[str, ...] = ("num_nodes", "num_gpus_per_node")

# Config file holding the default of each group of role-relative paths (the first path component):
# the engine block follows the engine's baseline, the optimizer its defaults file.
_DEFAULTS_FILES: dict[str, str] = {
    OPTIM_BLOCK: SLIME_ENGINE.optimizer_file,
    SLIME_ENGINE.role_block: SLIME_ENGINE.baseline_file,
}


@dataclass(frozen=True)
class SlimeKey:
    """One row of the mapping table: a slime argparse name and where it lands in a role's section.

    ``path`` is relative to the role's section; its first component names the baseline it overrides
    (``megatron`` -> the top-level ``megatron.*`` baseline, ``optim`` -> the optimizer defaults). The
    target type is the type of the key's default in the config tree; ``null_type`` gives it for keys
    whose default is null.
    """

    name: str
    path: str
    null_type: type | None = None


# slime argparse name -> role-relative config path. The README prints this table.
SLIME_KEYS: tuple[SlimeKey, ...] = (
    # Optimizer and learning-rate schedule.
    SlimeKey("lr", "optim.lr"),
    SlimeKey("min_lr", "optim.min_lr"),
    SlimeKey("lr_decay_style", "optim.lr_decay_style"),
    SlimeKey("lr_decay_iters", "optim.lr_decay_steps", null_type=int),
    SlimeKey("lr_warmup_iters", "optim.lr_warmup_steps"),
    SlimeKey("lr_warmup_fraction", "optim.lr_warmup_steps_ratio"),
    SlimeKey("lr_warmup_init", "optim.lr_warmup_init"),
    SlimeKey("lr_wsd_decay_style", "optim.lr_wsd_decay_style"),
    SlimeKey("lr_wsd_decay_iters", "optim.lr_wsd_decay_steps", null_type=int),
    SlimeKey("weight_decay", "optim.weight_decay"),
    SlimeKey("weight_decay_incr_style", "optim.weight_decay_incr_style"),
    SlimeKey("clip_grad", "optim.clip_grad"),
    SlimeKey("adam_beta1", "optim.betas.0"),
    SlimeKey("adam_beta2", "optim.betas.1"),
    SlimeKey("optimizer", "optim.optimizer"),
    SlimeKey("use_checkpoint_opt_param_scheduler", "optim.use_checkpoint_opt_param_scheduler"),
    # Parallel layout.
    SlimeKey("tensor_model_parallel_size", "megatron.tensor_model_parallel_size"),
    SlimeKey("pipeline_model_parallel_size", "megatron.pipeline_model_parallel_size"),
    SlimeKey(
        "virtual_pipeline_model_parallel_size", "megatron.virtual_pipeline_model_parallel_size", null_type=int
    ),
    SlimeKey("context_parallel_size", "megatron.context_parallel_size"),
    SlimeKey("expert_model_parallel_size", "megatron.expert_model_parallel_size"),
    SlimeKey("expert_tensor_parallel_size", "megatron.expert_tensor_parallel_size", null_type=int),
    SlimeKey("sequence_parallel", "megatron.sequence_parallel"),
    SlimeKey("use_distributed_optimizer", "megatron.use_distributed_optimizer"),
    SlimeKey("seed", "megatron.seed"),
    # Checkpoint loading (verl reads it when megatron.use_dist_checkpointing is true).
    SlimeKey("load", "megatron.dist_checkpointing_path", null_type=str),
    # Activation recomputation and attention kernel (Megatron TransformerConfig fields).
    SlimeKey(
        "recompute_granularity", "megatron.override_transformer_config.recompute_granularity", null_type=str
    ),
    SlimeKey("recompute_method", "megatron.override_transformer_config.recompute_method", null_type=str),
    SlimeKey(
        "recompute_num_layers", "megatron.override_transformer_config.recompute_num_layers", null_type=int
    ),
    SlimeKey("recompute_modules", "megatron.override_transformer_config.recompute_modules"),
    SlimeKey("attention_backend", "megatron.override_transformer_config.attention_backend"),
)

KEYS_BY_NAME: dict[str, SlimeKey] = {key.name: key for key in SLIME_KEYS}

# slime names that have no per-role place in verl; the reason is the error message.
UNSUPPORTED_KEYS: dict[str, str] = {
    "save": (
        "verl has no per-role save directory: each role's checkpoint goes to "
        "trainer.default_local_dir/global_step_<n>/<role>. Remove the key and set "
        "trainer.default_local_dir=... on the command line"
    ),
}


@cache
def _defaults_file(group: str) -> Any:
    path = CONF_DIR / _DEFAULTS_FILES[group]
    return load_plain(path.read_text(encoding="utf-8"), str(path))


def default_value(key: SlimeKey) -> Any:
    """The default of ``key``'s target in the config tree (the engine or optimizer defaults file)."""
    group, rest = key.path.split(".", 1)
    return paths.get(_defaults_file(group), rest)


def target_type(key: SlimeKey) -> type:
    """The type a value of ``key`` is coerced to: its default's type, or ``null_type`` for null defaults."""
    default = default_value(key)
    if default is None:
        if key.null_type is None:
            raise AssertionError(f"slime key {key.name}: default is null and no null_type is declared")
        return key.null_type
    return type(default)


# ---------------------------------------------------------------------------------------------------
# Coercion.

_TRUE = {"true", "yes", "on", "1"}
_FALSE = {"false", "no", "off", "0"}


class CoercionError(ValueError):
    """A value cannot be converted to the target type; the message says what was expected."""


def coerce(value: Any, kind: type, nullable: bool) -> Any:
    """Convert a value read from YAML to ``kind``; strings are parsed, never judged by truthiness."""
    if value is None or (
        nullable and isinstance(value, str) and value.strip().lower() in ("null", "none", "~")
    ):
        if nullable:
            return None
        raise CoercionError(f"expected {_type_name(kind)}, not null")
    if kind is bool:
        return _to_bool(value)
    if kind is int:
        return _to_int(value)
    if kind is float:
        return _to_float(value)
    if kind is str:
        if isinstance(value, str):
            return value
        raise CoercionError("expected a string")
    if kind is list:
        return _to_str_list(value)
    raise AssertionError(f"no coercion for {kind}")


def _type_name(kind: type) -> str:
    return {
        bool: "true or false",
        int: "an integer",
        float: "a number",
        str: "a string",
        list: "a list of names",
    }[kind]


def _to_bool(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    if isinstance(value, str):
        text = value.strip().lower()
        if text in _TRUE:
            return True
        if text in _FALSE:
            return False
    raise CoercionError("expected true or false")


def _to_int(value: Any) -> int:
    if isinstance(value, bool):
        raise CoercionError("expected an integer, not a boolean")
    if isinstance(value, int):
        return value
    number = value
    if isinstance(value, str):
        try:
            return int(value.strip())
        except ValueError:
            try:
                number = float(value.strip())
            except ValueError:
                raise CoercionError("expected an integer") from None
    if isinstance(number, float) and math.isfinite(number) and number.is_integer():
        return int(number)
    raise CoercionError("expected an integer")


def _to_float(value: Any) -> float:
    if isinstance(value, bool):
        raise CoercionError("expected a number, not a boolean")
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value.strip())
        except ValueError:
            pass
    raise CoercionError("expected a number such as 1e-5")


def _to_str_list(value: Any) -> list[str]:
    if isinstance(value, str):
        return [part for part in value.replace(",", " ").split() if part]
    if isinstance(value, list) and all(isinstance(item, str) for item in value):
        return list(value)
    raise CoercionError("expected a list of names, e.g. [core_attn, mlp]")


# ---------------------------------------------------------------------------------------------------
# Reading a file.


@dataclass
class RoleEntry:
    """One validated entry of a slime file: the role and its coerced values by slime name."""

    index: int
    role: str
    name: str | None
    values: dict[str, Any] = field(default_factory=dict)
    ignored: list[str] = field(default_factory=list)

    def label(self, path: str) -> str:
        return f"{path}: megatron[{self.index}] (role {self.role})"


def _file_problem(path: str, message: str, fix: str = "") -> ConfigError:
    return ConfigError([Problem(key=f"{SLIME_PATH_KEY}={path}", message=message, fix=fix)])


def read_slime_file(path: str) -> list[RoleEntry]:
    """Read and check a slime per-role file; raise :class:`ConfigError` naming every mistake in it."""
    file = Path(path).expanduser()
    key = f"{SLIME_PATH_KEY}={path}"
    try:
        text = read_config_file(file, key)
    except ConfigError as error:
        if "file not found" not in error.problems[0].message:
            raise
        fix = "pass the path of an existing slime YAML file, or megatron_config_path=null"
        raise ConfigError([replace(error.problems[0], fix=fix)]) from None
    try:
        data = load_plain(text, str(file))
    except yaml.YAMLError as error:
        raise ConfigError([yaml_problem(error, key=key)]) from None
    if not isinstance(data, dict) or FILE_KEY not in data:
        raise _file_problem(
            path,
            "has no top-level `megatron` list",
            "start the file with `megatron:` followed by entries such as `- role: critic` / "
            "`  overrides: {lr: 1e-5}`",
        )
    extra = sorted(str(key) for key in data if key != FILE_KEY)
    entries_data = data[FILE_KEY]
    if entries_data is None:
        entries_data = []
    if not isinstance(entries_data, list):
        raise _file_problem(
            path,
            f"`megatron` must be a list of role entries, not {type(entries_data).__name__}",
            "write each role as a list item: `- role: critic`",
        )
    problems: list[Problem] = []
    if extra:
        problems.append(
            Problem(
                key=f"megatron_config_path={path}",
                message=f"unknown top-level key(s) {', '.join(extra)}",
                fix="keep only the `megatron` list at the top level",
            )
        )
    entries: list[RoleEntry] = []
    first_index: dict[str, int] = {}
    for index, raw in enumerate(entries_data):
        role = raw.get("role") if isinstance(raw, dict) else None
        if isinstance(role, str) and role in first_index:
            problems.append(
                Problem(
                    key=f"{path}: megatron[{index}] (role {role})",
                    message=f"duplicate entry for role {role} (first at megatron[{first_index[role]}])",
                    fix="merge the overrides of both entries into one entry per role",
                )
            )
            continue
        if isinstance(role, str) and role in SLIME_ROLES:
            first_index[role] = index
        entry = _check_entry(path, index, raw, problems)
        if entry is not None:
            entries.append(entry)
    if problems:
        raise ConfigError(problems)
    return entries


def _check_entry(path: str, index: int, raw: Any, problems: list[Problem]) -> RoleEntry | None:
    where = f"{path}: megatron[{index}]"
    if not isinstance(raw, dict):
        problems.append(
            Problem(
                key=where,
                message=f"an entry must be a mapping, not {type(raw).__name__}",
                fix="write `- role: actor|critic` followed by `overrides: {...}`",
            )
        )
        return None
    before = len(problems)
    for name in raw:
        if name not in ENTRY_FIELDS:
            close = difflib.get_close_matches(str(name), ENTRY_FIELDS, n=1)
            hint = f"did you mean `{close[0]}`? " if close else ""
            problems.append(
                Problem(
                    key=where,
                    message=f"unknown field {name!r}",
                    fix=f"{hint}an entry has only {', '.join(ENTRY_FIELDS)}",
                )
            )
    role = raw.get("role")
    if role is None:
        problems.append(
            Problem(
                key=where, message="has no `role`", fix=f"add `role: <{'|'.join(SLIME_ROLES)}>` to the entry"
            )
        )
    elif role not in SLIME_ROLES:
        problems.append(
            Problem(
                key=where,
                message=f"unknown role {role!r}",
                fix=f"use one of the supported roles: {', '.join(SLIME_ROLES)}",
            )
        )
    label = f"{where} (role {role})" if isinstance(role, str) else where
    name = raw.get("name")
    if name is not None and not isinstance(name, str):
        problems.append(
            Problem(key=label, message="`name` must be a string", fix="write e.g. `name: default`")
        )
    if "overrides" in raw and "args" in raw:
        problems.append(
            Problem(
                key=label,
                message="has both `overrides` and its alias `args`",
                fix="put every key under `overrides`",
            )
        )
    block_name = "overrides" if "overrides" in raw or "args" not in raw else "args"
    block = raw.get(block_name) or {}
    if not isinstance(block, dict):
        problems.append(
            Problem(
                key=label,
                message=f"`{block_name}` must be a mapping of argparse names to values",
                fix=f"write `{block_name}:` followed by indented `lr: 1e-5` lines",
            )
        )
        block = {}
    entry = RoleEntry(index=index, role=str(role), name=name)
    for key, value in block.items():
        _check_value(f"{label} {block_name}.{key}", str(key), value, entry, problems)
    return entry if len(problems) == before else None


def _check_value(where: str, key: str, value: Any, entry: RoleEntry, problems: list[Problem]) -> None:
    if key in RESOURCE_KEYS:
        entry.ignored.append(key)
        return
    if "-" in key:
        underscored = key.replace("-", "_").lstrip("_")
        known = " (a supported key)" if underscored in KEYS_BY_NAME else ""
        problems.append(
            Problem(
                key=where,
                message="is a command-line flag name; slime keys are argparse "
                "attribute names with underscores",
                fix=f"write `{underscored}`{known}",
            )
        )
        return
    if key in UNSUPPORTED_KEYS:
        problems.append(Problem(key=where, message="is not supported per role", fix=UNSUPPORTED_KEYS[key]))
        return
    if "." in key:
        _check_verl_path(where, key, value, entry, problems)
        return
    spec = KEYS_BY_NAME.get(key)
    if spec is None:
        close = difflib.get_close_matches(key, list(KEYS_BY_NAME), n=3)
        hint = f"did you mean {' or '.join(f'`{c}`' for c in close)}? " if close else ""
        problems.append(
            Problem(
                key=where,
                message="unknown slime key",
                fix=f"{hint}the supported keys are listed in docs/slime.md",
            )
        )
        return
    if _interpolation_in(value):
        problems.append(
            Problem(
                key=where,
                message="holds `${...}`: slime values are literal data, and OmegaConf (here and in verl, "
                "which reads resolved.yaml) would read it as an interpolation",
                fix=f"write the value itself (it sets {spec.path} of the role)",
            )
        )
        return
    kind = target_type(spec)
    try:
        entry.values[key] = coerce(value, kind, nullable=default_value(spec) is None)
    except CoercionError as error:
        problems.append(
            Problem(
                key=where,
                message=f"invalid value {value!r}: {error}",
                fix=f"write {_type_name(kind)} (it sets {spec.path} of the role)",
            )
        )


def _block_keys(block: str) -> list[str]:
    """Every key path (``megatron.param_offload``) of a block's defaults file."""
    return [f"{block}.{paths.dotted(path)}" for path, _ in paths.leaves(_defaults_file(block))]


def _check_verl_path(where: str, key: str, value: Any, entry: RoleEntry, problems: list[Problem]) -> None:
    """A key written as a role-relative verl path (``megatron.param_offload``): the per-role settings
    slime has no argument for, as ``verl-roles export-slime`` writes them."""
    block = key.split(".", 1)[0]
    known = _block_keys(block) if block in _DEFAULTS_FILES else []
    if key not in known:
        pool = known or [k for b in _DEFAULTS_FILES for k in _block_keys(b)]
        close = difflib.get_close_matches(key, pool, n=1)
        hint = f"did you mean `{close[0]}`? " if close else ""
        problems.append(Problem(
            key=where,
            message="is not a key of a role's Megatron or optimizer block",
            fix=f"{hint}a key with dots is a path inside the role's section, under "
            f"{' or '.join(f'`{b}.`' for b in _DEFAULTS_FILES)}",
        ))
        return
    if _interpolation_in(value):
        problems.append(Problem(key=where, message="holds `${...}`: slime values are literal data",
                                fix=f"write the value itself (it sets {key} of the role)"))
        return
    default = paths.get(_defaults_file(block), key.split(".", 1)[1])
    if default is None or isinstance(default, (list, dict)):
        entry.values[key] = value
        return
    kind = type(default)
    try:
        entry.values[key] = coerce(value, kind, nullable=False)
    except CoercionError as error:
        problems.append(Problem(key=where, message=f"invalid value {value!r}: {error}",
                                fix=f"write {_type_name(kind)} (it sets {key} of the role)"))


def _interpolation_in(value: Any) -> bool:
    """``${`` anywhere in a value: a string, an item of a list, a key or value of a mapping."""
    if isinstance(value, str):
        return "${" in value
    if isinstance(value, dict):
        return any(_interpolation_in(key) or _interpolation_in(item) for key, item in value.items())
    return isinstance(value, list) and any(_interpolation_in(item) for item in value)


# slime's `load` loads the checkpoint; verl reads the path only when this switch is on, so `load`
# turns it on for the role (a per-role command-line value of the switch still wins, with a warning).
LOAD_SWITCH = f"{SLIME_ENGINE.role_block}.use_dist_checkpointing"


def role_path(name: str) -> str:
    """The role-relative config path a file key sets: the table's for a slime name, the key itself for
    a verl path (``megatron.param_offload``)."""
    return name if "." in name else KEYS_BY_NAME[name].path


def role_assignments(entries: Sequence[RoleEntry]) -> Iterator[tuple[RoleEntry, str, str, Any]]:
    """(entry, file key, absolute config path, value) for every value of every entry; a `load` with a
    path also turns on the role's :data:`LOAD_SWITCH`."""
    for entry in entries:
        section = ROLE_SECTIONS[entry.role]
        for name, value in entry.values.items():
            yield entry, name, f"{section}.{role_path(name)}", value
            if name == "load" and value is not None and LOAD_SWITCH not in entry.values:
                yield entry, name, f"{section}.{LOAD_SWITCH}", True


# ---------------------------------------------------------------------------------------------------
# Writing a file: the per-role differences of a composed config.


def baseline_value(cfg: DictConfig, key: SlimeKey) -> Any:
    """What a role gets when nothing role-specific sets ``key``: the `megatron.*` baseline of ``cfg``
    for engine keys, the optimizer defaults for `optim.*` keys."""
    group, rest = key.path.split(".", 1)
    if group == SLIME_ENGINE.role_block:
        return _plain(paths.get(cfg, f"{SLIME_ENGINE.baseline}.{rest}"))
    return default_value(key)


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
    return paths.get(_defaults_file(block), rest, default=None)


_PATH_TO_NAME: dict[str, str] = {key.path: key.name for key in SLIME_KEYS}

# verl's key naming the class a block is built into; never a per-role setting.
TARGET_KEY = "_target_"


def _block_differences(cfg: DictConfig, section: dict[str, Any]) -> dict[str, Any]:
    """Role-relative path -> value for every leaf of the role's engine and optimizer blocks that differs
    from the baseline; a list the table maps item by item (``optim.betas``) is compared item by item."""
    diffs: dict[str, Any] = {}
    for block in _DEFAULTS_FILES:
        for path, value in paths.leaves(section.get(block, {}), (block,)):
            if path[-1] == TARGET_KEY:
                continue  # the class verl builds the block into: structure, not a setting
            key = paths.dotted(path)
            baseline = _block_baseline(cfg, key)
            if f"{key}.0" in _PATH_TO_NAME and isinstance(value, list) and isinstance(baseline, list):
                items = enumerate(value)
                diffs.update({f"{key}.{i}": v for i, v in items if i >= len(baseline) or v != baseline[i]})
            elif value != baseline:
                diffs[key] = value
    return diffs


def role_differences(cfg: DictConfig, roles: Sequence[str] = SLIME_ROLES) -> dict[str, dict[str, Any]]:
    """Role -> {file key: value} for every leaf of the role's engine and optimizer blocks whose value
    differs from the baseline: the slime name where the table has one, else the role-relative verl path
    (``megatron.param_offload``). A `load` path with the checkpoint switch on is written as `load` alone
    (reading `load` turns the switch on); with the switch off, as its verl path."""
    load_path = KEYS_BY_NAME["load"].path
    out: dict[str, dict[str, Any]] = {}
    for role in roles:
        section = _plain(OmegaConf.select(cfg, ROLE_SECTIONS[role]))
        diffs = _block_differences(cfg, section)
        as_verl_path: set[str] = set()
        if load_path in diffs:
            if paths.get(section, LOAD_SWITCH) is True:
                diffs.pop(LOAD_SWITCH, None)
            else:
                as_verl_path.add(load_path)
        named = {(key if key in as_verl_path else _PATH_TO_NAME.get(key, key)): v for key, v in diffs.items()}
        if named:
            out[role] = named
    return out


def verl_only_keys(differences: dict[str, dict[str, Any]]) -> list[tuple[str, str, Any]]:
    """(role, verl path, value) of every difference slime has no argument for."""
    return [(role, key, value) for role, values in differences.items() for key, value in values.items()
            if "." in key]


def to_slime_yaml(differences: dict[str, dict[str, Any]], header: str = "") -> str:
    """slime's file format for ``differences``; same input, byte-identical text."""
    entries = [{"name": "default", "role": role, "overrides": values} for role, values in differences.items()]
    body = yaml.safe_dump({FILE_KEY: entries}, sort_keys=False, default_flow_style=False)
    return header + body

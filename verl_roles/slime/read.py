"""Reading slime's per-role Megatron YAML (``--megatron-config-path``) into per-role values.

The file format is slime's::

    megatron:
      - name: default          # optional label
        role: critic           # required: actor or critic
        overrides:             # `args` is slime's alias
          lr: 1e-5

Keys are slime/Megatron argparse attribute names, mapped by the one table
(:data:`verl_roles.slime.names.SLIME_KEYS`), or verl paths inside the role (``megatron.param_offload``).
A value is converted to the type of the key it sets (:mod:`verl_roles.slime.coerce`). Every mistake in
a file is reported at once, before the file changes anything; what slime ignores harmlessly (a top-level
key besides ``megatron``, an entry field it does not read) is a warning. docs/slime.md lists where this
reader is stricter than slime's own parser, and why.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import yaml

from verl_roles.base import releases
from verl_roles.base.errors import ConfigError, Problem, did_you_mean, unknown_key, yaml_problem
from verl_roles.base.layout import ROLE_SECTIONS, SLIME_ENGINE, SLIME_ROLES
from verl_roles.base.limits import read_config_file
from verl_roles.base.suggest import near_keys, near_names
from verl_roles.inputs import paths
from verl_roles.omegaconf_adapter.yaml_dialect import load_plain
from verl_roles.slime.checkpoint import LoadError, resolve_load
from verl_roles.slime.coerce import CoercionError, coerce, type_name
from verl_roles.slime.names import (
    BLOCK_FILES,
    ENTRY_FIELDS,
    FILE_KEY,
    KEYS_BY_NAME,
    READ_FIELDS,
    RESOURCE_KEYS,
    SLIME_PATH_KEY,
    UNMAPPED,
    block_defaults,
    is_nullable,
    role_paths,
    target_type,
)

# slime's `load` loads the checkpoint; verl reads the path only when this switch is on, so `load`
# turns it on for the role (a per-role command-line value of the switch still wins, with a warning).
LOAD = "load"
LOAD_SWITCH = f"{SLIME_ENGINE.role_block}.use_dist_checkpointing"

# Where the names a file may hold are listed.
NAMES_DOC = "docs/slime.md"

_EXAMPLE_ENTRY = "`- role: critic` followed by `  overrides: {lr: 1e-5}`"


@dataclass
class RoleEntry:
    """One validated entry of a slime file: the role and its coerced values by file key."""

    index: int
    role: str
    name: str | None
    values: dict[str, Any] = field(default_factory=dict)
    ignored: list[str] = field(default_factory=list)

    def label(self, path: str) -> str:
        return f"{path}: megatron[{self.index}] (role {self.role})"


@dataclass
class SlimeFile:
    """A read slime file: its entries, and the warnings about what it holds that nothing reads."""

    entries: list[RoleEntry] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def _file_problem(path: str, message: str, fix: str = "") -> ConfigError:
    return ConfigError([Problem(key=f"{SLIME_PATH_KEY}={path}", message=message, fix=fix)])


def _load(path: str) -> Any:
    key = f"{SLIME_PATH_KEY}={path}"
    try:
        text = read_config_file(Path(path).expanduser(), key)
    except ConfigError as error:
        if "file not found" not in error.problems[0].message:
            raise
        fix = f"pass the path of an existing slime YAML file, or {SLIME_PATH_KEY}=null"
        raise ConfigError([replace(error.problems[0], fix=fix)]) from None
    try:
        return load_plain(text, str(Path(path).expanduser()))
    except yaml.YAMLError as error:
        raise ConfigError([yaml_problem(error, key=key)]) from None


def _entry_list(path: str, data: Any) -> list[Any]:
    """The `megatron` list of a loaded file, or the error slime's parser also stops at."""
    if not isinstance(data, dict) or FILE_KEY not in data:
        raise _file_problem(path, f"has no top-level `{FILE_KEY}` list",
                            f"start the file with `{FILE_KEY}:` followed by entries such as {_EXAMPLE_ENTRY}")
    entries = data[FILE_KEY]
    if entries is None:
        raise _file_problem(
            path,
            f"`{FILE_KEY}:` is empty (null), and slime refuses it too: it needs a list of role entries",
            f"list the entries under `{FILE_KEY}:`, e.g. {_EXAMPLE_ENTRY}; write `{FILE_KEY}: []` for a file "
            f"that changes no role, or drop {SLIME_PATH_KEY}",
        )
    if not isinstance(entries, list):
        kind = type(entries).__name__
        raise _file_problem(path, f"`{FILE_KEY}` must be a list of role entries, not {kind}",
                            "write each role as a list item: `- role: critic`")
    return entries


def read_slime_file(path: str, release: str = releases.DEFAULT_RELEASE) -> SlimeFile:
    """Read and check a slime per-role file for a config written for ``release``; raise
    :class:`ConfigError` naming every mistake in it."""
    data = _load(path)
    raw_entries = _entry_list(path, data)
    file = SlimeFile()
    extra = [str(key) for key in data if key != FILE_KEY]
    if extra:
        file.notes.append(Problem(
            key=f"{SLIME_PATH_KEY}={path}",
            message=f"top-level {'key' if len(extra) == 1 else 'keys'} {', '.join(extra)} ignored: slime "
            f"reads only the `{FILE_KEY}` list, and so does verl-roles",
            fix="remove them, or move role settings into an entry's `overrides`",
        ).render())
    problems: list[Problem] = []
    first_index: dict[str, int] = {}
    for index, raw in enumerate(raw_entries):
        role = raw.get("role") if isinstance(raw, dict) else None
        if isinstance(role, str) and role in first_index:
            problems.append(Problem(
                key=f"{path}: megatron[{index}] (role {role})",
                message=f"duplicate entry for role {role} (first at megatron[{first_index[role]}])",
                fix="merge the overrides of both entries into one entry per role",
            ))
            continue
        if isinstance(role, str) and role in SLIME_ROLES:
            first_index[role] = index
        entry = _check_entry(path, index, raw, problems, file.notes, release)
        if entry is not None:
            file.entries.append(entry)
    if problems:
        raise ConfigError(problems)
    return file


def _check_fields(where: str, raw: dict[str, Any], problems: list[Problem], notes: list[str]) -> None:
    """A field slime does not read: a misspelling of one it reads is an error (slime would drop what the
    entry holds), any other field a warning (slime ignores it)."""
    for name in raw:
        if name in ENTRY_FIELDS:
            continue
        read = near_names(str(name), READ_FIELDS)
        if read:
            problems.append(unknown_key(
                f"{where} {name}", "a slime role entry",
                because=f"slime would ignore it, and the entry would lose its `{read[0]}`",
                guesses=read, fix=f"an entry has only {', '.join(ENTRY_FIELDS)}",
            ))
        else:
            notes.append(unknown_key(
                f"{where} {name}", "a slime role entry",
                because="slime ignores it, and so does verl-roles",
                guesses=near_names(str(name), ENTRY_FIELDS), fix="remove it",
            ).render())


def _check_role(where: str, raw: dict[str, Any], problems: list[Problem]) -> Any:
    role = raw.get("role")
    if role is None:
        problems.append(Problem(key=where, message="has no `role`, so it applies to no role",
                                fix=f"add `role: <{'|'.join(SLIME_ROLES)}>` to the entry"))
    elif role not in SLIME_ROLES:
        problems.append(Problem(
            key=where, message=f"unknown role {role!r}, so it applies to no role",
            fix=did_you_mean(near_names(str(role), SLIME_ROLES),
                             f"use one of the supported roles: {', '.join(SLIME_ROLES)}"),
        ))
    return role


def _overrides(label: str, raw: dict[str, Any], problems: list[Problem]) -> tuple[str, dict[str, Any]]:
    """The entry's block of values, as slime picks it: `overrides`, else its alias `args` when
    `overrides` is empty or absent. Both non-empty is an error (slime would drop `args`)."""
    given = {name: raw[name] for name in ("overrides", "args") if raw.get(name)}
    if len(given) == 2:
        problems.append(Problem(
            key=label, message="has both `overrides` and its alias `args`, and slime would ignore `args`",
            fix="put every key under `overrides`",
        ))
        return "overrides", {}
    block_name, block = next(iter(given.items()), ("overrides", {}))
    if not isinstance(block, dict):
        problems.append(Problem(
            key=label, message=f"`{block_name}` must be a mapping of argparse names to values",
            fix=f"write `{block_name}:` followed by indented `lr: 1e-5` lines",
        ))
        return block_name, {}
    return block_name, block


def _check_entry(
    path: str, index: int, raw: Any, problems: list[Problem], notes: list[str], release: str
) -> RoleEntry | None:
    where = f"{path}: megatron[{index}]"
    if not isinstance(raw, dict):
        problems.append(Problem(key=where, message=f"an entry must be a mapping, not {type(raw).__name__}",
                                fix="write `- role: actor|critic` followed by `overrides: {...}`"))
        return None
    before = len(problems)
    _check_fields(where, raw, problems, notes)
    role = _check_role(where, raw, problems)
    label = f"{where} (role {role})" if isinstance(role, str) else where
    name = raw.get("name")
    if name is not None and not isinstance(name, str):
        problems.append(Problem(key=label, message="`name` must be a string",
                                fix="write e.g. `name: default`"))
    block_name, block = _overrides(label, raw, problems)
    entry = RoleEntry(index=index, role=str(role), name=name)
    for key, value in block.items():
        _check_value(f"{label} {block_name}.{key}", str(key), value, entry, problems, release)
    if entry.values.get(LOAD) is not None:
        _resolve_load(f"{label} {block_name}.{LOAD}", entry, problems, notes)
    _check_one_value_per_path(label, entry, problems)
    _check_one_warmup(label, entry, problems)
    return entry if len(problems) == before else None


def _resolve_load(where: str, entry: RoleEntry, problems: list[Problem], notes: list[str]) -> None:
    """slime's ``load`` as the folder verl loads (a checkpoint root becomes its iteration folder), or the
    problem saying why there is none (:mod:`verl_roles.slime.checkpoint`)."""
    try:
        folder, how = resolve_load(entry.values[LOAD], entry.role)
    except LoadError as error:
        problems.append(Problem(key=where, message=str(error), fix=error.fix))
        return
    entry.values[LOAD] = folder
    if how:
        notes.append(f"{where}: {how}.")


def _check_one_warmup(label: str, entry: RoleEntry, problems: list[Problem]) -> None:
    """A warmup given both ways: slime takes ``lr_warmup_fraction`` and ignores ``lr_warmup_iters``
    (get_optimizer_param_scheduler in slime/backends/megatron_utils/model.py), verl takes the steps and
    ignores the ratio (get_megatron_optimizer_param_scheduler, verl/utils/megatron/optimizer.py)."""
    iters = entry.values.get("lr_warmup_iters")
    if entry.values.get("lr_warmup_fraction") is not None and isinstance(iters, int) and iters > 0:
        problems.append(Problem(
            key=label, message="sets both `lr_warmup_fraction` and `lr_warmup_iters`: slime would warm up by "
            "the fraction and ignore the iterations, verl by the steps and ignore the ratio",
            fix="keep one of them (Megatron's own command line refuses both)",
        ))


def _check_one_value_per_path(label: str, entry: RoleEntry, problems: list[Problem]) -> None:
    """Two keys of one entry setting one config path (``offload_train`` and ``megatron.param_offload``)."""
    setters: dict[str, list[str]] = {}
    for name in entry.values:
        for target in role_paths(name):
            setters.setdefault(target, []).append(name)
    for target, names in setters.items():
        if len(names) > 1:
            problems.append(Problem(
                key=label, message=f"{' and '.join(f'`{n}`' for n in names)} both set {target} of the role",
                fix="keep one of them",
            ))


def _check_value(
    where: str, key: str, value: Any, entry: RoleEntry, problems: list[Problem], release: str
) -> None:
    if key in RESOURCE_KEYS:
        entry.ignored.append(key)
        return
    if "-" in key:
        underscored = key.replace("-", "_").lstrip("_")
        known = " (a name verl-roles reads)" if underscored in KEYS_BY_NAME else ""
        problems.append(Problem(
            key=where,
            message="is a command-line flag name; slime keys are argparse attribute names with underscores, "
            "and slime would set this one under a name nothing reads",
            fix=f"write `{underscored}`{known}",
        ))
        return
    if key in UNMAPPED:
        reason = UNMAPPED[key]
        problems.append(Problem(key=where, message=f"is a slime/Megatron argument verl-roles cannot map: "
                                f"{reason.slime}, but {reason.verl}", fix=reason.fix))
        return
    if "." in key:
        _check_verl_path(where, key, value, entry, problems, release)
        return
    spec = KEYS_BY_NAME.get(key)
    if spec is None:
        problems.append(unknown_key(
            where, "the slime names verl-roles reads",
            because="no verl key is known to have its effect (a slime or Megatron argument verl-roles does "
            "not map would do nothing here; a misspelt name slime sets anyway, and nothing reads it)",
            guesses=near_names(key, KEYS_BY_NAME, n=3),
            fix=f"the names are listed in {NAMES_DOC}; a setting slime has no name for is written as its "
            "verl path inside the role (megatron.param_offload)",
        ))
        return
    if _interpolation_in(value):
        problems.append(_interpolation_problem(where, ", ".join(spec.targets)))
        return
    if _missing_in_release(where, key, spec.targets, entry, problems, release):
        return
    kind = target_type(spec)
    try:
        entry.values[key] = coerce(value, kind, nullable=is_nullable(spec))
    except CoercionError as error:
        targets = ", ".join(spec.targets)
        problems.append(Problem(key=where, message=f"invalid value {value!r}: {error}",
                                fix=f"write {type_name(kind)} (it sets {targets} of the role)"))


def _missing_in_release(
    where: str, name: str, targets: Sequence[str], entry: RoleEntry, problems: list[Problem], release: str
) -> bool:
    """Whether a target of the slime ``name`` is a key only other verl releases have (the precision-aware
    optimizer's dtypes before verl 0.9.0); the problem gets the verdict the command line gets."""
    found = False
    for target in targets:
        full = f"{ROLE_SECTIONS[entry.role]}.{target}" if entry.role in ROLE_SECTIONS else target
        elsewhere = releases.elsewhere_problem_text(full, release, chosen=release != releases.DEFAULT_RELEASE)
        if elsewhere is not None:
            message, fix = elsewhere
            fix = fix.replace(f"remove {full}", f"remove `{name}` from the entry")
            problems.append(Problem(key=where, message=f"sets {full}, which {message}", fix=fix))
            found = True
    return found


def _block_keys(block: str) -> list[str]:
    """Every key path (``megatron.param_offload``) of a block's defaults file."""
    return [f"{block}.{paths.dotted(path)}" for path, _ in paths.leaves(block_defaults(block))]


def _check_verl_path(
    where: str, key: str, value: Any, entry: RoleEntry, problems: list[Problem], release: str
) -> None:
    """A key written as a role-relative verl path (``megatron.param_offload``): the per-role settings
    slime has no argument for, as ``verl-roles export-slime`` writes them. A key of another verl release
    gets the verdict it gets on the command line; one only ``release`` has (our files carry another's
    keys) is taken as written, and checked with the composed config."""
    block = key.split(".", 1)[0]
    known = _block_keys(block) if block in BLOCK_FILES else []
    full = f"{ROLE_SECTIONS[entry.role]}.{key}" if entry.role in ROLE_SECTIONS else key
    elsewhere = releases.elsewhere_problem_text(full, release, chosen=release != releases.DEFAULT_RELEASE)
    if elsewhere is not None:
        problems.append(Problem(key=where, message=f"sets {full}, which {elsewhere[0]}", fix=elsewhere[1]))
        return
    if key not in known and block in BLOCK_FILES and releases.has_key(release, full):
        if _interpolation_in(value):
            problems.append(_interpolation_problem(where, key))
        else:
            entry.values[key] = value
        return
    if key not in known:
        pool = known or [k for b in BLOCK_FILES for k in _block_keys(b)]
        problems.append(unknown_key(
            where, "a role's Megatron or optimizer block", guesses=near_keys(key, pool),
            fix="a key with dots is a path inside the role's section, under "
            f"{' or '.join(f'`{b}.`' for b in BLOCK_FILES)}",
        ))
        return
    if _interpolation_in(value):
        problems.append(_interpolation_problem(where, key))
        return
    default = paths.get(block_defaults(block), key.split(".", 1)[1])
    if default is None or isinstance(default, (list, dict)):
        entry.values[key] = value
        return
    kind = type(default)
    try:
        entry.values[key] = coerce(value, kind, nullable=False)
    except CoercionError as error:
        problems.append(Problem(key=where, message=f"invalid value {value!r}: {error}",
                                fix=f"write {type_name(kind)} (it sets {key} of the role)"))


def _interpolation_problem(where: str, target: str) -> Problem:
    return Problem(
        key=where,
        message="holds `${...}`: slime values are literal data, and OmegaConf (here and in verl, which reads "
        "resolved.yaml) would read it as an interpolation",
        fix=f"write the value itself (it sets {target} of the role)",
    )


def _interpolation_in(value: Any) -> bool:
    """``${`` anywhere in a value: a string, an item of a list, a key or value of a mapping."""
    if isinstance(value, str):
        return "${" in value
    if isinstance(value, dict):
        return any(_interpolation_in(key) or _interpolation_in(item) for key, item in value.items())
    return isinstance(value, list) and any(_interpolation_in(item) for item in value)


def role_assignments(entries: Sequence[RoleEntry]) -> Iterator[tuple[RoleEntry, str, str, Any]]:
    """(entry, file key, absolute config path, value) for every path every value of every entry sets; a
    `load` with a path also turns on the role's :data:`LOAD_SWITCH`."""
    for entry in entries:
        section = ROLE_SECTIONS[entry.role]
        for name, value in entry.values.items():
            for target in role_paths(name):
                yield entry, name, f"{section}.{target}", value
            if name == LOAD and value is not None and LOAD_SWITCH not in entry.values:
                yield entry, name, f"{section}.{LOAD_SWITCH}", True

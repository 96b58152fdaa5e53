"""What a config input may do: the limits of an override, an option file and Hydra's own settings.

A user hands us command-line overrides, option files under ``--config-dir`` and slime files. None of
them may reach further than it says:

- a group choice (``model_engine=megatron``, ``role/critic=fast``) names an option of the group: a
  string, a file name inside the group's folder (no ``..``, no absolute path), and a list only for
  the groups whose options stack (the role groups);
- a ``role/actor`` or ``role/critic`` option sets keys under its own role's section only: its
  ``# @package`` header is that section (or a section inside it), its content is a mapping, its
  defaults list names only options of its own group, it sets no ``_target_`` (the class verl builds
  the section with), and every key it sets exists (a near miss is named with the key it resembles);
- nothing from a config input is ever instantiated or called: Hydra instantiates its callbacks,
  launchers, sweepers and logging handlers, so ``hydra.callbacks``, a ``_target_`` under ``hydra``,
  a logging handler factory and Hydra's own config groups in a ``--config-dir`` are refused.

The checks are called by the Hydra adapter (:mod:`verl_roles.hydra_adapter.loader`) where it reads
overrides and files, and by the pipeline for the keys of a user's role option.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

from verl_roles.errors import Problem
from verl_roles.layout import ENGINE_KEY, ROLE_GROUPS, ROLE_SECTIONS
from verl_roles.limits import read_config_file
from verl_roles.omegaconf_adapter.yaml_dialect import key_lines, load_plain
from verl_roles.slime import RESOURCE_KEYS

# Each role group and the section its options set.
ROLE_OPTION_SECTIONS: dict[str, str] = {group: ROLE_SECTIONS[role] for role, group in ROLE_GROUPS.items()}

# The groups whose options stack (`role/critic=[offload,fast]`); every other group takes one option.
STACKING_GROUPS: frozenset[str] = frozenset(ROLE_GROUPS.values())

# The one callback of the main job (conf/ppo_trainer.yaml declares it); no other may be added.
OWN_CALLBACKS: frozenset[str] = frozenset({"verl_roles_sweep_summary"})

# Hydra settings whose values name code Hydra calls.
_CALLABLE_KEYS = ("_target_", "_partial_", "_args_", "()")
_HYDRA_CODE_SECTIONS = ("hydra.callbacks",)
_HYDRA_LOGGING = ("hydra.job_logging", "hydra.hydra_logging")


def group_choice_problem(
    text: str, group: str, value: object, options: Sequence[str], also_a_section: bool
) -> Problem | None:
    """The problem of the group choice ``text`` (``group=value``), or None when it names an option.

    ``options`` are the group's options (for the fix), ``also_a_section``: the group shares its name
    with a section of the config (``critic``), so a user probably meant one of its keys.
    """
    if not group:
        return Problem(key=f"`{text}`", message="has no key before `=`",
                       fix="write KEY=VALUE, e.g. trainer.nnodes=2")
    if isinstance(value, list) and group not in STACKING_GROUPS:
        return Problem(
            key=group,
            message=f"takes one option, but `{text}` lists several",
            expected="one of " + ", ".join(options) if options else "",
            fix=f"pick one, e.g. `{group}={options[0] if options else 'NAME'}`"
            + (" (sweep over options with -m and a comma list)" if group == ENGINE_KEY else ""),
        )
    for item in value if isinstance(value, list) else [value]:
        if not isinstance(item, str):
            return _not_an_option(text, group, item, options, also_a_section)
        problem = option_name_problem(group, item)
        if problem is not None:
            return problem
    return None


def _not_an_option(
    text: str, group: str, value: object, options: Sequence[str], also_a_section: bool
) -> Problem:
    shown = "null" if value is None else repr(value)
    if also_a_section:
        fix = f"set a key of the `{group}` section instead, e.g. `{group}.KEY=VALUE`"
    else:
        fix = f"pick an option by its name, e.g. `{group}={options[0] if options else 'NAME'}`"
    return Problem(
        key=group,
        message=f"is a config group, so `{text}` chooses one of its options, and {shown} is not an "
        "option name",
        expected="one of " + ", ".join(options) if options and not also_a_section else "",
        fix=fix,
    )


def group_deletion_problem(text: str, group: str, value: object) -> Problem | None:
    """``~group=OPTION`` removes the group's option OPTION; any other value is refused."""
    if isinstance(value, str):
        return option_name_problem(group, value)
    return Problem(
        key=group,
        message=f"`{text}` removes an option of the group only by its name, and {value!r} is not one",
        fix=f"write `~{group}` (remove whatever option is chosen) or `~{group}=NAME`",
    )


def option_name_problem(group: str, option: str) -> Problem | None:
    """An option is a file inside its group's folder: a name with a ``..`` part or an absolute path
    would read a file from elsewhere, so it is refused."""
    parts = option.replace("\\", "/").split("/")
    if option.startswith(("/", "\\", "~")) or ".." in parts or (len(option) > 1 and option[1] == ":"):
        return Problem(
            key=group,
            message=f"option {option!r} is a path, not the name of a file in the group's folder",
            fix=f"name the option only, e.g. `{group}=NAME` for {group}/NAME.yaml in conf/ or in your "
            "--config-dir (copy the file there if it lives elsewhere)",
        )
    return None


def config_name_problem(name: str) -> Problem | None:
    """``--config-name`` names a primary config of the search path, never a path to another file."""
    parts = name.replace("\\", "/").split("/")
    if name.startswith(("/", "\\", "~")) or ".." in parts:
        return Problem(
            key="--config-name",
            message=f"{name!r} is a path, not the name of a primary config",
            fix="name a config of conf/ or of your --config-dir (e.g. --config-name ppo_trainer), and "
            "put a config of your own into a folder you pass with --config-dir",
        )
    return None


# --- role option files ---------------------------------------------------------------------------


def role_option_problems(
    group: str,
    file: str,
    header_package: str | None,
    data: object,
    lines: Mapping[str, int],
    header_line: int,
) -> list[Problem]:
    """Everything wrong with the role option ``file`` of ``group`` before it is merged: its package,
    its shape, its defaults list and any ``_target_`` it sets. ``lines`` maps each dotted key of the
    file (``defaults.0``, ``optim.lr``) to its line; ``header_line`` is the line of ``# @package``."""
    section = ROLE_OPTION_SECTIONS[group]
    problems: list[Problem] = []
    package = header_package or ""
    if package != section and not package.startswith(f"{section}."):
        problems.append(_package_problem(group, file, section, package, header_line))
    if data is not None and not isinstance(data, dict):
        kind = "a list" if isinstance(data, list) else f"a single value ({data!r})"
        problems.append(Problem(
            key=file,
            message=f"holds {kind}, not a mapping of keys relative to `{section}`",
            fix=f"write `key: value` lines, e.g. `optim:` / `  lr: 1.0e-05` to set {section}.optim.lr",
        ))
        return problems
    for index, entry in enumerate((data or {}).get("defaults") or []):
        if not _own_group_entry(entry):
            line = lines.get(f"defaults.{index}", 1)
            problems.append(Problem(
                key=f"{file}, line {line}",
                message=f"its defaults list entry {entry!r} reaches outside {group}",
                fix=f"a {group} option may list only `_self_` and other options of {group} by name "
                "(stack options on the command line instead: `role/critic=[a,b]`)",
            ))
    for key in lines:
        if key.rsplit(".", 1)[-1] in _CALLABLE_KEYS and not key.startswith("defaults."):
            problems.append(Problem(
                key=f"{file}, line {lines[key]}",
                message=f"sets `{key}`, which names code, not a setting (verl builds `{section}` with "
                "the class it names)",
                fix=f"remove `{key}` from the option; it keeps the value of conf/",
            ))
    return problems


def defaults_shape_problem(file: str, data: object, lines: Mapping[str, int]) -> Problem | None:
    """A ``defaults`` key of a user's config file that is not a list (Hydra raised a bare ValueError)."""
    if not isinstance(data, dict) or "defaults" not in data or isinstance(data["defaults"], list):
        return None
    value = data["defaults"]
    return Problem(
        key=f"{file}, line {lines.get('defaults', 1)}",
        message=f"sets `defaults` to {'null' if value is None else repr(value)}; Hydra reads `defaults` as "
        "the list of configs this file builds on",
        fix="make it a list (`defaults:` then `  - _self_` lines), or remove the key",
    )


def _package_problem(group: str, file: str, section: str, package: str, line: int) -> Problem:
    if not package or package == group.replace("/", "."):
        option, default_package = f"{group}={Path(file).stem}", group.replace("/", ".")
        return Problem(
            key=f"{file}, line 1",
            message=f"has no `# @package {section}` header: Hydra would put the keys of option {option} "
            f"under a top-level `{default_package}`, where nothing reads them, instead of `{section}`",
            fix=f"make `# @package {section}` the first line of the file",
        )
    reach = "the whole config" if package == "_global_" else f"`{package}`"
    return Problem(
        key=f"{file}, line {line}",
        message=f"its header `# @package {package}` puts its keys into {reach}; a {group} option may "
        f"set keys under `{section}` only",
        fix=f"write `# @package {section}` and keys relative to it; set other keys on the command line",
    )


def _own_group_entry(entry: object) -> bool:
    """A defaults-list entry that names an option of the file's own group (or ``_self_``)."""
    if not isinstance(entry, str):
        return False
    return entry == "_self_" or not any(mark in entry for mark in ("/", "@", ":", "..", " ", "override"))


def unknown_keys(
    option: str, file: str, data: Mapping[str, Any], section: str, stock: DictConfig,
    lines: Mapping[str, int],
) -> list[Problem]:
    """Keys the role option ``file`` sets under ``section`` that the config does not have.

    A key right under the role's section must exist (verl builds the section as a dataclass, which
    refuses unknown fields), except the resource keys slime allows in a role (the roles step drops
    them with a warning); deeper, a key is refused when the config has a key very like it (a typo);
    other new keys inside a nested mapping (``megatron.override_transformer_config.*``, free
    mappings verl passes on) are allowed.
    """
    problems: list[Problem] = []
    for key in _leaf_keys(data):
        if key.startswith("defaults") or (section in ROLE_SECTIONS.values() and key in RESOURCE_KEYS):
            continue
        parts = key.split(".")
        node: Any = stock
        for depth, part in enumerate(parts):
            if not isinstance(node, DictConfig) or part in node:
                node = node.get(part) if isinstance(node, DictConfig) else None
                continue
            siblings = [str(k) for k in node]
            close = difflib.get_close_matches(part, siblings, n=1, cutoff=0.75)
            if depth == 0 or close:
                where = ".".join(parts[:depth])
                problems.append(_unknown_key(option, file, section, where, part, close, lines.get(key, 1)))
            break
    return problems


def _unknown_key(
    option: str, file: str, section: str, where: str, part: str, close: list[str], line: int
) -> Problem:
    inside = f"{section}.{where}" if where else section
    guess = f"did you mean `{close[0]}`? " if close else ""
    return Problem(
        key=f"{file}, line {line}",
        message=f"sets `{inside}.{part}`, which is not a key of `{inside}` (option {option})",
        fix=f"{guess}the keys of `{inside}` are listed by `verl-roles keys '{inside}.*'`",
    )


def _leaf_keys(data: Mapping[str, Any], prefix: str = "") -> Iterable[str]:
    for key, value in data.items():
        path = f"{prefix}{key}"
        if isinstance(value, dict) and value:
            yield from _leaf_keys(value, f"{path}.")
        else:
            yield path


def user_option_problems(
    config_dir: str | None, options: Mapping[str, Sequence[str]], stock: DictConfig
) -> list[Problem]:
    """Unknown keys in the role options of the user's ``config_dir`` that the command line chose
    (``options``: group -> option names); ``stock`` is our config for the engine, with every key."""
    if config_dir is None:
        return []
    problems: list[Problem] = []
    for group, names in options.items():
        section = ROLE_OPTION_SECTIONS.get(group)
        for name in names if section is not None else ():
            path = Path(config_dir) / group / f"{name}.yaml"
            if path.is_file():
                problems += _option_file_keys(f"{group}={name}", path, section, stock)
    return problems


def _option_file_keys(option: str, path: Path, section: str, stock: DictConfig) -> list[Problem]:
    text = read_config_file(path, str(path))
    data = load_plain(text, str(path))
    package = _package_of(text) or section
    node = OmegaConf.select(stock, package, default=None)
    if not isinstance(data, dict) or not isinstance(node, DictConfig):
        return []  # refused when the file was loaded
    return unknown_keys(option, str(path), data, package, node, key_lines(text))


def _package_of(text: str) -> str | None:
    for line in text.splitlines()[:50]:
        words = line.lstrip("#").split()
        if line.lstrip().startswith("#") and len(words) == 2 and words[0] == "@package":
            return words[1]
    return None


# --- Hydra's own settings --------------------------------------------------------------------------


def hydra_override_problem(text: str, key: str) -> Problem | None:
    """A command-line override of a Hydra setting that names code Hydra would call."""
    if any(key == section or key.startswith(f"{section}.") for section in _HYDRA_CODE_SECTIONS):
        return Problem(
            key=key,
            message=f"`{text}` adds a Hydra callback: Hydra would import and call what it names",
            fix="remove it; the main job's own callback writes the sweep summary",
        )
    leaf = key.rsplit(".", 1)[-1]
    logging = any(key.startswith(f"{section}.") for section in _HYDRA_LOGGING)
    if key.startswith("hydra.") and (leaf in _CALLABLE_KEYS or (logging and leaf in ("class", "factory"))):
        return Problem(
            key=key,
            message=f"`{text}` names code Hydra would import and call",
            fix="choose a launcher, sweeper or logging option by name instead (hydra/launcher=joblib, "
            "hydra/job_logging=disabled)",
        )
    return None


def callbacks_problem(names: Iterable[str]) -> Problem | None:
    """``hydra.callbacks`` of a composed config holding more than the main job's own callback (from a
    config file of the user's: an option with ``# @package _global_`` or a primary config)."""
    foreign = sorted(set(map(str, names)) - OWN_CALLBACKS)
    if not foreign:
        return None
    return Problem(
        key="hydra.callbacks",
        message=f"a config file adds the Hydra callback(s) {', '.join(foreign)}: Hydra would import and "
        "call what they name",
        fix="remove them from your config files (the main job's own callback writes the sweep summary)",
    )


def hydra_config_problem(config_path: str, file: str) -> Problem | None:
    """A file of a user's ``--config-dir`` that would replace one of Hydra's own configs (launchers,
    sweepers, logging, callbacks name code Hydra calls)."""
    if config_path == "hydra" or config_path.startswith("hydra/"):
        return Problem(
            key=file,
            message="is one of Hydra's own configs (hydra/...): those name code Hydra imports and calls",
            fix="remove it from your --config-dir; choose Hydra's options by name on the command line "
            "(hydra/launcher=joblib)",
        )
    return None

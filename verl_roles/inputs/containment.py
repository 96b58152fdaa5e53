"""What a config input's *shape* may be: a group choice, an option file, a primary config's name.

A group choice (``model_engine=megatron``, ``role/critic=fast``) names an option of the group: a string,
a file name inside the group's folder (no ``..``, no absolute path), and a list only for the groups
whose options stack (the role groups). A ``role/actor`` or ``role/critic`` option sets keys under its
own role's section only: its ``# @package`` header is that section (or a section inside it), its content
is a mapping, its defaults list names only options of its own group. A ``defaults`` key is a list.

What a composition may *contain* (code from config, keys without an effect) is not checked here, per
input, but once on the result, by the gate (:mod:`verl_roles.validation.gate`). These checks are called by the
Hydra adapter where it reads overrides and files.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path

from verl_roles.base.errors import Problem
from verl_roles.base.layout import ENGINE_KEY, ROLE_GROUPS, ROLE_SECTIONS
from verl_roles.base.releases import VERSION_KEY
from verl_roles.omegaconf_adapter.nodes import calls_a_resolver

# Each role group and the section its options set.
ROLE_OPTION_SECTIONS: dict[str, str] = {group: ROLE_SECTIONS[role] for role, group in ROLE_GROUPS.items()}

# The groups whose options stack (`role/critic=[offload,fast]`); every other group takes one option.
STACKING_GROUPS: frozenset[str] = frozenset(ROLE_GROUPS.values())


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
        if "${" in item:
            return Problem(
                key=group,
                message=f"`{text}` chooses an option through an interpolation ({item!r}); an option is "
                "chosen by its name, which is never computed",
                expected="one of " + ", ".join(options) if options else "",
                fix=f"write the option's name, e.g. `{group}={options[0] if options else 'NAME'}`",
            )
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
    drive = os.name == "nt" and len(option) > 1 and option[1] == ":"
    if option.startswith(("/", "\\", "~")) or ".." in parts or drive:
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


# --- files of a user's folder ----------------------------------------------------------------------

# Groups whose options are verl_roles' own: the training engine (each mounts blocks the layout table
# and the release data name) and the verl release (generated data). An option of a user's folder there
# would be read as an engine or a release that does not exist.
CLOSED_GROUPS: tuple[str, ...] = (ENGINE_KEY, VERSION_KEY)


def closed_group_problem(config_path: str, file: str) -> Problem | None:
    """A user's file that is an option of a closed group (``model_engine/mine.yaml``)."""
    group = next((g for g in CLOSED_GROUPS if config_path.startswith(f"{g}/")), None)
    if group is None:
        return None
    return Problem(
        key=file,
        message=f"is an option of `{group}` in your folder; the options of `{group}` are verl_roles' own "
        "(`python -m verl_roles.main --help` lists them): one of yours with their name is never read, and "
        f"another is read as {'an engine' if group == ENGINE_KEY else 'a verl release'} verl_roles does not "
        "have",
        fix=f"choose one of verl_roles' `{group}` options and put your settings into your primary config "
        "(--config-name) or a role option (role/actor=NAME, role/critic=NAME)",
    )


def shadowed_problem(user_file: str, config_path: str, used_from: str) -> Problem:
    """A user's file with the path of a file the composition reads from elsewhere (``used_from``, the
    search-path entry that comes first): Hydra reads the first one, so the user's is never read."""
    closed = closed_group_problem(config_path, user_file)
    if closed is not None:
        return closed
    group, _, name = config_path.rpartition("/")
    rename = (f"`{group}=mine` for {group}/mine.yaml" if group else "`--config-name mine` for mine.yaml")
    return Problem(
        key=user_file,
        message=f"has the name `{config_path}` of a config file that {used_from} also has, and that one "
        "comes first on the search path: this run reads it, never yours, so your settings would silently not "
        "apply",
        fix=f"give your file a name of its own and choose it by that name (e.g. {rename})",
    )


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


def defaults_entry_problems(file: str, data: object, lines: Mapping[str, int]) -> list[Problem]:
    """The entries of a user's defaults list that choose an option as the command line may not: through
    a resolver (``override model_engine: ${oc.env:E}``) or by a path (``role/critic: ../../x``). The same
    rules as for a group choice typed on the command line (:func:`group_choice_problem`). An option that
    follows another group's choice (``extra: ${model_engine}``, Hydra's defaults-list interpolation) is
    computed from the config alone and stays allowed."""
    entries = data.get("defaults") if isinstance(data, dict) else None
    problems: list[Problem] = []
    for index, entry in enumerate(entries if isinstance(entries, list) else []):
        where = f"{file}, line {lines.get(f'defaults.{index}', 1)}"
        if isinstance(entry, str):
            group, chosen = entry.rpartition("/")[0], [entry]
        elif isinstance(entry, dict) and len(entry) == 1:
            key, value = next(iter(entry.items()))
            group = str(key).split()[-1].partition("@")[0].lstrip("/")
            chosen = value if isinstance(value, list) else [value]
        else:
            continue
        for option in chosen:
            if isinstance(option, str):
                problems += _defaults_option_problems(where, group or option, option, isinstance(entry, dict))
    return problems


def _defaults_option_problems(where: str, group: str, option: str, chosen_by_name: bool) -> list[Problem]:
    if calls_a_resolver(option):
        return [Problem(
            key=where, message=f"its defaults list chooses an option of `{group}` through an interpolation "
            f"that calls a resolver ({option!r}): the option would come from outside the config (the "
            "environment, say), which the command line does not allow either",
            fix=f"write the option's name (`{group}: NAME`), or choose it on the command line; an option "
            "may follow another group's choice as `${GROUP}`")]
    if ".." in option.replace("\\", "/").split("/") or (chosen_by_name and option.startswith("/")):
        return [Problem(
            key=where, message=f"its defaults list names {option!r}, a path, not an option of a group",
            fix="name an option by its name (a file inside the group's folder of conf/ or of your folder)")]
    return []


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



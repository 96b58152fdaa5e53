"""``verl-roles show [overrides] [--role ROLE] [--keys GLOB]``: the config the main job runs with.

The same steps as the main job (compose, legacy keys, roles and the slime file, resolve, validate), so
the text is byte for byte the ``resolved.yaml`` (or ``roles/<ROLE>.yaml``) a run with these overrides
writes. Hydra's ``--cfg job`` shows the composition before those steps; this is the one view that
never disagrees with the files a run writes.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from fnmatch import fnmatchcase

from omegaconf import OmegaConf

from verl_roles.api.composition import compose
from verl_roles.base.errors import ConfigError, Problem, did_you_mean, shell_line
from verl_roles.base.layout import ROLE_SECTIONS
from verl_roles.base.suggest import MAX_KEYS, near_keys, near_names
from verl_roles.inputs import paths
from verl_roles.inputs.cmdline import CommandLine
from verl_roles.inputs.flags import CFG, CONFIG_FLAGS, INFO, PACKAGE, REQUIRED, FlagSpec
from verl_roles.omegaconf_adapter.yaml_dialect import dump_lines
from verl_roles.runs.run_files import run_files
from verl_roles.shell.command import Command, Invocation

ROLE = FlagSpec(
    ("--role",), REQUIRED, tuple(ROLE_SECTIONS), value_name="a role", metavar="ROLE",
    help=f"only that role's section, exactly roles/ROLE.yaml ({', '.join(ROLE_SECTIONS)})",
)
KEYS = FlagSpec(
    ("--keys",), REQUIRED, value_name="a key pattern", metavar="GLOB", repeatable=True,
    help="one `key: value` line per key matching GLOB (* and ? as in the shell; a section's name matches "
    "every key under it; a key near a plain name is suggested when none matches); repeat it for several "
    "patterns. Keys are relative to --role when given",
)


def _show(invocation: Invocation) -> None:
    line = invocation.line
    role = invocation.value(ROLE)
    if role is not None and role not in ROLE_SECTIONS:
        raise ConfigError([Problem(key="--role", message=f"{role!r} is not a role",
                                   expected="one of " + ", ".join(ROLE_SECTIONS),
                                   fix=f"write e.g. `--role {next(iter(ROLE_SECTIONS))}`")])
    sys.stdout.write(show(line))


COMMAND = Command(
    name="show",
    summary="the config the main job runs with (its resolved.yaml), or one role or some keys of it",
    action=_show,
    flags=(ROLE, KEYS, *CONFIG_FLAGS),
    about="""\
Print the config the main job runs with for these overrides: exactly the resolved.yaml it writes
(after legacy keys, role options and the megatron_config_path slime file are applied, and after
validation; an invalid config is reported as the main job reports it, exit code 2).""",
    examples=(
        "verl-roles show model_engine=megatron megatron.tensor_model_parallel_size=2",
        "verl-roles show --role critic model_engine=megatron megatron_config_path=roles.yaml",
        "verl-roles show --keys '*.optim.lr' --keys '*.tensor_model_parallel_size' model_engine=megatron",
    ),
)


def show(command: CommandLine) -> str:
    """The text ``verl-roles show`` prints for ``command`` (flags included)."""
    cfg = compose(command.without(ROLE).without(KEYS).texts(), command.config_name, command.config_dir)
    role = command.flag(ROLE)
    name = f"roles/{role.value}.yaml" if role is not None else "resolved.yaml"
    patterns = [flag.value for flag in command.flags if flag.spec == KEYS and flag.value is not None]
    if not patterns:
        return run_files(cfg)[name]
    container = OmegaConf.to_container(cfg, resolve=True, enum_to_str=True)
    if role is not None:
        container = paths.get(container, ROLE_SECTIONS[str(role.value)])
    return matching_lines(container, patterns)


def _leaves(node: object, prefix: str = "") -> list[tuple[str, object]]:
    if isinstance(node, dict) and node:
        found: list[tuple[str, object]] = []
        for key, child in node.items():
            found += _leaves(child, f"{prefix}{key}.")
        return found
    return [(prefix[:-1], node)]


GLOB_CHARACTERS = "*?["


def is_glob(pattern: str) -> bool:
    return any(char in pattern for char in GLOB_CHARACTERS)


def matches(key: str, pattern: str) -> bool:
    """``key`` matches the shell-style ``pattern``, or lies under a section that does."""
    return fnmatchcase(key, pattern) or fnmatchcase(key, pattern + ".*")


def near_patterns(patterns: Sequence[str], keys: Sequence[str]) -> list[str]:
    """The keys (or sections) nearest the plain names among ``patterns`` that match nothing
    (``critic.optim.lrr`` -> ``critic.optim.lr``; a name alone -> the keys whose name is near it)."""
    sections = {key.rsplit(".", i)[0] for key in keys for i in range(1, key.count(".") + 1)}
    pool = [*keys, *sorted(sections)]
    guesses: list[str] = []
    for pattern in patterns:
        if is_glob(pattern):
            continue
        found = near_keys(pattern, pool)
        if not found and "." not in pattern:
            names = near_names(pattern, [key.rpartition(".")[2] for key in pool], n=MAX_KEYS)
            found = sorted((k for k in pool if k.rpartition(".")[2] in names), key=_shallow_first)[:MAX_KEYS]
        guesses += found
    return list(dict.fromkeys(guesses))


def _shallow_first(key: str) -> tuple[int, str]:
    return key.count("."), key


def no_match(shown: str, keys: Sequence[str], patterns: Sequence[str], hint: str) -> ConfigError:
    """The error of patterns that match no key: the keys nearest a plain name, then how patterns work."""
    return ConfigError([Problem(
        key=shown,
        message="matches no key of the config",
        fix=did_you_mean(
            near_patterns(patterns, keys),
            "patterns use * and ? as in the shell and match the whole key, e.g. '*.optim.lr' or "
            f"'critic.megatron'; {hint}",
        ),
    )])


def matching_lines(container: object, patterns: Sequence[str]) -> str:
    """``key: value`` per leaf matching any of ``patterns``, in config order; an error when none does."""
    leaves = _leaves(container)
    found = {key: value for key, value in leaves if any(matches(key, p) for p in patterns)}
    if not found:
        raise no_match(" ".join(f"--keys {p}" for p in patterns), [key for key, _ in leaves], patterns,
                       "`verl-roles keys` lists every key with its comment")
    return dump_lines(found)


# --- pointers from the views that come before the main job's steps --------------------------------

def show_command(command: CommandLine) -> str:
    """`verl-roles show ...` for the config ``command`` composes (its config flags and task overrides)."""
    words = ["verl-roles", "show"]
    for flag in command.flags:
        if flag.spec in CONFIG_FLAGS:
            words += flag.tokens
    package = command.flag(PACKAGE)
    if package is not None and package.value:
        words += ["--keys", package.value]
    words += [override.text for override in command.task_overrides]
    return shell_line(words)


def shows_composition(command: CommandLine) -> bool:
    """True when Hydra prints the composed config (``--cfg job|all``, ``--info config|all``)."""
    cfg = command.flag(CFG)
    info = command.flag(INFO)
    return (cfg is not None and cfg.value in ("job", "all")) or (
        info is not None and info.value in ("config", "all")
    )


def composition_note(command: CommandLine) -> str:
    """The one line the main job prints on stderr after Hydra's --cfg / --info view."""
    return (
        "verl_roles note: this is Hydra's composition, before the main job reads legacy keys, applies the "
        "role options and the megatron_config_path slime file, and validates; the config a run uses "
        f"(its resolved.yaml) is what `{show_command(command)}` prints."
    )

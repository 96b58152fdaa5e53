"""``verl-roles export-slime [-o FILE] [--strict] [overrides...]``: a config's per-role differences as
slime's per-role YAML (the reverse of reading a file named by ``megatron_config_path``).

Every leaf of the actor's and the critic's Megatron and optimizer blocks that differs from the baseline
is written: under its slime argparse name where the mapping table has one, else as its role-relative
verl path (``megatron.param_offload``), which verl-roles reads back and slime itself does not. The
export is then checked by reading it back: the baseline command line (the overrides without the
per-role ones) with ``megatron_config_path`` set to the file is composed, and every key whose value
differs from the exported config is named (a reference model setting, a per-role key outside the
engine and optimizer blocks). Both lists are warnings; ``--strict`` makes them an error and writes
nothing.
"""

from __future__ import annotations

import sys
import tempfile
import warnings
from collections.abc import Sequence
from pathlib import Path

from omegaconf import DictConfig, OmegaConf

from verl_roles.api.composition import compose
from verl_roles.base.errors import ConfigError, Problem, shell_line
from verl_roles.base.layout import (
    ENGINE_KEY,
    ROLE_GROUPS,
    SLIME_ENGINE,
    SLIME_ROLES,
    engine,
)
from verl_roles.base.notices import warn
from verl_roles.inputs import paths
from verl_roles.inputs.cmdline import CommandLine, Override
from verl_roles.inputs.flags import CONFIG_FLAGS, NO_VALUE, REQUIRED, FlagSpec
from verl_roles.runs.write_protocol import signals_raise, write_user_file
from verl_roles.shell.command import Command, Invocation
from verl_roles.slime.export import carried_by_a_file, role_differences, to_slime_yaml, verl_only_keys
from verl_roles.slime.names import SLIME_PATH_KEY
from verl_roles.validation.rules.values import role_runs
from verl_roles.views.role_table import cell

OUTPUT = FlagSpec(("--output", "-o"), REQUIRED, value_name="a file name", metavar="FILE",
                  help="write the file there (atomically) instead of to stdout")
STRICT = FlagSpec(("--strict",), NO_VALUE,
                  help="what the file cannot carry is an error, and nothing is written")


def _export_command(invocation: Invocation) -> None:
    command = invocation.line.without(OUTPUT, STRICT)
    text = export_slime(command, invocation.given(STRICT))
    output = invocation.value(OUTPUT)
    if output is None:
        sys.stdout.write(text)
        return
    with signals_raise():
        write_user_file(Path(output), text)
    print(f"verl-roles: wrote {output}", file=sys.stderr)


COMMAND = Command(
    name="export-slime",
    summary="a config's per-role differences as slime's per-role YAML",
    action=_export_command,
    flags=(OUTPUT, STRICT, *CONFIG_FLAGS),
    about="""\
Compose the config with the overrides (model_engine=megatron is required) and write the per-role
differences of the actor and the critic (every key of their Megatron and optimizer blocks whose value
differs from the baseline) as slime's --megatron-config-path YAML, to stdout or to FILE: under slime's
argparse name where there is one (lr, tensor_model_parallel_size, load, ...), else as the verl key path
inside the role (megatron.param_offload), which verl-roles reads back and slime ignores.

The file is checked by reading it back over the same command line without the overrides it carries
(the actor's and critic's Megatron and optimizer keys, role options, a slime file); the header says how
to read it back. A warning names every verl key path written and every value the file and the
remaining overrides cannot carry (e.g. a role option's setting outside the two blocks); with --strict
these are an error and nothing is written.""",
    examples=("verl-roles export-slime -o roles.yaml model_engine=megatron critic.optim.lr=3e-5",),
)


def _carried_by_the_file(override: Override) -> bool:
    """An override whose effect the exported file carries: a role option, or a key the file holds (see
    :func:`verl_roles.slime.export.carried_by_a_file`)."""
    if override.is_group:
        return override.key in ROLE_GROUPS.values()
    return carried_by_a_file(override.key)


def baseline_command(command: CommandLine) -> CommandLine:
    """``command`` without the overrides the exported file carries: what the file is read back over."""
    return command.rewritten(lambda o: [] if _carried_by_the_file(o) else None)


def _leaves(cfg: DictConfig) -> dict[str, object]:
    container = OmegaConf.to_container(cfg, resolve=True, enum_to_str=True)
    return {paths.dotted(path): value for path, value in paths.leaves(container)}


def not_carried(exported: DictConfig, text: str, baseline: CommandLine) -> list[str]:
    """``key=value`` for every key whose value differs when the file ``text`` is read back over
    ``baseline`` (the slime file's own key excepted)."""
    with tempfile.TemporaryDirectory(prefix="verl-roles-export-") as folder:
        file = Path(folder) / "roles.yaml"
        file.write_text(text, encoding="utf-8")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            read_back = compose(
                [*baseline.texts(), f"{SLIME_PATH_KEY}={file}"], baseline.config_name, baseline.config_dir
            )
    before, after = _leaves(exported), _leaves(read_back)
    keys = sorted((set(before) | set(after)) - {SLIME_PATH_KEY})
    return [f"{key}={cell(before.get(key))}" for key in keys if before.get(key) != after.get(key)]


def _read_back_line(baseline: CommandLine, extra: Sequence[str]) -> str:
    words = ["python", "-m", "verl_roles.main", *baseline.argv(), f"{SLIME_PATH_KEY}=FILE", *extra]
    return shell_line(words)


def export_slime(command: CommandLine, strict: bool = False) -> str:
    """Compose ``command`` and return the slime YAML of its per-role differences (see the module
    docstring for what is named, and when ``strict`` refuses)."""
    cfg = compose(command.texts(), command.config_name, command.config_dir)
    if engine(cfg[ENGINE_KEY]) != SLIME_ENGINE:
        raise ConfigError(
            [
                Problem(
                    key=ENGINE_KEY,
                    message=f"export-slime writes Megatron settings, but the engine is {cfg[ENGINE_KEY]}",
                    fix=f"add {ENGINE_KEY}={SLIME_ENGINE.name} to the overrides",
                )
            ]
        )
    roles = [role for role in SLIME_ROLES if role_runs(cfg, role)]
    differences = role_differences(cfg, roles)
    body = to_slime_yaml(differences)
    baseline = baseline_command(command)
    missing = not_carried(cfg, body, baseline)
    verl_paths = [f"{role} {key}={cell(value)}" for role, key, value in verl_only_keys(differences)]
    _name_what_slime_cannot_express(verl_paths, missing, strict)
    shown = " ".join(command.argv()) or "(no overrides)"
    header = (
        f"# Per-role Megatron overrides (slime format) exported by verl-roles from: {shown}\n"
        f"# Read it back with: {_read_back_line(baseline, missing)}\n"
    )
    return header + body


def _name_what_slime_cannot_express(verl_paths: list[str], missing: list[str], strict: bool) -> None:
    problems = []
    if verl_paths:
        problems.append(Problem(
            key="export-slime",
            message=f"slime has no argument for {'; '.join(verl_paths)}: written as verl key paths inside "
            "the role, which verl-roles reads back and slime itself ignores",
        ))
    if missing:
        problems.append(Problem(
            key="export-slime",
            message=f"the file cannot carry {', '.join(missing)} (its entries hold the actor's and the "
            "critic's Megatron and optimizer settings only)",
            fix="keep them on the command line next to megatron_config_path=FILE (the header's read-back "
            "line has them)",
        ))
    if strict and problems:
        raise ConfigError([
            Problem(key=p.key, message=p.message,
                    fix=f"{p.fix + '; ' if p.fix else ''}without --strict the file is written anyway")
            for p in problems
        ])
    for problem in problems:
        warn(problem.render())

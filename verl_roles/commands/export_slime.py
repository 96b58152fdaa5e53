"""``verl-roles export-slime [-o FILE] [overrides...]``: a config's per-role differences as slime's
per-role YAML (the reverse of reading a file named by ``megatron_config_path``)."""

from __future__ import annotations

import sys
from pathlib import Path

from verl_roles.api import compose
from verl_roles.cmdline import CONFIG_FLAGS, REQUIRED, CommandLine, FlagSpec
from verl_roles.commands.reporting import run_reporting_errors
from verl_roles.errors import ConfigError, Problem
from verl_roles.layout import ENGINE_KEY, SLIME_ENGINE, SLIME_ROLES, engine
from verl_roles.output import write_atomic
from verl_roles.slime import role_differences, to_slime_yaml
from verl_roles.validate import critic_in_use

USAGE = """usage: verl-roles export-slime [-o FILE] [--config-name NAME] [--config-dir DIR] [overrides...]

Compose the config with the overrides (model_engine=megatron is required) and write the per-role
differences (role value != baseline value, for every key of the slime mapping table) as slime's
--megatron-config-path YAML, to stdout or to FILE. Reading the file back with
megatron_config_path=FILE over the same baseline gives the same config."""

OUTPUT = FlagSpec(("--output", "-o"), REQUIRED, value_name="a file name", metavar="FILE")


def run(args: list[str]) -> int:
    """The ``verl-roles export-slime`` command."""
    args = list(args)
    if any(arg in ("-h", "--help") for arg in args):
        print(USAGE)
        return 0
    # run_reporting_errors takes `--debug` out of this list before the action reads it.
    return run_reporting_errors(lambda: _export(parse_args(args)), args)


def parse_args(args: list[str]) -> tuple[CommandLine, str | None]:
    """The command line to compose and the output file (None: stdout)."""
    command = CommandLine.parse(args, flags=(OUTPUT, *CONFIG_FLAGS))
    problems = command.flag_problems("export-slime")
    if problems:
        raise ConfigError(problems)
    output = command.flag(OUTPUT)
    return command.without(OUTPUT), output.value if output is not None else None


def export_slime(command: CommandLine) -> str:
    """Compose ``command`` and return the slime YAML of its per-role differences."""
    cfg = compose(command.texts(), command.config_name, command.config_dir)
    if engine(cfg[ENGINE_KEY]) != SLIME_ENGINE:
        raise ConfigError(
            [
                Problem(
                    key=ENGINE_KEY,
                    message=f"slime's per-role files are {SLIME_ENGINE.name}-only (Megatron argparse names "
                    f"for the `{SLIME_ENGINE.role_block}` blocks), so export-slime needs "
                    f"{ENGINE_KEY}={SLIME_ENGINE.name}; the config was composed with "
                    f"{ENGINE_KEY}={cfg[ENGINE_KEY]}",
                    fix=f"add {ENGINE_KEY}={SLIME_ENGINE.name} to the overrides",
                )
            ]
        )
    roles = [role for role in SLIME_ROLES if role != "critic" or critic_in_use(cfg)]
    shown = " ".join(command.argv()) or "(no overrides)"
    header = f"# Per-role Megatron overrides (slime format) exported by verl-roles from: {shown}\n"
    return to_slime_yaml(role_differences(cfg, roles), header)


def _export(parsed: tuple[CommandLine, str | None]) -> None:
    command, output = parsed
    text = export_slime(command)
    if output is None:
        sys.stdout.write(text)
        return
    write_atomic(Path(output), text)
    print(f"verl-roles: wrote {output}", file=sys.stderr)

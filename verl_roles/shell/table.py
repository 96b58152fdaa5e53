"""The table of ``verl-roles``' commands, its global help and version, and the dispatch to a command.

Each command is declared once, as the ``COMMAND`` of its module under :mod:`verl_roles.commands`
(:class:`verl_roles.shell.command.Command`: name, summary, usage, flags, action); this module lists the
modules and dispatches. The command table, ``verl-roles --help``, ``--version`` and the shell completion
(``verl-roles completion bash``) are derived from those declarations. A command's name is its module's,
with ``-`` for ``_`` (``check-sweep`` is ``verl_roles/commands/check_sweep.py``), so running one imports
only its module (by name: the commands sit above the shell, which never imports them by statement).
"""

from __future__ import annotations

import importlib
import sys
from functools import cache

from verl_roles.base.errors import (
    ConfigError,
    Problem,
    caused_by_interrupt,
    did_you_mean,
    interrupted_at_start,
)
from verl_roles.base.installation import print_shadowing_notice
from verl_roles.base.suggest import near_names
from verl_roles.inputs.flags import HELP, VERSION, FlagSpec
from verl_roles.shell.command import PROGRAM, Command, options_lines, version_text
from verl_roles.shell.reporting import DEBUG_FLAG, run_reporting_errors, say

# The modules under verl_roles.commands that declare a command of verl-roles.
COMMAND_MODULES: tuple[str, ...] = (
    "check_sweep", "completion", "diff", "explain", "export_slime", "keys", "launch", "migrate", "roles",
    "show",
)

USAGE = f"usage: {PROGRAM} COMMAND [ARGS...]   ({PROGRAM} COMMAND --help for a command's usage)"
# The flags of verl-roles itself, before any command.
GLOBAL_FLAGS: tuple[FlagSpec, ...] = (
    HELP,
    FlagSpec(VERSION.names, help="the version of verl_roles and the verl release it writes configs for"),
)


def command_name(module: str) -> str:
    return module.replace("_", "-")


@cache
def command(name: str) -> Command:
    """The declaration of the command ``name`` (a KeyError when there is none)."""
    modules = {command_name(module): module for module in COMMAND_MODULES}
    declared = importlib.import_module(f"verl_roles.commands.{modules[name]}").COMMAND
    assert declared.name == name, f"verl_roles/commands/{modules[name]}.py declares {declared.name!r}"
    return declared


def command_table() -> dict[str, Command]:
    """Every command of verl-roles by name, sorted."""
    return {name: command(name) for name in sorted(command_name(module) for module in COMMAND_MODULES)}


def help_text() -> str:
    table = command_table()
    width = max(len(name) for name in table)
    lines = [USAGE, "", "commands:"]
    lines += [f"  {name.ljust(width)}  {declared.summary}" for name, declared in table.items()]
    lines += ["", "options:", *options_lines(GLOBAL_FLAGS)]
    lines += [
        "",
        "The main job itself is `python -m verl_roles.main [hydra overrides]` (its --help lists the groups).",
        f'Shell completion of the commands, their flags and overrides: eval "$({PROGRAM} completion bash)".',
    ]
    return "\n".join(lines)


def _without_command(args: list[str]) -> None:
    """``verl-roles`` with no command: its help, its version, or what is wrong with the first word."""
    first = args[0] if args else None
    if first in (*HELP.names, "help"):
        say(help_text())
        return
    if first in VERSION.names:
        say(version_text())
        return
    names = sorted(command_name(module) for module in COMMAND_MODULES)
    listed = ", ".join(names)
    if first is None:
        raise ConfigError([Problem(
            key=PROGRAM, message="no command given",
            fix=f"write `{PROGRAM} COMMAND`, one of {listed} (`{PROGRAM} --help` says what each does)",
        )])
    if first.startswith("-"):
        flags = [name for flag in GLOBAL_FLAGS for name in flag.names]
        raise ConfigError([Problem(
            key=first, message=f"is not an option of {PROGRAM}",
            fix=did_you_mean(near_names(first, flags), f"{PROGRAM} takes {', '.join(flags)}, then a command "
                             f"and its options (`{PROGRAM} COMMAND --help`)"),
        )])
    guesses = [f"{PROGRAM} {name}" for name in near_names(first, names)]
    raise ConfigError([Problem(key=first, message="is not a command",
                               fix=did_you_mean(guesses, f"the commands are {listed}"))])


def dispatch(argv: list[str] | None = None) -> int:
    """``verl-roles ARGS``: the command named first runs (with its own error boundary), or the global help,
    version or the paragraph about the first word."""
    try:
        return _dispatch(argv)
    except BaseException as error:  # Ctrl-C while a command loads, before its error boundary
        if not caused_by_interrupt(error):
            raise
        return interrupted_at_start()


def _dispatch(argv: list[str] | None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    # `--debug` may come before the command too (`verl-roles --debug show ...`).
    words = [arg for arg in args if arg != DEBUG_FLAG]
    if words and words[0] in {command_name(module) for module in COMMAND_MODULES}:
        print_shadowing_notice()
        at = args.index(words[0])
        return command(words[0]).run(args[:at] + args[at + 1:])
    return run_reporting_errors(lambda: _without_command(args), args)

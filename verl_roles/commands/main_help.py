"""``python -m verl_roles.main --help``: what a user can choose, and where to find the ~900 keys.

Hydra's own ``--help`` lists every directory of the config tree as a group (most are internal groups
the engine and role options mount, which fail when chosen) and prints the whole config (~800 lines).
This help lists only the groups a user picks an option of (:meth:`ConfigTree.selectable_groups`,
including a ``--config-dir``'s), Hydra's own groups, and the commands that find keys.
``--hydra-help`` is Hydra's, unchanged.
"""

from __future__ import annotations

import textwrap

from verl_roles.inputs.cmdline import CommandLine
from verl_roles.shell.command import WIDTH
from verl_roles.shell.table import command

HEADER = """verl_roles main job: compose, validate and write the PPO trainer config (resolved.yaml and
roles/*.yaml in Hydra's output directory).

usage: python -m verl_roles.main [FLAGS] [group=option ...] [key=value ...]
       verl-roles-main [FLAGS] ...          (the same program; shell completion works with this name)

Flags are Hydra's (`--hydra-help` lists them): -m for a sweep, --config-dir DIR for your own config
files, --config-name NAME, --cfg job, --info defaults, ... The main job adds --check-sweep (with -m):
check every point of the grid before launching any job."""

# The commands that find keys and show what a run uses, in the order listed.
KEY_COMMANDS = ("keys", "show", "roles", "explain", "check-sweep")


def _key_commands() -> list[str]:
    """The commands of :data:`KEY_COMMANDS` as their declarations word them."""
    shown = [(f"verl-roles {name} {command(name).arguments}", command(name).summary) for name in KEY_COMMANDS]
    width = max(len(usage) for usage, _ in shown)
    lines = ["Keys (about 900; override any with key=value, add one with +key=value):"]
    for usage, summary in shown:
        lines += textwrap.wrap(summary, WIDTH, initial_indent=f"  {usage.ljust(width)}  ",
                               subsequent_indent=" " * (width + 4))
    lines += textwrap.wrap(
        "(`verl-roles --help` lists every command; `python -m verl_roles.main --version` names the verl "
        "release it writes for)", WIDTH, initial_indent="  ", subsequent_indent="   ",
    )
    return lines


def _groups(title: str, groups: dict[str, list[str]]) -> list[str]:
    width = max((len(group) for group in groups), default=0)
    return [title, *(f"  {group.ljust(width)}  {', '.join(options)}" for group, options in groups.items())]


def main_help(command: CommandLine) -> str:
    """The text of ``--help`` for ``command`` (its ``--config-dir`` adds options and groups)."""
    tree = command.tree
    lines = [HEADER, ""]
    lines += _groups("Choose (group=option; a list applies several role options in order):",
                     tree.selectable_groups())
    lines += ["", *_groups("Hydra's own groups:", tree.hydra_groups_with_options()), "", *_key_commands()]
    return "\n".join(lines)

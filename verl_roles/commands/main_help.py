"""``python -m verl_roles.main --help``: what a user can choose, and where to find the ~900 keys.

Hydra's own ``--help`` lists every directory of the config tree as a group (most are internal groups
the engine and role options mount, which fail when chosen) and prints the whole config (~800 lines).
This help lists only the groups a user picks an option of (:meth:`ConfigTree.selectable_groups`,
including a ``--config-dir``'s), Hydra's own groups, and the commands that find keys.
``--hydra-help`` is Hydra's, unchanged.
"""

from __future__ import annotations

from verl_roles.cmdline import CommandLine

HEADER = """verl_roles main job: compose, validate and write the PPO trainer config (resolved.yaml and
roles/*.yaml in Hydra's output directory).

usage: python -m verl_roles.main [FLAGS] [group=option ...] [key=value ...]
       verl-roles-main [FLAGS] ...          (the same program; shell completion works with this name)

Flags are Hydra's (`--hydra-help` lists them): -m for a sweep, --config-dir DIR for your own config
files, --config-name NAME, --cfg job, --info defaults, ... The main job adds --check-sweep (with -m):
check every point of the grid before launching any job."""

KEYS = """Keys (about 900; override any with key=value, add one with +key=value):
  verl-roles keys [GLOB] [model_engine=...]   keys with their type, default and comment, e.g. '*.optim.lr'
  verl-roles show [overrides]                 the config a run uses (what resolved.yaml will hold)
  verl-roles roles [overrides]                the keys whose values differ between the roles
  verl-roles explain KEY [overrides]          where a key's value comes from
  verl-roles check-sweep [overrides]          every point of a sweep checked, nothing written"""


def _groups(title: str, groups: dict[str, list[str]]) -> list[str]:
    width = max((len(group) for group in groups), default=0)
    return [title, *(f"  {group.ljust(width)}  {', '.join(options)}" for group, options in groups.items())]


def main_help(command: CommandLine) -> str:
    """The text of ``--help`` for ``command`` (its ``--config-dir`` adds options and groups)."""
    tree = command.tree
    lines = [HEADER, ""]
    lines += _groups("Choose (group=option; a list applies several role options in order):",
                     tree.selectable_groups())
    lines += ["", *_groups("Hydra's own groups:", tree.hydra_groups_with_options()), "", KEYS]
    return "\n".join(lines)

"""``verl-roles roles [overrides...]``: the roles side by side, one row per key whose value differs.

The config is the one the main job runs with (:func:`verl_roles.compose`); the rows are
:func:`verl_roles.role_table.role_rows`. A critic the algorithm does not train is left out, and the
table says so.
"""

from __future__ import annotations

from verl_roles.api import compose
from verl_roles.cmdline import CommandLine
from verl_roles.commands.reporting import say
from verl_roles.commands.shell import Command, Invocation
from verl_roles.flags import CONFIG_FLAGS
from verl_roles.role_table import ROLE_COLUMNS, compared_roles, render_table, role_rows
from verl_roles.roles import critic_off_reason


def _print_table(invocation: Invocation) -> None:
    say(side_by_side(invocation.line))


COMMAND = Command(
    name="roles",
    summary="one table of the keys whose values differ between actor, ref, critic and rollout",
    action=_print_table,
    flags=CONFIG_FLAGS,
    about="""\
Compose the config the main job would run with and print one table of the keys whose values differ
between the roles: actor, ref, critic, and the rollout for the keys it shares with them. Keys are
relative to each role's section (optim.lr is actor_rollout_ref.actor.optim.lr for the actor and
critic.optim.lr for the critic); `-` marks a role without that key. A key only one role has, or with
the same value in every role, is not shown. A critic the algorithm does not train is left out.""",
    examples=("verl-roles roles model_engine=megatron critic.megatron.param_offload=true",),
)


def side_by_side(command: CommandLine) -> str:
    """The table ``verl-roles roles`` prints for ``command``."""
    cfg = compose(command.texts(), command.config_name, command.config_dir)
    roles = compared_roles(cfg)
    rows = role_rows(cfg, roles)
    lines = [render_table(rows, roles) if rows else "no key differs between the roles"]
    left_out = [role for role in ROLE_COLUMNS if role not in roles]
    if left_out:
        lines.append(f"(critic left out: it is not trained, {critic_off_reason(cfg)})")
    return "\n".join(lines)

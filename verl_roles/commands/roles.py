"""``verl-roles roles [overrides...]``: the roles side by side, one row per key whose value differs.

The config is the one the main job runs with (:func:`verl_roles.compose`); the rows are
:func:`verl_roles.views.role_table.role_rows`. A trained role the config does not train is left out, and the
table says so.
"""

from __future__ import annotations

from verl_roles.api.composition import compose, stock_config
from verl_roles.base.layout import DEFAULT_ENGINE, ENGINE_KEY
from verl_roles.base.releases import release_of
from verl_roles.inputs.cmdline import CommandLine
from verl_roles.inputs.flags import CONFIG_FLAGS, FlagSpec
from verl_roles.shell.command import Command, Invocation
from verl_roles.shell.reporting import say
from verl_roles.validation.rules.values import why_not
from verl_roles.views.role_table import ROLE_COLUMNS, TABLE_WIDTH, compared_roles, render_table, role_rows


def engine_name(cfg) -> str:
    return str(cfg.get(ENGINE_KEY) or DEFAULT_ENGINE)


ALL = FlagSpec(("--all",), help="every differing key, also verl's `_target_` class names and the keys that "
               "follow another role's key; no wrapping")


def _print_table(invocation: Invocation) -> None:
    say(side_by_side(invocation.line, everything=invocation.given(ALL)))


COMMAND = Command(
    name="roles",
    summary=f"one table of the keys whose values differ between the roles ({', '.join(ROLE_COLUMNS)})",
    action=_print_table,
    flags=(*CONFIG_FLAGS, ALL),
    about=f"""\
Compose the config the main job would run with and print one table of the keys whose values differ
between the roles ({', '.join(ROLE_COLUMNS)}; a role without an engine block only for the keys it
shares with the others). Keys are relative to each role's section (optim.lr is
actor_rollout_ref.actor.optim.lr for the actor and critic.optim.lr for the critic); `-` marks a role
without that key. A key only one role has, or with the same value in every role, is not shown. A
trained role the config does not train (the critic, when the algorithm trains none) is left out. Also
left out, unless --all: verl's `_target_` class names (each role is its own class) and keys that follow
another role's key by interpolation (the rollout's qat settings are the actor's), which differ by
construction. The table fits 120 columns; long values wrap.""",
    examples=("verl-roles roles model_engine=megatron critic.megatron.param_offload=true",
              "verl-roles roles --all model_engine=megatron"),
)


def side_by_side(command: CommandLine, everything: bool = False) -> str:
    """The table ``verl-roles roles`` prints for ``command`` (``everything``: ``--all``)."""
    cfg = compose(command.texts(), command.config_name, command.config_dir)
    roles = compared_roles(cfg)
    stock = stock_config(engine_name(cfg), release_of(cfg))
    rows = role_rows(cfg, roles, stock, everything)
    width = None if everything else TABLE_WIDTH
    lines = [render_table(rows, roles, width) if rows else "no key differs between the roles"]
    for role in ROLE_COLUMNS:
        if role not in roles:
            lines.append(f"({role} left out: it is not trained, {why_not(cfg, role)})")
    if not everything:
        hidden = len(role_rows(cfg, roles)) - len(rows)
        if hidden:
            differ = "row differs" if hidden == 1 else "rows differ"
            lines.append(f"({hidden} more {differ} by construction, e.g. _target_: `verl-roles roles --all` "
                         "shows every row)")
    return "\n".join(lines)

"""The roles side by side: every key two or more roles share whose value differs between them.

Actor, reference and critic (and the rollout, for the keys it shares with them) are compared leaf by
leaf on the resolved config, each key relative to its role's section (``optim.lr`` is
``actor_rollout_ref.actor.optim.lr`` for the actor and ``critic.optim.lr`` for the critic). A key only
one role has is not a difference; a key the same in every role that has it is not shown. A critic the
algorithm does not train is left out.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from omegaconf import DictConfig, OmegaConf

from verl_roles.layout import ENGINE_KEY, ROLE_SECTIONS, engine
from verl_roles.omegaconf_adapter.yaml_dialect import dump_flow
from verl_roles.rules.values import critic_in_use
from verl_roles.text_table import render_rows

# Columns, in the order shown.
ROLE_COLUMNS: tuple[str, ...] = ("actor", "ref", "critic", "rollout")

MISSING = "-"


@dataclass(frozen=True)
class RoleRow:
    """One key (relative to the role sections) and its value in each role that has it."""

    key: str
    values: Mapping[str, object]


def _leaves(node: object, prefix: str = "") -> dict[str, object]:
    """Dotted key -> value; an empty mapping counts as a leaf, lists are values."""
    if isinstance(node, dict) and node:
        out: dict[str, object] = {}
        for key, child in node.items():
            out.update(_leaves(child, f"{prefix}{key}."))
        return out
    return {prefix[:-1]: node}


def compared_roles(cfg: DictConfig) -> list[str]:
    """The roles shown for ``cfg``: every column but a critic that is not trained."""
    return [role for role in ROLE_COLUMNS if role != "critic" or critic_in_use(cfg)]


def _role_leaves(cfg: DictConfig, role: str) -> dict[str, object]:
    """A role's leaves relative to its section, its engine block named as the actor's (the FSDP
    critic's ``fsdp`` block is the actor's and the ref's ``fsdp_config``)."""
    leaves = _leaves(OmegaConf.to_container(OmegaConf.select(cfg, ROLE_SECTIONS[role]), resolve=True))
    row = engine(cfg.get(ENGINE_KEY))
    block, actor_block = row.block(role), row.block("actor")
    if block == actor_block:
        return leaves
    return {
        f"{actor_block}.{key[len(block) + 1:]}" if key.startswith(block + ".") else key: value
        for key, value in leaves.items()
    }


def role_rows(cfg: DictConfig, roles: Sequence[str]) -> list[RoleRow]:
    """The keys at least two of ``roles`` have, with different values, sorted by key."""
    leaves = {role: _role_leaves(cfg, role) for role in roles}
    keys = sorted({key for values in leaves.values() for key in values})
    rows = []
    for key in keys:
        present = {role: leaves[role][key] for role in roles if key in leaves[role]}
        if len(present) < 2:
            continue
        if len({repr(value) for value in present.values()}) > 1:
            rows.append(RoleRow(key, present))
    return rows


def cell(value: object) -> str:
    """A value on one line, as resolved.yaml spells it in flow style (1.0e-06, null, true, [a, b], {k: v}):
    :func:`verl_roles.omegaconf_adapter.yaml_dialect.dump_flow`, the spelling of every view."""
    return dump_flow(value)


def render_table(rows: Sequence[RoleRow], roles: Sequence[str]) -> str:
    """An aligned text table: a header, then one line per row (``-`` where a role has no such key)."""
    cells = [[row.key, *(cell(row.values[r]) if r in row.values else MISSING for r in roles)] for row in rows]
    return render_rows(["key", *roles], cells)

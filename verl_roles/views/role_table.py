"""The roles side by side: every key two or more roles share whose value differs between them.

The roles of the layout table (actor, critic, reference, and the rollout for the keys it shares with
them) are compared leaf by leaf on the resolved config, each key relative to its role's section
(``optim.lr`` is ``actor_rollout_ref.actor.optim.lr`` for the actor and ``critic.optim.lr`` for the
critic). A key only one role has is not a difference; a key the same in every role that has it is not
shown. A trained role the config does not train (the critic, when the algorithm trains none) is left
out.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from omegaconf import DictConfig, OmegaConf

from verl_roles.base.layout import ENGINE_KEY, ROLE_SECTIONS, ROLES, engine
from verl_roles.base.text_table import render_rows
from verl_roles.omegaconf_adapter.yaml_dialect import dump_flow
from verl_roles.validation.rules.values import shown_roles

# Columns, in the order shown: the layout table's.
ROLE_COLUMNS: tuple[str, ...] = tuple(role.name for role in ROLES)

MISSING = "-"
# The widest the table is printed (its value columns wrap to fit).
TABLE_WIDTH = 120
# verl's class names: they differ per role by construction (each role is its own dataclass).
TARGET = "_target_"


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
    """The roles shown for ``cfg``: every column but a trained role the config does not train."""
    return [role.name for role in shown_roles(cfg)]


def _following(raw: object, own: str, prefix: str = "") -> list[tuple[str, str]]:
    """(key relative to the role's section ``own``, the key of another role's section it follows) for
    every value of ``raw`` (the section, unresolved) that is an interpolation of another role's key."""
    if isinstance(raw, dict):
        return [pair for name, child in raw.items() for pair in _following(child, own, f"{prefix}{name}.")]
    if isinstance(raw, str) and raw.startswith("${") and raw.endswith("}"):
        target = raw[2:-1]
        others = [s for s in ROLE_SECTIONS.values() if s != own and not own.startswith(f"{s}.")]
        if any(target == s or target.startswith(f"{s}.") for s in others):
            return [(prefix[:-1], target)]
    return []


def _by_construction(cfg: DictConfig, follows: list[tuple[str, str]], key: str, value: object) -> bool:
    """Whether a role's leaf ``key`` differs by construction: verl's ``_target_`` class name, or a key
    that ``follows`` another role's key (in the stock config) and still equals it."""
    if key.rsplit(".", 1)[-1] == TARGET:
        return True
    for followed, target in follows:
        if key == followed or key.startswith(f"{followed}."):
            other = OmegaConf.select(cfg, target + key[len(followed):], default=None)
            if OmegaConf.is_config(other):
                other = OmegaConf.to_container(other, resolve=True)
            return other == value
    return False


def _role_leaves(cfg: DictConfig, role: str, stock: DictConfig | None = None,
                 everything: bool = True) -> dict[str, object]:
    """A role's leaves relative to its section, its engine block named as the actor's (the FSDP
    critic's ``fsdp`` block is the actor's and the ref's ``fsdp_config``). Without ``everything``, no
    leaf that differs by construction (:func:`_by_construction`; ``stock``: the config with no user
    input, which says which keys follow another role's)."""
    section = ROLE_SECTIONS[role]
    leaves = _leaves(OmegaConf.to_container(OmegaConf.select(cfg, section), resolve=True))
    if not everything:
        raw = OmegaConf.select(stock, section) if stock is not None else None
        follows = _following(OmegaConf.to_container(raw, resolve=False), section) if raw is not None else []
        leaves = {key: value for key, value in leaves.items()
                  if not _by_construction(cfg, follows, key, value)}
    row = engine(cfg.get(ENGINE_KEY))
    block, actor_block = row.block(role), row.block("actor")
    if block == actor_block:
        return leaves
    return {
        f"{actor_block}.{key[len(block) + 1:]}" if key.startswith(block + ".") else key: value
        for key, value in leaves.items()
    }


def role_rows(cfg: DictConfig, roles: Sequence[str], stock: DictConfig | None = None,
              everything: bool = True) -> list[RoleRow]:
    """The keys at least two of ``roles`` have, with different values, sorted by key; without
    ``everything``, a key whose values differ only by construction (see :func:`_role_leaves`) is left
    out. A row shows every role's value."""
    shown = {role: _role_leaves(cfg, role) for role in roles}
    judged = shown if everything else {
        role: _role_leaves(cfg, role, stock, everything=False) for role in roles}
    keys = sorted({key for values in judged.values() for key in values})
    rows = []
    for key in keys:
        present = {role: judged[role][key] for role in roles if key in judged[role]}
        if len(present) < 2 or len({repr(value) for value in present.values()}) < 2:
            continue
        rows.append(RoleRow(key, {role: shown[role][key] for role in roles if key in shown[role]}))
    return rows


def cell(value: object) -> str:
    """A value on one line, as resolved.yaml spells it in flow style (1.0e-06, null, true, [a, b], {k: v}):
    :func:`verl_roles.omegaconf_adapter.yaml_dialect.dump_flow`, the spelling of every view."""
    return dump_flow(value)


def render_table(rows: Sequence[RoleRow], roles: Sequence[str], width: int | None = TABLE_WIDTH) -> str:
    """An aligned text table: a header, then one line per row (``-`` where a role has no such key), at
    most ``width`` columns wide (long values wrap)."""
    cells = [[row.key, *(cell(row.values[r]) if r in row.values else MISSING for r in roles)] for row in rows]
    return render_rows(["key", *roles], cells, width)

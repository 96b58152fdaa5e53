"""What stops the steps before they start: an engine the chosen verl release does not ship, a section
removed or replaced by a value."""

from __future__ import annotations

from omegaconf import DictConfig

from verl_roles.base.errors import Problem
from verl_roles.base.layout import (
    ENGINE_KEY,
    LORA_SECTIONS,
    MODEL_SECTIONS,
    OPTIM_BLOCK,
    ROLE_SECTIONS,
    ROLES,
    engine,
)
from verl_roles.base.releases import VERSION_KEY, release_of, ships, supported
from verl_roles.validation.rules.values import UNSET, get

# The sections the steps and the rules walk under every engine.
SECTIONS: tuple[str, ...] = (
    "actor_rollout_ref", *ROLE_SECTIONS.values(), *MODEL_SECTIONS, *LORA_SECTIONS, "data", "trainer",
    "algorithm",
)


def sections_read(cfg: DictConfig) -> tuple[str, ...]:
    """:data:`SECTIONS`, and under the config's engine its baseline, each role's engine block and the
    optimizer blocks of the roles that have one (from the layout table)."""
    chosen = engine(cfg.get(ENGINE_KEY))
    blocks = [f"{role.section}.{chosen.block(role.name)}" for role in ROLES if role.engine_block]
    optims = [f"{role.section}.{OPTIM_BLOCK}" for role in ROLES if role.group is not None]
    return (*SECTIONS, chosen.baseline, *blocks, *optims)


def engine_problems(cfg: DictConfig) -> list[Problem]:
    """The engine of ``cfg``, when the verl release it is written for does not ship it (verl dropped it,
    or added it later): one problem naming the releases that do, instead of one for each of its keys."""
    release, chosen = release_of(cfg), engine(cfg.get(ENGINE_KEY)).name
    if release not in supported() or ships(release, chosen):
        return []
    shipping = [r for r in supported() if ships(r, chosen)]
    return [Problem(
        key=ENGINE_KEY,
        message=f"is {chosen}, an engine verl {release} does not ship"
        + (f" (verl {', '.join(shipping)} {'does' if len(shipping) == 1 else 'do'})" if shipping else ""),
        fix=f"write the config for a release that ships it ({VERSION_KEY}={shipping[-1]}), or pick another "
        f"{ENGINE_KEY}" if shipping else f"pick another {ENGINE_KEY}",
    )]


def section_problems(cfg: DictConfig) -> list[Problem]:
    """An engine the release does not ship (:func:`engine_problems`), else a section removed
    (``~actor_rollout_ref``) or replaced by a value (``actor_rollout_ref.actor=3``): one problem at the
    outermost such section. Checked before any step, which all read sections."""
    problems: list[Problem] = engine_problems(cfg)
    if problems:
        return problems
    for key in sections_read(cfg):
        if any(key.startswith(f"{problem.key}.") for problem in problems):
            continue
        node = get(cfg, key)
        if node is UNSET:
            problems.append(Problem(
                key=key, message="is removed, but the run is built from this section",
                fix=f"keep it: drop the `~{key}` override (remove single keys inside it instead)",
            ))
        elif not isinstance(node, DictConfig):
            problems.append(Problem(
                key=key, message="is a section of the config, but it holds a single value",
                value=node, show_value=True,
                fix=f"set keys inside it, e.g. `{key}.KEY=VALUE`, not `{key}` itself",
            ))
    return problems


# This module's rules, in the order they report.

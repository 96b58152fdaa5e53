"""What stops the steps before they start: a section removed or replaced by a value."""

from __future__ import annotations

from omegaconf import DictConfig

from verl_roles.errors import Problem
from verl_roles.layout import MODEL_SECTIONS, ROLE_SECTIONS
from verl_roles.rules.values import UNSET, get

SECTIONS: tuple[str, ...] = (
    "actor_rollout_ref", *ROLE_SECTIONS.values(), *MODEL_SECTIONS, "data", "trainer", "algorithm",
)


def section_problems(cfg: DictConfig) -> list[Problem]:
    """A section removed (``~actor_rollout_ref``) or replaced by a value (``actor_rollout_ref.actor=3``):
    one problem at the outermost such section. Checked before any step, which all read sections."""
    problems: list[Problem] = []
    for key in SECTIONS:
        if any(key.startswith(f"{problem.key}.") for problem in problems):
            continue
        node = get(cfg, key)
        if node is UNSET:
            problems.append(Problem(
                key=key, message="is removed, but verl reads this section",
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

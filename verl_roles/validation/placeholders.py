"""What only the user can know: the paths of the model and the data a run trains on.

The shipped config holds placeholders there (verl's own: ``~/models/deepseek-llm-7b-chat``,
``~/data/rlhf/gsm8k/train.parquet``), so a run composes and can be read without them; the summary names
each one still at its placeholder, to set before training, and ``verl-roles launch`` refuses to start
verl on one. A path is a placeholder when no input of the user set it (nor the key it follows), whatever
its text: every other value of the shipped config is one verl runs with.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass

from omegaconf import DictConfig

from verl_roles.base.errors import Problem
from verl_roles.base.layout import ROLES
from verl_roles.validation.rules.values import get


@dataclass(frozen=True)
class UserPath:
    key: str
    what: str


# The policy's model (every other model follows it unless set: the critic's, the reference's) and the
# data.
USER_PATHS = (
    UserPath(f"{next(role.model for role in ROLES if role.trained and role.model)}.path", "the policy model"),
    UserPath("data.train_files", "the training data"),
    UserPath("data.val_files", "the validation data"),
)


def unset_paths(cfg: DictConfig, user_keys: Collection[str]) -> list[tuple[UserPath, object]]:
    """The user paths no input of the user set, with their placeholder value."""
    def set_by_user(key: str) -> bool:
        return any(key == typed or key.startswith(f"{typed}.") for typed in user_keys)

    return [(path, get(cfg, path.key)) for path in USER_PATHS if not set_by_user(path.key)]


def summary_line(unset: list[tuple[UserPath, object]]) -> str | None:
    if not unset:
        return None
    return "; ".join(f"{path.key} ({path.what}: placeholder {value})" for path, value in unset)


def launch_problems(unset: list[tuple[str, str, str]], written: bool = False) -> list[Problem]:
    """``verl-roles launch`` refuses to start verl on a placeholder path (``[key, what, placeholder]``):
    verl would fail on it after Ray is up, or train on a file nobody chose. ``written`` is a run
    directory written before, whose command line cannot be changed any more."""
    problems = []
    for key, what, value in unset:
        fix = (f"compose the run again with `{key}=<path>` (or let launch compose it)" if written
               else f"set it on the command line, `{key}=<path>`, or in your config file")
        problems.append(Problem(
            key=key,
            message=f"is still the shipped placeholder {value} ({what}): no input set it, and verl would "
            "look for it only after Ray is up; nothing was written and nothing was started",
            origin="the shipped config (verl's own example path)",
            fix=fix,
        ))
    return problems

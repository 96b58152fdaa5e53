"""slime's learning-rate schedule counts optimizer steps; verl's counts trainer steps.

slime sizes Megatron's scheduler in samples and advances it by one global batch after every optimizer
step (``lr_warmup_iters * global_batch_size`` in ``get_optimizer_param_scheduler``, ``step(increment=
step_global_batch_size)`` after ``optimizer.step()`` in slime/backends/megatron_utils/model.py), so its
``lr_warmup_iters``, ``lr_decay_iters`` and ``lr_wsd_decay_iters`` are counts of optimizer steps.

verl hands ``optim.lr_warmup_steps`` / ``lr_decay_steps`` / ``lr_wsd_decay_steps`` to the same scheduler
unscaled (``get_megatron_optimizer_param_scheduler``, verl/utils/megatron/optimizer.py) and advances it
by one (``lr_scheduler.step(1)``, verl/workers/engine/megatron/transformer_impl.py) once per update call,
after the last of its mini-batches (``update_lr_scheduler=batch_idx == total_num_iterations - 1`` in
verl/workers/engine_workers.py). One update call is one trainer step, and it takes one optimizer step
per mini-batch (``optimizer_step()`` in ``train_batch``, verl/workers/engine/base.py) for each epoch:

    optimizer steps per trainer step = ppo_epochs * train_batch_size / ppo_mini_batch_size

for each role with its own ``ppo_epochs`` and ``ppo_mini_batch_size`` (both sizes count prompts: the
trainer multiplies both by ``rollout.n``, ``_update_actor`` / ``_update_critic`` in
verl/trainer/ppo/ray_trainer.py). A count converts when it is a whole number of trainer steps; otherwise,
or when the ratio is not a whole number known from the config, it is refused with the reason. A count
of zero or less (no warmup) and null (decay over the whole run, in slime and in verl) mean the same in
both units and are kept.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from omegaconf import DictConfig, OmegaConf

from verl_roles.base.layout import ROLE_SECTIONS

# The keys the ratio is made of: the prompts of one trainer step, and per role the mini-batch and epochs.
TRAIN_BATCH = "data.train_batch_size"
GEN_BATCH = "data.gen_batch_size"
MINI_BATCH = "ppo_mini_batch_size"
EPOCHS = "ppo_epochs"


class ScheduleError(ValueError):
    """A count of optimizer steps that has no equal in trainer steps; the message says why, ``fix`` what
    to write instead."""

    def __init__(self, message: str, fix: str) -> None:
        super().__init__(message)
        self.fix = fix


@dataclass(frozen=True)
class StepRatio:
    """How many optimizer steps one trainer step of a role takes, and the values it is made of."""

    per_trainer_step: int
    epochs: int
    train_batch: int
    mini_batch: int
    role_section: str

    def explain(self) -> str:
        """``4 optimizer steps (actor_rollout_ref.actor.ppo_epochs=1 x ...)``: the ratio and its sources."""
        return (
            f"{_count(self.per_trainer_step, 'optimizer step')} ({self.role_section}.{EPOCHS}={self.epochs}"
            f" x {TRAIN_BATCH}={self.train_batch} / {self.role_section}.{MINI_BATCH}={self.mini_batch})"
        )


def _count(number: int, unit: str) -> str:
    return f"{number} {unit}{'' if number == 1 else 's'}"


def _whole(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def _verl_path_fix(path: str) -> str:
    return f"write the count in trainer steps as the verl path instead (`{path}: N` in the entry)"


def step_ratio(cfg: DictConfig, role: str, path: str) -> StepRatio:
    """The optimizer steps of one trainer step of ``role`` in the run ``cfg`` describes, or
    :class:`ScheduleError` (whose fix names the role-relative verl ``path``) when the config does not
    make it a whole number."""
    section = ROLE_SECTIONS[role]
    epochs = _whole(OmegaConf.select(cfg, f"{section}.{EPOCHS}", default=None))
    mini = _whole(OmegaConf.select(cfg, f"{section}.{MINI_BATCH}", default=None))
    train = _whole(OmegaConf.select(cfg, TRAIN_BATCH, default=None))
    generated = OmegaConf.select(cfg, GEN_BATCH, default=None)
    fix = _verl_path_fix(path)
    if epochs is None or mini is None or train is None:
        raise ScheduleError(
            f"the optimizer steps of one trainer step ({section}.{EPOCHS} x {TRAIN_BATCH} / "
            f"{section}.{MINI_BATCH}) are not known from the config: each must be a positive integer", fix)
    if generated is not None and generated != train:
        raise ScheduleError(
            f"a trainer step trains on {GEN_BATCH}={generated} prompts, not {TRAIN_BATCH}={train}, so the "
            "optimizer steps of one trainer step are not known from the config", fix)
    if train % mini:
        raise ScheduleError(
            f"{TRAIN_BATCH}={train} is not a multiple of {section}.{MINI_BATCH}={mini}, so a trainer step "
            "takes no whole number of optimizer steps", fix)
    return StepRatio(epochs * train // mini, epochs, train, mini, section)


def to_trainer_steps(
    cfg: DictConfig, role: str, name: str, path: str, iters: int | None
) -> tuple[int | None, str]:
    """slime's count ``iters`` (of the slime ``name``) of optimizer steps as verl's count of trainer steps
    for ``role`` at the role-relative ``path``, and how it was converted (empty when the value means the
    same in both units)."""
    if iters is None or iters <= 0:
        return iters, ""
    ratio = step_ratio(cfg, role, path)
    steps, rest = divmod(iters, ratio.per_trainer_step)
    if rest:
        lower, upper = steps * ratio.per_trainer_step, (steps + 1) * ratio.per_trainer_step
        nearest = f"{lower} or {upper}" if lower > 0 else str(upper)
        raise ScheduleError(
            f"{name}={iters} counts optimizer steps (slime steps its scheduler after each), while verl "
            f"steps the scheduler once per trainer step, after all of its optimizer steps, and here each "
            f"trainer step takes {ratio.explain()}: {iters} is no whole number of trainer steps",
            f"write a multiple of {ratio.per_trainer_step} ({nearest}), or write the count in trainer steps "
            f"as the verl path (`{path}: N` in the entry)",
        )
    return steps, f"{_count(iters, 'optimizer step')} = {_count(steps, 'trainer step')} of {ratio.explain()}"


def to_optimizer_steps(cfg: DictConfig, role: str, path: str, steps: int | None) -> int | None:
    """verl's count ``steps`` of trainer steps at the role-relative ``path`` of ``role`` as slime's count
    of optimizer steps (:class:`ScheduleError` when the ratio is not known from the config)."""
    if steps is None or steps <= 0:
        return steps
    return steps * step_ratio(cfg, role, path).per_trainer_step

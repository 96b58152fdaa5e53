"""The short per-role summary the main job prints."""

from __future__ import annotations

from omegaconf import DictConfig, OmegaConf

from verl_roles.base.layout import ENGINE_KEY, LORA_BLOCK, Engine, Role, engine
from verl_roles.validation.rules.values import built_roles

# The width of the name column of the summary's lines.
NAME_WIDTH = 8


def _fmt(value: object) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "on" if value else "off"
    return str(value)


def _parallel(cfg: DictConfig, role: str, section: str, chosen: Engine) -> str:
    """The engine's summary fields of ``role``'s engine block."""
    block = OmegaConf.select(cfg, f"{section}.{chosen.block(role)}", default=None)
    if block is None:
        return ""
    return " ".join(f"{label}={_fmt(block.get(key))}" for label, key in chosen.summary)


def _lora(model: DictConfig | None) -> str:
    lora = model.get(LORA_BLOCK) if model is not None else None
    if lora is None or not lora.get("rank"):
        return "LoRA off"
    return f"LoRA rank={lora.rank} alpha={lora.alpha} type={lora.type}"


def _role_line(cfg: DictConfig, role: Role, chosen: Engine) -> str:
    """A role's line, from its layout row: a trained role's engine fields, learning rate, batch sizes and
    LoRA; another role with an engine block its engine fields and log-prob micro batch; a role without
    one its own summary fields."""
    section = OmegaConf.select(cfg, role.section)
    if not role.engine_block:
        fields = " ".join(f"{label}={_fmt(section.get(key))}" for label, key in role.summary)
        return f"  {role.name.ljust(NAME_WIDTH - 1)} {fields}"
    head = f"  {role.name.ljust(NAME_WIDTH - 1)} {_parallel(cfg, role.name, role.section, chosen)} | "
    if not role.trained:
        return f"{head}log_prob_micro_batch/gpu={_fmt(section.get('log_prob_micro_batch_size_per_gpu'))}"
    model = OmegaConf.select(cfg, role.model, default=None) if role.model else None
    return (
        f"{head}lr={_fmt(OmegaConf.select(section, 'optim.lr', default=None))} "
        f"mini_batch={_fmt(section.get('ppo_mini_batch_size'))} "
        f"micro_batch/gpu={_fmt(section.get('ppo_micro_batch_size_per_gpu'))} | {_lora(model)}"
    )


def summarize(cfg: DictConfig, inert: str | None = None, unset: str | None = None) -> str:
    """One line per role verl builds a worker for (from the layout table; no line for the critic when
    the algorithm trains none, nor for the reference policy without a KL term), then the trainer's;
    then the values the user set that verl would not read (``inert``) and the paths still at their
    placeholders (``unset``), when there are any."""
    chosen = engine(cfg[ENGINE_KEY])
    lines = [f"verl_roles: {ENGINE_KEY}={chosen.name}, adv_estimator={cfg.algorithm.adv_estimator}"]
    lines += [_role_line(cfg, role, chosen) for role in built_roles(cfg)]
    lines.append(
        f"  {'trainer'.ljust(NAME_WIDTH - 1)} nnodes={_fmt(cfg.trainer.nnodes)} "
        f"n_gpus_per_node={_fmt(cfg.trainer.n_gpus_per_node)} "
        f"train_batch_size={_fmt(cfg.data.train_batch_size)}"
    )
    if inert:
        lines.append(f"  {'inert'.ljust(NAME_WIDTH - 1)} verl would not read: {inert}")
    if unset:
        lines.append(f"  {'to set'.ljust(NAME_WIDTH - 1)} before training: {unset}")
    return "\n".join(lines)

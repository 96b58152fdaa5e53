"""The short per-role summary the main job prints."""

from __future__ import annotations

from omegaconf import DictConfig, OmegaConf

from verl_roles.layout import (
    ACTOR,
    CRITIC,
    ENGINE_KEY,
    LORA_BLOCK,
    REF,
    ROLES_BY_NAME,
    ROLLOUT,
    Engine,
    engine,
)
from verl_roles.rules.values import critic_in_use


def _fmt(value: object) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "on" if value else "off"
    return str(value)


def _parallel(cfg: DictConfig, role: str, section: str, chosen: Engine) -> str:
    """The engine's summary fields of ``role``'s engine block."""
    block = OmegaConf.select(cfg, f"{section}.{chosen.block(role)}")
    if block is None:
        return ""
    return " ".join(f"{label}={_fmt(block.get(key))}" for label, key in chosen.summary)


def _lora(model: DictConfig | None) -> str:
    lora = model.get(LORA_BLOCK) if model is not None else None
    if lora is None or not lora.get("rank"):
        return "LoRA off"
    return f"LoRA rank={lora.rank} alpha={lora.alpha} type={lora.type}"


def summarize(cfg: DictConfig) -> str:
    """One line per role that runs: engine, parallel sizes, learning rate, batch sizes and LoRA (no
    critic line when the algorithm trains no critic)."""
    chosen = engine(cfg[ENGINE_KEY])
    actor = OmegaConf.select(cfg, ACTOR)
    critic = OmegaConf.select(cfg, CRITIC)
    rollout = OmegaConf.select(cfg, ROLLOUT)
    lines = [f"verl_roles: {ENGINE_KEY}={chosen.name}, adv_estimator={cfg.algorithm.adv_estimator}"]
    lines.append(
        f"  actor   {_parallel(cfg, 'actor', ACTOR, chosen)} | lr={_fmt(actor.optim.lr)} "
        f"mini_batch={_fmt(actor.ppo_mini_batch_size)} "
        f"micro_batch/gpu={_fmt(actor.ppo_micro_batch_size_per_gpu)} | "
        f"{_lora(OmegaConf.select(cfg, ROLES_BY_NAME['actor'].model))}"
    )
    if critic_in_use(cfg):
        # A critic the algorithm does not train gets no row: its settings have no effect.
        lines.append(
            f"  critic  {_parallel(cfg, 'critic', CRITIC, chosen)} | lr={_fmt(critic.optim.lr)} "
            f"mini_batch={_fmt(critic.ppo_mini_batch_size)} "
            f"micro_batch/gpu={_fmt(critic.ppo_micro_batch_size_per_gpu)} | "
            f"{_lora(OmegaConf.select(cfg, ROLES_BY_NAME['critic'].model))}"
        )
    lines.append(
        f"  ref     {_parallel(cfg, 'ref', REF, chosen)} | "
        f"log_prob_micro_batch/gpu={_fmt(OmegaConf.select(cfg, REF).log_prob_micro_batch_size_per_gpu)}"
    )
    lines.append(
        f"  rollout name={_fmt(rollout.name)} TP={_fmt(rollout.tensor_model_parallel_size)} "
        f"n={_fmt(rollout.n)} gpu_memory_utilization={_fmt(rollout.gpu_memory_utilization)}"
    )
    lines.append(
        f"  trainer nnodes={_fmt(cfg.trainer.nnodes)} n_gpus_per_node={_fmt(cfg.trainer.n_gpus_per_node)} "
        f"train_batch_size={_fmt(cfg.data.train_batch_size)}"
    )
    return "\n".join(lines)

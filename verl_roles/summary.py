"""The short per-role summary the main job prints."""

from __future__ import annotations

from omegaconf import DictConfig, OmegaConf

_PARALLEL = (
    ("TP", "tensor_model_parallel_size"),
    ("PP", "pipeline_model_parallel_size"),
    ("VPP", "virtual_pipeline_model_parallel_size"),
    ("CP", "context_parallel_size"),
    ("EP", "expert_model_parallel_size"),
    ("ETP", "expert_tensor_parallel_size"),
)


def _fmt(value: object) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "on" if value else "off"
    return str(value)


def _parallel(cfg: DictConfig, section: str, engine: str) -> str:
    if engine == "megatron":
        block = OmegaConf.select(cfg, f"{section}.megatron")
        if block is None:
            return ""
        sizes = " ".join(f"{name}={_fmt(block.get(key))}" for name, key in _PARALLEL)
        return f"{sizes} SP={_fmt(block.get('sequence_parallel'))}"
    block_key = "fsdp" if section == "critic" else "fsdp_config"
    block = OmegaConf.select(cfg, f"{section}.{block_key}")
    if block is None:
        return ""
    return (
        f"fsdp_size={_fmt(block.get('fsdp_size'))} "
        f"ulysses_sp={_fmt(block.get('ulysses_sequence_parallel_size'))} "
        f"param_offload={_fmt(block.get('param_offload'))}"
    )


def _lora(model: DictConfig | None) -> str:
    lora = model.get("lora") if model is not None else None
    if lora is None or not lora.get("rank"):
        return "LoRA off"
    return f"LoRA rank={lora.rank} alpha={lora.alpha} type={lora.type}"


def summarize(cfg: DictConfig) -> str:
    """One line per role: engine, parallel sizes, learning rate, batch sizes and LoRA."""
    engine = cfg.model_engine
    actor = cfg.actor_rollout_ref.actor
    critic = cfg.critic
    rollout = cfg.actor_rollout_ref.rollout
    lines = [f"verl_roles: model_engine={engine}, adv_estimator={cfg.algorithm.adv_estimator}"]
    lines.append(
        f"  actor   {_parallel(cfg, 'actor_rollout_ref.actor', engine)} | lr={_fmt(actor.optim.lr)} "
        f"mini_batch={_fmt(actor.ppo_mini_batch_size)} "
        f"micro_batch/gpu={_fmt(actor.ppo_micro_batch_size_per_gpu)} | "
        f"{_lora(cfg.actor_rollout_ref.model)}"
    )
    lines.append(
        f"  critic  {_parallel(cfg, 'critic', engine)} | lr={_fmt(critic.optim.lr)} "
        f"mini_batch={_fmt(critic.ppo_mini_batch_size)} "
        f"micro_batch/gpu={_fmt(critic.ppo_micro_batch_size_per_gpu)} | {_lora(critic.get('model'))}"
    )
    lines.append(
        f"  ref     {_parallel(cfg, 'actor_rollout_ref.ref', engine)} | "
        f"log_prob_micro_batch/gpu={_fmt(cfg.actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu)}"
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

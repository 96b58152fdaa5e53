"""Where our composed config differs from verl's on purpose: the one list, each entry with its reason.

Every other leaf of verl's composed ``ppo_trainer`` is in our config with the value the chosen release
gives it (``tests/test_verl_surface.py`` checks that for every supported release, and that no entry here
is stale). ``scripts/generate_verl_releases.py`` reads this list too: a release's layer never undoes a
deliberate difference.
"""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass

from verl_roles.base.layout import (
    ENGINE_TABLE,
    ENGINES,
    HF_MODULE_NAMES,
    MEGATRON_MODULE_NAMES,
    MODEL_SECTIONS,
    ROLES,
)

ALL = ENGINES
# Engines by how verl reads LoRA (the layout table's LoRA naming family): the FSDP engine and VeOmni, built
# on it, read the flat keys; Megatron reads the block; TorchTitan reads neither.
FLAT_LORA_READERS = tuple(e.name for e in ENGINE_TABLE if e.lora_module_names == HF_MODULE_NAMES)
BLOCK_LORA_READERS = tuple(e.name for e in ENGINE_TABLE if e.lora_module_names == MEGATRON_MODULE_NAMES)
NO_LORA = tuple(e.name for e in ENGINE_TABLE if e.lora_module_names is None)
MODELS = MODEL_SECTIONS


@dataclass(frozen=True)
class Difference:
    """A verl leaf (fnmatch pattern) whose value or presence differs on purpose under ``engines``."""

    pattern: str
    engines: tuple[str, ...]
    reason: str

    def matches(self, path: str, engine: str) -> bool:
        return engine in self.engines and fnmatch.fnmatchcase(path, self.pattern)


# verl engines (options of verl's own model_engine group) that model_engine does not offer, with the reason.
ENGINES_NOT_OFFERED: dict[str, str] = {
    "mindspeed": (
        "the Ascend NPU build of the Megatron engine (MindSpeed); verl_roles writes configs for GPU engines"),
}


def _per_model(field: str, engines: tuple[str, ...], reason: str) -> list[Difference]:
    return [Difference(f"{model}.{field}", engines, reason) for model in MODELS]


# Every deliberate difference from verl's composed config, with its reason.
DIFFERENCES: tuple[Difference, ...] = (
    Difference(
        "actor_rollout_ref.rollout.name", ALL,
        "verl leaves it mandatory (???); we default to vllm, the backend nearly every verl launch script "
        "sets, so a run without it composes",
    ),
    Difference(
        "reward.reward_model.rollout.name", ALL,
        "follows actor_rollout_ref.rollout.name (verl: mandatory ???), so the reward model is served by "
        "the policy's backend unless set",
    ),
    Difference(
        "distillation.teacher_models.teacher_model.inference.name", ALL,
        "follows actor_rollout_ref.rollout.name; verl's oc.select of its mandatory name resolves to null",
    ),
    *_per_model(
        "lora.alpha", FLAT_LORA_READERS,
        "the block is our one LoRA source; under FSDP-style engines it carries the alpha verl's engine "
        "reads from the flat lora_alpha (16), so both names agree (verl's block default 32 is unread there)",
    ),
    *_per_model(
        "lora.target_modules", FLAT_LORA_READERS,
        "the block is our one LoRA source; under FSDP-style engines it carries the modules verl's engine "
        "reads from the flat target_modules (all-linear, Hugging Face names), not Megatron's names",
    ),
    *_per_model(
        "lora.alpha", NO_LORA,
        "verl's TorchTitan engine reads no LoRA setting (a non-zero rank is refused here); the block keeps "
        "the Hugging Face defaults, so the flat lora_alpha derived from it is verl's flat default (16)",
    ),
    *_per_model(
        "lora.target_modules", NO_LORA,
        "verl's TorchTitan engine reads no LoRA setting (a non-zero rank is refused here); the block keeps "
        "the Hugging Face defaults, so the flat target_modules derived from it is verl's (all-linear)",
    ),
    *_per_model(
        "lora_alpha", BLOCK_LORA_READERS,
        "derived from the block, which verl's Megatron engine reads (alpha 32): one alpha under both names "
        "(verl's unread flat default is 16)",
    ),
    *_per_model(
        "use_remove_padding", ("megatron",),
        "kept from the legacy megatron trainer on purpose (false), so verl's Megatron engine runs padded "
        "(BSHD): verl's engine worker copies the model section's value over the engine's "
        "megatron.use_remove_padding, which it never reads (verl/workers/engine_workers.py); set "
        "actor_rollout_ref.model.use_remove_padding=true and critic.model.use_remove_padding=true to pack "
        "sequences (THD) as verl's own Megatron config does",
    ),
    *(
        Difference(
            f"{role.section}.{row.block(role.name)}.sequence_parallel", (row.name,),
            "written as verl uses it: its McoreEngineConfig turns sequence_parallel off at "
            "tensor_model_parallel_size 1 (verl's default), while its YAML shows true",
        )
        for row in ENGINE_TABLE if row.mcore
        for role in ROLES if role.engine_block
    ),
    # Launchable defaults: verl leaves the micro batch sizes unset and refuses to start without them
    # (validate_config, the actor's and critic's dataclasses, the worker's init_model asserts).
    *(
        Difference(
            key, ALL,
            "verl leaves it null and refuses to start with static batches until it is set; 4 divides each "
            "rank's share of the default mini batch (256 prompts * rollout.n 1 / 8 GPUs = 32), so the "
            "defaults launch",
        )
        for key in (
            "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu",
            "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu",
            "actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu",
            "critic.ppo_micro_batch_size_per_gpu",
        )
    ),
    Difference(
        "critic.forward_micro_batch_size_per_gpu", ("dp",),
        "follows critic.ppo_micro_batch_size_per_gpu, which verl leaves null and refuses to start without",
    ),
    *_per_model(
        "override_config", ("megatron",),
        "kept from the legacy megatron trainer on purpose: model_config and moe_config.freeze_moe_router "
        "exist, so old command lines set them without `+`",
    ),
)


def for_engine(engine: str) -> tuple[Difference, ...]:
    """The deliberate differences under ``engine``."""
    return tuple(entry for entry in DIFFERENCES if engine in entry.engines)


def deliberate(path: str, engine: str) -> bool:
    """Whether the leaf ``path`` of verl's config differs from ours on purpose under ``engine``."""
    return reason_for(path, engine) is not None


def reason_for(path: str, engine: str) -> str | None:
    """Why the leaf ``path`` differs from verl's config under ``engine``, None when it does not on purpose."""
    return next((entry.reason for entry in DIFFERENCES if entry.matches(path, engine)), None)

"""The legacy tables: every old key path with its current key, the keys with no current equivalent,
and the deprecated config names. See :mod:`verl_roles.legacy`."""


from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from verl_roles.base import releases
from verl_roles.base.errors import Problem
from verl_roles.base.layout import (
    CRITIC,
    DP,
    LORA_BLOCK,
    MODEL_SECTIONS,
)
from verl_roles.base.notices import ConfigDeprecationWarning, ConfigTranslationWarning
from verl_roles.omegaconf_adapter.override_text import element_text

Convert = Callable[[object], object]


def _null_to_empty_list(value: object) -> object:
    """The flat ``exclude_modules`` used null for "none"; the LoRA block uses an empty list."""
    return [] if value is None else value


@dataclass(frozen=True)
class LegacyKey:
    """One legacy key path and the current key path it maps to.

    ``section`` marks a whole section that moved: every key under ``old`` moves under ``new``.
    ``convert`` translates the value when the two spellings differ in meaning (None: unchanged).
    ``shipped``: the old key is in our config with a null value, as in verl's own config (its
    legacy reward sections); null there means unset, and the key stays (null) once its value moved.
    ``open_target``: the current key is not in the config (``reward.reward_kwargs``, added with
    ``+``), so a ``+`` typed with the old key is kept.
    ``alias``: the old key is verl's too, derived here from the new one (the flat LoRA keys), so the
    entry applies under every release. Any other entry applies under a release whose config lacks the
    old key: a key verl 0.8.0 has is no legacy key with ``verl_version=0.8.0``.
    """

    old: str
    new: str
    reason: str
    convert: Convert | None = None
    section: bool = False
    shipped: bool = False
    open_target: bool = False
    alias: bool = False

    def applies(self, release: str) -> bool:
        """Whether the old key is legacy under ``release`` (see the class docstring)."""
        return self.alias or self.shipped or not releases.has_key(release, self.old)

    def why(self, release: str) -> str:
        return self.reason.format(release=release)

    def new_key_for(self, key: str) -> str | None:
        """The current key for ``key``, or None when this entry does not cover ``key``."""
        if key == self.old:
            return self.new
        if self.section and key.startswith(self.old + "."):
            return self.new + key[len(self.old):]
        return None

    def converted(self, value: object) -> object:
        return value if self.convert is None else self.convert(value)

    # How the messages call the old key: verl's own flat LoRA keys are not deprecated (verl's examples
    # use them); we read them into the one block. Any other old key is a deprecated one.
    @property
    def warning(self) -> type[ConfigDeprecationWarning] | type[ConfigTranslationWarning]:
        return ConfigTranslationWarning if self.alias else ConfigDeprecationWarning

    def kind(self) -> str:
        return "verl's flat LoRA key" if self.alias else "a deprecated key"

    def spelling_of(self, new_key: str) -> str:
        return f"verl's flat spelling of {new_key}" if self.alias else f"the deprecated spelling of {new_key}"

    def read_into(self, new_key: str, value_text: str) -> str:
        """What reading the old key did, for a warning."""
        if self.alias:
            return (f"verl_roles reads it into the one `{LORA_BLOCK}` block: it sets {new_key} (value "
                    f"{value_text}), and the resolved config writes both spellings from that block")
        return f"it now sets {new_key} (value {value_text})"


_LORA_REASON = (
    "verl's flat LoRA keys are read into the one structured `lora` block; verl reads both spellings"
)
_SKIP_REASON = "verl {release} holds rollout dumping in the top-level `skip` section"
_TEACHER_REASON = (
    "verl {release} holds teachers by name under `distillation.teacher_models`, their pool in `distillation`"
)

_REWARD_REASON = (
    "verl {release} reads reward settings under `reward`; its legacy top-level reward keys have no effect "
    "in its PPO trainer"
)

# verl's legacy reward keys (trainer/config/legacy_reward_impl.yaml since 0.8.0, null in our config too)
# and the Jan-2026 ones (reward_model/*.yaml, reward_manager.yaml), each where verl reads it
# (experimental/reward_loop/reward_loop.py migrate_legacy_reward_impl maps the same keys, but only the
# fully-async entry point calls it). Moved key by key: a section set in part keeps the current
# defaults for the rest (custom_reward_function.name stays compute_score, as in Jan 2026).
_REWARD_KEYS: tuple[LegacyKey, ...] = (
    *(
        LegacyKey(f"reward_model.{old}", f"reward.{new}", _REWARD_REASON, shipped=True)
        for old, new in (
            ("num_workers", "num_workers"),
            ("reward_manager", "reward_manager.name"),
            ("reward_loop_source", "reward_manager.source"),
            ("reward_loop_module_path", "reward_manager.module.path"),
            ("reward_loop_class_name", "reward_manager.module.name"),
            ("enable", "reward_model.enable"),
            ("enable_resource_pool", "reward_model.enable_resource_pool"),
            ("n_gpus_per_node", "reward_model.n_gpus_per_node"),
            ("nnodes", "reward_model.nnodes"),
            ("model.path", "reward_model.model_path"),
        )
    ),
    *(
        LegacyKey(old, new, _REWARD_REASON, section=True, shipped=True)
        for old, new in (
            ("reward_model.rollout", "reward.reward_model.rollout"),
            ("custom_reward_function", "reward.custom_reward_function"),
            ("sandbox_fusion", "reward.sandbox_fusion"),
        )
    ),
    LegacyKey("reward_model.sandbox_fusion", "reward.sandbox_fusion", _REWARD_REASON, section=True),
    LegacyKey("reward_manager", "reward.reward_manager", _REWARD_REASON, section=True),
    LegacyKey(
        "reward_model.reward_kwargs", "reward.reward_kwargs", _REWARD_REASON, section=True, open_target=True
    ),
)

# The one table of legacy key paths. Documented in docs/legacy.md.
LEGACY_KEYS: tuple[LegacyKey, ...] = (
    *(
        LegacyKey(f"{model}.{old}", f"{model}.{LORA_BLOCK}.{new}", _LORA_REASON, convert, alias=True)
        for model in MODEL_SECTIONS
        for old, new, convert in (
            ("lora_rank", "rank", None),
            ("lora_alpha", "alpha", None),
            ("target_modules", "target_modules", None),
            ("exclude_modules", "exclude_modules", _null_to_empty_list),
            ("lora_adapter_path", "adapter_path", None),
        )
    ),
    LegacyKey(
        "critic.model.fsdp_config",
        f"{CRITIC}.{DP.block('critic')}",
        "the FSDP critic's engine block sits next to its optimizer, as in current verl",
        section=True,
    ),
    *(
        LegacyKey(f"actor_rollout_ref.rollout.skip.{name}", f"skip.rollout.{name}", _SKIP_REASON)
        for name in ("enable", "dump_dir", "action")
    ),
    LegacyKey(
        "distillation.teacher_model.inference",
        "distillation.teacher_models.teacher_model.inference",
        _TEACHER_REASON,
        section=True,
    ),
    *(
        LegacyKey(f"distillation.teacher_model.{old}", new, _TEACHER_REASON)
        for old, new in (
            ("model_path", "distillation.teacher_models.teacher_model.model_path"),
            ("nnodes", "distillation.nnodes"),
            ("n_gpus_per_node", "distillation.n_gpus_per_node"),
        )
    ),
    *_REWARD_KEYS,
)


@dataclass(frozen=True)
class RemovedKey:
    """An old key (or, with ``section``, every key below it) that has no current equivalent.

    Setting it is an error naming ``replaced_by``, except to a value in ``harmless``: what verl does
    anyway, so the key is dropped with a warning.
    """

    old: str
    replaced_by: str
    section: bool = False
    harmless: tuple[object, ...] = ()

    def covers(self, key: str) -> bool:
        return key == self.old or (self.section and key.startswith(self.old + "."))

    def applies(self, release: str) -> bool:
        """Whether the key is removed under ``release``: under every supported one, since each reads its
        reward settings under ``reward`` only (verl 0.8.0 did already; the top-level reward sections
        some of these keys sit in are null leftovers in each release's config)."""
        return releases.is_supported(release)

    def why(self, release: str) -> str:
        return self.replaced_by.format(release=release)


_RM_WORKER = (
    "verl {release} has no FSDP/Megatron reward-model worker any more: the reward model is served by an "
    "inference engine, set with reward.reward_model.model_path and reward.reward_model.rollout.* "
    "(batching: max_num_seqs, max_num_batched_tokens; memory: gpu_memory_utilization; parallelism: "
    "tensor_model_parallel_size)"
)

# Jan-2026 reward-model keys no supported verl has anything for (and two of verl's own legacy keys its
# migration ignores). Documented in docs/legacy.md.
REMOVED_KEYS: tuple[RemovedKey, ...] = (
    RemovedKey(
        "reward_model.use_reward_loop",
        "the reward loop is verl {release}'s only reward implementation (the legacy reward-model worker is "
        "gone); reward.reward_model.* configures its reward model",
        harmless=(True,),
    ),
    RemovedKey(
        "reward_model.launch_reward_fn_async",
        "verl {release}'s reward loop always computes rewards asynchronously",
        harmless=(True, False),
    ),
    *(
        RemovedKey(f"reward_model.{key}", _RM_WORKER, section=section)
        for key, section in (
            ("strategy", False),
            ("micro_batch_size", False),
            ("micro_batch_size_per_gpu", False),
            ("max_length", False),
            ("use_dynamic_bsz", False),
            ("forward_max_token_len_per_gpu", False),
            ("ulysses_sequence_parallel_size", False),
            ("load_weight", False),
            ("nccl_timeout", False),
            ("megatron", True),
            ("profiler", True),
            ("model.input_tokenizer", False),
            ("model.override_config", True),
            ("model.use_shm", False),
            ("model.use_remove_padding", False),
            ("model.use_fused_kernels", False),
            ("model.fsdp_config", True),
            ("model.external_lib", False),
            ("model.trust_remote_code", False),
        )
    ),
)


def find_removed(key: str, release: str = releases.DEFAULT_RELEASE) -> RemovedKey | None:
    """The entry of :data:`REMOVED_KEYS` covering ``key`` under ``release``, if any."""
    for entry in REMOVED_KEYS:
        if entry.covers(key) and entry.applies(release):
            return entry
    return None


def removed_problem(entry: RemovedKey, key: str, value: object, origin: str, release: str) -> Problem:
    return Problem(
        key=key,
        message=f"is a legacy key verl {release} has no equivalent for (set to {element_text(value)})",
        origin=origin,
        fix=f"remove it: {entry.why(release)}",
    )


def removed_warning(entry: RemovedKey, key: str, value: object, release: str) -> str:
    return (
        f"{key}={element_text(value)} is a legacy key with no current equivalent, dropped: "
        f"{entry.why(release)}. Remove it; {MIGRATE_HINT}."
    )

# Deprecated primary config names -> the overrides that replace them on the primary config.
LEGACY_CONFIG_NAMES: dict[str, list[str]] = {
    "ppo_megatron_trainer": ["model_engine=megatron"],
}

MIGRATE_HINT = "`verl-roles migrate ...` rewrites a whole command line"


def find(key: str, release: str = releases.DEFAULT_RELEASE) -> tuple[LegacyKey, str] | None:
    """The table entry covering the dotted ``key`` and the current key it maps to, if legacy under
    ``release``."""
    for entry in LEGACY_KEYS:
        if not entry.applies(release):
            continue
        new = entry.new_key_for(key)
        if new is not None:
            return entry, new
    return None


def renamed_between(key: str, old: str, new: str) -> tuple[LegacyKey, str] | None:
    """The spelling under verl ``new`` of ``key``, a key of verl ``old`` that ``new`` names another way,
    and the table entry saying so; None when ``key`` keeps its name. Either direction: an entry that is
    legacy under ``new`` only renames its old key to its new one (``actor_rollout_ref.rollout.skip.enable``
    -> ``skip.rollout.enable`` from 0.8.0 to 0.9.1), one that is legacy under ``old`` only renames back.
    verl's flat LoRA keys and its null reward sections are no renames (every release reads them)."""
    if old == new:
        return None
    for entry in LEGACY_KEYS:
        if entry.alias or entry.shipped or entry.applies(old) == entry.applies(new):
            continue
        if entry.applies(new):
            spelled = entry.new_key_for(key)
        else:
            spelled = LegacyKey(entry.new, entry.old, entry.reason, section=entry.section).new_key_for(key)
        if spelled is not None:
            return entry, spelled
    return None


def old_key_label(key: str) -> str:
    """What a view calls the old key ``key``: verl's own flat LoRA keys are not legacy keys."""
    flat = any(entry.alias and entry.new_key_for(key) is not None for entry in LEGACY_KEYS)
    return "verl's flat LoRA key" if flat else "legacy key"

"""The typed schema of the composed config: the type of every key, and no value at all.

Defaults live only in the YAML files under ``conf/``. This module holds what YAML cannot say:
which type each key takes, so a wrong value (``trainer.nnodes=abc``) is caught when the config is
composed, not hours later in a worker. One dataclass per section, fields without defaults (a block
mounted several times, such as the per-role megatron block, is one class used several times).
A field that exists under one training engine only is marked ``= only("megatron")``.

Types: ``int``; ``float`` (an int is accepted too); ``bool``; ``str`` (a scalar such as ``123`` is
accepted and read as text, as OmegaConf does); ``list``; ``dict`` (any mapping, not checked inside);
``X | None``; ``Any``. Keys a user adds with ``+key=value`` are not in the schema and are not checked.

``tests/test_schema.py`` proves, for both engines, that the schema and the composed YAML have exactly
the same keys and that every YAML default has the declared type.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from functools import cache
from typing import Any

from omegaconf import DictConfig, ListConfig

from verl_roles.errors import Problem


def only(engine: str) -> Any:
    """Mark a field that exists only when the config is composed with ``model_engine=<engine>``."""
    return dataclasses.field(metadata={"engine": engine})


@dataclass
class CustomClass:
    """Types of ``data.custom_cls``."""
    path: str | None
    name: str | None


@dataclass
class DataSampler:
    """Types of ``data.sampler``."""
    class_path: str | None
    class_name: str | None


@dataclass
class Data:
    """Types of ``data``."""
    tokenizer: str | None
    use_shm: bool
    train_files: str | list
    val_files: str | list
    train_max_samples: int
    val_max_samples: int
    prompt_key: str
    reward_fn_key: str
    max_prompt_length: int
    max_response_length: int
    train_batch_size: int
    val_batch_size: int | None
    tool_config_path: str | None
    return_raw_input_ids: bool
    return_raw_chat: bool
    return_full_prompt: bool
    shuffle: bool
    seed: int | None
    dataloader_num_workers: int
    image_patch_size: int
    validation_shuffle: bool
    filter_overlong_prompts: bool
    filter_overlong_prompts_workers: int
    truncation: str
    image_key: str
    video_key: str
    trust_remote_code: bool
    custom_cls: CustomClass
    return_multi_modal_inputs: bool
    sampler: DataSampler
    datagen: CustomClass
    apply_chat_template_kwargs: dict


@dataclass
class ModelFusedKernelOptions:
    """Types of ``actor_rollout_ref.model.fused_kernel_options``."""
    impl_backend: str


@dataclass
class ModelTiledMlp:
    """Types of ``actor_rollout_ref.model.tiled_mlp``."""
    enabled: bool
    num_shards: int


@dataclass
class ModelMtp:
    """Types of ``actor_rollout_ref.model.mtp``."""
    enable: bool
    enable_train: bool
    enable_rollout: bool
    detach_encoder: bool
    mtp_loss_scaling_factor: float
    speculative_algorithm: str
    speculative_num_steps: int
    speculative_eagle_topk: int
    speculative_num_draft_tokens: int
    method: str
    num_speculative_tokens: int


@dataclass
class Lora:
    """Types of ``actor_rollout_ref.model.lora``."""
    type: str
    merge: bool
    rank: int
    dropout: float
    exclude_modules: list
    dropout_position: str
    lora_A_init_method: str
    lora_B_init_method: str
    a2a_experimental: bool
    dtype: str | None
    adapter_path: str | None
    freeze_vision_model: bool
    freeze_vision_projection: bool
    freeze_language_model: bool
    alpha: float
    target_modules: str | list


@dataclass
class OverrideConfigMoeConfig:
    """Types of ``actor_rollout_ref.model.override_config.moe_config``."""
    freeze_moe_router: bool


@dataclass
class ModelOverrideConfig:
    """Types of ``actor_rollout_ref.model.override_config``."""
    model_config: dict = only('megatron')
    moe_config: OverrideConfigMoeConfig = only('megatron')


@dataclass
class ActorRolloutRefModel:
    """Types of ``actor_rollout_ref.model``."""
    path: str
    hf_config_path: str | None
    tokenizer_path: str | None
    use_shm: bool
    trust_remote_code: bool
    custom_chat_template: str | None
    external_lib: str | None
    enable_gradient_checkpointing: bool
    enable_activation_offload: bool
    use_liger: bool
    use_fused_kernels: bool
    fused_kernel_options: ModelFusedKernelOptions
    tiled_mlp: ModelTiledMlp
    mtp: ModelMtp
    lora: Lora
    use_remove_padding: bool
    override_config: ModelOverrideConfig


@dataclass
class ToolConfigNsys:
    """Types of ``actor_rollout_ref.actor.profiler.tool_config.nsys``."""
    discrete: bool


@dataclass
class ToolConfigNpu:
    """Types of ``actor_rollout_ref.actor.profiler.tool_config.npu``."""
    contents: list
    level: str
    analysis: bool
    discrete: bool


@dataclass
class ToolConfigTorch:
    """Types of ``actor_rollout_ref.actor.profiler.tool_config.torch``."""
    contents: list
    discrete: bool


@dataclass
class ToolConfigTorchMemory:
    """Types of ``actor_rollout_ref.actor.profiler.tool_config.torch_memory``."""
    trace_alloc_max_entries: int
    stack_depth: int


@dataclass
class ProfilerToolConfig:
    """Types of ``actor_rollout_ref.actor.profiler.tool_config``."""
    nsys: ToolConfigNsys
    npu: ToolConfigNpu
    torch: ToolConfigTorch
    torch_memory: ToolConfigTorchMemory


@dataclass
class RoleProfiler:
    """Types of ``actor_rollout_ref.actor.profiler``."""
    tool: str | None
    enable: bool
    all_ranks: bool
    ranks: list
    save_path: str
    tool_config: ProfilerToolConfig


@dataclass
class PolicyLoss:
    """Types of ``actor_rollout_ref.actor.policy_loss``."""
    loss_mode: str
    clip_cov_ratio: float
    clip_cov_lb: float
    clip_cov_ub: float
    kl_cov_ratio: float
    ppo_kl_coef: float


@dataclass
class Checkpoint:
    """Types of ``actor_rollout_ref.actor.checkpoint``."""
    save_contents: list
    load_contents: list
    async_save: bool
    mbridge_config: dict


@dataclass
class RouterReplay:
    """Types of ``actor_rollout_ref.actor.router_replay``."""
    mode: str
    record_file: str | None
    replay_file: str | None


@dataclass
class Qat:
    """Types of ``actor_rollout_ref.actor.qat``."""
    enable: bool
    mode: str
    group_size: int
    ignore_patterns: list
    activation_observer: str
    quantization_config_path: str | None


@dataclass
class FsdpConfigWrapPolicy:
    """Types of ``actor_rollout_ref.actor.fsdp_config.wrap_policy``."""
    min_num_params: int


@dataclass
class FsdpEngine:
    """Types of ``actor_rollout_ref.actor.fsdp_config``."""
    wrap_policy: FsdpConfigWrapPolicy
    param_offload: bool
    optimizer_offload: bool
    offload_policy: bool
    reshard_after_forward: bool
    fsdp_size: int
    forward_prefetch: bool
    model_dtype: str
    use_orig_params: bool
    seed: int
    full_determinism: bool
    ulysses_sequence_parallel_size: int
    entropy_from_logits_with_chunking: bool
    use_torch_compile: bool
    entropy_checkpointing: bool
    forward_only: bool
    strategy: str
    dtype: str
    qat: Qat


@dataclass
class Optimizer:
    """Types of ``actor_rollout_ref.actor.optim``."""
    optimizer: str
    optimizer_impl: str = only('dp')
    lr: float
    lr_warmup_steps_ratio: float
    total_training_steps: int
    weight_decay: float
    lr_warmup_steps: int
    betas: list
    clip_grad: float
    min_lr_ratio: float = only('dp')
    num_cycles: float = only('dp')
    lr_scheduler_type: str = only('dp')
    zero_indexed_step: bool = only('dp')
    warmup_style: str | None = only('dp')
    override_optimizer_config: dict | None
    lr_warmup_init: float = only('megatron')
    lr_decay_steps: int | None = only('megatron')
    lr_decay_style: str = only('megatron')
    min_lr: float = only('megatron')
    weight_decay_incr_style: str = only('megatron')
    lr_wsd_decay_style: str = only('megatron')
    lr_wsd_decay_steps: int | None = only('megatron')
    use_checkpoint_opt_param_scheduler: bool = only('megatron')


@dataclass
class MegatronOverrideTransformerConfig:
    """Types of ``actor_rollout_ref.actor.megatron.override_transformer_config``."""
    recompute_granularity: str | None
    recompute_modules: list
    recompute_method: str | None
    recompute_num_layers: int | None
    attention_backend: str


@dataclass
class MegatronQat:
    """Types of ``actor_rollout_ref.actor.megatron.qat``."""
    enable: bool
    mode: str
    group_size: int
    ignore_patterns: list
    activation_observer: str | None
    quantization_config_path: str | None


@dataclass
class MegatronEngine:
    """Types of ``actor_rollout_ref.actor.megatron``."""
    param_offload: bool
    grad_offload: bool
    optimizer_offload: bool
    tensor_model_parallel_size: int
    expert_model_parallel_size: int
    expert_tensor_parallel_size: int | None
    pipeline_model_parallel_size: int
    virtual_pipeline_model_parallel_size: int | None
    context_parallel_size: int
    sequence_parallel: bool
    use_distributed_optimizer: bool
    use_dist_checkpointing: bool
    dist_checkpointing_path: str | None
    dynamic_context_parallel: bool
    max_seqlen_per_dp_cp_rank: int | None
    dist_checkpointing_prefix: str
    dist_ckpt_optim_fully_reshardable: bool
    distrib_optim_fully_reshardable_mem_efficient: bool
    seed: int
    override_ddp_config: dict
    override_transformer_config: MegatronOverrideTransformerConfig
    override_mcore_model_config: dict
    use_mbridge: bool
    vanilla_mbridge: bool
    use_remove_padding: bool
    forward_only: bool
    dtype: str
    router_replay: RouterReplay
    qat: MegatronQat


@dataclass
class ActorRolloutRefActor:
    """Types of ``actor_rollout_ref.actor``."""
    profiler: RoleProfiler
    rollout_n: int
    strategy: str
    ppo_mini_batch_size: int
    ppo_micro_batch_size: int | None
    ppo_micro_batch_size_per_gpu: int | None
    use_dynamic_bsz: bool
    ppo_max_token_len_per_gpu: int
    clip_ratio: float
    clip_ratio_low: float
    clip_ratio_high: float
    tau_pos: float
    tau_neg: float
    freeze_vision_tower: bool
    policy_loss: PolicyLoss
    clip_ratio_c: float
    loss_agg_mode: str
    loss_scale_factor: float | None
    entropy_coeff: float
    calculate_entropy: bool
    use_kl_loss: bool
    use_prefix_grouper: bool
    use_torch_compile: bool
    kl_loss_coef: float
    kl_loss_type: str
    ppo_epochs: int
    shuffle: bool
    data_loader_seed: int
    checkpoint: Checkpoint
    use_fused_kernels: bool
    router_replay: RouterReplay
    qat: Qat
    fsdp_config: FsdpEngine = only('dp')
    optim: Optimizer
    grad_clip: float = only('dp')
    ulysses_sequence_parallel_size: int = only('dp')
    entropy_from_logits_with_chunking: bool = only('dp')
    entropy_checkpointing: bool = only('dp')
    use_remove_padding: bool = only('dp')
    calculate_sum_pi_squared: bool = only('dp')
    sum_pi_squared_checkpointing: bool = only('dp')
    megatron: MegatronEngine = only('megatron')
    load_weight: bool = only('megatron')


@dataclass
class ActorRolloutRefRef:
    """Types of ``actor_rollout_ref.ref``."""
    profiler: RoleProfiler
    rollout_n: int
    strategy: str
    use_torch_compile: bool
    log_prob_micro_batch_size: int | None
    log_prob_micro_batch_size_per_gpu: int | None
    log_prob_use_dynamic_bsz: bool
    log_prob_max_token_len_per_gpu: int
    router_replay: RouterReplay
    fsdp_config: FsdpEngine = only('dp')
    ulysses_sequence_parallel_size: int = only('dp')
    entropy_from_logits_with_chunking: bool = only('dp')
    entropy_checkpointing: bool = only('dp')
    megatron: MegatronEngine = only('megatron')
    load_weight: bool = only('megatron')


@dataclass
class RolloutEngineKwargs:
    """Types of ``actor_rollout_ref.rollout.engine_kwargs``."""
    vllm: dict
    sglang: dict
    trtllm: dict


@dataclass
class RolloutValKwargs:
    """Types of ``actor_rollout_ref.rollout.val_kwargs``."""
    top_k: int
    top_p: float
    temperature: float
    n: int
    do_sample: bool


@dataclass
class RolloutMultiTurn:
    """Types of ``actor_rollout_ref.rollout.multi_turn``."""
    enable: bool
    max_assistant_turns: int | None
    tool_config_path: str | None
    max_user_turns: int | None
    max_parallel_calls: int
    max_tool_response_length: int
    tool_response_truncate_side: str
    interaction_config_path: str | None
    use_inference_chat_template: bool
    tokenization_sanity_check_mode: str
    format: str
    num_repeat_rollouts: int | None


@dataclass
class RolloutAgent:
    """Types of ``actor_rollout_ref.rollout.agent``."""
    num_workers: int
    default_agent_loop: str
    agent_loop_config_path: str | None
    custom_async_server: CustomClass


@dataclass
class RolloutCheckpointEngine:
    """Types of ``actor_rollout_ref.rollout.checkpoint_engine``."""
    backend: str
    update_weights_bucket_megabytes: int
    engine_kwargs: dict


@dataclass
class RolloutTrace:
    """Types of ``actor_rollout_ref.rollout.trace``."""
    project_name: str
    experiment_name: str
    backend: str | None
    token2text: bool
    max_samples_per_step_per_worker: int | None


@dataclass
class RolloutSkip:
    """Types of ``actor_rollout_ref.rollout.skip``."""
    enable: bool
    dump_dir: str
    max_dump_step: int
    action: str


@dataclass
class ProfilerToolConfig_:
    """Types of ``actor_rollout_ref.rollout.profiler.tool_config``."""
    npu: ToolConfigNpu
    torch: ToolConfigTorch


@dataclass
class RolloutProfiler:
    """Types of ``actor_rollout_ref.rollout.profiler``."""
    tool: str | None
    enable: bool
    all_ranks: bool
    ranks: list
    save_path: str
    tool_config: ProfilerToolConfig_


@dataclass
class RolloutPrometheus:
    """Types of ``actor_rollout_ref.rollout.prometheus``."""
    enable: bool
    port: int
    file: str
    served_model_name: str


@dataclass
class RolloutQat:
    """Types of ``actor_rollout_ref.rollout.qat``."""
    enable: bool
    mode: str
    group_size: int
    ignore_patterns: list
    activation_observer: str | None
    quantization_config_path: str | None


@dataclass
class RolloutLayerNameMap:
    """Types of ``actor_rollout_ref.rollout.layer_name_map``."""
    qkv_layer_name: str
    gate_proj_layer_name: str


@dataclass
class ActorRolloutRefRollout:
    """Types of ``actor_rollout_ref.rollout``."""
    name: str
    mode: str
    nnodes: int
    n_gpus_per_node: int
    temperature: float
    top_k: int
    top_p: float
    prompt_length: int
    response_length: int
    dtype: str
    gpu_memory_utilization: float
    ignore_eos: bool
    enforce_eager: bool
    cudagraph_capture_sizes: list | None
    free_cache_engine: bool
    tensor_model_parallel_size: int
    data_parallel_size: int
    expert_parallel_size: int
    pipeline_model_parallel_size: int
    max_num_batched_tokens: int
    max_model_len: int | None
    max_num_seqs: int
    enable_chunked_prefill: bool
    enable_prefix_caching: bool
    logprobs_mode: str
    scheduling_policy: str
    load_format: str
    log_prob_micro_batch_size: int | None
    log_prob_micro_batch_size_per_gpu: int | None
    log_prob_use_dynamic_bsz: bool
    log_prob_max_token_len_per_gpu: int
    disable_log_stats: bool
    do_sample: bool
    n: int
    over_sample_rate: float
    multi_stage_wake_up: bool
    engine_kwargs: RolloutEngineKwargs
    val_kwargs: RolloutValKwargs
    multi_turn: RolloutMultiTurn
    calculate_log_probs: bool
    agent: RolloutAgent
    checkpoint_engine: RolloutCheckpointEngine
    trace: RolloutTrace
    skip: RolloutSkip
    skip_tokenizer_init: bool
    enable_rollout_routing_replay: bool
    profiler: RolloutProfiler
    prometheus: RolloutPrometheus
    quantization: str | None
    quantization_config_file: str | None
    mtp: ModelMtp
    qat: RolloutQat
    layered_summon: bool
    layer_name_map: RolloutLayerNameMap = only('megatron')


@dataclass
class ActorRolloutRef:
    """Types of ``actor_rollout_ref``."""
    model: ActorRolloutRefModel
    actor: ActorRolloutRefActor
    ref: ActorRolloutRefRef
    rollout: ActorRolloutRefRollout
    hybrid_engine: bool
    nccl_timeout: int


@dataclass
class CriticModel:
    """Types of ``critic.model``."""
    path: str
    tokenizer_path: str
    external_lib: str | None
    trust_remote_code: bool
    use_shm: bool
    enable_gradient_checkpointing: bool
    enable_activation_offload: bool
    tiled_mlp: ModelTiledMlp
    lora: Lora
    use_remove_padding: bool
    override_config: ModelOverrideConfig


@dataclass
class Critic:
    """Types of ``critic``."""
    profiler: RoleProfiler
    rollout_n: int
    enable: bool | None
    ppo_mini_batch_size: int
    ppo_micro_batch_size: int | None
    ppo_micro_batch_size_per_gpu: int | None
    use_dynamic_bsz: bool
    ppo_max_token_len_per_gpu: int
    forward_max_token_len_per_gpu: int
    ppo_epochs: int
    shuffle: bool
    cliprange_value: float
    loss_agg_mode: str
    checkpoint: Checkpoint
    model: CriticModel
    fsdp: FsdpEngine = only('dp')
    optim: Optimizer
    strategy: str
    data_loader_seed: int
    forward_micro_batch_size: int | None = only('dp')
    forward_micro_batch_size_per_gpu: int | None = only('dp')
    ulysses_sequence_parallel_size: int = only('dp')
    grad_clip: float = only('dp')
    megatron: MegatronEngine = only('megatron')
    nccl_timeout: int = only('megatron')
    load_weight: bool = only('megatron')


@dataclass
class RewardCustomRewardFunction:
    """Types of ``reward.custom_reward_function``."""
    path: str | None
    name: str


@dataclass
class RewardRewardManager:
    """Types of ``reward.reward_manager``."""
    source: str
    name: str
    module: RewardCustomRewardFunction


@dataclass
class RewardModelRollout:
    """Types of ``reward.reward_model.rollout``."""
    name: str
    dtype: str
    gpu_memory_utilization: float
    enforce_eager: bool
    cudagraph_capture_sizes: list | None
    free_cache_engine: bool
    data_parallel_size: int
    expert_parallel_size: int
    tensor_model_parallel_size: int
    max_num_batched_tokens: int
    max_model_len: int | None
    max_num_seqs: int
    load_format: str
    engine_kwargs: dict
    limit_images: int | None
    enable_chunked_prefill: bool
    enable_prefix_caching: bool
    disable_log_stats: bool
    skip_tokenizer_init: bool
    prompt_length: int
    response_length: int


@dataclass
class RewardRewardModel:
    """Types of ``reward.reward_model``."""
    enable: bool
    enable_resource_pool: bool
    n_gpus_per_node: int
    nnodes: int
    model_path: str | None
    rollout: RewardModelRollout


@dataclass
class RewardSandboxFusion:
    """Types of ``reward.sandbox_fusion``."""
    url: str | None
    max_concurrent: int
    memory_limit_mb: int


@dataclass
class Reward:
    """Types of ``reward``."""
    num_workers: int
    custom_reward_function: RewardCustomRewardFunction
    reward_manager: RewardRewardManager
    reward_model: RewardRewardModel
    sandbox_fusion: RewardSandboxFusion


@dataclass
class RewardModelModel:
    """Types of ``reward_model.model``."""
    path: str | None
    external_lib: str | None
    trust_remote_code: bool | None


@dataclass
class RewardModelRollout_:
    """Types of ``reward_model.rollout``."""
    name: str | None
    dtype: str | None
    gpu_memory_utilization: float | None
    enforce_eager: bool | None
    cudagraph_capture_sizes: list | None
    free_cache_engine: str | None
    data_parallel_size: int | None
    expert_parallel_size: int | None
    tensor_model_parallel_size: int | None
    max_num_batched_tokens: int | None
    max_model_len: int | None
    max_num_seqs: int | None
    load_format: str | None
    engine_kwargs: str | None
    limit_images: int | None
    enable_chunked_prefill: bool | None
    enable_prefix_caching: str | None
    disable_log_stats: bool | None
    skip_tokenizer_init: bool | None
    prompt_length: int | None
    response_length: int | None


@dataclass
class RewardModel:
    """Types of ``reward_model``."""
    num_workers: int | None
    reward_manager: Any
    enable: bool | None
    enable_resource_pool: bool | None
    n_gpus_per_node: int | None
    nnodes: int | None
    reward_loop_source: str | None
    reward_loop_module_path: str | None
    reward_loop_class_name: str | None
    model: RewardModelModel
    rollout: RewardModelRollout_


@dataclass
class SandboxFusion:
    """Types of ``sandbox_fusion``."""
    url: str | None
    max_concurrent: int | None
    memory_limit_mb: int | None


@dataclass
class AlgorithmRolloutCorrection:
    """Types of ``algorithm.rollout_correction``."""
    rollout_is: str | None
    rollout_is_threshold: float
    rollout_rs: str | None
    rollout_rs_threshold: float | None
    bypass_mode: bool
    loss_type: str
    rollout_is_batch_normalize: bool


@dataclass
class AlgorithmFilterGroups:
    """Types of ``algorithm.filter_groups``."""
    enable: bool
    metric: str | None
    max_num_gen_batches: int
    max_inflight_gen_batches: int


@dataclass
class AlgorithmKlCtrl:
    """Types of ``algorithm.kl_ctrl``."""
    type: str
    kl_coef: float
    horizon: int
    target_kl: float


@dataclass
class AlgorithmPfPpo:
    """Types of ``algorithm.pf_ppo``."""
    reweight_method: str
    weight_pow: float


@dataclass
class Algorithm:
    """Types of ``algorithm``."""
    rollout_correction: AlgorithmRolloutCorrection
    gamma: float
    lam: float
    adv_estimator: str
    norm_adv_by_std_in_grpo: bool
    filter_groups: AlgorithmFilterGroups
    use_kl_in_reward: bool
    kl_penalty: str
    kl_ctrl: AlgorithmKlCtrl
    use_pf_ppo: bool
    pf_ppo: AlgorithmPfPpo


@dataclass
class DistillationDistillationLoss:
    """Types of ``distillation.distillation_loss``."""
    loss_mode: str
    topk: int
    use_task_rewards: bool
    distillation_loss_coef: float
    loss_max_clamp: float | None
    log_prob_min_clamp: float | None
    use_policy_gradient: bool
    policy_loss_mode: str
    clip_ratio: float
    clip_ratio_low: float
    clip_ratio_high: float


@dataclass
class TeacherModelInference(RewardModelRollout):
    """Types of ``distillation.teacher_model.inference``: the reward-model engine fields plus temperature."""
    temperature: float


@dataclass
class DistillationTeacherModel:
    """Types of ``distillation.teacher_model``."""
    enable_resource_pool: bool
    n_gpus_per_node: int
    nnodes: int
    model_path: str | None
    inference: TeacherModelInference


@dataclass
class Distillation:
    """Types of ``distillation``."""
    enabled: bool
    num_workers: int
    distillation_loss: DistillationDistillationLoss
    teacher_model: DistillationTeacherModel


@dataclass
class Trainer:
    """Types of ``trainer``."""
    balance_batch: bool
    total_epochs: int
    total_training_steps: int | None
    project_name: str
    experiment_name: str
    logger: list
    log_val_generations: int
    rollout_data_dir: str | None
    validation_data_dir: str | None
    nnodes: int
    n_gpus_per_node: int
    save_freq: int
    esi_redundant_time: int
    resume_mode: str
    resume_from_path: str | None
    del_local_ckpt_after_load: bool
    val_before_train: bool
    val_only: bool
    test_freq: int
    critic_warmup: int
    default_hdfs_dir: str | None
    default_local_dir: str
    max_actor_ckpt_to_keep: int | None
    max_critic_ckpt_to_keep: int | None
    ray_wait_register_center_timeout: int
    device: str
    use_legacy_worker_impl: str


@dataclass
class GlobalToolConfigNsys:
    """Types of ``global_profiler.global_tool_config.nsys``."""
    discrete: bool
    controller_nsight_options: dict
    worker_nsight_options: dict


@dataclass
class GlobalToolConfigTorchMemory:
    """Types of ``global_profiler.global_tool_config.torch_memory``."""
    trace_alloc_max_entries: int
    stack_depth: int
    context: str
    stacks: str
    kw_args: dict


@dataclass
class GlobalProfilerGlobalToolConfig:
    """Types of ``global_profiler.global_tool_config``."""
    nsys: GlobalToolConfigNsys
    torch_memory: GlobalToolConfigTorchMemory


@dataclass
class GlobalProfiler:
    """Types of ``global_profiler``."""
    tool: str | None
    steps: int | None
    profile_continuous_steps: bool
    save_path: str
    global_tool_config: GlobalProfilerGlobalToolConfig


@dataclass
class TransferQueue:
    """Types of ``transfer_queue``."""
    enable: bool


@dataclass
class RayInitRuntimeEnv:
    """Types of ``ray_kwargs.ray_init.runtime_env``."""
    py_executable: str | None


@dataclass
class RayKwargsRayInit:
    """Types of ``ray_kwargs.ray_init``."""
    num_cpus: int | None
    runtime_env: RayInitRuntimeEnv


@dataclass
class RayKwargs:
    """Types of ``ray_kwargs``."""
    ray_init: RayKwargsRayInit
    timeline_json_file: str | None


@dataclass
class PPOTrainerConfig:
    """Types of ``(root)``."""
    data: Data
    actor_rollout_ref: ActorRolloutRef
    critic: Critic
    reward: Reward
    custom_reward_function: CustomClass
    reward_model: RewardModel
    sandbox_fusion: SandboxFusion
    algorithm: Algorithm
    distillation: Distillation
    trainer: Trainer
    global_profiler: GlobalProfiler
    model_engine: str
    megatron_config_path: str | None
    actor_critic_same_topology: bool
    transfer_queue: TransferQueue
    ray_kwargs: RayKwargs
    fsdp: FsdpEngine = only('dp')
    megatron: MegatronEngine = only('megatron')



# --- reading the schema ---------------------------------------------------------------------------

ROOT = PPOTrainerConfig

_SCALARS = ("int", "float", "bool", "str", "list", "dict", "None", "Any")

_WORDING = {
    "int": "an integer",
    "float": "a number",
    "bool": "true or false",
    "str": "a string",
    "list": "a list such as [a,b]",
    "dict": "a mapping such as {k: v}",
    "None": "null",
}


@dataclass(frozen=True)
class KeyType:
    """The declared type of one key: the kinds it accepts, and the engine it exists under (or None)."""

    kinds: tuple[str, ...]
    engine: str | None = None
    section: type | None = None

    def accepts(self, value: object) -> bool:
        return any(_accepts(kind, value) for kind in self.kinds)

    def describe(self) -> str:
        return " or ".join(_WORDING.get(kind, kind) for kind in self.kinds)


def _accepts(kind: str, value: object) -> bool:
    if kind == "Any":
        return True
    if kind == "None":
        return value is None
    if kind == "bool":
        return isinstance(value, bool)
    if kind == "int":
        return isinstance(value, int) and not isinstance(value, bool)
    if kind == "float":
        return isinstance(value, int | float) and not isinstance(value, bool)
    if kind == "str":
        return isinstance(value, str | int | float | bool)
    if kind == "list":
        return isinstance(value, ListConfig | list | tuple)
    return isinstance(value, DictConfig | dict)  # "dict" or a section


def _parse(annotation: str) -> tuple[tuple[str, ...], type | None]:
    kinds, section = [], None
    for part in (p.strip() for p in annotation.split("|")):
        if part in _SCALARS:
            kinds.append(part)
        else:
            section = globals()[part]
            kinds.append("dict")
    return tuple(kinds), section


@cache
def fields_of(section: type) -> dict[str, KeyType]:
    """Each field of a schema class and its declared type."""
    out = {}
    for f in dataclasses.fields(section):
        kinds, nested = _parse(str(f.type))
        out[f.name] = KeyType(kinds=kinds, engine=f.metadata.get("engine"), section=nested)
    return out


def flat_schema(engine: str | None = None) -> dict[str, KeyType]:
    """Every key path of the schema (sections included) and its type; only ``engine``'s when given."""
    table: dict[str, KeyType] = {}

    def walk(section: type, prefix: str, inherited: str | None) -> None:
        for name, key_type in fields_of(section).items():
            owner = key_type.engine or inherited
            if engine is not None and owner not in (None, engine):
                continue
            path = f"{prefix}{name}"
            table[path] = dataclasses.replace(key_type, engine=owner)
            if key_type.section is not None:
                walk(key_type.section, path + ".", owner)

    walk(ROOT, "", None)
    return table


def type_problems(cfg: DictConfig) -> Iterator[Problem]:
    """One pass over ``cfg``: a problem for each value whose type the schema does not accept.

    Interpolations are skipped (their target is checked where it is set), as are ``???`` values and
    keys a user added with ``+`` (not in the schema).
    """
    yield from _check(cfg, ROOT, "")


def _check(node: DictConfig, section: type, prefix: str) -> Iterable[Problem]:
    # Reads OmegaConf's node internals directly: this runs on every compose and a public accessor
    # per key costs ten times more. ``_content`` of a container is its children (or None / a string
    # for null, ``???`` and interpolations); ``_val`` of a leaf is its raw value.
    declared = fields_of(section)
    for key, child in node.__dict__["_content"].items():
        key_type = declared.get(key)
        if key_type is None:
            continue
        if isinstance(child, DictConfig | ListConfig):
            content = child.__dict__["_content"]
            if isinstance(content, str):
                continue
            value: object = None if content is None else child
            if value is not None and key_type.section is not None and isinstance(child, DictConfig):
                yield from _check(child, key_type.section, f"{prefix}{key}.")
                continue
        else:
            value = child._val
            if isinstance(value, str) and (value == "???" or "${" in value):
                continue
        if not key_type.accepts(value):
            yield _wrong_type(f"{prefix}{key}", value, key_type)


def _wrong_type(path: str, value: object, key_type: KeyType) -> Problem:
    shown = value if not isinstance(value, DictConfig | ListConfig) else type(value).__name__
    return Problem(
        key=path,
        message="has the wrong type",
        value=shown,
        show_value=True,
        expected=key_type.describe(),
        fix=f"set {path} to {key_type.describe()}",
    )



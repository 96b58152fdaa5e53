"""How each role's batches are cut, as verl reads it: a micro batch size per GPU with static batches, a
token budget with dynamic ones, and the same switch for the actor and the pass that computes its old
log-probs.

verl reads, per role (the same in every supported release; the files are verl's):

- the actor trains with ``ppo_micro_batch_size_per_gpu`` (static) or ``ppo_max_token_len_per_gpu``
  (``use_dynamic_bsz``); its old log-probs are computed by the actor's engine with the rollout section's
  ``log_prob_micro_batch_size_per_gpu`` / ``log_prob_max_token_len_per_gpu`` under the *actor's* switch,
  and ``rollout.log_prob_use_dynamic_bsz`` must equal it (workers/engine_workers.py, init_model asserts);
- the reference policy, when verl builds its engine, reads ``log_prob_micro_batch_size_per_gpu`` under its
  own ``log_prob_use_dynamic_bsz`` (the worker renames them before converting the section to an
  ActorConfig);
- the critic's config is checked like the actor's (CriticConfig), but its engine batches by token budget
  whatever ``critic.use_dynamic_bsz`` says (the inert table names that);
- the global ``ppo_micro_batch_size`` / ``log_prob_micro_batch_size`` are deprecated and never reach an
  engine: set with the per-GPU key, verl refuses both; set alone, the worker asserts the per-GPU key.

Where verl refuses before training (validate_config, the dataclasses, the worker's init_model), these
rules refuse; what verl would refuse only once the run has started is refused too, and listed in
tests/verl_known_failures.py as a deliberate difference.
"""

from __future__ import annotations

from collections.abc import Iterable

from omegaconf import DictConfig

from verl_roles.base.errors import Problem
from verl_roles.base.layout import ACTOR, CRITIC, REF, ROLLOUT
from verl_roles.base.releases import release_of
from verl_roles.validation.rules.values import (
    UNSET,
    count,
    critic_in_use,
    get,
    gpu_count,
    model_parallel,
    ref_engine_built,
    ref_in_use,
)

ACTOR_CONFIG = "verl/workers/config/actor.py, ActorConfig.__post_init__"
CRITIC_CONFIG = "verl/workers/config/critic.py, CriticConfig.__post_init__"
VALIDATE_CONFIG = "verl/utils/config.py, validate_config"
INIT_MODEL = "verl/workers/engine_workers.py, ActorRolloutRefWorker.init_model"


def dynamic(cfg: DictConfig, key: str) -> bool:
    return get(cfg, key) is True


def _null(value: object) -> bool:
    return value is None or value is UNSET


def micro_batches_are_set_as_verl_reads_them(cfg: DictConfig) -> Iterable[Problem]:
    """Every role verl runs with static batches has its per-GPU micro batch, set one way only; every
    role with dynamic batches has its token budget; the old log-prob pass batches as the actor does."""
    actor_dynamic = dynamic(cfg, f"{ACTOR}.use_dynamic_bsz")
    if actor_dynamic:
        yield from _token_budgets(cfg)
    else:
        yield from _micro_batch(cfg, ACTOR, "ppo_micro_batch_size", "actor.use_dynamic_bsz=false",
                                f"its ActorConfig ({ACTOR_CONFIG})")
        yield from _micro_batch(cfg, ROLLOUT, "log_prob_micro_batch_size", "actor.use_dynamic_bsz=false",
                                f"{VALIDATE_CONFIG} and the worker ({INIT_MODEL}); the actor's engine "
                                "computes the old log-probs with it")
    yield from _deprecated_alone(cfg, actor_dynamic)
    rollout_dynamic = get(cfg, f"{ROLLOUT}.log_prob_use_dynamic_bsz")
    if isinstance(rollout_dynamic, bool) and rollout_dynamic != actor_dynamic:
        yield Problem(
            key=f"{ROLLOUT}.log_prob_use_dynamic_bsz",
            message=f"is {str(rollout_dynamic).lower()}, but {ACTOR}.use_dynamic_bsz is "
            f"{str(actor_dynamic).lower()}: the actor's engine computes the old log-probs with the actor's "
            f"batching, and verl {release_of(cfg)} asserts the two are equal when the worker starts "
            f"({INIT_MODEL})",
            fix=f"drop the override (it follows {ACTOR}.use_dynamic_bsz), or set both to the same value",
        )
    if ref_in_use(cfg):
        ref_dynamic = dynamic(cfg, f"{REF}.log_prob_use_dynamic_bsz")
        # validate_config checks the reference's pair under the actor's switch; the reference's own
        # ActorConfig (when verl builds its engine) under the reference's switch.
        if not actor_dynamic or (ref_engine_built(cfg) and not ref_dynamic):
            why = "ref.log_prob_use_dynamic_bsz=false" if actor_dynamic else "actor.use_dynamic_bsz=false"
            where = (f"{VALIDATE_CONFIG}" if not actor_dynamic else
                     f"the reference's ActorConfig, built by {INIT_MODEL}")
            yield from _micro_batch(cfg, REF, "log_prob_micro_batch_size", why, where)
    if critic_in_use(cfg) and not dynamic(cfg, f"{CRITIC}.use_dynamic_bsz"):
        yield from _micro_batch(cfg, CRITIC, "ppo_micro_batch_size", "critic.use_dynamic_bsz=false",
                                f"its CriticConfig ({CRITIC_CONFIG})")


def _micro_batch(cfg: DictConfig, role: str, name: str, setting: str, checker: str) -> Iterable[Problem]:
    """``<role>.<name>`` (deprecated) and ``<role>.<name>_per_gpu``: exactly one is set (verl's check)."""
    deprecated, per_gpu = get(cfg, f"{role}.{name}"), get(cfg, f"{role}.{name}_per_gpu")
    release = release_of(cfg)
    if _null(deprecated) and _null(per_gpu):
        yield Problem(
            key=f"{role}.{name}_per_gpu",
            message=f"is null, but verl {release} batches this role by sample count here ({setting}) and "
            f"needs the micro batch size per GPU; {checker} refuses to start without it",
            fix=f"set {role}.{name}_per_gpu (e.g. 4), or batch by tokens with "
            f"{ACTOR}.use_dynamic_bsz=true",
        )
    elif not _null(deprecated) and not _null(per_gpu):
        yield Problem(
            key=f"{role}.{name}",
            message=f"is {deprecated}, and {role}.{name}_per_gpu is {per_gpu} (set by you or by default): "
            f"verl {release} refuses both ({checker}); the global micro batch is deprecated and never "
            "reaches verl's engine, which reads only the per-GPU size",
            fix=f"remove {role}.{name} and set {role}.{name}_per_gpu{_per_gpu_of(cfg, role, deprecated)}",
        )


def _per_gpu_of(cfg: DictConfig, role: str, deprecated: object) -> str:
    """`` to N`` (the global micro batch over the role's data-parallel ranks) when it can be told."""
    n_gpus = gpu_count(cfg)
    size, _ = model_parallel(cfg, ACTOR if role in (ROLLOUT, REF) else role)
    if not isinstance(deprecated, int) or not n_gpus or n_gpus % size:
        return " (the global size divided by the data-parallel size)"
    dp = n_gpus // size
    if deprecated % dp:
        return f" (the global size {deprecated} does not split over the {dp} data-parallel ranks)"
    return f" to {deprecated // dp} (the global size {deprecated} over {dp} data-parallel ranks)"


def _deprecated_alone(cfg: DictConfig, actor_dynamic: bool) -> Iterable[Problem]:
    """A deprecated global micro batch set alone: the worker asserts the per-GPU size of the actor and of
    the old log-prob pass (init_model); the reference's engine would get no micro batch at all and fail at
    its first pass."""
    release = release_of(cfg)
    roles = [] if actor_dynamic else [(ACTOR, "ppo_micro_batch_size"), (ROLLOUT, "log_prob_micro_batch_size")]
    if ref_engine_built(cfg) and not dynamic(cfg, f"{REF}.log_prob_use_dynamic_bsz"):
        roles.append((REF, "log_prob_micro_batch_size"))
    for role, name in roles:
        deprecated, per_gpu = get(cfg, f"{role}.{name}"), get(cfg, f"{role}.{name}_per_gpu")
        if _null(deprecated) or not _null(per_gpu):
            continue
        when = (f"verl {release} asserts {name}_per_gpu is set when the worker starts ({INIT_MODEL})"
                if role != REF else
                f"verl {release}'s reference engine would get no micro batch and fail at its first "
                "log-prob pass")
        yield Problem(
            key=f"{role}.{name}",
            message=f"is {deprecated} with {role}.{name}_per_gpu null: the global micro batch is deprecated "
            f"and never reaches verl's engine; {when}",
            fix=f"remove {role}.{name} and set {role}.{name}_per_gpu{_per_gpu_of(cfg, role, deprecated)}",
        )


def _token_budgets(cfg: DictConfig) -> Iterable[Problem]:
    """Dynamic batches: the actor's engine needs its token budgets (init_model asserts both)."""
    for key in (f"{ACTOR}.ppo_max_token_len_per_gpu", f"{ROLLOUT}.log_prob_max_token_len_per_gpu"):
        if _null(get(cfg, key)):
            yield Problem(
                key=key,
                message=f"is null, but {ACTOR}.use_dynamic_bsz is true: verl {release_of(cfg)} packs micro "
                f"batches by this token budget and asserts it is set when the worker starts ({INIT_MODEL})",
                fix=f"set {key} (tokens per GPU, e.g. 16384), or use static batches with "
                f"{ACTOR}.use_dynamic_bsz=false",
            )


def rollout_replicas_fit_the_gpus(cfg: DictConfig) -> Iterable[Problem]:
    """The rollout's replicas tile the GPUs: TP * DP * PP divides ``n_gpus_per_node * nnodes`` (the worker
    asserts it when it builds the rollout's device mesh)."""
    n_gpus = gpu_count(cfg)
    sizes = [count(cfg, f"{ROLLOUT}.{key}") or 1 for key in
             ("tensor_model_parallel_size", "data_parallel_size", "pipeline_model_parallel_size")]
    replica = sizes[0] * sizes[1] * sizes[2]
    if not n_gpus or n_gpus % replica == 0:
        return
    yield Problem(
        key=f"{ROLLOUT}.tensor_model_parallel_size",
        message=f"makes one rollout replica TP*DP*PP = {sizes[0]}*{sizes[1]}*{sizes[2]} = {replica} GPUs, "
        f"which does not divide the {n_gpus} GPUs (trainer.n_gpus_per_node * trainer.nnodes); verl "
        f"{release_of(cfg)} asserts it when the worker builds the rollout ({INIT_MODEL})",
        fix="pick rollout tensor/data/pipeline parallel sizes whose product divides the GPU count",
    )


def rollout_expert_parallel_fits_the_replica(cfg: DictConfig) -> Iterable[Problem]:
    """verl's RolloutConfig (every supported release, verl/workers/config/rollout.py) asserts: for a
    rollout other than trtllm, an expert parallel size above 1 equals one replica's TP * DP; a MoE tensor
    parallel size above 1 only with trtllm; and under trtllm, with both above 1, their product equals
    TP. The section is converted before any worker starts its rollout."""
    name = get(cfg, f"{ROLLOUT}.name")
    ep = count(cfg, f"{ROLLOUT}.expert_parallel_size") or 1
    moe_tp = count(cfg, f"{ROLLOUT}.moe_tensor_parallel_size") or 1
    tp = count(cfg, f"{ROLLOUT}.tensor_model_parallel_size") or 1
    dp = count(cfg, f"{ROLLOUT}.data_parallel_size") or 1
    where = f"verl {release_of(cfg)}'s RolloutConfig asserts it (verl/workers/config/rollout.py)"
    if name != "trtllm" and ep > 1 and ep != tp * dp:
        yield Problem(
            key=f"{ROLLOUT}.expert_parallel_size",
            message=f"is {ep}, but the {name} rollout spreads experts over one replica's TP*DP = {tp}*{dp} = "
            f"{tp * dp} GPUs; {where}",
            fix=f"set {ROLLOUT}.expert_parallel_size={tp * dp}, or change the rollout's tensor/data parallel "
            "sizes so that their product is the expert parallel size",
        )
    if name != "trtllm" and moe_tp > 1:
        yield Problem(
            key=f"{ROLLOUT}.moe_tensor_parallel_size",
            message=f"is {moe_tp}, which only the trtllm rollout reads; {where}",
            fix=f"remove it (the {name} rollout splits experts by expert_parallel_size), or use "
            f"{ROLLOUT}.name=trtllm",
        )
    if name == "trtllm" and ep > 1 and moe_tp > 1 and moe_tp * ep != tp:
        yield Problem(
            key=f"{ROLLOUT}.moe_tensor_parallel_size",
            message=f"times expert_parallel_size ({moe_tp}*{ep} = {moe_tp * ep}) is not the rollout's "
            f"tensor_model_parallel_size ({tp}); {where}",
            fix="pick moe_tensor_parallel_size and expert_parallel_size whose product is the tensor parallel "
            "size",
        )

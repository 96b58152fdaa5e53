"""Rules across keys: parallel sizes against the GPUs, batch sizes against each other and the ranks,
Ulysses and sequence parallel settings, validation sampling, the custom reward function.

The rules refuse what verl refuses, no more: what its ``validate_config`` and its dataclasses'
``__post_init__`` / ``validate()`` reject, and what would crash its workers once started (a batch that
does not split into micro batches).
"""

from __future__ import annotations

from collections.abc import Iterable

from omegaconf import DictConfig

from verl_roles.base.errors import Problem
from verl_roles.base.layout import ACTOR, CRITIC, DP, ENGINE_TABLE, REF, ROLES, ROLES_BY_NAME, ROLLOUT
from verl_roles.base.releases import release_of
from verl_roles.validation.rules.tables import ULYSSES
from verl_roles.validation.rules.values import (
    UNSET,
    count,
    engine_of,
    fsdp_roles_in_use,
    get,
    get_int,
    gpu_count,
    model_parallel,
    number,
    role_name,
    role_runs,
    trained_roles,
)
from verl_roles.validation.schema import engine_strategies


def strategies_match_the_engine(cfg: DictConfig) -> Iterable[Problem]:
    """Each role's ``strategy`` picks the worker verl builds it with; under ``model_engine=X`` it must be
    one that runs X, or the role would run another engine on X's settings."""
    chosen = engine_of(cfg)
    release = release_of(cfg)
    allowed = engine_strategies(chosen.name, release)
    for role in ROLES:
        if not role.engine_block:
            continue
        key = f"{role.section}.strategy"
        value = get(cfg, key)
        if value is UNSET or value in allowed:
            continue
        others = [e.name for e in ENGINE_TABLE if value in engine_strategies(e.name, release)]
        switch = f"; to run {others[0]}, choose model_engine={others[0]} instead" if others else ""
        yield Problem(
            key=key,
            message=f"is {value!r}, but the config was composed with model_engine={chosen.name}: the role "
            f"would be built by another engine's worker from {chosen.name}'s blocks",
            expected="one of " + ", ".join(allowed),
            fix=f"drop the override of {key} (model_engine sets it){switch}",
        )


def parallel_sizes_fit_the_gpus(cfg: DictConfig) -> Iterable[Problem]:
    """One model replica's ranks (Megatron's TP*PP*CP, FSDP's Ulysses size, TorchTitan's TP*PP*CP) must
    divide the GPU count: each worker lays its ranks out as a data-parallel by model-parallel mesh. Under
    Megatron verl's validate_config checks the actor's; under the other engines the worker's device mesh
    refuses it when the role's engine is built (verl's ``init_model``). Megatron's every role is checked
    (its process state is set by the first engine built); elsewhere the roles verl builds."""
    n_gpus = gpu_count(cfg)
    chosen = engine_of(cfg)
    if not chosen.model_parallel or not n_gpus:
        return
    for role in (ACTOR, REF, CRITIC):
        if not chosen.divides_gpus and not role_runs(cfg, role_name(role)):
            continue
        size, spelled = model_parallel(cfg, role)
        if n_gpus % size:
            where = ("verl's validate_config checks the actor's; Megatron-Core refuses the others when the "
                     "worker builds its engine") if chosen.divides_gpus else (
                     "verl's worker builds a device mesh of (GPUs / size) x size ranks and refuses it in "
                     "init_model, after Ray is up")
            yield Problem(
                key=f"{role}.{chosen.model_parallel_keys(role_name(role))[0][1]}",
                message=f"{spelled if '*' not in spelled else f'{spelled} = {size}'} does not divide the "
                f"{n_gpus} GPUs (trainer.n_gpus_per_node * trainer.nnodes): {where}",
                fix="pick parallel sizes whose product divides the GPU count, "
                "or change trainer.n_gpus_per_node / trainer.nnodes",
            )


def batch_sizes_are_consistent(cfg: DictConfig) -> Iterable[Problem]:
    """verl's batch rules: mini <= train batch, micro set one way, and the splits divide evenly.

    ``ppo_mini_batch_size`` counts prompts like ``data.train_batch_size``; each worker trains on
    ``ppo_mini_batch_size * rollout.n / data_parallel_size`` responses, split into micro batches.
    """
    train = count(cfg, "data.train_batch_size")
    n = count(cfg, f"{ROLLOUT}.n") or 1
    n_gpus = gpu_count(cfg)
    for role in trained_roles(cfg):
        if get(cfg, f"{role}.use_dynamic_bsz") is True:
            continue
        mini = count(cfg, f"{role}.ppo_mini_batch_size")
        micro = count(cfg, f"{role}.ppo_micro_batch_size")
        per_gpu = count(cfg, f"{role}.ppo_micro_batch_size_per_gpu")
        if train is not None and mini is not None and train < mini:
            yield Problem(
                key=f"{role}.ppo_mini_batch_size",
                message=f"is {mini} prompts, more than data.train_batch_size = {train} prompts",
                expected=f"at most data.train_batch_size ({train})",
                fix=f"lower {role}.ppo_mini_batch_size or raise data.train_batch_size",
            )
        if micro is not None and per_gpu is None and mini is not None and mini % micro:
            yield Problem(
                key=f"{role}.ppo_micro_batch_size",
                message=f"({micro}) does not divide ppo_mini_batch_size ({mini})",
                fix="pick a micro batch size that divides the mini batch size",
            )
        # The critic's engine batches by token budget whatever its micro batch says (the inert table names
        # it), so only the actor's micro batch must divide a rank's share.
        micro_read = per_gpu if role == ACTOR else None
        if mini is not None and n_gpus and micro is None:
            yield from _micro_batches_per_rank(cfg, role, mini * n, f"{mini}*{n}", micro_read, n_gpus)
    yield from _train_batch_fills_the_gpus(cfg, train, n, n_gpus)


# Where verl splits a role's mini batch at its first update (both assert; the run stops there; the same in
# every supported release).
SPLIT_OVER_RANKS = "verl/workers/engine_workers.py, TrainingWorker.train_mini_batch"
SPLIT_INTO_MICRO_BATCHES = "verl/workers/engine/utils.py, prepare_micro_batches"


def _micro_batches_per_rank(
    cfg: DictConfig, role: str, responses: int, spelled_responses: str, per_gpu: int | None, n_gpus: int
) -> Iterable[Problem]:
    """verl's engine workers split each mini batch (``ppo_mini_batch_size * rollout.n`` responses) evenly
    over the data-parallel ranks, then each rank's share into micro batches of
    ``ppo_micro_batch_size_per_gpu``; both splits are asserted at the first update, after the resources
    are up. A micro batch larger than a rank's share is not clamped: it does not divide it either."""
    size, spelled = model_parallel(cfg, role)
    if n_gpus % size:
        return
    dp = n_gpus // size
    # The model-parallel product spelled first, then what it comes to: `dp = GPUs / (TP*PP*CP = 2*1*1)
    # = 8/2 = 4`, never a line that reads as dp = 1.
    dp_spelled = f"dp = GPUs / ({spelled}) = {n_gpus}/{size} = {dp}"
    formula = f"ppo_mini_batch_size * rollout.n / dp = {spelled_responses}/{dp}, {dp_spelled}"
    per_rank = responses // dp
    if per_rank == 0:
        yield Problem(
            key=f"{role}.ppo_mini_batch_size",
            message=f"gives each of the {dp} data-parallel ranks no sample ({formula})",
            fix="raise ppo_mini_batch_size or rollout.n, or use fewer GPUs",
        )
    elif responses % dp:
        yield Problem(
            key=f"{role}.ppo_mini_batch_size",
            message=f"times rollout.n ({spelled_responses} = {responses} responses) does not split evenly "
            f"over the {dp} data-parallel ranks ({dp_spelled}); verl {release_of(cfg)} asserts "
            "it at the first "
            f"update ({SPLIT_OVER_RANKS})",
            fix="pick ppo_mini_batch_size (or rollout.n) so that their product is a multiple of the "
            "data-parallel size",
        )
    elif per_gpu is not None and per_rank % per_gpu:
        larger = ", and is larger than that share" if per_gpu > per_rank else ""
        yield Problem(
            key=f"{role}.ppo_micro_batch_size_per_gpu",
            message=f"({per_gpu}) does not divide the {per_rank} samples each data-parallel rank trains per "
            f"mini batch ({formula}){larger}; verl {release_of(cfg)} splits a rank's share into whole micro "
            "batches and "
            f"asserts it at the first update ({SPLIT_INTO_MICRO_BATCHES}), after the resources are up",
            fix="pick a micro batch size per GPU that divides it, or change ppo_mini_batch_size",
        )



def _train_batch_fills_the_gpus(
    cfg: DictConfig, train: int | None, n: int, n_gpus: int | None
) -> Iterable[Problem]:
    """verl: ``train_batch_size * rollout.n`` must split evenly over the smallest possible batch."""
    if train is None or not n_gpus or get(cfg, f"{ACTOR}.use_dynamic_bsz") is True:
        return
    if engine_of(cfg).divides_gpus:
        size, _ = model_parallel(cfg, ACTOR)
        per_gpu = count(cfg, f"{ACTOR}.ppo_micro_batch_size_per_gpu")
        if n_gpus % size or per_gpu is None:
            return
        minimal, how = (n_gpus // size) * per_gpu, "data-parallel size * ppo_micro_batch_size_per_gpu"
    else:
        minimal, how = n_gpus, "the GPU count"
    if (train * n) % minimal:
        yield Problem(
            key="data.train_batch_size",
            message=f"times rollout.n ({train}*{n} = {train * n} responses) does not split evenly over "
            f"{minimal} ({how})",
            fix="pick data.train_batch_size (or rollout.n) so that their product is a multiple of it",
        )



def ulysses_size_is_set_one_way(cfg: DictConfig) -> Iterable[Problem]:
    """A role-level Ulysses size above 1 and a different one in the role's FSDP block: verl silently
    runs one of them (the actor's and the ref's FSDPActorConfig copies the role-level value over the
    block's; the critic's engine reads only the block). Our conf makes the block follow the role-level key,
    so they differ only when both are set."""
    for name, section in fsdp_roles_in_use(cfg):
        block = f"{section}.{DP.block(name)}.{ULYSSES}"
        role_level, engine_value = get_int(cfg, f"{section}.{ULYSSES}"), get_int(cfg, block)
        if role_level is None or engine_value is None or role_level <= 1 or role_level == engine_value:
            continue
        used = role_level if name != "critic" else engine_value
        release = release_of(cfg)
        how = (
            f"verl {release} copies a role-level value above 1 over the FSDP block's (FSDPActorConfig)"
            if name != "critic"
            else f"verl {release}'s critic engine reads only the FSDP block's "
            "(FSDPCriticConfig copies nothing)"
        )
        yield Problem(
            key=f"{section}.{ULYSSES}",
            message=f"is {role_level}, but {block} is {engine_value}; {how}, so the {name} would run with "
            f"{used} whatever resolved.yaml shows",
            fix=f"set one of the two: {block} (verl's current key; the role-level key is deprecated in "
            "verl), or both to the same value",
        )


def sequence_parallel_needs_remove_padding(cfg: DictConfig) -> Iterable[Problem]:
    """verl's FSDP engine (and FSDPActorConfig.validate): Ulysses sequence parallelism needs padding
    removed from the role's model."""
    for name, section in fsdp_roles_in_use(cfg):
        key = f"{section}.{DP.block(name)}.{ULYSSES}"
        sp = get_int(cfg, key)
        model = ROLES_BY_NAME["actor" if name == "ref" else name].model
        if sp is None or sp <= 1 or get(cfg, f"{model}.use_remove_padding") is True:
            continue
        yield Problem(
            key=key,
            message=f"is {sp}, but {model}.use_remove_padding is not true; verl's FSDP engine refuses "
            "Ulysses sequence parallelism with padding kept",
            fix=f"set {model}.use_remove_padding=true",
        )


def sampled_validation_needs_a_temperature(cfg: DictConfig) -> Iterable[Problem]:
    """verl's validate_config: sampling validation generations needs rollout.temperature > 0."""
    temperature = number(cfg, f"{ROLLOUT}.temperature")
    if get(cfg, f"{ROLLOUT}.val_kwargs.do_sample") is True and temperature is not None and temperature <= 0:
        yield Problem(
            key=f"{ROLLOUT}.temperature",
            message=f"is {temperature}, but {ROLLOUT}.val_kwargs.do_sample is true; verl needs a temperature "
            "> 0 to sample validation generations",
            fix=f"raise {ROLLOUT}.temperature, or set {ROLLOUT}.val_kwargs.do_sample=false",
        )


def custom_reward_function_is_named(cfg: DictConfig) -> Iterable[Problem]:
    """verl loads ``reward.custom_reward_function.name`` from the file at ``path`` and asserts it is set."""
    path = get(cfg, "reward.custom_reward_function.path")
    if isinstance(path, str) and path and get(cfg, "reward.custom_reward_function.name") is None:
        yield Problem(
            key="reward.custom_reward_function.name",
            message=f"is null, but reward.custom_reward_function.path is set ({path}); verl needs the "
            "name of the function to load from that file",
            fix="set reward.custom_reward_function.name, e.g. compute_score",
        )


# Paths a run cannot start without; a null or empty value here fails only after resources are up.

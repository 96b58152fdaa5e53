"""The validation rules refuse what verl 0.9.1 refuses, and only that; registry names are warnings.

Every case goes through ``verl_roles.compose`` (the CLI's path) or the CLI itself.
"""

from __future__ import annotations

import warnings

import pytest
from conftest import arrived, assert_user_error, run_in_process
from omegaconf import OmegaConf

import verl_roles
from verl_roles.validation.schema import verl_names

MEGATRON = "model_engine=megatron"
ACTOR = "actor_rollout_ref.actor"
ROLLOUT = "actor_rollout_ref.rollout"


def compose_quietly(overrides: list[str]) -> tuple[object, list[str]]:
    """The composed config and every warning message it raised."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        cfg = verl_roles.compose(overrides)
    return cfg, [str(w.message) for w in caught]


def problems(overrides: list[str]) -> dict[str, str]:
    with pytest.raises(verl_roles.ConfigError) as info:
        compose_quietly(overrides)
    return {p.key: p.render() for p in info.value.problems}


# --- names verl looks up in registries users extend --------------------------------------------------

REGISTRY_KEYS = {
    "adv_estimator": "algorithm.adv_estimator",
    "policy_loss_mode": "actor_rollout_ref.actor.policy_loss.loss_mode",
    "reward_manager": "reward.reward_manager.name",
}


@pytest.mark.parametrize(
    ("names", "name"),
    [(names, name) for names in REGISTRY_KEYS for name in verl_names(names)],
)
def test_every_name_verl_registers_composes_without_a_warning(names, name):
    _, messages = compose_quietly([f"{REGISTRY_KEYS[names]}={name}"])
    assert [m for m in messages if "built-in" in m] == []


@pytest.mark.parametrize("names", list(REGISTRY_KEYS))
def test_an_unknown_registry_name_is_a_warning_naming_verls_list(names):
    key = REGISTRY_KEYS[names]
    _, messages = compose_quietly([f"{key}=my_own_entry"])
    (message,) = [m for m in messages if "built-in" in m]
    assert message.startswith(f"{key}=my_own_entry is not one of verl 0.9.1's built-in")
    assert ", ".join(verl_names(names)) in message
    assert "register" in message


def test_a_near_miss_names_the_likely_estimator():
    _, messages = compose_quietly(["algorithm.adv_estimator=grpoo"])
    assert any("Did you mean `algorithm.adv_estimator=grpo`?" in m for m in messages)


def test_a_reward_manager_loaded_from_a_module_is_not_looked_up():
    _, messages = compose_quietly(
        ["reward.reward_manager.source=importlib", "reward.reward_manager.name=anything"]
    )
    assert [m for m in messages if "built-in" in m] == []


def test_an_unknown_estimator_trains_no_critic_as_in_verl():
    _, messages = compose_quietly(["algorithm.adv_estimator=my_est", "critic.optim.lr=3e-5"])
    assert any("trains no critic" in m and "critic.optim.lr" in m for m in messages)


def test_the_cli_prints_the_warning_and_writes_the_run(in_tmp):
    result = run_in_process(["algorithm.adv_estimator=my_est", "hydra.run.dir=out"], cwd=in_tmp)
    assert result.returncode == 0, result.stderr
    assert "verl_roles warning: algorithm.adv_estimator=my_est is not one of" in result.stderr
    assert (in_tmp / "out" / "resolved.yaml").is_file()


# --- lists verl checks -----------------------------------------------------------------------------


@pytest.mark.parametrize("mode", verl_names("loss_agg_mode"))
@pytest.mark.parametrize("role", ["actor_rollout_ref.actor", "critic"])
def test_every_loss_agg_mode_verl_checks_composes(role, mode):
    override = f"{role}.loss_agg_mode={mode}"
    cfg, _ = compose_quietly([override])
    arrived(cfg, override)


def test_an_unknown_loss_agg_mode_is_refused_with_verls_list():
    text = problems([f"{ACTOR}.loss_agg_mode=token-avg"])[f"{ACTOR}.loss_agg_mode"]
    assert "token-sum" in text and "seq-mean-token-sum-norm" in text


def test_the_critic_loss_agg_mode_is_not_checked_without_a_critic():
    cfg, warned = compose_quietly(["algorithm.adv_estimator=grpo", "critic.loss_agg_mode=anything"])
    arrived(cfg, "critic.loss_agg_mode=anything")
    # The critic is not trained, so the value is named as a setting without effect, not refused.
    assert any("critic.loss_agg_mode" in message for message in warned), warned


@pytest.mark.parametrize(
    ("override", "expected"),
    [
        ("actor_rollout_ref.rollout.name=hf", "sglang, trtllm, vllm"),
        ("actor_rollout_ref.rollout.name=null", "sglang, trtllm, vllm"),
        ("actor_rollout_ref.rollout.mode=sync", "async"),
    ],
)
def test_a_rollout_engine_verl_does_not_have_is_refused(override, expected):
    key = override.partition("=")[0]
    assert expected in problems([override])[key]


@pytest.mark.parametrize(
    ("overrides", "refused"),
    [
        (["algorithm.kl_penalty=full"], False),
        (["algorithm.kl_penalty=full", "algorithm.use_kl_in_reward=true"], True),
        (["algorithm.kl_penalty=k3+", "algorithm.use_kl_in_reward=true"], False),
        ([f"{ACTOR}.kl_loss_type=bogus", f"{ACTOR}.use_kl_loss=false"], False),
        ([f"{ACTOR}.kl_loss_type=bogus", f"{ACTOR}.use_kl_loss=true"], True),
        ([f"{ACTOR}.kl_loss_type=low_var_kl+", f"{ACTOR}.use_kl_loss=true"], False),
    ],
)
def test_kl_estimators_are_checked_only_where_a_kl_is_computed(overrides, refused):
    if refused:
        assert "KL estimator" in " ".join(problems(overrides).values())
    else:
        compose_quietly(overrides)


@pytest.mark.parametrize(
    "key",
    ["actor_rollout_ref.actor.megatron.router_replay.mode", "critic.megatron.router_replay.mode"],
)
def test_router_replay_mode_is_checked_in_every_megatron_block(key):
    assert "disabled, R2, R3" in problems([MEGATRON, f"{key}=R4"])[key]


# --- verl's own refusals -----------------------------------------------------------------------------


def test_log_prob_micro_batches_set_twice_on_the_ref_matter_only_when_a_ref_runs():
    ref = "actor_rollout_ref.ref"
    both = [f"{ref}.log_prob_micro_batch_size=8", f"{ref}.log_prob_micro_batch_size_per_gpu=2"]
    compose_quietly([*both, f"{ACTOR}.use_kl_loss=false", "algorithm.use_kl_in_reward=false"])
    assert f"{ref}.log_prob_micro_batch_size" in problems([*both, f"{ACTOR}.use_kl_loss=true"])


def test_the_deprecated_global_micro_batch_is_refused_with_the_per_gpu_size_it_means():
    # It never reaches verl's engine: with the per-GPU size verl refuses both, alone its worker asserts.
    for extra in ([], [f"{ACTOR}.ppo_micro_batch_size_per_gpu=null"]):
        text = problems([f"{ACTOR}.ppo_micro_batch_size=16", *extra])[f"{ACTOR}.ppo_micro_batch_size"]
        assert f"set {ACTOR}.ppo_micro_batch_size_per_gpu to 2 (the global size 16 over 8" in text


def test_sequence_parallelism_needs_padding_removed_under_dp():
    sp = f"{ACTOR}.ulysses_sequence_parallel_size=2"
    text = problems([sp, "actor_rollout_ref.model.use_remove_padding=false"])
    # Reported at the key verl's engine reads, naming the key the value came from.
    message = text[f"{ACTOR}.fsdp_config.ulysses_sequence_parallel_size"]
    assert "use_remove_padding=true" in message
    assert f"`{ACTOR}.ulysses_sequence_parallel_size`, which this key follows" in message
    compose_quietly([sp, "actor_rollout_ref.model.use_remove_padding=true"])


def test_the_critics_sequence_parallelism_needs_padding_removed_from_the_critics_model():
    text = problems(["critic.fsdp.ulysses_sequence_parallel_size=2", "critic.model.use_remove_padding=false"])
    assert "set critic.model.use_remove_padding=true" in text["critic.fsdp.ulysses_sequence_parallel_size"]


# --- Ulysses size: a role-level key (deprecated in verl) and the FSDP block's, which verl's engine reads ---
KL_LOSS = f"{ACTOR}.use_kl_loss=true"  # a reference policy runs, so its engine is built
REF = "actor_rollout_ref.ref"
ACTOR_BLOCK = f"{ACTOR}.fsdp_config.ulysses_sequence_parallel_size"


def ulysses_sizes(cfg) -> dict[str, int]:
    """Each role's role-level size and the size in its FSDP block (what verl 0.9.1's engine runs with)."""
    blocks = {ACTOR: "fsdp_config", REF: "fsdp_config", "critic": "fsdp"}
    sizes = {}
    for section, block in blocks.items():
        sizes[section] = OmegaConf.select(cfg, f"{section}.ulysses_sequence_parallel_size")
        sizes[f"{section}.{block}"] = OmegaConf.select(
            cfg, f"{section}.{block}.ulysses_sequence_parallel_size"
        )
    return sizes


@pytest.mark.parametrize(
    ("overrides", "expected"),
    [
        # verl copies a role-level value above 1 into fsdp_config; the ref's role-level value follows the
        # actor's.
        ([f"{ACTOR}.ulysses_sequence_parallel_size=2"], (2, 2, 2, 2, 1, 1)),
        # fsdp_config alone: verl's role-level value stays 1 and copies nothing; the ref keeps its own (1).
        ([f"{ACTOR}.fsdp_config.ulysses_sequence_parallel_size=4"], (1, 4, 1, 1, 1, 1)),
        ([f"{REF}.fsdp_config.ulysses_sequence_parallel_size=2"], (1, 1, 1, 2, 1, 1)),
        # Both set to one value; the ref's role-level key set on its own.
        ([f"{ACTOR}.ulysses_sequence_parallel_size=4", f"{ACTOR_BLOCK}=4"], (4, 4, 4, 4, 1, 1)),
        ([f"{REF}.ulysses_sequence_parallel_size=2"], (1, 1, 2, 2, 1, 1)),
        # The critic's engine reads critic.fsdp only; here it follows the critic's role-level key.
        (["critic.ulysses_sequence_parallel_size=2"], (1, 1, 1, 1, 2, 2)),
        (["critic.fsdp.ulysses_sequence_parallel_size=2"], (1, 1, 1, 1, 1, 2)),
        # The baseline reaches every role.
        (["fsdp.ulysses_sequence_parallel_size=2"], (2, 2, 2, 2, 2, 2)),
    ],
)
def test_each_ulysses_spelling_reaches_the_key_verls_engine_reads(overrides, expected):
    cfg, _ = compose_quietly([*overrides, KL_LOSS])
    sizes = ulysses_sizes(cfg)
    assert tuple(sizes.values()) == expected, sizes


@pytest.mark.parametrize(
    ("overrides", "key", "runs_with"),
    [
        ([f"{ACTOR}.ulysses_sequence_parallel_size=2", f"{ACTOR_BLOCK}=4"],
         f"{ACTOR}.ulysses_sequence_parallel_size", "the actor would run with 2"),
        # The ref's role-level value follows the actor's: verl copies it over the ref's own block.
        ([f"{ACTOR}.ulysses_sequence_parallel_size=2", f"{REF}.fsdp_config.ulysses_sequence_parallel_size=1",
          KL_LOSS], f"{REF}.ulysses_sequence_parallel_size", "the ref would run with 2"),
        (["critic.ulysses_sequence_parallel_size=2", "critic.fsdp.ulysses_sequence_parallel_size=4"],
         "critic.ulysses_sequence_parallel_size", "the critic would run with 4"),
        # A baseline above 1 is the role-level value of every role: a block set otherwise contradicts it.
        (["fsdp.ulysses_sequence_parallel_size=2", f"{ACTOR}.fsdp_config.ulysses_sequence_parallel_size=4"],
         f"{ACTOR}.ulysses_sequence_parallel_size", "the actor would run with 2"),
    ],
)
def test_two_different_ulysses_sizes_for_one_role_are_an_error_naming_both_keys(overrides, key, runs_with):
    message = problems(overrides)[key]
    block = key.replace(".ulysses", ".fsdp.ulysses" if key.startswith("critic") else ".fsdp_config.ulysses")
    assert block in message and runs_with in message
    assert f"Fix: set one of the two: {block}" in message


def test_an_explicit_role_level_size_of_one_leaves_the_block_in_charge():
    # verl copies only a value above 1: the block's 4 is what its engine runs with, and what is written.
    cfg, _ = compose_quietly(
        [f"{ACTOR}.ulysses_sequence_parallel_size=1", f"{ACTOR}.fsdp_config.ulysses_sequence_parallel_size=4"]
    )
    assert OmegaConf.select(cfg, ACTOR_BLOCK) == 4



def test_sampled_validation_needs_a_positive_temperature():
    text = problems([f"{ROLLOUT}.val_kwargs.do_sample=true", f"{ROLLOUT}.temperature=0"])
    assert "val_kwargs.do_sample" in text[f"{ROLLOUT}.temperature"]


def test_a_custom_reward_file_needs_a_function_name():
    text = problems(["reward.custom_reward_function.path=/r.py", "reward.custom_reward_function.name=null"])
    assert "compute_score" in text["reward.custom_reward_function.name"]
    compose_quietly(["reward.custom_reward_function.name=null"])


def test_the_cli_refuses_with_one_paragraph_and_writes_nothing(in_tmp):
    result = run_in_process(["actor_rollout_ref.rollout.name=hf", "hydra.run.dir=out"], cwd=in_tmp)
    assert_user_error(result, f"{ROLLOUT}.name: is not a rollout engine verl 0.9.1 has", "'hf'")
    assert not (in_tmp / "out" / "resolved.yaml").exists()


# --- ranges: refused only where verl (or what it calls) refuses ---------------------------------------


@pytest.mark.parametrize(
    "override",
    [
        f"{ACTOR}.optim.lr=0",
        "critic.optim.lr=0",
        f"{ACTOR}.clip_ratio_low=-0.1",
        f"{ACTOR}.clip_ratio_high=-0.1",
        f"{ACTOR}.clip_ratio=-0.2",
        "critic.cliprange_value=-0.5",
    ],
)
def test_values_verl_runs_with_compose(override):
    cfg, _ = compose_quietly([override])
    arrived(cfg, override)


@pytest.mark.parametrize(
    ("override", "expected"),
    [
        (f"{ACTOR}.optim.lr=-1e-6", "a learning rate >= 0"),
        (f"{ACTOR}.clip_ratio_c=1.0", "a dual-clip bound > 1"),
        (f"{ACTOR}.clip_ratio_low=inf", "a finite clip ratio"),
        (f"{ROLLOUT}.gpu_memory_utilization=1.2", "a fraction in (0, 1]"),
        (f"{ROLLOUT}.temperature=-1", "a temperature >= 0"),
    ],
)
def test_values_verl_refuses_are_refused(override, expected):
    key = override.partition("=")[0]
    assert expected in problems([override])[key]


# ---------------------------------------------------------------------------------------------------
# Batches as verl reads them (issue 27): every value verl refuses before training is refused here.

A, RO, RF = "actor_rollout_ref.actor", "actor_rollout_ref.rollout", "actor_rollout_ref.ref"


def test_the_defaults_of_every_engine_set_what_verl_requires():
    for engine in ("dp", "megatron"):
        cfg, _ = compose_quietly([f"model_engine={engine}", f"{A}.use_kl_loss=true"])
        assert cfg.actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu == 4
        assert cfg.actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu == 4
        assert cfg.actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu == 4
        assert cfg.critic.ppo_micro_batch_size_per_gpu == 4
        assert cfg.critic.model.path == cfg.actor_rollout_ref.model.path


@pytest.mark.parametrize(
    ("overrides", "key", "phrase"),
    [
        ([f"{A}.ppo_micro_batch_size_per_gpu=null"],
         f"{A}.ppo_micro_batch_size_per_gpu", "refuses to start without it"),
        ([f"{RO}.log_prob_micro_batch_size_per_gpu=null"],
         f"{RO}.log_prob_micro_batch_size_per_gpu", "refuses to start without it"),
        ([f"{A}.use_kl_loss=true", f"{RF}.log_prob_micro_batch_size_per_gpu=null"],
         f"{RF}.log_prob_micro_batch_size_per_gpu", "refuses to start without it"),
        (["critic.ppo_micro_batch_size_per_gpu=null"], "critic.ppo_micro_batch_size_per_gpu",
         "refuses to start without it"),
        ([f"{A}.ppo_micro_batch_size=64"], f"{A}.ppo_micro_batch_size",
         "set actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu to 8 (the global size 64 over 8"),
        ([f"{A}.ppo_micro_batch_size=64", f"{A}.ppo_micro_batch_size_per_gpu=null"],
         f"{A}.ppo_micro_batch_size", "asserts ppo_micro_batch_size_per_gpu is set"),
        ([f"{RO}.log_prob_use_dynamic_bsz=true"],
         f"{RO}.log_prob_use_dynamic_bsz", "asserts the two are equal"),
        ([f"{A}.use_dynamic_bsz=true", f"{A}.ppo_max_token_len_per_gpu=null"],
         f"{A}.ppo_max_token_len_per_gpu", "packs micro batches by this token budget"),
        ([f"{RO}.tensor_model_parallel_size=3"],
         f"{RO}.tensor_model_parallel_size", "does not divide the 8 GPUs"),
        ([f"{A}.ulysses_sequence_parallel_size=4", "trainer.n_gpus_per_node=2"],
         f"{A}.fsdp_config.ulysses_sequence_parallel_size",
         "ulysses_sequence_parallel_size = 4 does not divide the 2 GPUs"),
        ([f"{RO}.expert_parallel_size=2", f"{RO}.tensor_model_parallel_size=4"],
         f"{RO}.expert_parallel_size", "spreads experts over one replica's TP*DP = 4*1 = 4 GPUs"),
        (["model_engine=torchtitan", f"{A}.torchtitan.tensor_parallel_size=3"],
         f"{A}.torchtitan.tensor_parallel_size", "TP*PP*CP = 3*1*1 = 3 does not divide the 8 GPUs"),
        (["model_engine=megatron", "actor_critic_same_topology=false",
          "critic.megatron.tensor_model_parallel_size=2"],
         "critic.megatron.tensor_model_parallel_size", "parallel state is set once"),
        (["model_engine=megatron", f"{A}.use_kl_loss=true",
          f"{RF}.megatron.tensor_model_parallel_size=2"],
         f"{RF}.megatron.tensor_model_parallel_size", "parallel state is set once"),
    ],
)
def test_what_verl_refuses_before_training_is_refused(overrides: list[str], key: str, phrase: str):
    found = problems(overrides)
    assert key in found, found
    assert phrase in found[key], found[key]


def test_a_megatron_optimizer_dtype_verl_does_not_accept_is_refused_even_unused():
    # McoreOptimizerConfig asserts the dtype whether or not the precision-aware optimizer reads it.
    found = problems(["model_engine=megatron", f"{A}.optim.exp_avg_dtype=fp16"])
    assert "Expected one of 32, bf16, bfloat16, float32, fp32" in found[f"{A}.optim.exp_avg_dtype"]
    compose_quietly(["model_engine=megatron", f"{A}.optim.exp_avg_dtype=bf16"])


def test_batching_by_tokens_needs_no_micro_batch():
    cfg, _ = compose_quietly([f"{A}.use_dynamic_bsz=true",
                              f"{A}.ppo_micro_batch_size_per_gpu=null",
                              f"{RO}.log_prob_micro_batch_size_per_gpu=null"])
    assert cfg.actor_rollout_ref.rollout.log_prob_use_dynamic_bsz is True


def test_the_critics_deprecated_micro_batch_alone_is_what_verl_accepts():
    # verl's critic engine batches by token budget: its config only checks that one micro batch is set.
    compose_quietly(["critic.ppo_micro_batch_size=64", "critic.ppo_micro_batch_size_per_gpu=null"])

"""The unified config composes for every group option, and the Python API behaves."""

from __future__ import annotations

import pytest
from conftest import CONF, DATA, flat, group_options, read_overrides
from hydra.core.global_hydra import GlobalHydra
from hydra.core.override_parser.overrides_parser import OverridesParser
from omegaconf import OmegaConf

import verl_roles
from verl_roles.base.layout import ENGINES, ROLE_GROUPS, ROLE_SECTIONS
from verl_roles.base.releases import engine_choice
from verl_roles.inputs.paths import leaves

# What Hydra/OmegaConf do decides these tests' outcome: CI runs them on both stacks.
pytestmark = pytest.mark.stack


@pytest.mark.parametrize("engine", group_options("model_engine"))
def test_every_model_engine_option_composes(engine):
    cfg = verl_roles.compose([*engine_choice(engine)])
    assert cfg.model_engine == ("dp" if engine == "fsdp" else engine)


# Every option file of every role group: (role, option).
ROLE_OPTIONS = [(path.parent.name, path.stem) for path in sorted(CONF.glob("role/*/*.yaml"))]


@pytest.mark.parametrize(("role", "option"), ROLE_OPTIONS, ids=[f"{r}={o}" for r, o in ROLE_OPTIONS])
@pytest.mark.parametrize("engine", ENGINES)
def test_every_role_option_composes(role, option, engine):
    cfg = verl_roles.compose([*engine_choice(engine), f"role/{role}={option}"])
    assert cfg.model_engine == engine
    # Every value the option sets lands in its role's section (keys relative to the section).
    section = OmegaConf.select(cfg, ROLE_SECTIONS[role])
    written = OmegaConf.load(CONF / "role" / role / f"{option}.yaml")
    for path, value in leaves(OmegaConf.to_container(written)):
        if path:  # an option that sets nothing is one empty mapping
            assert OmegaConf.select(section, ".".join(path)) == value, (role, option, path)


def test_every_role_has_its_option_group():
    assert {role for role, _ in ROLE_OPTIONS} == set(ROLE_GROUPS)


def test_default_engine_is_dp():
    cfg = verl_roles.compose()
    assert cfg.model_engine == "dp"
    assert "megatron" not in cfg.actor_rollout_ref.actor
    assert cfg.actor_rollout_ref.actor.strategy == "fsdp"


def test_fsdp_is_an_alias_of_dp():
    assert flat(verl_roles.compose(["model_engine=fsdp"])) == flat(verl_roles.compose(["model_engine=dp"]))


def test_megatron_carries_every_legacy_megatron_setting():
    cfg = verl_roles.compose(["model_engine=megatron"])
    arr = cfg.actor_rollout_ref
    assert OmegaConf.to_container(arr.rollout.layer_name_map) == {
        "qkv_layer_name": "qkv",
        "gate_proj_layer_name": "gate_up",
    }
    assert arr.model.use_remove_padding is False
    expected_override = {"model_config": {}, "moe_config": {"freeze_moe_router": False}}
    assert OmegaConf.to_container(arr.model.override_config) == expected_override
    assert OmegaConf.to_container(cfg.critic.model.override_config) == expected_override
    parallel_keys = {
        "tensor_model_parallel_size",
        "pipeline_model_parallel_size",
        "virtual_pipeline_model_parallel_size",
        "context_parallel_size",
        "expert_model_parallel_size",
        "expert_tensor_parallel_size",
        "sequence_parallel",
        "use_distributed_optimizer",
        "use_dist_checkpointing",
        "dist_checkpointing_path",
        "param_offload",
        "optimizer_offload",
        "override_transformer_config",
        "dtype",
    }
    for block in (arr.actor.megatron, arr.ref.megatron, cfg.critic.megatron):
        assert parallel_keys <= set(block), parallel_keys - set(block)
        # verl 0.9.1's McoreEngineConfig has no grad_offload: carrying it would break verl's conversion.
        assert "grad_offload" not in block
    for optim in (arr.actor.optim, cfg.critic.optim):
        assert {"lr", "min_lr", "lr_decay_style", "weight_decay", "clip_grad", "optimizer"} <= set(optim)
        assert optim.optimizer == "adam"
    assert arr.actor.strategy == arr.ref.strategy == cfg.critic.strategy == "megatron"


@pytest.mark.parametrize("engine", ENGINES)
def test_layered_summon_exists_for_every_engine(engine):
    cfg = verl_roles.compose([*engine_choice(engine)])
    assert cfg.actor_rollout_ref.rollout.layered_summon is False


def test_freeze_moe_router_overrides_without_plus():
    cfg = verl_roles.compose(
        [
            "model_engine=megatron",
            "actor_rollout_ref.model.override_config.moe_config.freeze_moe_router=True",
            "critic.model.override_config.moe_config.freeze_moe_router=True",
        ]
    )
    assert cfg.actor_rollout_ref.model.override_config.moe_config.freeze_moe_router is True
    assert cfg.critic.model.override_config.moe_config.freeze_moe_router is True


def test_deprecated_megatron_name_equals_model_engine_megatron():
    with pytest.warns(verl_roles.ConfigDeprecationWarning, match="model_engine=megatron"):
        legacy = verl_roles.compose(config_name="ppo_megatron_trainer")
    modern = verl_roles.compose(["model_engine=megatron"])
    assert flat(legacy) == flat(modern)
    assert OmegaConf.to_yaml(legacy) == OmegaConf.to_yaml(modern)


@pytest.mark.parametrize(
    ("script", "engine"),
    [
        ("run_qwen3_8b_fsdp.txt", "dp"),
        ("run_qwen3_8b_megatron.txt", "megatron"),
        ("verl-project/tests__special_e2e__run_ppo_trainer_veomni.txt", "veomni"),
        ("verl-project/examples__grpo_trainer__run_deepseek_v4_veomni.txt", "veomni"),
    ],
)
def test_verl_example_launch_overrides_compose_unchanged(script, engine):
    overrides = read_overrides(DATA / "verl_examples" / script)
    cfg = verl_roles.compose(overrides)
    assert cfg.model_engine == engine
    values = flat(cfg)
    for parsed in OverridesParser.create().parse_overrides(overrides):
        key = parsed.key_or_group
        if key == "model_engine":
            continue
        assert key in values, f"{key} did not land at its path"
        expected = OmegaConf.to_container(OmegaConf.create({"v": parsed.value()}))["v"]
        assert values[key] == expected, (key, values[key], expected)


def test_python_api_twice_in_one_process_leaves_no_hydra_state():
    dp = verl_roles.compose(["model_engine=dp"])
    megatron = verl_roles.compose(["model_engine=megatron", "megatron.tensor_model_parallel_size=2"])
    dp_again = verl_roles.compose()
    assert dp.model_engine == "dp" and megatron.model_engine == "megatron"
    assert megatron.critic.megatron.tensor_model_parallel_size == 2
    assert flat(dp) == flat(dp_again)
    assert not GlobalHydra.instance().is_initialized()


def test_result_is_resolved_and_read_only():
    cfg = verl_roles.compose(["model_engine=megatron"])
    text = OmegaConf.to_yaml(cfg)
    assert "${" not in text
    with pytest.raises(Exception):  # noqa: B017 - OmegaConf raises ReadonlyConfigError
        cfg.trainer.nnodes = 3

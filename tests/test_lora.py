"""The one LoRA block: each engine's defaults, no flat keys left, and its validation rules."""

from __future__ import annotations

from pathlib import Path

import pytest
from omegaconf import OmegaConf

import verl_roles
from verl_roles import main as main_module
from verl_roles.errors import ConfigError

MODELS = ("actor_rollout_ref.model", "critic.model")
FLAT_KEYS = ("lora_rank", "lora_alpha", "target_modules", "exclude_modules", "lora_adapter_path")
MEGATRON_MODULES = ["linear_qkv", "linear_proj", "linear_fc1", "linear_fc2"]


@pytest.fixture(scope="module")
def engines() -> dict[str, object]:
    return {engine: verl_roles.compose([f"model_engine={engine}"]) for engine in ("dp", "megatron")}


@pytest.mark.parametrize(
    ("engine", "alpha", "target_modules"),
    [("dp", 16, "all-linear"), ("megatron", 32, MEGATRON_MODULES)],
)
@pytest.mark.parametrize("model", MODELS)
def test_each_engine_keeps_its_legacy_lora_defaults(engines, engine, alpha, target_modules, model):
    lora = OmegaConf.to_container(OmegaConf.select(engines[engine], model).lora)
    assert lora["alpha"] == alpha
    assert lora["target_modules"] == target_modules
    assert (lora["rank"], lora["type"], lora["merge"], lora["dropout"], lora["exclude_modules"]) == (
        0, "lora", False, 0.0, []
    )
    section = OmegaConf.select(engines[engine], model)
    assert not set(FLAT_KEYS) & set(section), "flat LoRA keys next to the lora block"


# (engine, override, phrases); the error names the override's key. Same rules under both engines.
BAD_LORA = [
    ("dp", "actor_rollout_ref.model.lora.rank=-1", ["integer >= 0", "-1"]),
    ("megatron", "critic.model.lora.rank=8.5", ["integer >= 0", "8.5"]),
    ("dp", "critic.model.lora.rank=true", ["integer >= 0"]),
    ("megatron", "actor_rollout_ref.model.lora.dropout=1.0", ["[0, 1)"]),
    ("dp", "critic.model.lora.dropout=-0.1", ["[0, 1)"]),
    ("megatron", "actor_rollout_ref.model.lora.type=qlora", ["vlm_lora, canonical_lora, dora", "qlora"]),
]


@pytest.mark.parametrize(("engine", "override", "phrases"), BAD_LORA)
def test_invalid_lora_values_are_errors(engine, override, phrases):
    key = override.partition("=")[0]
    with pytest.raises(ConfigError) as caught:
        verl_roles.compose([f"model_engine={engine}", override])
    message = str(caught.value)
    assert message.startswith(key + ":")
    for phrase in phrases:
        assert phrase in message


@pytest.mark.parametrize("alpha", ["0", "null"])
def test_alpha_must_be_positive_when_lora_is_on(alpha):
    with pytest.raises(ConfigError, match=r"actor_rollout_ref\.model\.lora\.alpha: must be a number > 0"):
        verl_roles.compose(
            ["actor_rollout_ref.model.lora.rank=8", f"actor_rollout_ref.model.lora.alpha={alpha}"]
        )


def test_alpha_is_not_checked_while_lora_is_off():
    cfg = verl_roles.compose(["actor_rollout_ref.model.lora.alpha=0"])
    assert cfg.actor_rollout_ref.model.lora.rank == 0


@pytest.mark.parametrize(
    ("engine", "override", "wrong", "expected"),
    [
        ("dp", "actor_rollout_ref.model.lora.target_modules=[linear_qkv,q_proj]", "linear_qkv", "q_proj"),
        ("dp", "critic.model.lora.exclude_modules=[linear_fc2]", "linear_fc2", "all-linear"),
        ("megatron", "actor_rollout_ref.model.lora.target_modules=all-linear", "all-linear", "linear_qkv"),
        ("megatron", "critic.model.lora.target_modules=[q_proj,v_proj]", "q_proj, v_proj", "linear_fc1"),
    ],
)
def test_module_names_of_the_other_engine_name_the_expected_set(engine, override, wrong, expected):
    with pytest.raises(ConfigError) as caught:
        verl_roles.compose([f"model_engine={engine}", override])
    message = str(caught.value)
    assert override.partition("=")[0] in message
    assert wrong in message and expected in message and f"model_engine={engine}" in message


@pytest.mark.parametrize(
    ("engine", "overrides"),
    [
        ("dp", ["actor_rollout_ref.model.lora.rank=16",
                "actor_rollout_ref.model.lora.target_modules=[q_proj,v_proj]",
                "actor_rollout_ref.model.lora.dropout=0.05", "actor_rollout_ref.model.lora.type=dora"]),
        ("megatron", ["critic.model.lora.rank=8", "critic.model.lora.type=canonical_lora",
                      "critic.model.lora.target_modules=[linear_q,linear_k,linear_v]"]),
    ],
)
def test_valid_lora_settings_compose(engine, overrides):
    cfg = verl_roles.compose([f"model_engine={engine}", *overrides])
    for override in overrides:
        key, _, value = override.partition("=")
        assert str(OmegaConf.select(cfg, key)).replace("'", "").replace(" ", "") == value


def test_every_lora_problem_is_reported_in_one_paragraph_each(tmp_path: Path, capsys):
    code = main_module.main([
        "model_engine=megatron", "critic.model.lora.rank=-2", "critic.model.lora.type=x",
        "actor_rollout_ref.model.lora.target_modules=[q_proj]", f"hydra.run.dir={tmp_path / 'out'}",
    ])
    err = capsys.readouterr().err
    assert code == 2 and "Traceback" not in err
    assert "3 problems" in err
    for key in ("rank", "type"):
        assert f"critic.model.lora.{key}" in err
    assert "actor_rollout_ref.model.lora.target_modules" in err
    assert not (tmp_path / "out" / "resolved.yaml").exists()

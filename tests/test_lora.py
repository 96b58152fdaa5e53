"""The one LoRA block: each engine's defaults, no flat keys left, and its validation rules."""

from __future__ import annotations

from pathlib import Path

import pytest
from omegaconf import OmegaConf

import verl_roles
from verl_roles import main as main_module
from verl_roles.base import releases
from verl_roles.base.errors import ConfigError
from verl_roles.base.layout import ENGINE_TABLE, ENGINES, MEGATRON_MODULE_NAMES
from verl_roles.base.releases import engine_choice

MODELS = ("actor_rollout_ref.model", "critic.model")
FLAT_KEYS = ("lora_rank", "lora_alpha", "target_modules", "exclude_modules", "lora_adapter_path")
MEGATRON_MODULES = ["linear_qkv", "linear_proj", "linear_fc1", "linear_fc2"]


@pytest.fixture(scope="module")
def engines() -> dict[str, object]:
    return {engine: verl_roles.compose([*engine_choice(engine)]) for engine in ENGINES}


# The block's defaults per naming family of the engine: Megatron's (the legacy megatron trainer's block),
# or Hugging Face's (verl's flat FSDP keys).
LORA_DEFAULTS = {row.name: (32, MEGATRON_MODULES) if row.lora_module_names == MEGATRON_MODULE_NAMES
                 else (16, "all-linear") for row in ENGINE_TABLE}


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("model", MODELS)
def test_each_engine_keeps_its_legacy_lora_defaults(engines, engine, model):
    alpha, target_modules = LORA_DEFAULTS[engine]
    lora = OmegaConf.to_container(OmegaConf.select(engines[engine], model).lora)
    assert lora["alpha"] == alpha
    assert lora["target_modules"] == target_modules
    assert (lora["rank"], lora["type"], lora["merge"], lora["dropout"], lora["exclude_modules"]) == (
        0, "lora", False, 0.0, []
    )
    # verl reads LoRA from flat keys too (FSDP, VeOmni; under Megatron its rollout engines): the result
    # carries them, derived from the block; under Megatron the modules in Hugging Face names, as the
    # rollout serves a Hugging Face model (all four linear layers: all-linear, verl's own value).
    section = OmegaConf.to_container(OmegaConf.select(engines[engine], model))
    flat_keys = (section["lora_rank"], section["lora_alpha"], section["target_modules"])
    assert flat_keys == (0, alpha, "all-linear" if engine == "megatron" else target_modules)
    assert (section["exclude_modules"], section["lora_adapter_path"]) == (None, None)


# Each case: an engine and bad overrides, each with phrases its problem must carry. The rules report
# every problem at once, so one composition checks several rules; the problem names the override's key.
BAD_LORA = {
    "dp": ("dp", {
        "actor_rollout_ref.model.lora.rank=-1": ["must be an integer >= 0", "Got -1"],
        "critic.model.lora.dropout=-0.1": ["must be a probability in [0, 1)", "Got -0.1"],
        "actor_rollout_ref.model.lora.type=qlora": ["lora, vlm_lora, canonical_lora, dora", "'qlora'"],
        "critic.model.lora.exclude_modules=[linear_fc2]": ["Megatron module(s) linear_fc2", "all-linear"],
    }),
    "megatron": ("megatron", {
        "critic.model.lora.rank=8.5": ["wrong type", "Got 8.5", "integer"],
        "actor_rollout_ref.model.lora.dropout=1.0": ["must be a probability in [0, 1)", "Got 1.0"],
        "actor_rollout_ref.model.lora.target_modules=all-linear": [
            "Hugging Face module(s) all-linear", "linear_qkv, linear_proj, linear_fc1, linear_fc2"],
    }),
    "alpha": ("dp", {
        "critic.model.lora.rank=true": ["wrong type", "Got True", "integer"],
        "actor_rollout_ref.model.lora.rank=8": [],
        "actor_rollout_ref.model.lora.alpha=0": ["must be a number > 0 when LoRA is on", "Got 0"],
    }),
    "hf_names_under_megatron": ("megatron", {
        "critic.model.lora.target_modules=[q_proj,v_proj]": ["Hugging Face module(s) q_proj, v_proj"],
    }),
}


@pytest.mark.parametrize("case", sorted(BAD_LORA))
def test_invalid_lora_settings_are_reported_together(case):
    engine, expected = BAD_LORA[case]
    with pytest.raises(ConfigError) as caught:
        verl_roles.compose([f"model_engine={engine}", *expected])
    problems = {p.key: p.render() for p in caught.value.problems}
    assert len(problems) == len(caught.value.problems), "one problem per key, not one per rule"
    wanted = {override.partition("=")[0]: phrases for override, phrases in expected.items() if phrases}
    assert set(problems) == set(wanted), problems
    for key, phrases in wanted.items():
        for phrase in phrases:
            assert phrase in problems[key], (phrase, problems[key])
        if "module" in phrases[0]:
            assert f"model_engine={engine}" in problems[key]


def test_alpha_is_not_checked_while_lora_is_off():
    cfg = verl_roles.compose(["actor_rollout_ref.model.lora.alpha=0"])
    assert cfg.actor_rollout_ref.model.lora.rank == 0


@pytest.mark.parametrize(
    ("engine", "overrides"),
    [
        ("dp", ["actor_rollout_ref.model.lora.rank=16",
                "actor_rollout_ref.model.lora.target_modules=[q_proj,v_proj]",
                "actor_rollout_ref.model.lora.dropout=0.05", "actor_rollout_ref.model.lora.type=dora"]),
        ("megatron", ["critic.model.lora.rank=8", "critic.model.lora.type=canonical_lora",
                      "critic.model.lora.target_modules=[linear_q,linear_k,linear_v]"]),
        ("veomni", ["actor_rollout_ref.model.lora.rank=32", "actor_rollout_ref.model.lora.alpha=64"]),
    ],
)
def test_valid_lora_settings_compose(engine, overrides):
    cfg = verl_roles.compose([f"model_engine={engine}", *overrides])
    for override in overrides:
        key, _, value = override.partition("=")
        assert str(OmegaConf.select(cfg, key)).replace("'", "").replace(" ", "") == value


@pytest.mark.parametrize("engine", [row.name for row in ENGINE_TABLE if row.lora_module_names is None])
@pytest.mark.parametrize("model", MODELS)
def test_lora_is_refused_under_an_engine_that_reads_no_lora(engine, model):
    with pytest.raises(ConfigError) as caught:
        verl_roles.compose([*engine_choice(engine), f"{model}.lora.rank=8"])
    (problem,) = caught.value.problems
    assert problem.key == f"{model}.lora.rank"
    text = problem.render()
    assert f"verl's {engine} engine reads no LoRA setting" in text and f"{model}.lora.rank=0" in text
    offered = text.rpartition("pick an engine that has LoRA (")[2]
    assert all(row.name in offered for row in ENGINE_TABLE if row.lora_module_names is not None)
    assert engine not in offered
    # A rank of 0 (LoRA off) is the default and composes.
    assert verl_roles.compose([*engine_choice(engine)]).actor_rollout_ref.model.lora_rank == 0


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


@pytest.mark.parametrize("release", releases.supported())
def test_a_key_verl_reads_from_the_lora_block_when_added_is_accepted_and_written(release):
    """verl's vLLM server reads `model.lora.fully_sharded_loras` with a default (no config has it); verl's own
    megatron e2e script adds it with +. The closed LoRA block refused it; a near miss is still refused."""
    key = "actor_rollout_ref.model.lora.fully_sharded_loras"
    cfg = verl_roles.compose([f"verl_version={release}", f"+{key}=true"])
    assert OmegaConf.select(cfg, key) is True
    with pytest.raises(ConfigError, match=f"did you mean `{key}`"):
        verl_roles.compose([f"verl_version={release}", f"+{key[:-1]}=true"])

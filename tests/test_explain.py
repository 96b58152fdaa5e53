"""``verl-roles explain``: the value of a key and the exact chain of files, roles and overrides behind it."""

from __future__ import annotations

import pytest
from conftest import assert_user_error, run
from omegaconf import OmegaConf

from verl_roles import provenance
from verl_roles.cli import main as cli_main
from verl_roles.hydra_context import compose_raw


def sources(explanation: provenance.Explanation) -> list[tuple[str, object]]:
    return [(step.source, step.raw) for step in explanation.steps]


def test_default_comes_from_its_section_file():
    explained = provenance.explain("trainer.nnodes")
    assert explained.value == 1
    assert sources(explained) == [("trainer/trainer.yaml (at trainer)", 1)]


def test_role_option_overrides_the_optimizer_default():
    explained = provenance.explain("critic.optim.lr")
    assert explained.value == 1e-5
    assert sources(explained) == [
        ("optim/fsdp.yaml (at critic.optim)", 1e-6),
        ("role/critic/default.yaml (role option role/critic=default, at critic)", 1e-5),
    ]


def test_interpolated_value_follows_the_baseline_and_the_command_line():
    explained = provenance.explain(
        "critic.megatron.tensor_model_parallel_size",
        ["model_engine=megatron", "megatron.tensor_model_parallel_size=2"],
    )
    assert explained.value == 2
    assert sources(explained) == [
        ("engine/megatron_role.yaml (at critic.megatron)", "${megatron.tensor_model_parallel_size}")
    ]
    (baseline,) = explained.references
    assert baseline.key == "megatron.tensor_model_parallel_size"
    assert sources(baseline) == [
        ("engine/megatron.yaml (at megatron)", 1),
        ("command line `megatron.tensor_model_parallel_size=2`", 2),
    ]


def test_command_line_override_is_the_last_step():
    explained = provenance.explain("trainer.nnodes", ["trainer.nnodes=4"])
    assert explained.value == 4
    assert sources(explained)[-1] == ("command line `trainer.nnodes=4`", 4)


def test_legacy_alias_is_named_in_the_chain():
    legacy = ["actor_rollout_ref.model.lora_rank=8"]
    explained = provenance.explain("actor_rollout_ref.model.lora.rank", legacy)
    assert explained.value == 8
    assert sources(explained)[-1] == (
        "command line `actor_rollout_ref.model.lora_rank=8` (legacy key, read as "
        "`actor_rollout_ref.model.lora.rank=8`)",
        8,
    )


def test_section_interpolation_is_followed_to_the_key_inside_it():
    explained = provenance.explain("actor_rollout_ref.rollout.mtp.enable")
    (target,) = explained.references
    assert target.key == "actor_rollout_ref.model.mtp.enable"
    assert sources(target) == [("model/hf_model.yaml (at actor_rollout_ref.model)", False)]


@pytest.mark.parametrize("engine", ["dp", "megatron"])
def test_chain_is_exact_for_every_key(engine):
    """For every leaf, the last step wrote exactly the raw value the composed config holds."""
    overrides = [f"model_engine={engine}", "role/critic=default"]
    composed = compose_raw("ppo_trainer", overrides)
    leaves: dict[str, object] = {}

    def walk(node: object, prefix: str) -> None:
        for key, value in node.items():
            path = f"{prefix}{key}"
            if isinstance(value, dict) and value:
                walk(value, path + ".")
            else:
                leaves[path] = value

    walk(OmegaConf.to_container(composed, resolve=False), "")
    explained = provenance.explain_many(list(leaves), overrides)
    for key, explanation in zip(leaves, explained, strict=True):
        assert explanation.steps, key
        assert explanation.steps[-1].raw == leaves[key], (key, explanation.render())


def test_cli_prints_the_chain(capsys):
    assert cli_main(["explain", "critic.optim.lr", "critic.optim.lr=3e-5"]) == 0
    out = capsys.readouterr().out
    assert out.splitlines() == [
        "critic.optim.lr = 3e-05",
        "  1. optim/fsdp.yaml (at critic.optim): 1e-06",
        "  2. role/critic/default.yaml (role option role/critic=default, at critic): 1e-05",
        "  3. command line `critic.optim.lr=3e-5`: 3e-05",
    ]


def test_cli_unknown_key_suggests_the_close_one(capsys):
    assert cli_main(["explain", "trainer.nnodez"]) == 2
    err = capsys.readouterr().err
    assert "trainer.nnodez: is not a key" in err and "did you mean `trainer.nnodes`" in err
    assert "Traceback" not in err


def test_cli_subprocess(in_tmp):
    args = ["explain", "critic.rollout_n", "actor_rollout_ref.rollout.n=4"]
    result = run(args, cwd=in_tmp, module="verl_roles.cli")
    assert result.returncode == 0, result.stderr
    assert "critic.rollout_n = 4" in result.stdout
    assert "command line `actor_rollout_ref.rollout.n=4`: 4" in result.stdout
    bad = run(["explain", "trainer.nnodes", "model_engine=deepspeed"], cwd=in_tmp, module="verl_roles.cli")
    assert_user_error(bad, "no option 'deepspeed'")

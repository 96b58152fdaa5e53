"""``verl-roles explain``: the value of a key and the exact chain of files, roles and overrides behind it."""

from __future__ import annotations

import pytest
from conftest import assert_user_error, flat, run_in_process, write
from omegaconf import OmegaConf

import verl_roles
from verl_roles.api.composition import compose_raw
from verl_roles.base.layout import ENGINES
from verl_roles.base.releases import engine_choice
from verl_roles.cli import main as cli_main
from verl_roles.commands import explain
from verl_roles.inputs.paths import flat_leaves
from verl_roles.steps.sequence_parallel import TURNED_OFF

# What Hydra/OmegaConf do decides these tests' outcome: CI runs them on both stacks.
pytestmark = pytest.mark.stack


def sources(explanation: explain.Explanation) -> list[tuple[str, object]]:
    return [(step.source, step.raw) for step in explanation.steps]


def test_default_comes_from_its_section_file():
    explained = explain.explain("trainer.nnodes")
    assert explained.value == 1
    assert sources(explained) == [("trainer/trainer.yaml (at trainer)", 1)]


def test_role_option_overrides_the_optimizer_default():
    explained = explain.explain("critic.optim.lr")
    assert explained.value == 1e-5
    assert sources(explained) == [
        ("optim/fsdp.yaml (at critic.optim)", 1e-6),
        ("critic/stock.yaml (at critic)", 1e-5),
    ]


def test_interpolated_value_follows_the_baseline_and_the_command_line():
    explained = explain.explain(
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
    explained = explain.explain("trainer.nnodes", ["trainer.nnodes=4"])
    assert explained.value == 4
    assert sources(explained)[-1] == ("command line `trainer.nnodes=4`", 4)


def test_legacy_alias_is_named_in_the_chain():
    legacy = ["actor_rollout_ref.model.lora_rank=8"]
    # Warned as the main job warns.
    with pytest.warns(verl_roles.ConfigTranslationWarning, match="lora_rank is verl's flat LoRA key"):
        explained = explain.explain("actor_rollout_ref.model.lora.rank", legacy)
    assert explained.value == 8
    assert sources(explained)[-1] == (
        "command line `actor_rollout_ref.model.lora_rank=8` (verl's flat LoRA key, read as "
        "`actor_rollout_ref.model.lora.rank=8`)",
        8,
    )


def test_section_interpolation_is_followed_to_the_key_inside_it():
    explained = explain.explain("actor_rollout_ref.rollout.mtp.enable")
    (target,) = explained.references
    assert target.key == "actor_rollout_ref.model.mtp.enable"
    assert sources(target) == [("model/hf_model.yaml (at actor_rollout_ref.model)", False)]


@pytest.mark.parametrize("engine", ENGINES)
def test_chain_is_exact_for_every_key(engine):
    """For every leaf, the last step wrote exactly the raw value the composed config holds."""
    overrides = [*engine_choice(engine), "role/critic=default"]
    composed = compose_raw("ppo_trainer", overrides)
    leaves = flat_leaves(OmegaConf.to_container(composed, resolve=False))
    explained = explain.explain_many(list(leaves), overrides)
    for key, explanation in zip(leaves, explained, strict=True):
        steps = explanation.steps
        assert steps, key
        if steps[-1].source.startswith(TURNED_OFF):
            # The step after validation wrote the value verl uses over the composed one.
            assert steps[-1].raw is False and explanation.value is False, key
            steps = steps[:-1]
        assert steps[-1].raw == leaves[key], (key, explanation.render())


def test_cli_prints_the_chain(capsys):
    assert cli_main(["explain", "critic.optim.lr", "critic.optim.lr=3e-5"]) == 0
    out = capsys.readouterr().out
    assert out.splitlines() == [
        "critic.optim.lr = 3.0e-05",
        "  1. optim/fsdp.yaml (at critic.optim): 1.0e-06",
        "  2. critic/stock.yaml (at critic): 1.0e-05",
        "  3. command line `critic.optim.lr=3e-5`: 3.0e-05",
    ]


def test_cli_unknown_key_suggests_the_close_one(capsys):
    assert cli_main(["explain", "trainer.nnodez"]) == 2
    err = capsys.readouterr().err
    assert "trainer.nnodez: is not a key" in err and "did you mean `trainer.nnodes`" in err
    assert "Traceback" not in err


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (
            ["critic.megatron.tensor_model_parallel_size"],
            "verl_roles error: critic.megatron.tensor_model_parallel_size: exists under "
            "model_engine=megatron; this explains the config composed with model_engine=dp. Fix: add "
            "model_engine=megatron: "
            "`verl-roles explain critic.megatron.tensor_model_parallel_size model_engine=megatron`.",
        ),
        (
            ["critic.fsdp.param_offload", "model_engine=megatron"],
            "verl_roles error: critic.fsdp.param_offload: exists under model_engine=dp; this explains the "
            "config composed with model_engine=megatron. Fix: replace model_engine=megatron with "
            "model_engine=dp: `verl-roles explain critic.fsdp.param_offload model_engine=dp`.",
        ),
    ],
    ids=["megatron-key-without-engine", "dp-key-under-megatron"],
)
def test_cli_key_of_another_engine_names_that_engine(capsys, args, expected):
    assert cli_main(["explain", *args]) == 2
    assert capsys.readouterr().err.strip() == expected


def test_cli_as_typed(in_tmp):
    args = ["explain", "critic.rollout_n", "actor_rollout_ref.rollout.n=4"]
    result = run_in_process(args, cwd=in_tmp, module="verl_roles.cli")
    assert result.returncode == 0, result.stderr
    assert "critic.rollout_n = 4" in result.stdout
    assert "command line `actor_rollout_ref.rollout.n=4`: 4" in result.stdout
    bad = run_in_process(["explain", "trainer.nnodes", "model_engine=deepspeed"], cwd=in_tmp,
                         module="verl_roles.cli")
    assert_user_error(bad, "no option 'deepspeed'")


# ---------------------------------------------------------------------------------------------------
# After composition: what finalize does (legacy keys in files, the slime file, role resources), a
# user's --config-dir, and configs the main job would refuse.

MEGATRON = "model_engine=megatron"


@pytest.fixture
def user_conf(tmp_path):
    conf = tmp_path / "myconf"
    write(conf / "role/critic/high_lr.yaml", "# @package critic\noptim:\n  lr: 3e-5\nnum_nodes: 2\n")
    write(conf / "legacy_run.yaml", "defaults:\n  - ppo_trainer\n  - _self_\n"
          "actor_rollout_ref:\n  model:\n    lora_rank: 8\n")
    return conf


@pytest.fixture
def slime_file(tmp_path):
    return write(tmp_path / "roles.yaml", "megatron:\n  - name: c\n    role: critic\n    overrides:\n"
                 "      lr: 2e-5\n      clip_grad: 2\n")


def test_user_config_dir_role_option_is_named_as_the_users_file(user_conf, capsys, monkeypatch):
    monkeypatch.chdir(user_conf.parent)
    assert cli_main(["explain", "--config-dir", "myconf", "critic.optim.lr", "role/critic=high_lr"]) == 0
    assert capsys.readouterr().out.splitlines() == [
        "critic.optim.lr = 3.0e-05",
        "  1. optim/fsdp.yaml (at critic.optim): 1.0e-06",
        "  2. critic/stock.yaml (at critic): 1.0e-05",
        "  3. myconf: role/critic/high_lr.yaml (role option role/critic=high_lr, at critic): 3.0e-05",
    ]


def test_role_resource_key_dropped_by_the_pipeline(user_conf):
    with pytest.warns(verl_roles.ConfigWarning, match="critic.num_nodes=2"):
        explained = explain.explain("critic.num_nodes", ["role/critic=high_lr"], config_dir=str(user_conf))
    assert explained.value is explain.REMOVED
    first, dropped = sources(explained)
    assert first == (f"{user_conf}: role/critic/high_lr.yaml (role option role/critic=high_lr, at critic)", 2)
    assert dropped[0].startswith("roles step: dropped critic.num_nodes") and dropped[1] is explain.REMOVED


def test_slime_file_value_is_the_last_step(slime_file):
    overrides = [MEGATRON, f"megatron_config_path={slime_file}"]
    explained = explain.explain("critic.optim.lr", overrides)
    assert explained.value == 2e-5
    assert sources(explained)[-1] == (f"{slime_file}: megatron[0] (role critic) overrides.lr", 2e-5)
    # A per-role command-line key has the last word: the file's value is not applied, so not shown.
    with pytest.warns(verl_roles.ConfigWarning, match="the command line .* wins over"):
        explained = explain.explain("critic.optim.lr", [*overrides, "critic.optim.lr=4e-5"])
    assert explained.value == 4e-5
    assert sources(explained)[-1] == ("command line `critic.optim.lr=4e-5`", 4e-5)


def test_critic_following_the_actor_layout_is_a_roles_step():
    overrides = [MEGATRON, "actor_rollout_ref.actor.megatron.tensor_model_parallel_size=2"]
    with pytest.warns(verl_roles.ConfigWarning, match="follows the actor's parallel layout"):
        explained = explain.explain("critic.megatron.tensor_model_parallel_size", overrides)
    assert explained.value == 2
    step, raw = sources(explained)[-1]
    assert step.startswith("roles step: follows actor_rollout_ref.actor.megatron.tensor_model_parallel_size")
    assert raw == "${actor_rollout_ref.actor.megatron.tensor_model_parallel_size}"


def test_legacy_key_in_a_user_file_is_moved_to_its_current_key(user_conf):
    flat_key = "lora_rank in a config file is verl's flat LoRA key"
    with pytest.warns(verl_roles.ConfigTranslationWarning, match=flat_key):
        new, old = explain.explain_many(
            ["actor_rollout_ref.model.lora.rank", "actor_rollout_ref.model.lora_rank"],
            config_name="legacy_run",
            config_dir=str(user_conf),
        )
    move = (
        "verl's flat LoRA key actor_rollout_ref.model.lora_rank -> actor_rollout_ref.model.lora.rank "
        f"(from {user_conf}: legacy_run.yaml)"
    )
    assert new.value == 8
    assert sources(new) == [("lora/lora.yaml (at actor_rollout_ref.model.lora)", 0), (move, 8)]
    # The legacy key is moved to the block; the result's flat key is derived from the block again.
    assert old.value == 8
    assert sources(old) == [
        (f"{user_conf}: legacy_run.yaml (at the top level)", 8),
        (move, explain.REMOVED),
        ("verl's flat LoRA key, derived from actor_rollout_ref.model.lora.rank (verl reads both)", 8),
    ]


def test_shown_value_is_the_value_compose_returns(slime_file):
    """The value explain shows is the one the main job writes, for a sample of keys of every kind."""
    overrides = [MEGATRON, f"megatron_config_path={slime_file}", "megatron.tensor_model_parallel_size=2",
                 "trainer.n_gpus_per_node=2", "actor_rollout_ref.model.lora_rank=4"]
    with pytest.warns(verl_roles.ConfigTranslationWarning, match="lora_rank"):
        resolved = verl_roles.compose(overrides)
    keys = sorted(flat(resolved))[::29] + [
        "critic.optim.lr",  # slime file
        "critic.optim.clip_grad",  # slime file
        "critic.megatron.tensor_model_parallel_size",  # interpolation of a command-line value
        "actor_rollout_ref.model.lora.rank",  # legacy command-line key
        "critic.megatron",  # a whole section
    ]
    with pytest.warns(verl_roles.ConfigTranslationWarning, match="lora_rank"):
        explanations = explain.explain_many(keys, overrides)
    for key, explained in zip(keys, explanations, strict=True):
        assert explained.invalid is None
        assert explained.value == OmegaConf.select(resolved, key), key
    assert OmegaConf.select(resolved, "critic.optim.lr") == 2e-5


def test_invalid_config_is_still_explained_and_exits_2(capsys):
    code = cli_main(["explain", "trainer.nnodes", "trainer.nnodes=0"])
    captured = capsys.readouterr()
    assert code == 2 and "Traceback" not in captured.err
    assert captured.out.splitlines() == [
        "trainer.nnodes = 0",
        "  1. trainer/trainer.yaml (at trainer): 1",
        "  2. command line `trainer.nnodes=0`: 0",
    ]
    (line,) = captured.err.splitlines()
    assert "this config is invalid, the main job would stop on it: trainer.nnodes:" in line


def test_explanation_carries_the_error_of_an_invalid_config(slime_file):
    explained = explain.explain("critic.optim.lr", [f"megatron_config_path={slime_file}"])
    assert explained.value == 1e-5  # composed; the slime file needs model_engine=megatron
    assert explained.invalid is not None and explained.invalid.problems[0].key == "megatron_config_path"


@pytest.mark.parametrize(
    "args",
    [
        ["--config-dir", "d", "--config-name", "n", "k", "a=1"],
        ["k", "--config-name=n", "a=1", "-cd", "d"],
        ["a=1", "-cn", "n", "--config-dir=d", "k"],
    ],
)
def test_flags_and_key_in_any_order(args):
    assert explain.parse_args(args) == ("k", ["a=1"], {"config_name": "n", "config_dir": "d"})


def test_missing_config_dir_is_a_user_error(tmp_path, capsys):
    assert cli_main(["explain", "--config-dir", str(tmp_path / "nope"), "trainer.nnodes"]) == 2
    err = capsys.readouterr().err
    assert "--config-dir" in err and "is not a directory" in err and "Traceback" not in err


def test_explain_shows_the_ulysses_follow_chain_from_the_engines_key_to_the_one_set():
    ref, actor = "actor_rollout_ref.ref", "actor_rollout_ref.actor"
    out = explain.explain(f"{ref}.fsdp_config.ulysses_sequence_parallel_size",
                          [f"{actor}.ulysses_sequence_parallel_size=2"]).render()
    assert out.startswith(f"{ref}.fsdp_config.ulysses_sequence_parallel_size = 2")
    for reference in (f"{ref}.ulysses_sequence_parallel_size", f"{actor}.ulysses_sequence_parallel_size"):
        assert f"which follows ${{{reference}}}" in out
    assert f"command line `{actor}.ulysses_sequence_parallel_size=2`: 2" in out


@pytest.mark.slow
def test_a_chain_of_a_thousand_references_gets_one_verdict_from_every_command(tmp_path):
    """Recursion limits are the same for every command: a chain the main job, show and the API accept,
    explain explains (it walked the chain with Python's recursion: an internal error, exit 70)."""
    links = "".join(f"  link{i}: ${{trainer.link{i - 1}}}\n" for i in range(1, 1001))
    head = "defaults:\n  - ppo_trainer\n  - _self_\ntrainer:\n  link0: 7\n"
    write(tmp_path / "conf" / "chain.yaml", head + links)
    chosen = ["--config-dir", str(tmp_path / "conf"), "--config-name", "chain"]
    assert verl_roles.compose(config_name="chain", config_dir=str(tmp_path / "conf")).trainer.link1000 == 7
    main = run_in_process([*chosen, f"hydra.run.dir={tmp_path / 'run'}"], tmp_path)
    assert main.returncode == 0, main.stderr
    show = run_in_process(["show", *chosen], tmp_path, module="verl_roles.cli")
    assert show.returncode == 0 and "link1000: 7" in show.stdout, show.stderr
    explained = run_in_process(["explain", *chosen, "trainer.link1000"], tmp_path, module="verl_roles.cli")
    assert explained.returncode == 0, explained.stderr
    lines = explained.stdout.splitlines()
    assert lines[0] == "trainer.link1000 = 7"
    # Deep levels keep the last indent and say their level.
    assert lines[-3].strip() == "which follows ${trainer.link0} (level 1000):"
    assert lines[-2].strip() == "trainer.link0 = 7"
    assert lines[-1].strip().startswith("1. ") and "chain.yaml" in lines[-1] and lines[-1].endswith(": 7")

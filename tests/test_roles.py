"""Per-role settings: the engine baseline, the role groups, resources, topology and critic-less algorithms."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import main_in_process, run_in_process, write
from omegaconf import OmegaConf

import verl_roles
from verl_roles.base import layout
from verl_roles.base.releases import engine_choice

# What Hydra/OmegaConf do decides these tests' outcome: CI runs them on both stacks.
pytestmark = pytest.mark.stack

MEGATRON = "model_engine=megatron"
# Engine -> the engine blocks of actor, ref and critic (from the layout table).
ROLE_BLOCKS = {
    row.name: tuple(f"{layout.ROLE_SECTIONS[role]}.{row.block(role)}" for role in ("actor", "ref", "critic"))
    for row in layout.ENGINE_TABLE
}


def plain(cfg, key):
    return OmegaConf.to_container(OmegaConf.select(cfg, key), resolve=True)


def settings(cfg, key):
    """A block's values without verl's `_target_` class names (role blocks carry them, the baseline not)."""
    return without_targets(plain(cfg, key))


def without_targets(node):
    if isinstance(node, dict):
        return {k: without_targets(v) for k, v in node.items() if k != "_target_"}
    return node


def write_option(config_dir: Path, role: str, name: str, text: str) -> None:
    write(config_dir / "role" / role / f"{name}.yaml", text)


# ---------------------------------------------------------------------------------------------------
# The common baseline.


# Engine -> (baseline keys set once for every role, keys set for the critic only).
BASELINE_CASES = {
    "megatron": (
        {"tensor_model_parallel_size": 2, "override_transformer_config.recompute_granularity": "full"},
        {"param_offload": True},
    ),
    "dp": ({"ulysses_sequence_parallel_size": 2, "seed": 7}, {"param_offload": True}),
    "torchtitan": ({"tensor_parallel_size": 2, "wrap_policy.min_num_params": 10}, {"param_offload": True}),
    "veomni": ({"ulysses_parallel_size": 2, "moe_implementation": "eager"}, {"optimizer_offload": True}),
}


def test_every_engine_has_a_baseline_case():
    assert set(BASELINE_CASES) == set(layout.ENGINES)


@pytest.mark.parametrize("engine", layout.ENGINES)
def test_baseline_reaches_every_role_and_role_overrides_change_one(engine):
    shared, only_critic = BASELINE_CASES[engine]
    baseline = layout.engine(engine).baseline
    actor_block, ref_block, critic_block = ROLE_BLOCKS[engine]
    overrides = [*engine_choice(engine)]
    overrides += [f"{baseline}.{key}={value}" for key, value in shared.items()]
    overrides += [f"{critic_block}.{key}={value}" for key, value in only_critic.items()]
    cfg = verl_roles.compose(overrides)
    for key, value in shared.items():
        for block in (baseline, actor_block, ref_block, critic_block):
            assert OmegaConf.select(cfg, f"{block}.{key}") == value, (block, key)
    for key, value in only_critic.items():
        assert OmegaConf.select(cfg, f"{critic_block}.{key}") == value
        for block in (baseline, actor_block, ref_block):
            assert OmegaConf.select(cfg, f"{block}.{key}") != value, (block, key)
    # A role with no overrides inherits the baseline unchanged, leaf for leaf.
    assert settings(cfg, actor_block) == settings(cfg, baseline)


# Engine -> a parallel-layout key of the engine block that the reference takes from the actor.
REF_FOLLOWS = {
    "megatron": "tensor_model_parallel_size",
    "dp": "fsdp_size",
    "torchtitan": "tensor_parallel_size",
    "veomni": "ulysses_parallel_size",
}


@pytest.mark.parametrize("engine", layout.ENGINES)
def test_ref_follows_actor_parallel_layout(engine):
    key = REF_FOLLOWS[engine]
    actor_block, ref_block, critic_block = ROLE_BLOCKS[engine]
    overrides = [*engine_choice(engine), f"{actor_block}.{key}=4", "actor_critic_same_topology=false"]
    if key in layout.engine(engine).process_state:
        # Megatron: the critic shares the actor's process, so it cannot keep another layout (issue 27).
        with pytest.raises(verl_roles.ConfigError, match="parallel state is set once"):
            verl_roles.compose(overrides)
        overrides.append("algorithm.adv_estimator=grpo")
    cfg = verl_roles.compose(overrides)
    assert OmegaConf.select(cfg, f"{ref_block}.{key}") == 4
    baseline = layout.engine(engine).baseline
    assert OmegaConf.select(cfg, f"{critic_block}.{key}") == OmegaConf.select(cfg, f"{baseline}.{key}")


# ---------------------------------------------------------------------------------------------------
# Role groups, including a user's own options from --config-dir.


def test_user_role_option_from_config_dir(tmp_path: Path):
    confdir = tmp_path / "myconf"
    write_option(
        confdir,
        "critic",
        "high_lr",
        "# @package critic\noptim:\n  lr: 3.0e-05\nmegatron:\n  param_offload: true\n"
        "num_nodes: 2\nnum_gpus_per_node: 4\n",
    )
    write_option(
        confdir, "actor", "offload",
        "# @package actor_rollout_ref.actor\nmegatron:\n  optimizer_offload: true\n",
    )
    result = run_in_process(
        [
            "--config-dir",
            str(confdir),
            MEGATRON,
            "role/critic=high_lr",
            "role/actor=offload",
            "hydra.run.dir=out",
        ],
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stderr
    # Resources in a role are ignored with a warning naming them, and removed from what is written.
    assert "verl_roles warning" in result.stderr and "trainer.nnodes" in result.stderr
    assert "critic.num_nodes=2" in result.stderr and "critic.num_gpus_per_node=4" in result.stderr
    assert "num_nodes" not in OmegaConf.load(tmp_path / "out/resolved.yaml").critic
    critic = OmegaConf.load(tmp_path / "out/roles/critic.yaml")
    actor = OmegaConf.load(tmp_path / "out/roles/actor.yaml")
    assert critic.optim.lr == 3e-05 and critic.megatron.param_offload is True
    assert actor.optim.lr == 1e-06 and actor.megatron.param_offload is False
    assert actor.megatron.optimizer_offload is True and critic.megatron.optimizer_offload is False
    assert "num_gpus_per_node" not in critic


@pytest.mark.parametrize("engine", layout.ENGINES)
def test_user_option_changes_only_the_keys_it_sets(engine: str, tmp_path: Path, capsys):
    """A user's role/critic option replaces the stock `default` option, never the stock critic values."""
    block = layout.engine(engine).block("critic")
    confdir = tmp_path / "myconf"
    write_option(confdir, "critic", "offload", f"# @package critic\n{block}:\n  param_offload: true\n")
    args = ["--config-dir", str(confdir), *engine_choice(engine), "role/critic=offload"]
    code, _, err = main_in_process(args, tmp_path, capsys)
    assert code == 0, err
    critic = OmegaConf.load(tmp_path / "out/roles/critic.yaml")
    assert critic[block].param_offload is True
    # The stock critic learning rate stays: the option did not set it.
    assert critic.optim.lr == 1e-05
    expected = verl_roles.compose([*engine_choice(engine), f"critic.{block}.param_offload=true"])
    assert OmegaConf.load(tmp_path / "out/resolved.yaml") == expected


def test_role_options_stack_in_the_order_listed(tmp_path: Path, capsys):
    confdir = tmp_path / "myconf"
    write_option(confdir, "critic", "offload", "# @package critic\nmegatron:\n  param_offload: true\n")
    write_option(confdir, "critic", "fast", "# @package critic\noptim:\n  lr: 3.0e-05\n")
    write_option(confdir, "critic", "slow", "# @package critic\noptim:\n  lr: 2.0e-06\n")
    args = ["--config-dir", str(confdir), MEGATRON, "role/critic=[offload,fast,slow]"]
    code, _, err = main_in_process(args, tmp_path, capsys)
    assert code == 0, err
    critic = OmegaConf.load(tmp_path / "out/roles/critic.yaml")
    assert critic.megatron.param_offload is True and critic.optim.lr == 2e-06  # the last one listed wins
    # Stacked options are critic overrides too: named in the warning when no critic is trained.
    code, out, err = main_in_process([*args, "algorithm.adv_estimator=grpo"], tmp_path / "grpo", capsys)
    assert code == 0, err
    # Each value named at the last file that sets it (fast's lr is replaced by slow's).
    for option in ("offload", "slow"):
        assert f"role/critic/{option}.yaml)" in err
    assert "would do nothing: here algorithm.adv_estimator=grpo trains no critic" in err


def test_option_file_without_package_header_is_an_error(tmp_path: Path, capsys):
    confdir = tmp_path / "myconf"
    write_option(confdir, "critic", "nohdr", "optim:\n  lr: 3.0e-05\n")
    code, out, err = main_in_process(["--config-dir", str(confdir), "role/critic=nohdr"], tmp_path, capsys)
    output = out + err
    assert code == 2
    for phrase in ("role/critic=nohdr", "`role.critic`", "# @package critic", "role/critic/nohdr.yaml"):
        assert phrase in output, output
    assert not (tmp_path / "out/resolved.yaml").exists()


# ---------------------------------------------------------------------------------------------------
# Resources never come from a role.


def test_resources_on_command_line_are_ignored_with_warning():
    with pytest.warns(
        verl_roles.ConfigWarning, match=r"actor_rollout_ref\.actor\.num_gpus_per_node=4.*command line"
    ):
        cfg = verl_roles.compose(["+actor_rollout_ref.actor.num_gpus_per_node=4"])
    assert "num_gpus_per_node" not in cfg.actor_rollout_ref.actor
    assert cfg.trainer.n_gpus_per_node == 8


# ---------------------------------------------------------------------------------------------------
# Topology: actor and critic share one parallel layout under Megatron.

ACTOR_TP2 = "actor_rollout_ref.actor.megatron.tensor_model_parallel_size=2"
FOLLOWS = "critic.megatron follows the actor's parallel layout"


# The critic differs in every topology key; the stock actor has sizes 1 (expert tensor parallel unset,
# i.e. the tensor parallel size) and sequence_parallel on.
TOPOLOGY_CASES = {
    "tensor_model_parallel_size": (1, 2),
    "pipeline_model_parallel_size": (1, 2),
    "context_parallel_size": (1, 2),
    "expert_model_parallel_size": (1, 4),
    "expert_tensor_parallel_size": (1, 8),
    "sequence_parallel": (True, False),
}


def test_topology_mismatch_names_every_differing_key_with_both_values():
    overrides = [f"critic.megatron.{key}={critic}" for key, (_, critic) in TOPOLOGY_CASES.items()]
    with pytest.raises(verl_roles.ConfigError) as info:
        verl_roles.compose([MEGATRON, *overrides])
    problems = {problem.key: problem.render() for problem in info.value.problems}
    assert list(problems) == [f"critic.megatron.{key}" for key in TOPOLOGY_CASES]
    for key, (actor, critic) in TOPOLOGY_CASES.items():
        text = problems[f"critic.megatron.{key}"]
        assert f"actor_rollout_ref.actor.megatron.{key}={actor}" in text
        assert f"critic.megatron.{key}={critic}" in text
        assert f"megatron.{key}=" in text
        # Parallel sizes set the worker process's state: no setting lets actor and critic differ there.
        if key in layout.engine("megatron").process_state:
            assert "no setting lets them differ" in text
        else:
            assert "actor_critic_same_topology=false" in text


@pytest.mark.parametrize(
    ("overrides", "actor", "critic"),
    [
        # Same per-role value on both sides; the actor's unset expert tensor size means its TP (2).
        (
            [
                "critic.megatron.tensor_model_parallel_size=2",
                "actor_rollout_ref.actor.megatron.tensor_model_parallel_size=2",
                "critic.megatron.expert_tensor_parallel_size=2",
            ],
            {"tensor_model_parallel_size": 2, "expert_tensor_parallel_size": None},
            {"tensor_model_parallel_size": 2, "expert_tensor_parallel_size": 2},
        ),
    ],
    ids=["same-per-role-and-unset-etp-equals-tp"],
)
def test_topology_rule_passes(overrides, actor, critic):
    cfg = verl_roles.compose([MEGATRON, *overrides])
    # Each role keeps its own value: the rule accepted them, it did not overwrite them.
    assert {key: cfg.actor_rollout_ref.actor.megatron[key] for key in actor} == actor
    assert {key: cfg.critic.megatron[key] for key in critic} == critic
    # The reference follows the actor's layout.
    assert {key: cfg.actor_rollout_ref.ref.megatron[key] for key in actor} == actor


@pytest.mark.parametrize(
    ("engine", "key"),
    [("dp", "ulysses_sequence_parallel_size"), ("torchtitan", "tensor_parallel_size")],
)
def test_topology_setting_has_no_effect_where_each_role_builds_its_own_mesh(engine, key):
    assert not layout.engine(engine).topology
    cfg = verl_roles.compose([*engine_choice(engine), f"{ROLE_BLOCKS[engine][2]}.{key}=2"])
    assert cfg.actor_critic_same_topology is True
    assert OmegaConf.select(cfg, f"{ROLE_BLOCKS[engine][2]}.{key}") == 2


@pytest.mark.parametrize("key", layout.engine("veomni").topology)
def test_veomni_critic_shares_the_actors_parallel_state(key):
    """VeOmni keeps one parallel state per process, and verl runs actor and critic in the same ones."""
    with pytest.raises(verl_roles.ConfigError) as info:
        verl_roles.compose(["model_engine=veomni", f"critic.veomni.{key}=2"])
    (problem,) = info.value.problems
    assert problem.key == f"critic.veomni.{key}"
    text = problem.render()
    assert f"critic.veomni.{key}=2" in text and "actor_critic_same_topology=false" in text
    switched_off = ["model_engine=veomni", f"critic.veomni.{key}=2", "actor_critic_same_topology=false"]
    cfg = verl_roles.compose(switched_off)
    assert cfg.critic.veomni[key] == 2


@pytest.mark.parametrize(
    ("actor_sets", "followed"),
    [
        ([ACTOR_TP2], {"tensor_model_parallel_size": 2}),
        (
            [ACTOR_TP2, "actor_rollout_ref.actor.megatron.pipeline_model_parallel_size=2"],
            {"tensor_model_parallel_size": 2, "pipeline_model_parallel_size": 2},
        ),
        (
            ["actor_rollout_ref.actor.megatron.sequence_parallel=false",
             "actor_rollout_ref.actor.megatron.expert_model_parallel_size=4"],
            {"sequence_parallel": False, "expert_model_parallel_size": 4},
        ),
    ],
    ids=["tp", "tp-pp", "sp-ep"],
)
def test_critic_follows_the_actor_layout_it_does_not_set(actor_sets, followed):
    with pytest.warns(verl_roles.ConfigWarning, match=FOLLOWS) as w:
        cfg = verl_roles.compose([MEGATRON, *actor_sets])
    message = str(w[0].message)
    for key, value in followed.items():
        assert cfg.critic.megatron[key] == value == cfg.actor_rollout_ref.actor.megatron[key]
        assert f"{key}={value}" in message
    # What the actor does not set follows the common baseline on both sides.
    assert cfg.critic.megatron.context_parallel_size == cfg.megatron.context_parallel_size == 1


def test_critic_follows_the_actor_layout_from_an_actor_option(tmp_path: Path):
    confdir = tmp_path / "myconf"
    text = "# @package actor_rollout_ref.actor\nmegatron:\n  tensor_model_parallel_size: 4\n"
    write_option(confdir, "actor", "tp4", text)
    with pytest.warns(verl_roles.ConfigWarning, match="tensor_model_parallel_size=4"):
        cfg = verl_roles.compose([MEGATRON, "role/actor=tp4"], config_dir=str(confdir))
    assert cfg.critic.megatron.tensor_model_parallel_size == 4


@pytest.mark.parametrize(
    "critic_sets",
    [
        ["critic.megatron.tensor_model_parallel_size=1"],
        ["role/critic=tp1"],
    ],
    ids=["command-line", "role-option"],
)
def test_an_explicit_critic_layout_that_differs_stays_an_error(critic_sets, tmp_path: Path):
    confdir = tmp_path / "myconf"
    write_option(confdir, "critic", "tp1", "# @package critic\nmegatron:\n  tensor_model_parallel_size: 1\n")
    with pytest.raises(verl_roles.ConfigError, match="actor and critic differ"):
        verl_roles.compose([MEGATRON, ACTOR_TP2, *critic_sets], config_dir=str(confdir))


def test_without_a_shared_placement_the_critic_still_shares_the_actors_process():
    # verl builds the critic in the actor's worker process (the global resource pool), where
    # Megatron-Core's parallel state is set once: switching the shared placement off cannot give the
    # critic another layout, so a critic left at the baseline is refused instead of silently written.
    with pytest.raises(verl_roles.ConfigError, match="does not give the critic processes of its own") as info:
        verl_roles.compose([MEGATRON, ACTOR_TP2, "actor_critic_same_topology=false"])
    assert "critic.megatron.tensor_model_parallel_size" in str(info.value)
    cfg = verl_roles.compose([MEGATRON, ACTOR_TP2, "actor_critic_same_topology=false",
                              "critic.megatron.tensor_model_parallel_size=2"])
    assert cfg.critic.megatron.tensor_model_parallel_size == 2


# ---------------------------------------------------------------------------------------------------
# Critic overrides without a critic: verl ignores them, so they are a warning naming them.


@pytest.mark.parametrize("estimator", ["grpo", "rloo", "my_registered_estimator"])
def test_critic_override_without_critic_is_a_warning(estimator):
    with pytest.warns(verl_roles.InertValueWarning, match="trains no critic") as w:
        cfg = verl_roles.compose(
            [f"algorithm.adv_estimator={estimator}", "critic.optim.lr=1e-4", "critic.model.path=/m"]
        )
    (message,) = [str(x.message) for x in w if "trains no critic" in str(x.message)]
    assert "critic.optim.lr (command line), critic.model.path (command line) would do nothing" in message
    assert f"algorithm.adv_estimator={estimator}" in message and "critic.enable=true" in message
    assert cfg.critic.optim.lr == 1e-4


def test_critic_disabled_by_switch_warns_about_overrides():
    ignored = r"critic\.megatron\.param_offload.*critic\.enable=False"
    with pytest.warns(verl_roles.ConfigWarning, match=ignored):
        verl_roles.compose(["critic.enable=false", "critic.megatron.param_offload=true", MEGATRON])


@pytest.mark.parametrize(
    ("overrides", "expected"),
    [
        (
            ["algorithm.adv_estimator=grpo", "critic.enable=true", "critic.optim.lr=1e-4"],
            {"algorithm.adv_estimator": "grpo", "critic.enable": True, "critic.optim.lr": 1e-4},
        ),
        (
            [
                "algorithm.adv_estimator=grpo",
                "critic.enable=false",
                "role/critic=default",
                "role/actor=default",
                "actor_rollout_ref.actor.optim.lr=2e-6",
                MEGATRON,
                "actor_rollout_ref.actor.megatron.tensor_model_parallel_size=2",
            ],
            {
                "critic.enable": False,
                "model_engine": "megatron",
                "actor_rollout_ref.actor.optim.lr": 2e-6,
                "actor_rollout_ref.actor.megatron.tensor_model_parallel_size": 2,
                "actor_rollout_ref.ref.megatron.tensor_model_parallel_size": 2,
                # No critic is trained: its stock values stay, nothing the command line typed reached it.
                "critic.optim.lr": 1e-5,
                "critic.megatron.tensor_model_parallel_size": 1,
            },
        ),
    ],
    ids=["critic-forced-on", "actor-overrides-switch-and-default-options"],
)
def test_critic_less_algorithm_accepts(overrides, expected):
    cfg = verl_roles.compose(overrides)
    assert {key: OmegaConf.select(cfg, key) for key in expected} == expected


def test_user_critic_option_without_critic_is_a_warning(tmp_path: Path, capsys):
    confdir = tmp_path / "myconf"
    write_option(confdir, "critic", "high_lr", "# @package critic\noptim:\n  lr: 3.0e-05\n")
    code, out, err = main_in_process(
        ["--config-dir", str(confdir), "role/critic=high_lr", "algorithm.adv_estimator=grpo"],
        tmp_path,
        capsys,
    )
    assert code == 0, out + err
    assert "critic.optim.lr (the file" in err and "role/critic/high_lr.yaml) would do nothing" in err
    assert "algorithm.adv_estimator=grpo" in err
    assert (tmp_path / "out/resolved.yaml").exists()


def test_the_critic_following_the_actors_layout_offers_only_fixes_the_rules_allow(tmp_path: Path, capsys):
    """The notice of the critic following the actor's layout offers choices the rules take, and each, when
    applied, composes (verl builds the critic in the actor's processes: a size of the parallel state cannot
    differ, whatever `actor_critic_same_topology` says)."""
    import warnings

    line = ["model_engine=megatron", "actor_rollout_ref.actor.megatron.tensor_model_parallel_size=2"]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        verl_roles.compose(line)
    [notice] = [str(w.message) for w in caught if FOLLOWS in str(w.message)]
    assert "actor_critic_same_topology=false" not in notice and "Set critic.megatron.<key>" not in notice
    assert "set megatron.<key> once for every role" in notice
    # The fix offered, applied: one value for every role composes, and no notice is left.
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        cfg = verl_roles.compose(["model_engine=megatron", "megatron.tensor_model_parallel_size=2"])
    assert cfg.critic.megatron.tensor_model_parallel_size == 2
    assert not [w for w in caught if FOLLOWS in str(w.message)]

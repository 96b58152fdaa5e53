"""slime's per-role Megatron YAML: import with `megatron_config_path=FILE`, export with
`verl-roles export-slime`."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest
import yaml
from conftest import REPO, assert_user_error, flat, run_in_process
from omegaconf import OmegaConf

import verl_roles
from verl_roles.cli import main as cli_main
from verl_roles.slime import doc as slime_doc
from verl_roles.slime import export as slime_export
from verl_roles.slime import names
from verl_roles.upstream import passed_on

MEGATRON = "model_engine=megatron"


def write(tmp_path: Path, text: str, name: str = "roles.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def compose_with(path: Path, *overrides: str):
    return verl_roles.compose([MEGATRON, f"megatron_config_path={path}", *overrides])


def problems_of(path: Path, *overrides: str) -> list[str]:
    with pytest.raises(verl_roles.ConfigError) as info:
        compose_with(path, *overrides)
    return [problem.render() for problem in info.value.problems]


# ---------------------------------------------------------------------------------------------------
# Import: values, types, precedence.


def test_values_are_coerced_to_the_target_type(tmp_path: Path):
    path = write(
        tmp_path,
        """
megatron:
  - name: default
    role: actor
    overrides:
      lr: 1e-6
      adam_beta2: "0.95"
      lr_warmup_iters: 8.0
      use_distributed_optimizer: "False"
      recompute_modules: core_attn mlp
      load: /ckpt/actor/iter_0000010
  - role: critic
    args:
      lr: 1e-5
      min_lr: 0
      clip_grad: "2"
      use_checkpoint_opt_param_scheduler: "true"
      recompute_granularity: full
      recompute_num_layers: "4"
      expert_tensor_parallel_size: null
""",
    )
    cfg = compose_with(path)
    actor, critic = cfg.actor_rollout_ref.actor, cfg.critic
    # (section, key) -> value as pairs: a config section is not hashable (OmegaConf 2.4).
    expected = [
        ((actor.optim, "lr"), 1e-6),
        ((actor.optim, "lr_warmup_steps"), 2),
        ((actor.megatron, "use_distributed_optimizer"), False),
        ((actor.megatron, "dist_checkpointing_path"), "/ckpt/actor/iter_0000010"),
        ((critic.optim, "lr"), 1e-5),
        ((critic.optim, "min_lr"), 0.0),
        ((critic.optim, "clip_grad"), 2.0),
        ((critic.optim, "use_checkpoint_opt_param_scheduler"), True),
        ((critic.megatron.override_transformer_config, "recompute_granularity"), "full"),
        ((critic.megatron.override_transformer_config, "recompute_num_layers"), 4),
        ((critic.megatron, "expert_tensor_parallel_size"), None),
        ((critic.megatron, "use_distributed_optimizer"), True),
    ]
    for (node, key), value in expected:
        assert node[key] == value and type(node[key]) is type(value), (key, node[key])
    assert actor.optim.override_optimizer_config == {"adam_beta2": 0.95}
    assert critic.optim.override_optimizer_config == {}
    assert list(actor.megatron.override_transformer_config.recompute_modules) == ["core_attn", "mlp"]
    # The reference follows the actor's recompute settings; the baseline is untouched.
    assert list(cfg.actor_rollout_ref.ref.megatron.override_transformer_config.recompute_modules) == [
        "core_attn",
        "mlp",
    ]
    assert cfg.megatron.use_distributed_optimizer is True


def test_absent_role_inherits_and_precedence(tmp_path: Path):
    """baseline < role group option < slime file < per-role command line."""
    path = write(tmp_path, "megatron:\n  - role: critic\n    overrides:\n      lr: 4e-5\n      seed: 9\n")
    with pytest.warns(verl_roles.ConfigWarning, match=r"critic\.megatron\.seed: the command line"):
        cfg = compose_with(path, "megatron.seed=5", "critic.megatron.seed=11", "megatron.param_offload=true")
    # The file beats the critic's default role option (lr 1e-5); the command line beats the file.
    assert cfg.critic.optim.lr == 4e-5
    assert cfg.critic.megatron.seed == 11
    # The actor is absent from the file: it inherits the baseline, including the command-line baseline.
    actor_block = OmegaConf.to_container(cfg.actor_rollout_ref.actor.megatron)
    assert without_targets(actor_block) == OmegaConf.to_container(cfg.megatron)
    assert cfg.actor_rollout_ref.actor.megatron.seed == 5
    # The file beats a baseline set on the command line.
    assert cfg.critic.megatron.param_offload is True


def test_resource_keys_in_file_are_ignored_with_warning(tmp_path: Path):
    path = write(
        tmp_path,
        "megatron:\n  - role: actor\n    overrides:\n      num_nodes: 2\n      num_gpus_per_node: 4\n",
    )
    with pytest.warns(
        verl_roles.ConfigWarning, match=r"megatron\[0\] \(role actor\) sets num_nodes, num_gpus_per_node"
    ):
        cfg = compose_with(path)
    assert "num_nodes" not in cfg.actor_rollout_ref.actor
    assert cfg.trainer.nnodes == 1


def test_critic_entry_without_critic_is_a_warning(tmp_path: Path):
    path = write(tmp_path, "megatron:\n  - role: critic\n    overrides: {lr: 1e-5}\n")
    with pytest.warns(verl_roles.InertValueWarning, match="trains no critic") as w:
        compose_with(path, "algorithm.adv_estimator=grpo")
    text = " ".join(str(x.message) for x in w)
    assert "critic.optim.lr (" in text and "megatron[0] (role critic))" in text
    assert "algorithm.adv_estimator=grpo" in text
    assert str(path) in text


def test_topology_from_file_is_checked(tmp_path: Path):
    path = write(
        tmp_path, "megatron:\n  - role: critic\n    overrides:\n      tensor_model_parallel_size: 2\n"
    )
    (text,) = problems_of(path)
    assert "critic.megatron.tensor_model_parallel_size=2" in text
    # Off, the critic still runs in the actor's process (verl's global pool): refused all the same.
    (text,) = problems_of(path, "actor_critic_same_topology=false")
    assert "parallel state is set once" in text


# ---------------------------------------------------------------------------------------------------
# Import: every mistake is an error naming the file and the entry, reported together.


def test_every_entry_mistake_is_reported_together(tmp_path: Path):
    path = write(
        tmp_path,
        """
megatron:
  - role: critic
    overrides:
      tensor-model-parallel-size: 2
      lrr: 1e-5
      save: /ckpt
      clip_grad: abc
      sequence_parallel: maybe
      tensor_model_parallel_size: "two"
      lr: null
      use_distributed_optimizer: 2
  - role: critic
  - role: reward
  - overrides: {}
  - role: actor
    overrides: {lr: 1e-6}
    args: {lr: 1e-6}
    overides: {lr: 1e-6}
  - just a string
""",
    )
    texts = problems_of(path)
    entry0 = f"{path}: megatron[0] (role critic)"
    expected = [
        (entry0, "overrides.tensor-model-parallel-size", "write `tensor_model_parallel_size`"),
        (entry0, "overrides.lrr", "did you mean `lr`"),
        (entry0, "overrides.save", "trainer.default_local_dir"),
        (entry0, "overrides.clip_grad", "'abc'"),
        (entry0, "overrides.sequence_parallel", "'maybe'"),
        (entry0, "overrides.tensor_model_parallel_size", "'two'"),
        (entry0, "overrides.lr", "not null"),
        (entry0, "overrides.use_distributed_optimizer", "true or false"),
        (f"{path}: megatron[1] (role critic)", "duplicate entry for role critic", "megatron[0]"),
        (f"{path}: megatron[2]", "unknown role 'reward'", "actor, critic"),
        (f"{path}: megatron[3]", "has no `role`", "role: <actor|critic>"),
        (f"{path}: megatron[4] overides", "is not a key of a slime role entry", "did you mean `overrides`"),
        (f"{path}: megatron[4] (role actor)", "both `overrides` and its alias `args`", ""),
        (f"{path}: megatron[5]", "must be a mapping", ""),
    ]
    for phrases in expected:
        assert any(all(p in text for p in phrases) for text in texts), (phrases, texts)
    assert len(texts) == len(expected)


@pytest.mark.parametrize(
    ("text", "phrases"),
    [
        (None, ["file not found"]),
        ("megatron:\n  - role: [critic\n", ["not valid YAML at line 3"]),
        ("megatron:\n  - role: actor\n    role: critic\n", ["duplicate key 'role'", "line 3"]),
        ("actor:\n  lr: 1e-6\n", ["no top-level `megatron` list"]),
        ("megatron:\n  role: actor\n", ["must be a list of role entries"]),
    ],
    ids=["not-found", "syntax", "duplicate-key", "no-megatron", "not-a-list"],
)
def test_file_level_mistakes(tmp_path: Path, text, phrases):
    path = tmp_path / "roles.yaml"
    if text is not None:
        path.write_text(text, encoding="utf-8")
    (message,) = problems_of(path)
    assert f"megatron_config_path={path}" in message
    for phrase in phrases:
        assert phrase in message, message


def test_file_needs_the_megatron_engine(tmp_path: Path):
    path = write(tmp_path, "megatron:\n  - role: actor\n    overrides: {lr: 1e-6}\n")
    with pytest.raises(verl_roles.ConfigError, match="model_engine=megatron"):
        verl_roles.compose([f"megatron_config_path={path}"])


def test_bad_file_through_the_cli_writes_nothing(in_tmp: Path):
    write(in_tmp, "megatron:\n  - role: critic\n    overrides:\n      tensor-model-parallel-size: 2\n")
    result = run_in_process([MEGATRON, "megatron_config_path=roles.yaml", "hydra.run.dir=out"], cwd=in_tmp)
    assert_user_error(result, "roles.yaml: megatron[0] (role critic)", "tensor_model_parallel_size")
    assert not (in_tmp / "out" / "resolved.yaml").exists()


# ---------------------------------------------------------------------------------------------------
# Export, and import(export(x)) == x.


def export(args: list[str], capsys) -> tuple[int, str, str]:
    code = cli_main(["export-slime", *args])
    captured = capsys.readouterr()
    assert "Traceback" not in captured.out + captured.err
    return code, captured.out, captured.err


ROUND_TRIPS = {
    "mixed": [
        "actor_rollout_ref.actor.optim.lr=2e-6",
        "actor_rollout_ref.actor.optim.betas=[0.9,0.95]",
        "actor_rollout_ref.actor.megatron.override_transformer_config.recompute_granularity=full",
        "actor_rollout_ref.actor.megatron.override_transformer_config.recompute_modules=[mlp,core_attn]",
        "critic.optim.lr=3e-5",
        "critic.optim.lr_decay_style=cosine",
        "critic.megatron.use_distributed_optimizer=false",
        "critic.megatron.dist_checkpointing_path=/ckpt/critic",
    ],
}


@pytest.mark.parametrize("case", list(ROUND_TRIPS))
def test_import_of_export_gives_the_same_config(tmp_path: Path, capsys, case):
    baseline = [MEGATRON, "megatron.tensor_model_parallel_size=2", "megatron.seed=3"]
    role_overrides = ROUND_TRIPS[case]
    out = tmp_path / "exported.yaml"
    code, _, err = export([*baseline, *role_overrides, "-o", str(out)], capsys)
    assert code == 0, err
    original = verl_roles.compose([*baseline, *role_overrides])
    # The exported file alone, over the baseline-only command line, gives the same config.
    imported = verl_roles.compose([*baseline, f"megatron_config_path={out}"])
    as_dict = OmegaConf.to_container(imported)
    as_dict["megatron_config_path"] = None
    assert as_dict == OmegaConf.to_container(original)
    # Differences only: the baseline keys are not in the file.
    body = exported_body(out)
    assert "tensor_model_parallel_size" not in body and "seed" not in body


def test_export_to_stdout_is_deterministic_and_skips_an_unused_critic(capsys):
    args = [MEGATRON, "algorithm.adv_estimator=grpo", "actor_rollout_ref.actor.optim.lr=2e-6"]
    code, first, _ = export(args, capsys)
    assert code == 0
    _, second, _ = export(args, capsys)
    assert first == second
    assert first.startswith("# ")
    assert "role: actor" in first and "lr: 2.0e-06" in first and "role: critic" not in first


def test_export_needs_megatron(capsys):
    code, _, err = export(["model_engine=dp"], capsys)
    assert code == 2
    assert "model_engine=megatron" in err


# ---------------------------------------------------------------------------------------------------
# The mapping table.


def test_every_mapped_key_lands_in_both_roles_with_a_known_type():
    cfg = verl_roles.compose([MEGATRON])
    for key in names.SLIME_KEYS:
        kind = names.target_type(key)
        assert kind in (bool, int, float, str, list), key
        for section in ("actor_rollout_ref.actor", "critic"):
            for target in key.targets:
                where = f"{section}.{target}"
                if passed_on.inside(where) is not None:
                    # A field of a mapping verl passes on as it is: the mapping is there, the key is added.
                    where = where.rpartition(".")[0]
                assert OmegaConf.select(cfg, where, default=KeyError) is not KeyError, key
        if key.in_block:
            default = names.default_value(key)
            assert (default is None) == (key.kind is not None), f"{key.name}: kind only for null defaults"
        else:
            assert key.kind is not None and key.nullable is not None, f"{key.name}: declare the type"


def test_the_doc_tables_are_rendered_from_the_name_table():
    """docs/slime.md holds the table as generated from the source (scripts/generate_slime_doc.py)."""
    document = (REPO / "docs" / "slime.md").read_text(encoding="utf-8")
    assert slime_doc.render(document) == document, "docs/slime.md is stale: run scripts/generate_slime_doc.py"
    rows = dict(re.findall(r"^\| `([a-z0-9_]+)` \| [A-Za-z-]+ \| ([^|]+) \|", document, flags=re.MULTILINE))
    assert rows == {key.name: " and ".join(f"`{t}`" for t in key.targets) for key in names.SLIME_KEYS}


def without_targets(node):
    """A block's values without verl's `_target_` class names (role blocks carry them, the baseline not)."""
    if isinstance(node, dict):
        return {k: without_targets(v) for k, v in node.items() if k != "_target_"}
    return node


def exported_body(path: Path) -> str:
    """The YAML of an exported file without its header comments."""
    return "".join(line for line in path.read_text().splitlines(keepends=True) if not line.startswith("#"))


def read_back_line(path: Path) -> list[str]:
    """The overrides of the header's read-back line, with FILE replaced by ``path``."""
    line = next(line for line in path.read_text().splitlines() if line.startswith("# Read it back with: "))
    words = shlex.split(line.removeprefix("# Read it back with: "))
    assert words[:3] == ["python", "-m", "verl_roles.main"]
    return [word.replace("=FILE", f"={path}") for word in words[3:]]


def test_keys_outside_the_table_round_trip_as_verl_paths_with_a_warning(tmp_path: Path, capsys):
    overrides = [
        MEGATRON,
        "megatron.tensor_model_parallel_size=2",
        "critic.megatron.param_offload=true",
        "critic.optim.weight_decay=0.1",
        "actor_rollout_ref.actor.megatron.optimizer_offload=true",
        "actor_rollout_ref.ref.megatron.param_offload=true",
        "critic.ppo_epochs=3",
    ]
    out = tmp_path / "roles.yaml"
    code, _, err = export([*overrides, "-o", str(out)], capsys)
    assert code == 0, err
    body = yaml.safe_load(exported_body(out))
    assert body == {"megatron": [
        {"name": "default", "role": "actor", "overrides": {"megatron.optimizer_offload": True}},
        {"name": "default", "role": "critic", "overrides": {
            "lr": 1e-05, "weight_decay": 0.1, "megatron.param_offload": True,
        }},
    ]}
    # Each key slime has no argument for is named, once.
    warning = next(line for line in err.splitlines() if "slime has no argument for" in line)
    assert "actor megatron.optimizer_offload=true" in warning
    assert "critic megatron.param_offload=true" in warning
    assert "cannot carry" not in err
    # Read back as the header says: the per-role keys outside the two blocks stay on the line.
    line = read_back_line(out)
    assert "actor_rollout_ref.ref.megatron.param_offload=true" in line and "critic.ppo_epochs=3" in line
    carried = ("critic.megatron", "critic.optim", "actor_rollout_ref.actor")
    assert not any(word.startswith(carried) for word in line)
    original = flat(verl_roles.compose(overrides))
    read_back = flat(verl_roles.compose(line))
    read_back["megatron_config_path"] = None
    assert read_back == original


def test_strict_refuses_what_slime_cannot_express_and_writes_nothing(tmp_path: Path, capsys):
    out = tmp_path / "roles.yaml"
    args = [MEGATRON, "critic.megatron.param_offload=true", "--strict", "-o", str(out)]
    code, _, err = export(args, capsys)
    assert code == 2
    assert "export-slime: slime has no argument for critic megatron.param_offload=true" in err
    assert "without --strict the file is written anyway" in err
    assert not out.exists()
    code, _, err = export([MEGATRON, "critic.optim.lr=2e-5", "--strict", "-o", str(out)], capsys)
    assert code == 0, err
    assert "export-slime:" not in err


def test_a_role_option_outside_the_blocks_is_named_as_not_carried(tmp_path: Path, capsys):
    option = tmp_path / "myconf" / "role" / "critic" / "long.yaml"
    option.parent.mkdir(parents=True)
    option.write_text("# @package critic\nppo_epochs: 4\noptim:\n  lr: 2.0e-05\n", encoding="utf-8")
    code, out, err = export(["--config-dir", str(tmp_path / "myconf"), MEGATRON, "role/critic=long"], capsys)
    assert code == 0, err
    assert "lr: 2.0e-05" in out
    assert "the file cannot carry critic.ppo_epochs=4" in err


def test_load_turns_the_checkpoint_switch_on(tmp_path: Path):
    folder = "/ckpt/critic/iter_0000010"
    path = write(tmp_path, f"megatron:\n  - role: critic\n    overrides:\n      load: {folder}\n")
    critic = compose_with(path).critic.megatron
    assert critic.dist_checkpointing_path == folder and critic.use_dist_checkpointing is True
    # A per-role command-line value of the switch has the last word, with a warning naming `load`.
    wins = r"use_dist_checkpointing: the command line .* wins over .* load"
    with pytest.warns(verl_roles.ConfigWarning, match=wins):
        critic = compose_with(path, "critic.megatron.use_dist_checkpointing=false").critic.megatron
    assert critic.use_dist_checkpointing is False
    # Export writes `load` alone for a role that loads an iteration folder, and the verl paths for any
    # other folder (slime would read it as a checkpoint root or Hugging Face weights) or the switch off.
    on = [f"critic.megatron.dist_checkpointing_path={folder}", "critic.megatron.use_dist_checkpointing=true"]
    loads = verl_roles.compose([MEGATRON, *on])
    assert slime_export.role_differences(loads)["critic"] == {"lr": 1e-05, "load": folder}
    on = ["critic.megatron.dist_checkpointing_path=/c", "critic.megatron.use_dist_checkpointing=true"]
    other = {"lr": 1e-05, "megatron.use_dist_checkpointing": True, "megatron.dist_checkpointing_path": "/c"}
    assert slime_export.role_differences(verl_roles.compose([MEGATRON, *on]))["critic"] == other
    off = verl_roles.compose([MEGATRON, "critic.megatron.dist_checkpointing_path=/c"])
    expected = {"lr": 1e-05, "megatron.dist_checkpointing_path": "/c"}
    assert slime_export.role_differences(off)["critic"] == expected


@pytest.mark.parametrize(
    ("overrides_yaml", "phrases"),
    [
        ("megatron.param_ofload: true", ["is not a key of a role's Megatron or optimizer block",
                                         "did you mean `megatron.param_offload`"]),
        ("megatron.param_offload: maybe", ["invalid value 'maybe'", "true or false"]),
        ("rollout.n: 4", ["is not a key of a role's Megatron or optimizer block"]),
    ],
    ids=["misspelt", "wrong-type", "outside-the-blocks"],
)
def test_verl_paths_in_a_file_are_checked(tmp_path: Path, overrides_yaml: str, phrases: list[str]):
    path = write(tmp_path, f"megatron:\n  - role: critic\n    overrides:\n      {overrides_yaml}\n")
    rendered = " ".join(problems_of(path))
    for phrase in phrases:
        assert phrase in rendered, rendered

"""``verl-roles diff [A] -- [B]``: a semantic diff of two resolved compositions."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from conftest import cli_env, run_in_process

from verl_roles.cli import main as cli
from verl_roles.commands.diff import Change, compare


def test_compare_reports_added_removed_changed_sorted_by_key():
    a = {"b": {"x": 1, "gone": True, "same": [1, 2]}, "a": {}, "flag": 1, "lst": [1]}
    b = {"b": {"x": 2, "new": None, "same": [1, 2]}, "a": {"k": "v"}, "flag": True, "lst": [1, 2]}
    assert compare(a, b) == [
        Change("a", "removed", old={}),
        Change("a.k", "added", new="v"),
        Change("b.gone", "removed", old=True),
        Change("b.new", "added", new=None),
        Change("b.x", "changed", old=1, new=2),
        Change("flag", "changed", old=1, new=True),
        Change("lst", "changed", old=[1], new=[1, 2]),
    ]
    assert compare(a, a) == []


def test_overrides_show_only_the_changed_keys_with_values(capsys: pytest.CaptureFixture[str]):
    status = cli(["diff", "--", "trainer.total_epochs=3", "actor_rollout_ref.actor.optim.lr=2e-6"])
    assert status == 1
    assert capsys.readouterr().out.splitlines() == [
        "A: (defaults)",
        "B: trainer.total_epochs=3 actor_rollout_ref.actor.optim.lr=2e-6",
        "changed actor_rollout_ref.actor.optim.lr: 1.0e-06 -> 2.0e-06",
        "changed trainer.total_epochs: 30 -> 3",
        "2 keys differ: 0 added, 0 removed, 2 changed",
    ]


def test_same_config_exits_zero(capsys: pytest.CaptureFixture[str]):
    assert cli(["diff", "model_engine=megatron", "--", "--config-name", "ppo_megatron_trainer"]) == 0
    captured = capsys.readouterr()
    assert captured.out.splitlines() == [
        "A: model_engine=megatron",
        "B: --config-name ppo_megatron_trainer",
        "same: every resolved value of A and B is equal",
    ]


def test_dp_versus_megatron(capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert cli(["diff", "--", "model_engine=megatron"]) == 1
    lines = capsys.readouterr().out.splitlines()
    assert lines[:2] == ["A: (defaults)", "B: model_engine=megatron"]
    assert "changed model_engine: dp -> megatron" in lines
    assert "changed actor_rollout_ref.actor.strategy: fsdp -> megatron" in lines
    assert "added   critic.megatron.tensor_model_parallel_size: 1" in lines
    assert "removed actor_rollout_ref.actor.fsdp_config.param_offload: false" in lines
    keys = [line.split(" ", 1)[1].lstrip().split(":", 1)[0] for line in lines[2:-1]]
    assert keys == sorted(keys, key=lambda k: k.split(".")) and len(keys) == len(set(keys))
    assert lines[-1].endswith("changed") and " keys differ: " in lines[-1]
    assert not list(tmp_path.iterdir())


@pytest.mark.parametrize(
    ("args", "phrases"),
    [
        (["model_engine=megatron"], ["separate the overrides of A and B with `--`"]),
        (["--", "model_engine=deepspeed"], ["side B (model_engine=deepspeed)", "megatron"]),
        (["trainer.totl_epochs=3", "--"], ["side A (trainer.totl_epochs=3)", "trainer.totl_epochs"]),
        (["--", "--resolve"], ["--resolve on side B: is not an option of diff"]),
        (["--", "--config-name"], ["--config-name on side B: needs a config name"]),
    ],
    ids=["no-separator", "bad-option-B", "bad-key-A", "unknown-flag", "config-name-without-value"],
)
def test_mistakes_are_one_paragraph_and_exit_2(args, phrases, capsys: pytest.CaptureFixture[str]):
    assert cli(["diff", *args]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.startswith("verl_roles error: ") and captured.err.count("\n") == 1
    for phrase in phrases:
        assert phrase in captured.err


def test_help_lists_the_command_and_its_usage(capsys: pytest.CaptureFixture[str]):
    assert cli(["--help"]) == 0
    assert "diff" in capsys.readouterr().out
    assert cli(["diff", "--help"]) == 0
    out = capsys.readouterr().out
    assert "verl-roles diff -- model_engine=megatron" in out and "Exit code 0" in out


@pytest.mark.slow
def test_console_script_runs_the_command(tmp_path: Path):
    script = Path(sys.executable).with_name("verl-roles")
    result = subprocess.run(
        [str(script), "diff", "--help"], cwd=tmp_path, env=cli_env(), capture_output=True, text=True
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("usage: verl-roles diff")


def test_one_difference_is_worded_in_the_singular(capsys: pytest.CaptureFixture[str]):
    assert cli(["diff", "--", "trainer.total_epochs=3"]) == 1
    assert capsys.readouterr().out.splitlines()[-1] == "1 key differs: 0 added, 0 removed, 1 changed"


# --------------------------------------------------------------------------------------------------
# A verl upgrade.


def test_a_release_side_borrows_the_overrides_and_renamed_keys_are_paired(in_tmp):
    """`diff verl_version=OLD -- verl_version=NEW OVERRIDES` compares one config under two releases: the
    overrides reach both sides, keys the new release spells another way are `renamed`, and the counts
    add up."""
    from verl_roles.base import releases

    old, new = releases.supported()[0], releases.DEFAULT_RELEASE
    result = run_in_process(
        ["diff", releases.choice(old), "--", releases.choice(new), "model_engine=megatron",
         "trainer.total_epochs=3"], in_tmp, module="verl_roles.cli")
    assert result.returncode == 1, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == f"A: model_engine=megatron trainer.total_epochs=3 {releases.choice(old)}  (verl {old})"
    assert lines[1].endswith(f"(verl {new})")
    assert not any("trainer.total_epochs" in line for line in lines[2:])  # the same on both sides
    renamed = [line for line in lines if line.startswith("renamed ")]
    assert "renamed actor_rollout_ref.rollout.skip.enable -> skip.rollout.enable: false" in renamed
    layer = releases.layer(old, "megatron")
    old_value = "true" if layer["set"]["megatron.vanilla_mbridge"] else "false"
    assert f"changed megatron.vanilla_mbridge: {old_value} -> false" in lines
    assert any(line.startswith("removed actor_rollout_ref.actor.megatron.grad_offload:") for line in lines)
    kinds = {kind: sum(line.startswith(kind + " ") for line in lines)
             for kind in ("added", "removed", "renamed", "changed")}
    assert lines[-1].endswith(f"{kinds['added']} added, {kinds['removed']} removed, "
                              f"{kinds['renamed']} renamed, {kinds['changed']} changed")


# --------------------------------------------------------------------------------------------------
# Against stock verl: `diff --stock [overrides]`.


def test_stock_lists_exactly_what_the_launch_changes(capsys: pytest.CaptureFixture[str]):
    args = ["model_engine=megatron", "actor_rollout_ref.actor.optim.lr=3e-6"]
    assert cli(["diff", "--stock", *args]) == 1
    lines = capsys.readouterr().out.splitlines()
    assert lines[:4] == [
        "stock: verl 0.9.1's defaults under model_engine=megatron",
        "launch: model_engine=megatron actor_rollout_ref.actor.optim.lr=3e-6",
        "changed actor_rollout_ref.actor.optim.lr: 1.0e-06 -> 3.0e-06",
        "1 key differs from stock verl 0.9.1: 0 added, 0 removed, 1 changed",
    ]
    # Then the keys verl_roles sets apart from verl on purpose, each with its value here (the rollout
    # backend verl leaves mandatory is one), and a count of our own layer's keys.
    assert lines[4] == ("verl_roles' defaults that differ from stock verl 0.9.1 on purpose (14 keys), each "
                        "with its reason:")
    named = lines.index("  actor_rollout_ref.rollout.name: vllm")
    assert lines[named + 1].startswith("      verl leaves it mandatory (???); we default to vllm")
    assert lines[-1].startswith("not listed: ") and "own layer" in lines[-1]
    assert all(len(line) <= 120 for line in lines)


def test_stock_marks_the_keys_verl_has_not(capsys: pytest.CaptureFixture[str]):
    assert cli(["diff", "--stock", "model_engine=megatron", "megatron.tensor_model_parallel_size=2",
                "+trainer.my_tag=1"]) == 1
    lines = capsys.readouterr().out.splitlines()
    assert "changed megatron.tensor_model_parallel_size: 1 -> 2  (verl 0.9.1 has no such key)" in lines
    assert "changed critic.megatron.tensor_model_parallel_size: 1 -> 2" in lines
    assert "added   trainer.my_tag: 1  (verl 0.9.1 has no such key)" in lines


def test_stock_follows_the_release_and_exits_zero_when_nothing_changes(capsys: pytest.CaptureFixture[str]):
    assert cli(["diff", "--stock"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[:3] == ["stock: verl 0.9.1's defaults under model_engine=dp", "launch: (defaults)",
                         "same: this launch changes no key from stock verl 0.9.1 beyond verl_roles' own "
                         "defaults listed below"]
    assert cli(["diff", "--stock", "verl_version=0.8.0", "trainer.total_epochs=3"]) == 1
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "stock: verl 0.8.0's defaults under model_engine=dp"
    assert lines[2:4] == ["changed trainer.total_epochs: 30 -> 3",
                          "1 key differs from stock verl 0.8.0: 0 added, 0 removed, 1 changed"]


def test_stock_is_verls_own_composed_config(capsys: pytest.CaptureFixture[str]):
    """Every key of verl's frozen composed config (tests/data/verl-<release>/composition) that the launch
    sets to another value is listed, with verl's value as the old one, and nothing else of verl's is:
    the stock side is verl's defaults but for the deliberate differences."""
    import json

    from conftest import DATA
    from omegaconf import OmegaConf

    import verl_roles
    from verl_roles.omegaconf_adapter.yaml_dialect import dump_flow
    from verl_roles.upstream.verl_differences import deliberate

    args = ["model_engine=megatron", "actor_rollout_ref.actor.optim.lr=3e-6", "trainer.total_epochs=3",
            "algorithm.adv_estimator=grpo", "actor_rollout_ref.rollout.n=4"]
    assert cli(["diff", "--stock", *args]) == 1
    listed = {line.split(" ", 1)[1].lstrip().split(":", 1)[0]: line
              for line in capsys.readouterr().out.splitlines() if line.startswith(("changed ", "added "))}
    verl = json.loads((DATA / "verl-0.9.1" / "composition" / "megatron.json").read_text())["leaves"]
    launch = OmegaConf.to_container(verl_roles.compose(args), resolve=True)
    ours = {".".join(map(str, path)): value for path, value in _leaves(launch)}
    differs = {key for key, leaf in verl.items() if key in ours and not deliberate(key, "megatron")
               and ours[key] != leaf["resolved"]}
    assert differs == {key for key in listed if key in verl}
    for key in differs:
        assert listed[key].startswith(f"changed {key}: {dump_flow(verl[key]['resolved'])} -> "), listed[key]


def _leaves(node, prefix=()):
    if isinstance(node, dict) and node:
        for key, child in node.items():
            yield from _leaves(child, (*prefix, key))
    else:
        yield prefix, node


@pytest.mark.parametrize(
    ("args", "phrases"),
    [
        (["--stock", "trainer.nnodes=2", "--", "x"], ["--stock compares one config with stock verl",
                                                     "drop the `--`"]),
        (["--stock", "trainer.nnodez=2"],
         ["side launch (trainer.nnodez=2)", "did you mean `trainer.nnodes`"]),
    ],
    ids=["separator", "bad-key"],
)
def test_stock_mistakes_are_one_paragraph_and_exit_2(args, phrases, tmp_path: Path):
    from conftest import assert_user_error

    result = run_in_process(["diff", *args], cwd=tmp_path, module="verl_roles.cli")
    assert_user_error(result, *phrases)
    assert result.stdout == ""


def test_the_documented_stock_example_is_what_the_command_prints(capsys: pytest.CaptureFixture[str]):
    import shlex

    from conftest import REPO

    text = (REPO / "docs" / "commands.md").read_text(encoding="utf-8")
    block = text.split("$ verl-roles diff --stock ", 1)[1].split("```", 1)[0].splitlines()
    args, expected = shlex.split(block[0]), block[1:]
    assert cli(["diff", "--stock", *args]) == 1
    assert capsys.readouterr().out.splitlines() == expected

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
    from verl_roles import releases

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

"""``verl-roles migrate`` between verl releases and from verl's launch form, as a user types it: renames in
both directions, what the line's release says, ``--config-path``, and a printed line always composing."""

from __future__ import annotations

import shlex
import subprocess
from pathlib import Path

import pytest
from conftest import assert_user_error, run_in_process, write

import verl_roles
from verl_roles.base import releases
from verl_roles.inputs.cmdline import CommandLine

OLD, NEW = releases.supported()[0], releases.DEFAULT_RELEASE


def migrate(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return run_in_process(["migrate", *args], cwd, module="verl_roles.cli")


def composes(printed: str) -> None:
    """The printed line composes through the API, as the main job composes it."""
    command = CommandLine.parse(shlex.split(printed))
    verl_roles.compose(command.texts(), command.config_name, command.config_dir)


def diff_renames(old: str, new: str, cwd: Path) -> dict[str, str]:
    """What `verl-roles diff verl_version=OLD -- verl_version=NEW` lists as renamed (old key -> new key)."""
    result = run_in_process(["diff", releases.choice(old), "--", releases.choice(new)], cwd,
                            module="verl_roles.cli")
    assert result.returncode == 1, result.stderr
    pairs = [line.split()[1:4] for line in result.stdout.splitlines() if line.startswith("renamed ")]
    assert pairs, result.stdout
    return {pair[0]: pair[2].rstrip(":") for pair in pairs}


@pytest.mark.parametrize(("old", "new"), [(OLD, NEW), (NEW, OLD)], ids=["upgrade", "downgrade"])
def test_every_rename_diff_lists_is_what_migrate_writes(old, new, in_tmp):
    renames = diff_renames(old, new, in_tmp)
    for old_key, new_key in renames.items():
        result = migrate(["--to", new, releases.choice(old), f"{old_key}=true"], in_tmp)
        assert result.returncode == 0, result.stderr
        assert result.stdout.split() == [releases.choice(new), f"{new_key}=true"], result.stderr
        assert f"{old_key}=true -> {new_key}=true" in result.stderr
        composes(result.stdout)


def test_a_line_of_the_default_release_goes_back_to_the_older_name(in_tmp):
    # The case: the line chooses no release (the default one), --to names the older one.
    result = migrate(["--to", OLD, "skip.rollout.enable=true"], in_tmp)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["actor_rollout_ref.rollout.skip.enable=true", releases.choice(OLD)]
    assert "nothing in verl" not in result.stderr
    composes(result.stdout)


def test_a_from_the_line_contradicts_is_refused(in_tmp):
    result = migrate(["--from", OLD, "--to", NEW, releases.choice(NEW),
                      "actor_rollout_ref.rollout.skip.enable=true"], in_tmp)
    assert_user_error(result, f"--from {OLD}", f"the line chooses verl {NEW} itself",
                      f"`{releases.choice(NEW)}`", "Fix:")
    assert result.returncode == 2 and result.stdout == ""
    # The same release said twice is no contradiction.
    result = migrate(["--from", OLD, "--to", NEW, releases.choice(OLD), "trainer.total_epochs=3"], in_tmp)
    assert result.returncode == 0, result.stderr


def test_a_from_without_a_to_keeps_the_line_on_that_release(in_tmp):
    result = migrate(["--from", OLD, "actor_rollout_ref.rollout.skip.enable=true"], in_tmp)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["actor_rollout_ref.rollout.skip.enable=true", releases.choice(OLD)]
    assert f"{releases.choice(OLD)} added" in result.stderr
    composes(result.stdout)


def test_a_line_sweeping_the_release_is_not_rewritten_for_one(in_tmp):
    result = migrate(["--to", OLD, "-m", f"verl_version={OLD},{NEW}"], in_tmp)
    assert_user_error(result, "sweeps the verl release", "once per release")


def test_the_diff_it_names_runs_for_a_sweep(in_tmp):
    result = migrate(["--to", OLD, "-m", "trainer.nnodes=1,2", "model_engine=megatron"], in_tmp)
    assert result.returncode == 0, result.stderr
    hint = result.stderr.split("listed by `", 1)[1].split("`", 1)[0]
    assert hint.startswith("verl-roles diff ") and "-m" not in shlex.split(hint)
    ran = run_in_process(shlex.split(hint)[1:], in_tmp, module="verl_roles.cli")
    assert ran.returncode == 1 and "Traceback" not in ran.stderr, ran.stderr
    assert "changed verl_version:" in ran.stdout


def test_a_migrated_line_the_main_job_refuses_is_refused(in_tmp):
    # verl's launch form of a LoRA run under megatron: the flat target_modules is HF's all-linear, which
    # the megatron engine's lora block has no module for.
    result = migrate(["--config-path=./config", "--config-name=ppo_megatron_trainer",
                      "actor_rollout_ref.model.target_modules=all-linear"], in_tmp)
    assert_user_error(result, "actor_rollout_ref.model.lora.target_modules",
                      "`actor_rollout_ref.model.target_modules=all-linear`", "model_engine=megatron", "Fix:")
    assert result.returncode == 2 and result.stdout == ""
    assert len(result.stderr.strip().splitlines()) == 1


def test_verls_own_config_path_is_dropped(in_tmp):
    result = migrate(["--config-path=config", "--config-name=ppo_megatron_trainer.yaml",
                      "actor_rollout_ref.model.lora_rank=8"], in_tmp)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["model_engine=megatron", "actor_rollout_ref.model.lora.rank=8"]
    assert "--config-path=config -> (dropped)" in result.stderr
    composes(result.stdout)


@pytest.mark.parametrize("typed", [["--config-path=myconf"], ["--config-path", "myconf"], ["-cp", "myconf"]])
def test_config_path_of_a_users_folder_becomes_config_dir_as_the_main_job_says(typed, in_tmp):
    write(in_tmp / "myconf" / "mine.yaml", "defaults:\n  - ppo_trainer\n  - _self_\ntrainer:\n  nnodes: 2\n")
    result = migrate([*typed, "--config-name=mine", "trainer.total_epochs=3"], in_tmp)
    assert result.returncode == 0, result.stderr
    printed = shlex.split(result.stdout)
    assert "--config-path" not in result.stdout and "-cp" not in printed
    assert CommandLine.parse(printed).config_dir == "myconf"
    # The main job's refusal of the typed line names the same rewrite.
    refused = run_in_process([*typed, "--config-name=mine"], in_tmp)
    assert_user_error(refused, "write `--config-dir myconf` instead")
    ran = run_in_process([*printed, f"hydra.run.dir={in_tmp / 'out'}"], in_tmp)
    assert ran.returncode == 0, ran.stderr


def test_config_path_and_config_dir_together_are_refused(in_tmp):
    (in_tmp / "a").mkdir()
    result = migrate(["--config-path", "a", "--config-dir", "a", "--config-name", "mine"], in_tmp)
    assert_user_error(result, "--config-path a", "one --config-dir")

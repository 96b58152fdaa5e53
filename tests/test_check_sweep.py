"""Sweeps checked before launch: `verl-roles check-sweep` and `python -m verl_roles.main -m --check-sweep`."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import assert_user_error, run_in_process

from verl_roles import ConfigError, compose
from verl_roles.cli import main as cli
from verl_roles.commands.sweep import SUMMARY_FILE, read_summary
from verl_roles.inputs.cmdline import CommandLine
from verl_roles.inputs.sweep_grid import sweep_points
from verl_roles.main import main

# What Hydra/OmegaConf do decides these tests' outcome: CI runs them on both stacks.
pytestmark = pytest.mark.stack


def test_points_are_the_jobs_of_the_real_sweep_in_order(tmp_path: Path, capsys):
    # A value sweep, a group sweep, a range, and a key given twice (the last mention wins, in the
    # first one's place), as Hydra's basic sweeper reads them.
    grid = ["critic.optim.lr=1e-5,2e-5", "model_engine=dp,megatron", "trainer.total_epochs=range(1,3)",
            "critic.optim.lr=3e-5,4e-5", "trainer.nnodes=1"]
    assert main(["-m", *grid, f"hydra.sweep.dir={tmp_path / 's'}", "hydra/job_logging=none",
                 "hydra/hydra_logging=none"]) == 0, capsys.readouterr().err
    jobs = [row["overrides"] for row in read_summary(tmp_path / "s" / SUMMARY_FILE)]
    points = sweep_points(CommandLine.parse(grid))
    assert [" ".join(p.overrides) for p in points] == jobs
    assert [p.number for p in points] == list(range(8))
    assert points[5].swept == (("critic.optim.lr", "4e-05"), ("model_engine", "dp"),
                               ("trainer.total_epochs", "2"))


def test_check_sweep_prints_the_failing_points_and_writes_nothing(tmp_path: Path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    code = cli(["check-sweep", "model_engine=dp,megatron", "critic.optim.lr=1e-5,-1",
                "actor_rollout_ref.actor.ppo_mini_batch_size=4096,256"])
    captured = capsys.readouterr()
    assert code == 2
    lines = captured.out.splitlines()
    header = ["#", "model_engine", "critic.optim.lr", "actor_rollout_ref.actor.ppo_mini_batch_size", "error"]
    assert lines[0].split() == header
    rows = [line.split(None, 4) for line in lines[1:-1]]
    assert [row[:4] for row in rows] == [
        ["0", "dp", "1e-05", "4096"],
        ["2", "dp", "-1", "4096"],
        ["3", "dp", "-1", "256"],
        ["4", "megatron", "1e-05", "4096"],
        ["6", "megatron", "-1", "4096"],
        ["7", "megatron", "-1", "256"],
    ]
    # Each error on one line: the first problem's key and what is wrong, and how many more there are.
    mini_batch = "actor_rollout_ref.actor.ppo_mini_batch_size"
    assert [row[4].split(":")[0] for row in rows] == [mini_batch, mini_batch, "critic.optim.lr"] * 2
    assert rows[2][4] == "critic.optim.lr: is out of range (got -1; expected a learning rate >= 0)."
    # The critic follows the actor's mini batch: one problem, at the actor's key; point 2 has more.
    assert "; critic follows this value" in rows[0][4] and rows[1][4].endswith("more problem).")
    assert lines[-1] == "check-sweep: 8 points: 2 ok, 6 failed"
    assert captured.err.startswith("verl_roles error: check-sweep: 6 of 8 sweep points fail (table above); "
                                   "nothing was launched or written")
    assert "Traceback" not in captured.err
    assert list(tmp_path.iterdir()) == []


def test_a_sweep_that_passes_exits_0(capsys):
    grid = ["model_engine=dp,megatron", "actor_rollout_ref.model.lora_rank=8,16"]
    assert cli(["check-sweep", "-m", *grid]) == 0
    captured = capsys.readouterr()
    assert captured.out.splitlines() == [
        "check-sweep: 4 jobs would share one trainer.experiment_name, so each gets its own (its swept values "
        "appended, e.g. job #0: gsm8k_model_engine=dp,actor_rollout_ref.model.lora.rank=8); "
        "sweep_summary.csv lists them",
        "check-sweep: 4 points: 4 ok, 0 failed",
    ]
    # The legacy key is read as its current key; its warning is printed once, not once per point.
    assert captured.err.count("lora_rank is verl's flat LoRA key") == 1


def test_the_sweeps_own_config_is_checked(capsys):
    # A key that is not swept is part of Hydra's master config, composed with the default engine.
    code = cli(["check-sweep", "model_engine=megatron,dp", "megatron.tensor_model_parallel_size=2"])
    out = capsys.readouterr().out.splitlines()
    assert code == 2
    assert out[0].startswith("the sweep's own config (the overrides without the sweeps, composed before "
                             "any job) does not compose, so the sweep would stop before its first job: "
                             "megatron.tensor_model_parallel_size:")
    assert out[-1] == "check-sweep: 2 points: 1 ok, 1 failed; the sweep's own config fails"


def test_main_job_checks_first_on_request(tmp_path: Path, capsys):
    sweep_dir = tmp_path / "s"
    code = main(["-m", "--check-sweep", "critic.optim.lr=1e-5,-1", f"hydra.sweep.dir={sweep_dir}"])
    captured = capsys.readouterr()
    assert code == 2
    assert "1  -1               critic.optim.lr: is out of range" in captured.out
    assert "nothing was launched or written" in captured.err
    assert not sweep_dir.exists()
    code = main(["-m", "--check-sweep", "critic.optim.lr=1e-5,2e-5", f"hydra.sweep.dir={sweep_dir}",
                 "hydra/job_logging=none", "hydra/hydra_logging=none"])
    assert code == 0, capsys.readouterr().err
    assert [r["status"] for r in read_summary(sweep_dir / SUMMARY_FILE)] == ["ok", "ok"]


@pytest.mark.parametrize(
    ("args", "module", "phrases"),
    [
        (["--check-sweep", "critic.optim.lr=1e-5"], "verl_roles.main", ["--check-sweep", "no -m"]),
        (["check-sweep", "--cfg", "job"], "verl_roles.cli", ["--cfg: is not an option of check-sweep"]),
        (["check-sweep", "trainer"], "verl_roles.cli", ["trainer: is not an override"]),
        (["check-sweep", "critic.optim.lr=interval(0,1)"], "verl_roles.cli", ["interval sweep"]),
    ],
    ids=["no-multirun", "hydra-flag", "bare-word", "interval"],
)
def test_check_sweep_mistakes(tmp_path: Path, args, module, phrases):
    # In this process (the main job's mistake is refused before Hydra runs); a mistake of a verl-roles
    # command in a real process: tests/test_show.py, tests/test_shell.py.
    result = run_in_process(args, cwd=tmp_path, module=module)
    assert_user_error(result, *phrases)
    assert result.returncode == 2
    assert list(tmp_path.iterdir()) == []


def test_a_key_of_one_swept_engine_gets_one_sweep_per_engine_as_the_fix(tmp_path):
    """`model_engine=dp,megatron megatron.tensor_model_parallel_size=2`, as a user types it: the fix is to
    split the sweep by engine (never "switch it to model_engine=megatron", which would drop dp)."""
    args = ["check-sweep", "model_engine=dp,megatron", "megatron.tensor_model_parallel_size=2"]
    result = run_in_process(args, cwd=tmp_path, module="verl_roles.cli")
    assert_user_error(
        result, "The sweep `model_engine=dp,megatron` runs both engines",
        "run one sweep per engine: `-m model_engine=megatron megatron.tensor_model_parallel_size=2 ...` for "
        "megatron, and the other engine's sweep without `megatron.tensor_model_parallel_size=2`",
    )
    assert "switch it to model_engine=megatron" not in result.stdout + result.stderr
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("grid", [["critic.optim.lr=range(0,1,1e-9)"],
                                  ["trainer.total_epochs=range(1,2000)", "critic.optim.lr=1e-5,2e-5"]],
                         ids=["a-billion-values", "a-product-over-the-limit"])
def test_a_grid_too_big_to_plan_is_refused_at_once_by_the_sweep_and_check_sweep(
    grid: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
):
    """Each job is planned before any starts: a range step of 1e-9 kept check-sweep busy for hours."""
    from verl_roles.base.limits import MAX_SWEEP_JOBS

    assert cli(["check-sweep", *grid]) == 2
    assert f"more than the {MAX_SWEEP_JOBS:,} a sweep may have" in capsys.readouterr().err
    code = main(["-m", *grid, f"hydra.sweep.dir={tmp_path / 's'}"])
    assert code == 2 and f"more than the {MAX_SWEEP_JOBS:,} a sweep may have" in capsys.readouterr().err
    assert not (tmp_path / "s").exists()


@pytest.mark.parametrize("args", [["-m"], ["--check-sweep", "-m"], ["check-sweep"], []],
                         ids=["sweep", "main-check-sweep", "check-sweep", "single-run"])
def test_a_sweep_over_a_hydra_setting_is_one_paragraph_before_anything_is_planned(tmp_path: Path, args):
    """Hydra's settings are the sweep's: `-m hydra.job.chdir=true,false` gave a failing-point table and
    "add --multirun" (a text for single runs); now every entry point says it at once, the same way."""
    module = "verl_roles.cli" if args == ["check-sweep"] else "verl_roles.main"
    overrides = ["hydra.job.chdir=true,false", "critic.optim.lr=1e-5,2e-5"]
    result = run_in_process([*args, *overrides], cwd=tmp_path, module=module)
    assert_user_error(result, "`hydra.job.chdir=true,false`: sweeps over one of Hydra's own settings",
                      "run one sweep per value")
    assert result.returncode == 2
    assert "#" not in result.stdout + result.stderr  # no table of points
    assert len((result.stdout + result.stderr).strip().splitlines()) == 1
    assert list(tmp_path.iterdir()) == []
    with pytest.raises(ConfigError, match="sweeps over one of Hydra's own settings"):
        compose(overrides)

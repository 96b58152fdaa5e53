"""Sweep jobs never share training state or folders, by class: every output name and path verl writes
per run (compared as the folders they name, however spelled), every job folder (never one inside
another, never named like the sweep's own files), every job (one config is never listed twice), and a
grid too big to plan is refused at once. Checked with ``verl-roles check-sweep`` (the main job's own
plan of the sweep, writing nothing); one real sweep shows the summary listing each output in use."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import run_in_process

from verl_roles.commands.check_sweep import check_sweep
from verl_roles.commands.sweep import SUMMARY_FILE, read_summary
from verl_roles.inputs.cmdline import CommandLine
from verl_roles.inputs.sweep_grid import MAX_SWEEP_JOBS
from verl_roles.main import main
from verl_roles.runs.sweep_isolation import EXPERIMENT_NAME

LR = "critic.optim.lr=1e-5,2e-5"


def checked(tmp_path: Path, *args: str):  # noqa: ANN201 - a CompletedProcess
    result = run_in_process(["check-sweep", *args], tmp_path, module="verl_roles.cli")
    assert "Traceback" not in result.stderr
    assert list(tmp_path.iterdir()) == []
    return result


@pytest.mark.parametrize(("args", "phrases"), [
    # one folder, however it is spelled
    (["trainer.default_local_dir=ck,ck/"], ["'ck' and 'ck/' (all the folder", "checkpoints"]),
    (["trainer.default_local_dir=ck,./x/../ck"], ["all the folder"]),
    (["trainer.default_local_dir={d}/ck,ck"], ["all the folder"]),
    # every output verl writes per run, not only the checkpoints
    ([LR, "ray_kwargs.timeline_json_file=/tmp/t.json"], ["ray_kwargs.timeline_json_file", "timeline"]),
    ([LR, "global_profiler.tool=torch", "global_profiler.save_path='/p/${trainer.experiment_name}'",
      "critic.profiler.enable=true", "critic.profiler.save_path=/p/critic"], ["critic.profiler.save_path"]),
    ([LR, "actor_rollout_ref.rollout.trace.backend=mlflow",
      "actor_rollout_ref.rollout.trace.experiment_name=t"],
     ["actor_rollout_ref.rollout.trace.experiment_name", "one name per job"]),
    # job folders: inside one another, or named like the sweep's own files
    (["hydra.sweep.subdir=${hydra.job.override_dirname}", "data.train_files=a,a/b"],
     ["inside the folder of job #0", "hydra.sweep.subdir"]),
    *(([LR, f"hydra.sweep.subdir={name}/${{hydra.job.num}}"], ["keeps for its own files"])
      for name in (".verl_roles", "sweep_summary.csv", "multirun.yaml", ".verl_roles-lock", ".submitit")),
    # one config listed twice
    (["critic.optim.lr=1e-5,2e-5,1e-5"], ["lists job #2 (critic.optim.lr=1e-05) twice: it is job #0 too",
                                          "data.seed=1,2,3"]),
    # grids too big to plan: refused before a value is listed
    ([f"trainer.total_epochs=range(0,{10**9})"],
     [f"grid of {10**9:,} jobs, more than the {MAX_SWEEP_JOBS:,} a sweep may have"]),
    ([f"{key}={','.join(str(i) for i in range(1, 41))}"
      for key in ("trainer.total_epochs", "trainer.save_freq")], ["40 x 40 = 1,600 jobs"]),
])
def test_what_jobs_would_share_stops_the_sweep_before_anything_runs(tmp_path: Path, args, phrases):
    result = checked(tmp_path, *(a.replace("{d}", str(tmp_path)) for a in args))
    assert result.returncode == 2, result.stderr
    for phrase in phrases:
        assert phrase in result.stdout + result.stderr


SPELLED = ["data.train_files='a b','a_b','a:b'", "trainer.resume_mode=disable"]


def test_values_that_differ_only_in_characters_a_name_cannot_hold_give_two_names(tmp_path: Path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    plan = check_sweep(CommandLine.parse(SPELLED))
    assert plan.ok, [p.render() for p in plan.problems]
    names = [dict(job.assigned)[EXPERIMENT_NAME] for job in plan.jobs]
    assert len(set(names)) == 3 and all(name.startswith("gsm8k_data.train_files=_a_b_-") for name in names)
    # The same values give the same names again (a sweep run again resumes each job from its own folder).
    again = check_sweep(CommandLine.parse(SPELLED))
    assert [dict(job.assigned)[EXPERIMENT_NAME] for job in again.jobs] == names


def test_the_summary_lists_every_output_a_job_writes_to(tmp_path: Path, capsys):
    sweep_dir = tmp_path / "s"
    code = main(["-m", LR, "trainer.rollout_data_dir=/data/${trainer.experiment_name}/rollouts",
                 f"hydra.sweep.dir={sweep_dir}", "hydra/job_logging=none", "hydra/hydra_logging=none"])
    assert code == 0, capsys.readouterr().err
    rows = read_summary(sweep_dir / SUMMARY_FILE)
    assert [row["trainer.rollout_data_dir"] for row in rows] == [
        f"/data/{row[EXPERIMENT_NAME]}/rollouts" for row in rows]
    assert "global_profiler.save_path" not in rows[0]  # not written to: not listed

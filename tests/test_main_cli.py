"""The main job as a user types it: one real console run, the rest in-process on the same code path."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import assert_user_error, main_in_process, run, run_in_process
from omegaconf import OmegaConf

import verl_roles
from verl_roles.main import main
from verl_roles.runs.run_files import ROLE_SECTIONS

# What Hydra/OmegaConf do decides these tests' outcome: CI runs them on both stacks.
pytestmark = pytest.mark.stack


def test_main_job_writes_resolved_config_and_role_files(in_tmp: Path):
    # In this process: the exit status of a real run as a shell sees it is checked by
    # tests/test_run_dirs.py (two runs started together) and by the installed copies of tests/test_wheel.py.
    result = run_in_process(["model_engine=megatron", "hydra.run.dir=out"], cwd=in_tmp)
    assert result.returncode == 0, result.stderr
    out = in_tmp / "out"
    expected = verl_roles.compose(["model_engine=megatron"])
    assert (out / "resolved.yaml").read_text() == OmegaConf.to_yaml(expected)
    for role, section in ROLE_SECTIONS.items():
        written = OmegaConf.load(out / "roles" / f"{role}.yaml")
        assert written == OmegaConf.select(expected, section), role
    assert "model_engine=megatron" in result.stdout
    # A line per role verl builds: no reference policy without a KL term (its file is still written).
    for role in ("actor", "critic", "rollout"):
        assert f"  {role}" in result.stdout
    assert "\n  ref " not in result.stdout
    assert "TP=1" in result.stdout


def test_default_run_in_hydra_output_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main(["hydra/job_logging=none", "hydra/hydra_logging=none"]) == 0, capsys.readouterr().err
    resolved = list(tmp_path.glob("outputs/*/*/resolved.yaml"))
    assert len(resolved) == 1
    assert OmegaConf.load(resolved[0]).model_engine == "dp"


def test_deprecated_config_name_warns_and_matches(tmp_path: Path, capsys):
    code, _, err = main_in_process(["--config-name", "ppo_megatron_trainer"], tmp_path / "old", capsys)
    assert code == 0, err
    assert "deprecated" in err and "model_engine=megatron" in err
    assert err.count("ppo_megatron_trainer is deprecated") == 1, err  # one notice per run
    code, _, err = main_in_process(["model_engine=megatron"], tmp_path / "new", capsys)
    assert code == 0, err
    old, new = (tmp_path / name / "out/resolved.yaml" for name in ("old", "new"))
    assert old.read_bytes() == new.read_bytes()


@pytest.mark.slow
def test_hydra_flags_work(in_tmp: Path):
    # Real processes: --cfg and --info configure Hydra's logging, which must not leak between tests.
    cfg_job = run(["model_engine=megatron", "--cfg", "job", "--resolve"], cwd=in_tmp)
    assert cfg_job.returncode == 0, cfg_job.stderr
    assert OmegaConf.create(cfg_job.stdout).model_engine == "megatron"
    info = run(["--info", "defaults", "model_engine=megatron"], cwd=in_tmp)
    assert info.returncode == 0, info.stderr
    assert "model_engine/megatron" in info.stdout
    assert not list(in_tmp.rglob("resolved.yaml"))


def test_unknown_group_option_is_one_clear_error(in_tmp: Path):
    result = run_in_process(["model_engine=deepspeed", "hydra.run.dir=out"], cwd=in_tmp)
    assert_user_error(result, "model_engine", "deepspeed", "megatron")
    assert not (in_tmp / "out" / "resolved.yaml").exists()


def test_unknown_key_is_one_clear_error(tmp_path: Path, capsys):
    code, out, err = main_in_process(["model_enginez=megatron"], tmp_path, capsys)
    assert code == 2
    assert "model_enginez" in err and "model_engine" in err
    assert not (tmp_path / "out" / "resolved.yaml").exists()


def test_the_run_folder_keeps_what_the_run_said(in_tmp: Path):
    """main.log holds the run's summary and each warning and notice it printed (the terminal is gone once a
    cluster job ends); a sweep's each job, its own."""
    from conftest import run_in_process

    said = ["model_engine=megatron", "actor_rollout_ref.actor.optim.betas=[0.9,0.95]",
            "actor_rollout_ref.actor.megatron.tensor_model_parallel_size=2"]
    result = run_in_process([*said, "hydra.run.dir=run"], in_tmp)
    assert result.returncode == 0, result.stderr
    log = (in_tmp / "run" / "main.log").read_text(encoding="utf-8")
    warned = [line.removeprefix("verl_roles warning: ") for line in result.stderr.splitlines()
              if line.startswith("verl_roles warning: ")]
    assert len(warned) == 2 and all(f"[verl_roles][WARNING] - {text}" in log for text in warned), log
    assert "[verl_roles][INFO] - verl_roles: model_engine=megatron" in log
    result = run_in_process(["-m", *said, "critic.optim.lr=1e-5,2e-5", "hydra.sweep.dir=sweep"], in_tmp)
    assert result.returncode == 0, result.stderr
    for job in ("0", "1"):
        log = (in_tmp / "sweep" / job / "main.log").read_text(encoding="utf-8")
        assert "would do nothing" in log and "follows the actor's parallel layout" in log, log

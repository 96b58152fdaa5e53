"""The main job through the CLI exactly as a user types it."""

from __future__ import annotations

from pathlib import Path

from conftest import assert_user_error, run
from omegaconf import OmegaConf

import verl_roles
from verl_roles.output import ROLE_SECTIONS


def test_main_job_writes_resolved_config_and_role_files(in_tmp: Path):
    result = run(["model_engine=megatron", "hydra.run.dir=out"], cwd=in_tmp)
    assert result.returncode == 0, result.stderr
    out = in_tmp / "out"
    expected = verl_roles.compose(["model_engine=megatron"])
    assert (out / "resolved.yaml").read_text() == OmegaConf.to_yaml(expected)
    for role, section in ROLE_SECTIONS.items():
        written = OmegaConf.load(out / "roles" / f"{role}.yaml")
        assert written == OmegaConf.select(expected, section), role
    assert "model_engine=megatron" in result.stdout
    for role in ("actor", "critic", "ref", "rollout"):
        assert f"  {role}" in result.stdout
    assert "TP=1" in result.stdout


def test_default_run_in_hydra_output_dir(in_tmp: Path):
    result = run([], cwd=in_tmp)
    assert result.returncode == 0, result.stderr
    resolved = list(in_tmp.glob("outputs/*/*/resolved.yaml"))
    assert len(resolved) == 1
    assert OmegaConf.load(resolved[0]).model_engine == "dp"


def test_deprecated_config_name_warns_and_matches(in_tmp: Path):
    result = run(["--config-name", "ppo_megatron_trainer", "hydra.run.dir=old"], cwd=in_tmp)
    assert result.returncode == 0, result.stderr
    assert "deprecated" in result.stderr and "model_engine=megatron" in result.stderr
    modern = run(["model_engine=megatron", "hydra.run.dir=new"], cwd=in_tmp)
    assert (in_tmp / "old/resolved.yaml").read_bytes() == (in_tmp / "new/resolved.yaml").read_bytes()
    assert modern.returncode == 0


def test_hydra_flags_work(in_tmp: Path):
    cfg_job = run(["model_engine=megatron", "--cfg", "job", "--resolve"], cwd=in_tmp)
    assert cfg_job.returncode == 0, cfg_job.stderr
    assert OmegaConf.create(cfg_job.stdout).model_engine == "megatron"
    info = run(["--info", "defaults", "model_engine=megatron"], cwd=in_tmp)
    assert info.returncode == 0, info.stderr
    assert "model_engine/megatron" in info.stdout
    assert not list(in_tmp.rglob("resolved.yaml"))


def test_unknown_group_option_is_one_clear_error(in_tmp: Path):
    result = run(["model_engine=deepspeed", "hydra.run.dir=out"], cwd=in_tmp)
    assert_user_error(result, "model_engine", "deepspeed", "megatron")
    assert not (in_tmp / "out" / "resolved.yaml").exists()


def test_unknown_key_or_group_is_one_clear_error(in_tmp: Path):
    result = run(["model_enginez=megatron", "hydra.run.dir=out"], cwd=in_tmp)
    assert_user_error(result, "model_enginez")
    assert not (in_tmp / "out" / "resolved.yaml").exists()

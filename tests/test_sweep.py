"""Hydra multirun sweeps: per-job files, sweep_summary.csv, jobs that fail alone, and the same outputs
from the parallel (joblib) and cluster (submitit) launchers as from the basic one."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
from conftest import assert_user_error, run
from omegaconf import OmegaConf

from verl_roles.commands.sweep import ERROR_FILE, SUMMARY_COLUMNS, SUMMARY_FILE, read_summary
from verl_roles.main import main
from verl_roles.run_files import ROLE_SECTIONS

GRID = ["model_engine=dp,megatron", "critic.optim.lr=1e-5,2e-5"]


def run_files(job_dir: Path) -> dict[str, bytes]:
    """What the main job writes into a job directory."""
    names = ["resolved.yaml", *(f"roles/{role}.yaml" for role in ROLE_SECTIONS)]
    return {name: (job_dir / name).read_bytes() for name in names if (job_dir / name).exists()}


def sweep(tmp_path: Path, *overrides: str, launcher: list[str] | None = None) -> tuple[int, Path]:
    sweep_dir = tmp_path / "sweep"
    code = main(["-m", *(launcher or []), *overrides, f"hydra.sweep.dir={sweep_dir}"])
    return code, sweep_dir


def test_grid_writes_every_job_and_the_summary(tmp_path, capsys):
    code, sweep_dir = sweep(tmp_path, *GRID)
    assert code == 0, capsys.readouterr().err
    rows = read_summary(sweep_dir / SUMMARY_FILE)
    # One column per swept key, after the job number.
    assert list(rows[0]) == ["job", "model_engine", "critic.optim.lr", *SUMMARY_COLUMNS[1:]]
    assert [(r["job"], r["model_engine"], r["critic.optim.lr"], r["status"], r["error"]) for r in rows] == [
        # Hydra records each job's overrides with its values formatted (1e-5 -> 1e-05).
        ("0", "dp", "1e-05", "ok", ""),
        ("1", "dp", "2e-05", "ok", ""),
        ("2", "megatron", "1e-05", "ok", ""),
        ("3", "megatron", "2e-05", "ok", ""),
    ]
    assert rows[2]["overrides"] == "model_engine=megatron critic.optim.lr=1e-05"
    for row in rows:
        job_dir = Path(row["output_dir"])
        assert job_dir == sweep_dir / row["job"]
        assert set(run_files(job_dir)) == {"resolved.yaml", *(f"roles/{r}.yaml" for r in ROLE_SECTIONS)}
        engine, lr = row["model_engine"], row["critic.optim.lr"]
        resolved = OmegaConf.load(job_dir / "resolved.yaml")
        assert resolved.model_engine == engine
        critic = OmegaConf.load(job_dir / "roles" / "critic.yaml")
        assert critic.optim.lr == float(lr) == resolved.critic.optim.lr
    assert "sweep of 4 jobs: 4 ok, 0 failed" in capsys.readouterr().out
    assert not (sweep_dir / ".verl_roles_jobs").exists()


@pytest.mark.parametrize(
    ("grid", "failing", "phrases"),
    [
        # Job #1 composes but fails validation.
        ("critic.optim.lr=2e-5,-1", ["1"], ["critic.optim.lr", "out of range"]),
        # Jobs #2 and #3 do not even compose (a megatron key under model_engine=dp).
        (
            "model_engine=megatron,dp megatron.tensor_model_parallel_size=2,4",
            ["2", "3"],
            ["exists only with model_engine=megatron", "switch it to model_engine=megatron"],
        ),
    ],
    ids=["invalid-value", "does-not-compose"],
)
def test_an_invalid_job_fails_alone(tmp_path, capsys, grid, failing, phrases):
    code, sweep_dir = sweep(tmp_path, *grid.split())
    err = capsys.readouterr().err
    assert code == 2
    assert "Traceback" not in err
    rows = read_summary(sweep_dir / SUMMARY_FILE)
    assert [r["job"] for r in rows if r["status"] == "failed"] == failing
    for row in rows:
        files = run_files(sweep_dir / row["job"])
        if row["status"] == "ok":
            assert row["error"] == "" and set(files) >= {"resolved.yaml", "roles/critic.yaml"}
        else:
            assert files == {}
            # The summary holds the error on one short line; the job's directory holds all of it.
            assert "\n" not in row["error"] and len(row["error"]) < 200, row["error"]
            assert phrases[0] in row["error"]
            full = (sweep_dir / row["job"] / ERROR_FILE).read_text()
            assert all(phrase in full for phrase in phrases), full
            assert full.startswith(row["error"].split(": ")[0] + ": ")
    final = err.strip().splitlines()[-1]
    head = f"verl_roles error: sweep: {len(failing)} of {len(rows)} sweep jobs failed: #{failing[0]}"
    assert final.startswith(head)
    assert str(sweep_dir / SUMMARY_FILE) in final


def test_sweep_as_typed_exits_non_zero_at_the_end(tmp_path):
    result = run(["-m", "critic.optim.lr=-1,1e-5", f"hydra.sweep.dir={tmp_path / 's'}"], cwd=tmp_path)
    assert_user_error(result, "1 of 2 sweep jobs failed", "#0 (critic.optim.lr=-1)", SUMMARY_FILE)
    assert [r["status"] for r in read_summary(tmp_path / "s" / SUMMARY_FILE)] == ["failed", "ok"]
    assert (tmp_path / "s" / "1" / "resolved.yaml").is_file()


def test_a_single_run_writes_no_sweep_files(tmp_path):
    assert main([f"hydra.run.dir={tmp_path / 'run'}", f"hydra.sweep.dir={tmp_path / 'sweep'}"]) == 0
    assert (tmp_path / "run" / "resolved.yaml").is_file()
    assert not (tmp_path / "sweep").exists()


def plugin_missing(module: str) -> bool:
    return importlib.util.find_spec(module) is None


def assert_same_sweep(expected: Path, actual: Path) -> None:
    """Same rows (apart from where the jobs ran) and byte-identical files in every job directory."""
    rows = read_summary(expected / SUMMARY_FILE)
    other = read_summary(actual / SUMMARY_FILE)
    assert [{**r, "output_dir": ""} for r in other] == [{**r, "output_dir": ""} for r in rows]
    for row in rows:
        assert run_files(actual / row["job"]) == run_files(expected / row["job"])
    assert any(run_files(expected / row["job"]) for row in rows)


# One job fails validation, one writes its files.
LAUNCHER_GRID = ["model_engine=megatron", "critic.optim.lr=-1,3e-5"]


@pytest.mark.skipif(plugin_missing("hydra_plugins.hydra_joblib_launcher"), reason="needs the joblib extra")
def test_joblib_launcher_gives_the_same_outputs(tmp_path):
    assert sweep(tmp_path / "basic", *LAUNCHER_GRID)[0] == 2
    launcher = ["hydra/launcher=joblib", "hydra.launcher.n_jobs=2"]
    assert sweep(tmp_path / "joblib", *LAUNCHER_GRID, launcher=launcher)[0] == 2
    assert_same_sweep(tmp_path / "basic" / "sweep", tmp_path / "joblib" / "sweep")


@pytest.mark.skipif(
    plugin_missing("hydra_plugins.hydra_submitit_launcher"), reason="needs the submitit extra"
)
def test_submitit_local_launcher_gives_the_same_outputs(tmp_path):
    assert sweep(tmp_path / "basic", *LAUNCHER_GRID)[0] == 2
    assert sweep(tmp_path / "submitit", *LAUNCHER_GRID, launcher=["hydra/launcher=submitit_local"])[0] == 2
    assert_same_sweep(tmp_path / "basic" / "sweep", tmp_path / "submitit" / "sweep")

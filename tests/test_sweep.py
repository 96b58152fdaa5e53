"""Hydra multirun sweeps: every job validated before anything exists, per-job files and names,
sweep_summary.csv, folders and outputs no two jobs share, and the same outputs from the parallel (joblib)
and cluster (submitit) launchers as from the basic one."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
from conftest import assert_user_error, run, run_in_process
from omegaconf import OmegaConf

from verl_roles.commands.sweep import SUMMARY_COLUMNS, SUMMARY_FILE, read_summary
from verl_roles.main import main
from verl_roles.runs.run_files import ROLE_SECTIONS

# What Hydra/OmegaConf do decides these tests' outcome: CI runs them on both stacks.
pytestmark = pytest.mark.stack

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
    # Nothing but the sweep: no staging folder or lock left beside it.
    assert sorted(p.name for p in tmp_path.iterdir()) == ["sweep"]


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
def test_an_invalid_job_stops_the_sweep_before_anything_exists(tmp_path, capsys, grid, failing, phrases):
    """Every job is composed and validated before Hydra starts: one invalid job refuses the sweep, with a
    table of the failing jobs, and no folder is made (not even the sweep folder)."""
    code, sweep_dir = sweep(tmp_path, *grid.split())
    captured = capsys.readouterr()
    assert code == 2
    assert "Traceback" not in captured.err
    table = captured.out.splitlines()
    assert [line.split()[0] for line in table[1:-1]] == failing
    assert all(phrase in captured.err for phrase in phrases), captured.err
    assert "nothing was launched or written" in captured.err
    assert list(tmp_path.iterdir()) == []


def test_sweep_as_typed_exits_non_zero_and_writes_nothing(tmp_path):
    result = run_in_process(["-m", "critic.optim.lr=-1,1e-5", f"hydra.sweep.dir={tmp_path / 's'}"],
                            cwd=tmp_path)
    assert_user_error(result, "1 of 2 sweep points fail", "nothing was launched or written")
    assert list(tmp_path.iterdir()) == []


def test_every_job_gets_its_own_experiment_name_and_checkpoint_folder(tmp_path, capsys):
    code, sweep_dir = sweep(tmp_path, "critic.optim.lr=1e-5,2e-5", "trainer.experiment_name=lr_grid")
    assert code == 0, capsys.readouterr().err
    rows = read_summary(sweep_dir / SUMMARY_FILE)
    names = [r["trainer.experiment_name"] for r in rows]
    assert names == ["lr_grid_critic.optim.lr=1e-05", "lr_grid_critic.optim.lr=2e-05"]
    assert [r["trainer.default_local_dir"] for r in rows] == [f"checkpoints/verl_examples/{n}" for n in names]
    for row, name in zip(rows, names, strict=True):
        resolved = OmegaConf.load(Path(row["output_dir"]) / "resolved.yaml")
        assert resolved.trainer.experiment_name == name
        assert resolved.trainer.default_local_dir == f"checkpoints/verl_examples/{name}"
    # A name the jobs already have each to themselves is kept.
    code, other = sweep(tmp_path / "own", "trainer.experiment_name=a,b")
    assert code == 0
    assert [r["trainer.experiment_name"] for r in read_summary(other / SUMMARY_FILE)] == ["a", "b"]


def test_a_checkpoint_folder_every_job_shares_is_refused(tmp_path, capsys):
    code, _ = sweep(tmp_path, "critic.optim.lr=1e-5,2e-5", f"trainer.default_local_dir={tmp_path}/ckpt")
    err = capsys.readouterr().err
    assert code == 2
    assert_user_error(subprocess_result(code, err), "trainer.default_local_dir",
                      "resume from and overwrite the others' checkpoints", "${trainer.experiment_name}")
    assert list(tmp_path.iterdir()) == []
    # Without checkpoints (no save, no resume) the same folder harms nothing.
    code, _ = sweep(tmp_path, "critic.optim.lr=1e-5,2e-5", f"trainer.default_local_dir={tmp_path}/ckpt",
                    "trainer.resume_mode=disable")
    assert code == 0, capsys.readouterr().err


def test_job_folders_that_collide_are_refused_before_any_job_runs(tmp_path, capsys):
    code, _ = sweep(tmp_path, "critic.optim.lr=1e-5,2e-5", "hydra.sweep.subdir=same")
    err = capsys.readouterr().err
    assert code == 2
    assert "hydra.sweep.subdir" in err and "the same folder 'same'" in err
    assert list(tmp_path.iterdir()) == []
    code, _ = sweep(tmp_path, "critic.optim.lr=1e-5,2e-5", "hydra.sweep.subdir=../out")
    assert code == 2
    assert "not a folder inside the sweep folder" in capsys.readouterr().err


def test_a_sweep_that_cannot_write_fails_and_leaves_nothing(tmp_path):
    """Once every job was validated a sweep fails only while writing: a file size limit stops each job's
    resolved.yaml (each job says so, naming its final folder) and then the sweep's own files, so the
    sweep stops, exit 2, and its staging folder is gone."""
    result = _limited_sweep(tmp_path, limit=30_000)
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr
    job = tmp_path / "s" / "0" / "resolved.yaml"
    assert f"job #0: {job}: cannot be written: File too large" in result.stderr
    assert "staging" not in result.stderr
    assert list(tmp_path.iterdir()) == []


def _limited_sweep(tmp_path: Path, limit: int):
    import resource
    import subprocess
    import sys

    from conftest import cli_env

    def limit_file_size() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    return subprocess.run(
        [sys.executable, "-m", "verl_roles.main", "-m", "critic.optim.lr=1e-5,2e-5",
         f"hydra.sweep.dir={tmp_path / 's'}", "hydra.output_subdir=null", "hydra/job_logging=none"],
        cwd=tmp_path, env=cli_env(), capture_output=True, text=True, timeout=120, preexec_fn=limit_file_size,
    )


def test_a_sweep_whose_summary_cannot_be_written_fails_and_leaves_nothing(tmp_path, monkeypatch, capsys):
    from verl_roles.base.errors import ConfigError, Problem
    from verl_roles.commands import sweep as sweep_module

    def refuse(path, text):  # noqa: ANN001, ARG001
        raise ConfigError([Problem(key=str(path), message="cannot be written: No space left on device")])

    monkeypatch.setattr(sweep_module, "write_atomic", refuse)
    code, sweep_dir = sweep(tmp_path, "critic.optim.lr=1e-5,2e-5")
    assert code == 2
    assert "sweep_summary.csv: cannot be written" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []


def subprocess_result(code: int, err: str):
    import subprocess

    return subprocess.CompletedProcess([], code, "", err)


def test_a_single_run_writes_no_sweep_files(tmp_path):
    assert main([f"hydra.run.dir={tmp_path / 'run'}", f"hydra.sweep.dir={tmp_path / 'sweep'}"]) == 0
    assert (tmp_path / "run" / "resolved.yaml").is_file()
    assert not (tmp_path / "sweep").exists()


def plugin_missing(module: str) -> bool:
    """No such plugin is installed. ``find_spec`` of ``hydra_plugins.X`` raises, rather than answering None,
    when no plugin at all is installed (no ``hydra_plugins`` package): that is missing too, a skip rather
    than an error at collection."""
    try:
        return importlib.util.find_spec(module) is None
    except ModuleNotFoundError:
        return True


def assert_same_sweep(expected: Path, actual: Path) -> None:
    """Same rows (apart from where the jobs ran) and byte-identical files in every job directory."""
    rows = read_summary(expected / SUMMARY_FILE)
    other = read_summary(actual / SUMMARY_FILE)
    assert [{**r, "output_dir": ""} for r in other] == [{**r, "output_dir": ""} for r in rows]
    for row in rows:
        assert run_files(actual / row["job"]) == run_files(expected / row["job"])
    assert any(run_files(expected / row["job"]) for row in rows)


def readme_launcher_line(launcher: str) -> tuple[list[str], list[str]]:
    """The README's sweep line for ``hydra/launcher=LAUNCHER``, split into (launcher arguments, grid).
    The line is run here, against the basic launcher on its grid, rather than in tests/test_readme.py
    (which checks that every such line is run here): one launcher start-up serves both."""
    from test_readme import EXAMPLES, LAUNCHER_LINES_RUN_BY_TEST_SWEEP

    assert launcher in LAUNCHER_LINES_RUN_BY_TEST_SWEEP
    wanted = f"hydra/launcher={launcher}"
    lines = [e for e in EXAMPLES if e.program == "main" and wanted in e.args]
    assert len(lines) == 1, f"README has {len(lines)} lines with {wanted}"
    args = [a for a in lines[0].args if a not in ("-m", "--multirun")]
    launcher_args = [a for a in args if a.startswith(("hydra/launcher=", "hydra.launcher."))]
    grid = [a for a in args if a not in launcher_args]
    assert any("," in a for a in grid), lines[0].text
    return launcher_args, grid


def launched_like_the_basic_launcher(tmp_path: Path, capsys, launcher: str) -> None:
    """The README's line for ``launcher`` exits 0 without a traceback, and writes the same files and
    summary as the basic launcher on the same grid. The launcher's sweep runs in a process of its own, as
    a user runs it: a parallel launcher's helpers (joblib's workers and resource trackers) live as long
    as the process that started them."""
    launcher_args, grid = readme_launcher_line(launcher)
    assert sweep(tmp_path / "basic", *grid)[0] == 0, capsys.readouterr().err
    (tmp_path / launcher).mkdir()
    result = run(["-m", *launcher_args, *grid, f"hydra.sweep.dir={tmp_path / launcher / 'sweep'}"],
                 cwd=tmp_path / launcher)
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stdout + result.stderr, result.stderr
    assert_same_sweep(tmp_path / "basic" / "sweep", tmp_path / launcher / "sweep")


@pytest.mark.slow
@pytest.mark.skipif(plugin_missing("hydra_plugins.hydra_joblib_launcher"), reason="needs the joblib extra")
def test_joblib_launcher_gives_the_same_outputs(tmp_path, capsys):
    launched_like_the_basic_launcher(tmp_path, capsys, "joblib")


@pytest.mark.slow
@pytest.mark.skipif(
    plugin_missing("hydra_plugins.hydra_submitit_launcher"), reason="needs the submitit extra"
)
def test_submitit_local_launcher_gives_the_same_outputs(tmp_path, capsys):
    launched_like_the_basic_launcher(tmp_path, capsys, "submitit_local")

"""Run folders: never shared, never clobbered, never half-written.

Two runs started in the same second get folders of their own; a run does not write into a folder
that holds another run's ``resolved.yaml`` unless the command line names that folder; a run killed
(SIGKILL) at any point of its writes leaves either the complete file set or no ``resolved.yaml``, and
what it leaves never disturbs the next run.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import cli_env, write

from verl_roles.main import main
from verl_roles.write_protocol import PAUSE_ENV

ROLE_FILES = [f"roles/{role}.yaml" for role in ("actor", "critic", "ref", "rollout")]
RUN_FILES = {*ROLE_FILES, "resolved.yaml"}
QUIET = ["hydra/job_logging=none", "hydra/hydra_logging=none"]


def run_files(folder: Path) -> set[str]:
    """The main job's files present in ``folder``."""
    return {name for name in RUN_FILES if (folder / name).is_file()}


def temporary_files(folder: Path) -> list[Path]:
    return sorted(folder.rglob("*.tmp"))


def test_two_runs_started_together_get_folders_of_their_own(tmp_path: Path):
    """Two real processes started at the same moment, with the default run folder."""
    command = [sys.executable, "-m", "verl_roles.main"]
    runs = [
        subprocess.Popen([*command, f"trainer.project_name=run{i}"], cwd=tmp_path, env=cli_env(),
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for i in range(2)
    ]
    for process in runs:
        _, err = process.communicate(timeout=120)
        assert process.returncode == 0, err
    resolved = sorted(tmp_path.glob("outputs/*/*/resolved.yaml"))
    assert len(resolved) == 2, resolved
    assert {run_files(path.parent) == RUN_FILES for path in resolved} == {True}
    assert {"run0", "run1"} == {_project(path) for path in resolved}


def _project(resolved: Path) -> str:
    from omegaconf import OmegaConf

    return str(OmegaConf.load(resolved).trainer.project_name)


def test_runs_in_one_process_within_a_second_get_folders_of_their_own(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
):
    monkeypatch.chdir(tmp_path)
    for _ in range(3):
        assert main(QUIET) == 0, capsys.readouterr().err
    assert len(list(tmp_path.glob("outputs/*/*/resolved.yaml"))) == 3


def test_a_folder_holding_another_run_is_refused_unless_named_on_the_command_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
):
    fixed = tmp_path / "fixed"
    # A primary config of the user's own that pins the run folder (the command line does not name it).
    write(tmp_path / "myconf" / "pinned.yaml",
          f"defaults:\n  - ppo_trainer\n  - _self_\nhydra:\n  run:\n    dir: {fixed}\n")
    args = ["--config-dir", str(tmp_path / "myconf"), "--config-name", "pinned", *QUIET]
    assert main([*args, "trainer.project_name=first"]) == 0, capsys.readouterr().err
    first = {name: (fixed / name).read_bytes() for name in RUN_FILES}

    assert main([*args, "trainer.project_name=second"]) == 2
    err = capsys.readouterr().err
    assert "already holds the files of another run" in err and f"hydra.run.dir={fixed}" in err
    assert {name: (fixed / name).read_bytes() for name in RUN_FILES} == first
    assert not temporary_files(fixed)

    # Named on the command line: the user asked for that folder, so the run replaces its files.
    assert main([*args, "trainer.project_name=third", f"hydra.run.dir={fixed}"]) == 0
    assert b"project_name: third" in (fixed / "resolved.yaml").read_bytes()


# Named points of the write sequence (verl_roles.output): each role file and resolved.yaml is first
# written to a temporary file, then all are renamed into place, resolved.yaml last.
KILL_POINTS = [
    "temp:actor.yaml",
    "temp:resolved.yaml",
    "renamed:actor.yaml",
    "renamed:rollout.yaml",
    "renamed:resolved.yaml",
]


@pytest.mark.parametrize("point", KILL_POINTS)
def test_a_run_killed_while_writing_leaves_all_files_or_no_resolved_yaml(
    point: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
):
    out = tmp_path / "out"
    env = {**cli_env(), PAUSE_ENV: point}
    process = subprocess.Popen(
        [sys.executable, "-m", "verl_roles.main", f"hydra.run.dir={out}", "trainer.project_name=killed"],
        cwd=tmp_path, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )
    try:
        line = process.stderr.readline()
        while line and "paused at" not in line:
            line = process.stderr.readline()
        assert f"paused at {point}" in line
        os.kill(process.pid, signal.SIGKILL)
    finally:
        process.kill()
        process.wait(timeout=60)
    left = run_files(out)
    assert left == RUN_FILES or "resolved.yaml" not in left, left

    # The next run into the same folder (named on the command line) is not disturbed by what the
    # killed one left, and leaves a complete set of its own.
    assert main([f"hydra.run.dir={out}", "trainer.project_name=next", *QUIET]) == 0, capsys.readouterr().err
    assert run_files(out) == RUN_FILES
    assert b"project_name: next" in (out / "resolved.yaml").read_bytes()
    assert all(p.name.startswith(".") for p in temporary_files(out))


def test_a_failed_run_leaves_no_temporary_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    out = tmp_path / "out"
    write(out / "roles", "a file where the roles folder should be\n")
    assert main([f"hydra.run.dir={out}", *QUIET]) == 2
    assert "roles" in capsys.readouterr().err
    assert not temporary_files(tmp_path)
    assert not (out / "resolved.yaml").exists()

"""Run folders: never shared, never mixed, never half-written, whatever stops a run.

A run is built in a staging folder beside its folder and swapped in whole (verl_roles/runs/write_protocol/).
Two runs started together get folders of their own; a folder holding another run is refused unless
``--overwrite`` asks to replace it, and then it is replaced as a whole; a folder holding anything else
is never touched; two runs on one folder at once: the second is refused. Ctrl-C, SIGTERM or SIGHUP at
any point of the writes leaves the folder as it was and nothing beside it; SIGKILL leaves the old run
or the new one, never a mix, and the next run cleans up what it left.
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
from verl_roles.runs.write_protocol import PAUSE_ENV

ROLE_FILES = [f"roles/{role}.yaml" for role in ("actor", "critic", "ref", "rollout")]
RUN_FILES = {*ROLE_FILES, "resolved.yaml"}
QUIET = ["hydra/job_logging=none", "hydra/hydra_logging=none"]


def run_files(folder: Path) -> set[str]:
    """The main job's files present in ``folder``."""
    return {name for name in RUN_FILES if (folder / name).is_file()}


def snapshot(folder: Path) -> dict[str, bytes]:
    """Every file under ``folder`` and its bytes."""
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def project(folder: Path) -> str:
    from omegaconf import OmegaConf

    return str(OmegaConf.load(folder / "resolved.yaml").trainer.project_name)


@pytest.mark.slow
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
    assert {"run0", "run1"} == {project(path.parent) for path in resolved}
    # Nothing but the two runs: no staging folder, no lock left beside them.
    folders = sorted(p.name for p in resolved[0].parent.parent.iterdir())
    assert folders == sorted(p.parent.name for p in resolved)


def test_runs_in_one_process_within_a_second_get_folders_of_their_own(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
):
    monkeypatch.chdir(tmp_path)
    for _ in range(3):
        assert main(QUIET) == 0, capsys.readouterr().err
    assert len(list(tmp_path.glob("outputs/*/*/resolved.yaml"))) == 3


def test_a_folder_holding_a_run_is_refused_unless_overwrite_replaces_it_whole(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
):
    fixed = tmp_path / "fixed"
    args = [f"hydra.run.dir={fixed}", *QUIET]
    assert main([*args, "trainer.project_name=first"]) == 0, capsys.readouterr().err
    write(fixed / "notes_of_the_first_run.txt", "kept with the first run\n")
    first = snapshot(fixed)

    # Named on the command line or not, a folder holding a run is not written into.
    assert main([*args, "trainer.project_name=second"]) == 2
    err = capsys.readouterr().err
    assert "already holds the files of another run; nothing was written" in err and "--overwrite" in err
    assert snapshot(fixed) == first

    # --overwrite replaces the old run as a whole: none of its files is left beside the new ones.
    assert main([*args, "--overwrite", "trainer.project_name=third"]) == 0, capsys.readouterr().err
    assert project(fixed) == "third"
    assert not (fixed / "notes_of_the_first_run.txt").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["fixed"]


def test_a_folder_holding_other_files_is_never_touched(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    mine = tmp_path / "mine"
    write(mine / "thesis.tex", "two years of work\n")
    for extra in ([], ["--overwrite"]):
        assert main([f"hydra.run.dir={mine}", *extra, *QUIET]) == 2
        assert "holds files that verl_roles did not write" in capsys.readouterr().err
        assert snapshot(mine) == {"thesis.tex": b"two years of work\n"}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mine"]


def test_an_empty_folder_is_used(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    empty = tmp_path / "empty"
    empty.mkdir()
    assert main([f"hydra.run.dir={empty}", *QUIET]) == 0, capsys.readouterr().err
    assert run_files(empty) == RUN_FILES


def _as_in_a_terminal() -> None:
    """Ctrl-C as a terminal delivers it: a shell that started the suite in the background (`pytest &`)
    leaves SIGINT ignored, and a child inheriting that would never see the signal under test."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _paused(out: Path, point: str, *extra: str) -> subprocess.Popen[str]:
    """A run into ``out`` that stops at ``point`` of its writes (it says so on stderr)."""
    process = subprocess.Popen(
        [sys.executable, "-m", "verl_roles.main", f"hydra.run.dir={out}", "trainer.project_name=new", *extra],
        cwd=out.parent, env={**cli_env(), PAUSE_ENV: point},
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
        text=True, preexec_fn=_as_in_a_terminal,
    )
    line = process.stderr.readline()
    while line and "paused at" not in line:
        line = process.stderr.readline()
    assert f"paused at {point}" in line, line
    return process


# Named points of the writes: each file's temporary file written / renamed into place inside the staging
# folder, the whole run staged, and (replacing an old run) the old run set aside before the new one moves in.
POINTS = ["temp:actor.yaml", "temp:resolved.yaml", "renamed:actor.yaml", "renamed:resolved.yaml", "staged"]


# Every point is stopped by a signal, and every signal stops a run before the point of no return and at
# it (swap:aside takes all three). Not every point with every signal: each signal only raises an
# exception in the main thread (Ctrl-C KeyboardInterrupt; SIGTERM and SIGHUP Interrupted, from one
# handler, verl_roles/runs/write_protocol/folders.py), and the clean-up of each point runs in `finally` and
# `except BaseException` blocks that do not look at which exception it is; only the exit code differs,
# and that is checked for each signal. The point decides what is cleaned up; the signal, the exit code.
STOPS = [
    ("temp:actor.yaml", signal.SIGINT), ("temp:resolved.yaml", signal.SIGTERM),
    ("renamed:actor.yaml", signal.SIGTERM), ("renamed:resolved.yaml", signal.SIGINT),
    ("staged", signal.SIGINT), ("staged", signal.SIGHUP),
    *(("swap:aside", stop) for stop in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)),
]


@pytest.mark.slow
@pytest.mark.parametrize(("point", "stop"), STOPS, ids=[f"{p}-{s.name[3:]}" for p, s in STOPS])
def test_a_run_stopped_at_any_point_leaves_the_folder_as_it_was(
    point: str, stop: signal.Signals, tmp_path: Path, capsys: pytest.CaptureFixture[str]
):
    out = tmp_path / "out"
    assert main([f"hydra.run.dir={out}", "trainer.project_name=old", *QUIET]) == 0, capsys.readouterr().err
    before = snapshot(out)
    process = _paused(out, point, "--overwrite")
    try:
        os.kill(process.pid, stop)
        _, err = process.communicate(timeout=60)
    finally:
        process.kill()
    assert process.returncode == 128 + stop, err
    assert "Traceback" not in err
    if point == "swap:aside":
        # Past the point of no return the new run is complete; it still never mixes with the old one.
        assert snapshot(out) == before or project(out) == "new" and run_files(out) == RUN_FILES
    else:
        assert snapshot(out) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]


@pytest.mark.slow
@pytest.mark.parametrize("point", [*POINTS, "swap:aside"])
def test_a_run_killed_at_any_point_leaves_one_whole_run_and_the_next_run_cleans_up(
    point: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
):
    out = tmp_path / "out"
    assert main([f"hydra.run.dir={out}", "trainer.project_name=old", *QUIET]) == 0, capsys.readouterr().err
    before = snapshot(out)
    process = _paused(out, point, "--overwrite")
    os.kill(process.pid, signal.SIGKILL)
    process.wait(timeout=60)
    # SIGKILL runs no clean-up: the old run is intact (or, cut mid-swap, set aside whole, put back below).
    if out.exists():
        assert snapshot(out) == before
    # The next run recovers what the killed one left, and writes a whole run of its own.
    assert main([f"hydra.run.dir={out}", "--overwrite", "trainer.project_name=next", *QUIET]) == 0, (
        capsys.readouterr().err
    )
    assert run_files(out) == RUN_FILES and project(out) == "next"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]


@pytest.mark.slow
def test_two_runs_on_one_folder_at_once_the_second_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
):
    out = tmp_path / "out"
    first = _paused(out, "staged")
    try:
        assert main([f"hydra.run.dir={out}", "trainer.project_name=second", *QUIET]) == 2
        err = capsys.readouterr().err
        assert "another verl_roles run" in err and f"(process {first.pid})" in err
    finally:
        first.kill()
        first.wait(timeout=60)
    assert main([f"hydra.run.dir={out}", *QUIET]) == 0, capsys.readouterr().err


def test_a_refused_run_creates_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    """Validated before Hydra starts: no outputs/ folder, no .hydra/, no log."""
    os.chdir(tmp_path)
    try:
        assert main(["critic.optim.lr=-1"]) == 2
    finally:
        os.chdir(Path(__file__).parent)
    assert "critic.optim.lr" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []


def test_a_failed_write_leaves_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    out = tmp_path / "deep" / "out"
    write(tmp_path / "deep", "a file where the run's parent folder should be\n")
    assert main([f"hydra.run.dir={out}", *QUIET]) == 2
    assert "deep" in capsys.readouterr().err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["deep"]

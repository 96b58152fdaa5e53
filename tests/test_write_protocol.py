"""The write protocol by class: a run is never written inside another run, a link is followed, and what a
killed write leaves (at every step, beside its folder or inside a mount-point folder) is put right by the
next claim, whether that claim is then refused or not, and whichever folder it is for.

A kill is a forked copy of the test process that ends with ``os._exit`` at the named write step, running
no clean-up, as SIGKILL would (tests/test_run_dirs.py kills real processes); a mount point is a folder the
protocol is told is one (a real one needs root)."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from bad_inputs import WITHOUT_ROOTS_READ_POWER, unreadable_works
from conftest import cli_env

from verl_roles.base.errors import ConfigError
from verl_roles.main import main
from verl_roles.runs.write_protocol import (
    RUN,
    SWEEP,
    claim_folder,
    folders,
    recovery,
    write_all_or_nothing,
    write_user_file,
)
from verl_roles.runs.write_protocol import files as write_files

QUIET = ["hydra/job_logging=none", "hydra/hydra_logging=none"]


def write_run(target: Path, text: str, *, kind: str = RUN, overwrite: bool = False) -> None:
    """A claimed folder written whole: two files and the marker, committed."""
    with claim_folder(target, kind, overwrite=overwrite) as claim:
        write_all_or_nothing([(claim.staging / "roles" / "actor.yaml", text),
                              (claim.staging / "resolved.yaml", text)])
        claim.commit()


def tree(folder: Path) -> dict[str, str]:
    """Every entry under ``folder``, hidden ones too: files with their text."""
    return {
        str(p.relative_to(folder)): p.read_text() if p.is_file() else "/"
        for p in sorted(folder.rglob("*"))
    }


def killed_at(point: str, action) -> None:  # noqa: ANN001 - a thunk
    """Run ``action`` in a forked copy of this process that ends at the write step ``point`` without any
    clean-up (as SIGKILL would); wait for it."""
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child never returns
        try:
            write_files._PAUSE_AT = point
            write_files.time.sleep = lambda seconds: os._exit(137)
            action()
        finally:
            os._exit(0)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 137, f"the write never reached {point}"


@pytest.fixture
def mount_point(monkeypatch: pytest.MonkeyPatch):
    """Make the protocol take the folders in ``points`` for mount points (it cannot rename them)."""
    points: set[Path] = set()

    def is_mount(target: Path) -> bool:
        return target.is_dir() and Path(os.path.realpath(target)) in points

    monkeypatch.setattr(recovery, "is_mount", is_mount)
    monkeypatch.setattr(folders, "is_mount", is_mount)
    return points


# --- never inside another run ----------------------------------------------------------------------


JOB_MARKER = '{"kind": "run", "status": "ok", "written_by": "verl_roles"}\n'


@pytest.mark.parametrize("overwrite", [False, True])
@pytest.mark.parametrize("where", ["run/new", "run/deep/er/new", "sweep/new", "sweep/0", "sweep/0/new"])
def test_a_run_is_never_written_inside_another_run_or_sweep(tmp_path: Path, where: str, overwrite: bool):
    write_run(tmp_path / "run", "old\n")
    write_run(tmp_path / "sweep", "s\n", kind=SWEEP)
    (tmp_path / "sweep" / "0").mkdir()
    (tmp_path / "sweep" / "0" / ".verl_roles").write_text(JOB_MARKER)
    before = tree(tmp_path)
    with pytest.raises(ConfigError, match="is inside .*, the folder of a (run|sweep) of verl_roles"):
        claim_folder(tmp_path / where, RUN, overwrite=overwrite)
    assert tree(tmp_path) == before


def test_a_folder_another_claim_is_writing_holds_no_other_run(tmp_path: Path):
    with claim_folder(tmp_path / "outer", SWEEP, overwrite=False) as claim:
        with pytest.raises(ConfigError, match="which another verl_roles run .*is writing"):
            claim_folder(tmp_path / "outer" / "0", RUN, overwrite=False)
        with pytest.raises(ConfigError, match="a folder verl_roles keeps a run in while it is being written"):
            claim_folder(claim.staging / "0", RUN, overwrite=False)
    assert list(tmp_path.iterdir()) == []


def test_overwrite_never_deletes_a_run_inside_the_old_one(tmp_path: Path):
    write_run(tmp_path / "outer", "old\n")
    write_run(tmp_path / "other", "other\n")
    os.replace(tmp_path / "other", tmp_path / "outer" / "other")
    before = tree(tmp_path)
    with pytest.raises(ConfigError, match="which --overwrite would delete with it"):
        claim_folder(tmp_path / "outer", RUN, overwrite=True)
    assert tree(tmp_path) == before
    # A sweep's own jobs are part of it: replacing the sweep replaces them.
    write_run(tmp_path / "sweep", "s\n", kind=SWEEP)
    (tmp_path / "sweep" / "0").mkdir()
    (tmp_path / "sweep" / "0" / ".verl_roles").write_text(JOB_MARKER)
    write_run(tmp_path / "sweep", "new sweep\n", kind=SWEEP, overwrite=True)
    assert not (tmp_path / "sweep" / "0").exists()


def test_the_main_job_refuses_a_run_inside_a_run_and_writes_nothing(tmp_path: Path, capsys):
    assert main([f"hydra.run.dir={tmp_path / 'run'}", *QUIET]) == 0
    before = tree(tmp_path)
    assert main([f"hydra.run.dir={tmp_path / 'run' / 'retry'}", *QUIET]) == 2
    assert "is inside" in capsys.readouterr().err
    assert tree(tmp_path) == before


def test_special_files_under_the_protocols_names_are_never_written_through_nor_waited_on(tmp_path: Path):
    """A link at the lock's name is never followed (its file would be truncated), a FIFO at the lock's or
    a marker's name never opened for reading (that waits forever)."""
    precious = tmp_path / "precious.txt"
    precious.write_text("keep me\n")
    (tmp_path / ".a.verl_roles-lock").symlink_to(precious)
    with pytest.raises(ConfigError, match="a link, a FIFO or another special file"):
        claim_folder(tmp_path / "a", RUN, overwrite=False)
    assert precious.read_text() == "keep me\n"
    os.mkfifo(tmp_path / ".b.verl_roles-lock")
    with pytest.raises(ConfigError, match="a link, a FIFO or another special file"):
        claim_folder(tmp_path / "b", RUN, overwrite=False)
    (tmp_path / "p").mkdir()
    os.mkfifo(tmp_path / "p" / ".verl_roles")
    write_run(tmp_path / "p" / "c", "c\n")  # a FIFO is no marker: p holds no run
    assert (tmp_path / "p" / "c" / "resolved.yaml").read_text() == "c\n"


# --- links -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("destination", ["real", "real/deeper", "missing/run"])
def test_a_link_is_followed_and_stays(tmp_path: Path, destination: str):
    (tmp_path / "real").mkdir()
    (tmp_path / "link").symlink_to(destination)
    write_run(tmp_path / "link", "first\n")
    assert (tmp_path / "link").is_symlink()
    assert (tmp_path / destination / "resolved.yaml").read_text() == "first\n"
    write_run(tmp_path / "link", "second\n", overwrite=True)
    assert (tmp_path / "link").is_symlink()
    assert (tmp_path / destination / "resolved.yaml").read_text() == "second\n"


# --- what a killed write leaves --------------------------------------------------------------------

BESIDE_POINTS = ["temp:resolved.yaml", "renamed:actor.yaml", "staged", "swap:aside"]
INSIDE_POINTS = [*BESIDE_POINTS, "moved:roles", "moved:resolved.yaml"]


@pytest.mark.parametrize("next_claim", ["refused", "overwrite"])
@pytest.mark.parametrize(("point", "mount"), [
    *((point, False) for point in BESIDE_POINTS), *((point, True) for point in INSIDE_POINTS)
])
def test_a_write_killed_at_any_step_is_put_right_by_the_next_claim(
    tmp_path: Path, point: str, mount: bool, next_claim: str, mount_point: set[Path]
):
    target = tmp_path / "out"
    write_run(target, "old\n")
    if mount:
        mount_point.add(target)
    old = tree(target)
    killed_at(point, lambda: write_run(target, "new\n", overwrite=True))
    if next_claim == "refused":
        with pytest.raises(ConfigError, match="already holds"):
            claim_folder(target, RUN, overwrite=False)
        assert tree(target) == old  # the old run whole (put back when it was cut mid-swap)
    else:
        write_run(target, "next\n", overwrite=True)
        assert (target / "resolved.yaml").read_text() == "next\n"
        assert "old\n" not in tree(target).values()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]


@pytest.mark.parametrize("point", ["staged", "swap:aside"])
def test_a_claim_tidies_up_after_a_killed_claim_of_another_folder_beside_it(tmp_path: Path, point: str):
    write_run(tmp_path / "a", "old a\n")
    killed_at(point, lambda: write_run(tmp_path / "a", "new a\n", overwrite=True))
    assert any(".verl_roles-" in p.name for p in tmp_path.iterdir())
    write_run(tmp_path / "b", "b\n")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a", "b"]
    assert (tmp_path / "a" / "resolved.yaml").read_text() == "old a\n"


def test_an_old_run_set_aside_goes_back_into_an_empty_folder_and_is_never_deleted_otherwise(tmp_path: Path):
    target = tmp_path / "out"
    write_run(target, "old\n")
    killed_at("swap:aside", lambda: write_run(target, "new\n", overwrite=True))
    target.mkdir()  # a script made the folder again before the next run
    with pytest.raises(ConfigError, match="already holds the files of another run"):
        claim_folder(target, RUN, overwrite=False)
    assert (target / "resolved.yaml").read_text() == "old\n"
    killed_at("swap:aside", lambda: write_run(target, "new\n", overwrite=True))
    target.mkdir()
    (target / "notes.txt").write_text("mine\n")
    with pytest.raises(ConfigError, match="did not write"):
        claim_folder(target, RUN, overwrite=True)
    aside = [p for p in tmp_path.iterdir() if ".verl_roles-replaced-" in p.name]
    assert len(aside) == 1 and (aside[0] / "resolved.yaml").read_text() == "old\n"


def test_recovery_never_takes_a_live_claim_or_a_folder_named_like_its_own(tmp_path: Path):
    lookalike = tmp_path / "x.verl_roles-staging-abcdefgh"
    with claim_folder(lookalike, RUN, overwrite=False) as live:
        write_run(tmp_path / "x", "x\n")
        write_run(tmp_path / "y", "y\n")
        assert live.staging.is_dir()
        write_all_or_nothing([(live.staging / "resolved.yaml", "live\n")])
        live.commit()
    assert (lookalike / "resolved.yaml").read_text() == "live\n"


# --- a file the user names (export-slime -o, the snapshot generator) -------------------------------


def test_a_fifo_nobody_reads_is_refused_at_once_and_one_being_read_is_written_into(tmp_path: Path):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    with pytest.raises(ConfigError, match="a FIFO .* that no process is reading"):
        write_user_file(fifo, "text\n")
    received: list[str] = []
    reader = threading.Thread(target=lambda: received.append(fifo.read_text()))
    reader.start()
    while True:  # the reader has the FIFO open once a writer can open it without waiting
        try:
            write_user_file(fifo, "text\n")
            break
        except ConfigError:
            time.sleep(0.01)
    reader.join(10)
    assert received == ["text\n"] and stat.S_ISFIFO(fifo.lstat().st_mode)


# In a process that, root or not, meets file permissions as their owner does (root loses its power to
# override them: tests/bad_inputs.py's unreadable cases drop it the same way).
REFUSED_WRITE = """
import sys
from pathlib import Path
from verl_roles.base.errors import ConfigError
from verl_roles.runs.write_protocol import write_user_file
try:
    write_user_file(Path(sys.argv[1]), "new\\n")
except ConfigError as error:
    print(error)
    sys.exit(2)
"""


def test_a_file_the_user_may_not_write_is_refused_not_replaced(tmp_path: Path):
    target = tmp_path / "kept.yaml"
    target.write_text("mine\n")
    target.chmod(0o444)
    if os.geteuid() != 0:
        with pytest.raises(ConfigError, match="Permission denied"):
            write_user_file(target, "new\n")
    else:
        if not unreadable_works():
            pytest.skip("root without `setpriv` writes every file")
        result = subprocess.run([*WITHOUT_ROOTS_READ_POWER, sys.executable, "-c", REFUSED_WRITE, str(target)],
                                env=cli_env(), capture_output=True, text=True, timeout=120)
        assert result.returncode == 2 and "Permission denied" in result.stdout, result.stdout + result.stderr
    assert target.read_text() == "mine\n"


def test_a_path_longer_than_the_system_allows_is_one_paragraph(tmp_path: Path):
    with pytest.raises(ConfigError, match="cannot be written: File name too long"):
        claim_folder(tmp_path.joinpath(*["y" * 200] * 25), RUN, overwrite=False)
    assert list(tmp_path.iterdir()) == []

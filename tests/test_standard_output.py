"""Standard output that cannot take what a command prints, as a shell sets it up: a full disk
(``> /dev/full``) is exit 2 and one paragraph naming it, whichever code printed (ours, Hydra's views, its
shell completion), and a run writes nothing then; a reader that went away (``| head``) ends the command
quietly with 141, as ``yes | head`` ends."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import cli_env

# Real processes: what a shell sees is the point.
pytestmark = [
    pytest.mark.slow, pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full"),
]

MAIN = f"{shlex.quote(sys.executable)} -m verl_roles.main"
CLI = f"{shlex.quote(sys.executable)} -m verl_roles.cli"


def _shell(line: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """``line`` in bash, whose exit code is the first command's of a pipeline."""
    return subprocess.run(["bash", "-c", f"{line}; exit ${{PIPESTATUS[0]}}"], cwd=cwd, env=cli_env(),
                          capture_output=True, text=True, timeout=300)


FULL = [
    f"{CLI} show",
    f"{CLI} keys",
    f"{CLI} explain trainer.nnodes",
    f"{MAIN} --cfg job",
    f"{MAIN} --help",
    f"{MAIN} -sc install=bash",
    f"{MAIN} hydra.run.dir=run",
]


@pytest.mark.parametrize("line", FULL, ids=[line.split(" -m ")[1] for line in FULL])
def test_a_full_disk_on_standard_output_is_one_paragraph_and_exit_2(line: str, tmp_path: Path):
    result = _shell(f"{line} > /dev/full", tmp_path)
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr and "internal error" not in result.stderr
    assert result.stderr.count("verl_roles error: standard output: could not be written (No space left") == 1
    assert "Fix: send it where it can be written" in result.stderr
    assert list(tmp_path.iterdir()) == []


PIPED = [f"{MAIN} -sc install=bash", f"{CLI} show", f"{MAIN} --cfg job", f"{CLI} keys"]


@pytest.mark.parametrize("line", PIPED, ids=[line.split(" -m ")[1] for line in PIPED])
def test_a_reader_that_goes_away_ends_the_command_quietly(line: str, tmp_path: Path):
    # A pipe whose reader is gone before the command prints (`| head` once it has its lines).
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        result = subprocess.run(shlex.split(line), cwd=tmp_path, env=cli_env(), stdout=write_end,
                                stderr=subprocess.PIPE, text=True, timeout=300)
    finally:
        os.close(write_end)
    assert result.returncode == 141, result.stderr
    assert result.stderr == ""


def test_a_run_whose_reader_went_away_still_writes_its_folder(tmp_path: Path):
    """The files a run writes matter more than what it shows: the summary is lost, the run is not (exit
    0: the run is there)."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        result = subprocess.run(shlex.split(f"{MAIN} hydra.run.dir=run"), cwd=tmp_path, env=cli_env(),
                                stdout=write_end, stderr=subprocess.PIPE, text=True, timeout=300)
    finally:
        os.close(write_end)
    assert result.returncode == 0 and "Traceback" not in result.stderr, result.stderr
    assert (tmp_path / "run" / "resolved.yaml").is_file()


# Standard error that cannot be written (`2> /dev/full`): the messages are lost, never the verdict. Each
# line and the exit code it keeps: a mistake (2, nothing written), a run that warns (0, its folder
# written), a command's mistake (2).
FULL_STDERR = [
    (f"{MAIN} trainer.nnodez=1 hydra.run.dir=run", 2, False),
    (f"{MAIN} model_engine=megatron actor_rollout_ref.actor.optim.betas=[0.9,0.95] hydra.run.dir=run", 0,
     True),
    (f"{CLI} show trainer.nnodez=1", 2, False),
]


@pytest.mark.parametrize(("line", "code", "writes"), FULL_STDERR, ids=["mistake", "warning", "command"])
def test_a_full_standard_error_keeps_the_exit_code(line: str, code: int, writes: bool, tmp_path: Path):
    result = _shell(f"{line} 2> /dev/full > /dev/null", tmp_path)
    assert result.returncode == code
    assert (tmp_path / "run" / "resolved.yaml").is_file() == writes

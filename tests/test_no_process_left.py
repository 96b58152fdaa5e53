"""No process is left behind: a Python that never answers launch's verl probe is given up on (with
everything it started), a trainer ends with `verl-roles launch` and a sweep's worker with the process
that launched the sweep, also when that one is killed outright (SIGKILL). A stand-in for verl's Python
(a shell script) answers the probe and records its process number; verl's checks, which launch runs
before the trainer, end with launch too."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import cli_env

from verl_roles.base.errors import ConfigError
from verl_roles.commands import launch, sweep
from verl_roles.main import main

# Real processes: what is tested is how they end.
pytestmark = pytest.mark.slow

STAND_IN = """#!/bin/sh
if [ "$1" = "-c" ]; then {probe}; fi
echo $$ > {pids}
exec sleep 60
"""


def stand_in(tmp_path: Path, probe: str) -> Path:
    path = tmp_path / "python"
    path.write_text(STAND_IN.format(probe=probe, pids=tmp_path / "pids"))
    path.chmod(0o755)
    return path


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def gone_soon(pids: list[int]) -> bool:
    for _ in range(100):
        if not any(alive(pid) for pid in pids):
            return True
        time.sleep(0.05)
    return False


def test_a_python_that_never_answers_the_probe_is_given_up_on_with_what_it_started(tmp_path, monkeypatch):
    pids = tmp_path / "pids"
    python = stand_in(tmp_path, f"echo $$ > {pids}; sleep 60 & echo $! >> {pids}; wait")
    monkeypatch.setattr(launch, "PROBE_SECONDS", 1)
    with pytest.raises(ConfigError, match="did not say within 1 seconds whether it has verl"):
        launch.probe_verl(str(python))
    started = [int(line) for line in pids.read_text().split()]
    assert len(started) == 2 and gone_soon(started)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux ends a child with its parent")
@pytest.mark.parametrize("child", ["trainer", "verl's checks"])
def test_what_launch_started_ends_when_launch_is_killed_outright(tmp_path, capsys, child):
    """The stand-in answers the probe, then stands in for what launch starts next: verl's checks, or
    (with --skip-verl-checks) the trainer."""
    run_dir = tmp_path / "run"
    # The paths only the user knows, set (launch refuses a run that keeps the shipped placeholders).
    paths = [f"actor_rollout_ref.model.path={tmp_path / 'model'}",
             f"data.train_files={tmp_path / 'train.parquet'}", f"data.val_files={tmp_path / 'test.parquet'}"]
    quiet = ["hydra/job_logging=none", "hydra/hydra_logging=none"]
    assert main([*paths, f"hydra.run.dir={run_dir}", *quiet]) == 0
    python = stand_in(tmp_path, """echo '{"found": true, "version": "0.9.1"}'; exit 0""")
    skip = ["--skip-verl-checks"] if child == "trainer" else []
    process = subprocess.Popen(
        [sys.executable, "-m", "verl_roles.cli", "launch", "--verl-python", str(python), *skip,
         "--run-dir", str(run_dir)],
        cwd=tmp_path, env=cli_env(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
    )
    try:
        for _ in range(600):
            if (tmp_path / "pids").exists() and (tmp_path / "pids").read_text().strip():
                break
            assert process.poll() is None, process.stderr.read().decode()
            time.sleep(0.05)
        trainer = int((tmp_path / "pids").read_text())
        assert alive(trainer)
        os.kill(process.pid, signal.SIGKILL)
        process.wait(timeout=60)
        assert gone_soon([trainer])
    finally:
        process.kill()
        process.wait()
        if (tmp_path / "pids").exists():
            for pid in (tmp_path / "pids").read_text().split():
                if alive(int(pid)):
                    os.kill(int(pid), signal.SIGKILL)


def test_a_sweep_worker_ends_when_the_process_that_launched_the_sweep_is_killed(tmp_path):
    """A launching process (forked here) starts a worker (a joblib worker, say) and is killed outright."""
    worker_pid = tmp_path / "worker"
    launcher = os.fork()
    if launcher == 0:  # pragma: no cover - the launching process
        try:
            identity = sweep.this_process()
            if os.fork() == 0:  # the worker: runs a job, which watches the launcher, then works on
                sweep.end_with_launcher(identity)
                worker_pid.write_text(str(os.getpid()))
                time.sleep(60)
            time.sleep(60)
        finally:
            os._exit(0)
    for _ in range(200):
        if worker_pid.exists() and worker_pid.read_text():
            break
        time.sleep(0.05)
    worker = int(worker_pid.read_text())
    try:
        assert alive(worker)
        os.kill(launcher, signal.SIGKILL)
        os.waitpid(launcher, 0)
        assert gone_soon([worker])
    finally:
        if alive(worker):
            os.kill(worker, signal.SIGKILL)

"""Ray for the launch tests: a local Ray head with a fake GPU, runs in process sessions of their own,
and where a run of verl's trainer stopped.

A CPU machine runs verl's trainer as far as Ray, the TaskRunner and the workers, and stops where a
worker first needs a GPU. The tests start one Ray head per side (``ray start --head --block`` in the
verl Python, ``--num-gpus`` a logical resource Ray hands out without any device behind it), point
each trainer run at it with ``RAY_ADDRESS`` (verl's ``run_ppo`` then connects instead of starting a
cluster of its own: one Ray start serves several runs), and read the traceback the run ends with.

Nothing here may hang or leak: every run and every head is started as the leader of a new process
session; a run that outlives its timeout is killed, and so is every process of a head's session when
the tests are done with it, also when a test failed (:func:`kill_session`: the processes whose session
id is the leader's, and the leader's descendants).
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

HEAD_START_TIMEOUT_S = 300
# A run on an idle 2-core machine takes about a minute; a loaded one, several.
RUN_TIMEOUT_S = 900
KILL_GRACE_S = 10
# Logical CPUs of a head (Ray counts them, nothing checks them against the machine). A run holds about
# six: its TaskRunner, TransferQueue's controller and storage unit, and the resource pool's bundle (three,
# verl's max_colocate_count); the rest is room for the previous run's actors while Ray removes them.
HEAD_CPUS = 16

ANSI = re.compile(r"\x1b\[[0-9;]*m")
# A line a Ray worker printed, as the driver relays it: "(WorkerDict pid=123) ...".
RELAYED = re.compile(r"^\((?:[\w:]+ )?pid=\d+(?:, ip=[\d.]+)?\)")
FRAME = re.compile(r'^\s*File "(?P<path>[^"]+)", line (?P<line>\d+), in (?P<function>\S+)')
REMOTE_CALL = re.compile(r"ray::(?P<call>\S+?)\(\)")
ERROR_LINE = re.compile(r"^(?P<type>[A-Za-z_][\w.]*(?:\([\w.]+\))?): (?P<message>.*)$")


# --------------------------------------------------------------------------------------------------
# Processes: sessions of our own, killed by id.


def session_members(leader: int) -> list[int]:
    """The processes in the session ``leader`` started, and the leader's descendants (living or zombie)."""
    sessions: dict[int, int] = {}
    parents: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()
        parents[int(entry)], sessions[int(entry)] = int(fields[1]), int(fields[3])
    members = {pid for pid, session in sessions.items() if session == leader}
    frontier = {leader}
    while frontier:
        frontier = {pid for pid, parent in parents.items() if parent in frontier} - members
        members |= frontier
    members.discard(os.getpid())
    return sorted(members)


def kill_session(leader: int, grace_s: float = KILL_GRACE_S) -> None:
    """SIGTERM to every process of ``leader``'s session, then SIGKILL to whatever is left after the grace."""
    for sig, wait_s in ((signal.SIGTERM, grace_s), (signal.SIGKILL, 0.0)):
        members = session_members(leader)
        for pid in members:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, sig)
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline and any(alive(pid) for pid in members):
            time.sleep(0.2)


def alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie, ended and not yet reaped, does not)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text(encoding="utf-8").rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


@dataclass
class Finished:
    """A run that ended (or was killed at its timeout): its exit code and its output, stdout and stderr
    interleaved as written."""

    argv: list[str]
    returncode: int | None
    timed_out: bool
    output: str
    seconds: float


class Run:
    """A command started as a session leader, its output going to ``log``."""

    def __init__(self, argv: list[str], env: dict[str, str], cwd: Path, log: Path) -> None:
        self.argv, self.log, self.started = argv, log, time.monotonic()
        with log.open("w", encoding="utf-8") as out:
            self.process = subprocess.Popen(
                argv, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                start_new_session=True,
            )

    def finish(self, timeout_s: float = RUN_TIMEOUT_S) -> Finished:
        """Wait for the run (at most ``timeout_s`` from its start), then kill whatever it left."""
        remaining = max(0.0, timeout_s - (time.monotonic() - self.started))
        timed_out = False
        try:
            self.process.wait(timeout=remaining)
        except subprocess.TimeoutExpired:
            timed_out = True
        finally:
            kill_session(self.process.pid)
            self.process.wait()
        return Finished(
            argv=self.argv,
            returncode=None if timed_out else self.process.returncode,
            timed_out=timed_out,
            output=self.log.read_text(encoding="utf-8", errors="replace"),
            seconds=time.monotonic() - self.started,
        )


# --------------------------------------------------------------------------------------------------
# The Ray head.


@dataclass
class RayHead:
    """A local Ray cluster of one node: its GCS address, and what started it."""

    address: str
    run: Run
    temp_dir: Path


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def spawn_head(python: str, env: dict[str, str], log: Path, cpus: int, gpus: int) -> RayHead:
    """``ray start --head --block`` in ``python``'s Ray, with ``gpus`` logical GPUs, its own temporary
    folder (short: Ray's socket paths have a length limit) and free ports, so it never meets another
    Ray on the machine. :func:`wait_for` tells when it is up."""
    temp_dir = Path(tempfile.mkdtemp(prefix="vr-ray-", dir="/tmp"))
    argv = [
        python, "-m", "ray.scripts.scripts", "start", "--head", "--block", "--port=0",
        f"--ray-client-server-port={free_port()}", f"--num-cpus={cpus}", f"--num-gpus={gpus}",
        "--include-dashboard=false", "--disable-usage-stats", f"--temp-dir={temp_dir}",
    ]
    return RayHead(address="", run=Run(argv, env, log.parent, log), temp_dir=temp_dir)


def wait_for(head: RayHead) -> None:
    """Wait until the head publishes its address (its GCS is up), then note the address."""
    published = head.temp_dir / "ray_current_cluster"
    deadline = head.run.started + HEAD_START_TIMEOUT_S
    while not (published.is_file() and "Ray runtime started" in head.run.log.read_text(errors="replace")):
        if head.run.process.poll() is not None or time.monotonic() > deadline:
            log = head.run.log.read_text(errors="replace")[-3000:]
            raise RuntimeError(f"the Ray head did not start ({' '.join(head.run.argv)}):\n{log}")
        time.sleep(0.5)
    head.address = published.read_text(encoding="utf-8").strip()


def stop_head(head: RayHead) -> None:
    """Every process of the head's session killed, its temporary folder removed."""
    kill_session(head.run.process.pid)
    head.run.process.wait()
    shutil.rmtree(head.temp_dir, ignore_errors=True)


@contextlib.contextmanager
def ray_heads(python: str, env: dict[str, str], work: Path, count: int, gpus: int) -> Iterator[list[RayHead]]:
    """``count`` heads, started side by side (``ray start`` mostly waits on its daemons), each stopped
    at the end whatever happened."""
    heads: list[RayHead] = []
    with terminated_as_interrupt():
        try:
            for index in range(count):
                heads.append(spawn_head(python, env, work / f"ray_head_{index}.log", HEAD_CPUS, gpus))
            for head in heads:
                wait_for(head)
            yield heads
        finally:
            for head in heads:
                stop_head(head)


@contextlib.contextmanager
def terminated_as_interrupt() -> Iterator[None]:
    """SIGTERM (a CI job cancelled, ``timeout``) unwinds like Ctrl-C, so the heads are still stopped
    (Python's default for SIGTERM ends the process without running a ``finally``)."""
    def interrupt(signum: int, frame: object) -> None:
        raise KeyboardInterrupt(f"signal {signum}")

    try:
        saved = signal.signal(signal.SIGTERM, interrupt)
    except ValueError:  # not the main thread: leave signals alone
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, saved)


# --------------------------------------------------------------------------------------------------
# Where a run stopped.


@dataclass(frozen=True)
class Stop:
    """Where a trainer run ended: the chain of Ray calls the error crossed (``TaskRunner.run``,
    ``WorkerDict.actor_rollout_ref_init_model``, ...), verl's frames on the way (``path:line function:
    code``, paths from the package folder on) and the error itself."""

    remote_calls: tuple[str, ...]
    frames: tuple[str, ...]
    error: str

    def describe(self) -> str:
        lines = [f"  Ray calls: {' -> '.join(self.remote_calls) or '(none)'}"]
        lines += [f"  {frame}" for frame in self.frames]
        lines.append(f"  error: {self.error}")
        return "\n".join(lines)


def driver_lines(output: str) -> list[str]:
    """The run's own lines (not those Ray relays from its workers), colour codes removed."""
    lines = [ANSI.sub("", line) for line in output.splitlines()]
    return [line for line in lines if not RELAYED.match(line)]


def stopping_point(output: str) -> Stop | None:
    """The last traceback of the run's own output, read as a :class:`Stop` (None: no traceback)."""
    lines = driver_lines(output)
    starts = [index for index, line in enumerate(lines) if line.startswith("Traceback (most recent call")]
    if not starts:
        return None
    tail = lines[starts[-1]:]
    calls: list[str] = []
    frames: list[str] = []
    error = ""
    for index, line in enumerate(tail):
        remote = REMOTE_CALL.search(line)
        if remote and ERROR_LINE.match(line):
            # "ray::aBcDeFWorkerDict_0:0:WorkerDict.__init__" -> "WorkerDict.__init__"
            calls.append(remote.group("call").rsplit(":", 1)[-1])
            continue
        frame = FRAME.match(line)
        if frame:
            path = package_path(frame.group("path"))
            if path.startswith("verl/"):
                code = tail[index + 1].strip() if index + 1 < len(tail) else ""
                frames.append(f"{path}:{frame.group('line')} {frame.group('function')}: {code}")
            continue
        if ERROR_LINE.match(line) and not line.startswith(" "):
            error = line.strip()
    return Stop(remote_calls=tuple(calls), frames=tuple(frames), error=error)


def package_path(path: str) -> str:
    """A source path from its package folder on (the same for a venv and the cache it links to)."""
    return path.split("site-packages/", 1)[1] if "site-packages/" in path else Path(path).name


# What verl's ray.init prints once Ray is up: connected to a running cluster, or started one.
RAY_STARTED = ("Connected to Ray cluster", "Started a local Ray instance")
# How far a run got, in order; each is read from the run's output and its stopping point.
MILESTONES = ("Ray up", "TaskRunner running", "workers started", "workers built", "init_model")


def milestones(output: str, stop: Stop | None) -> list[str]:
    """The :data:`MILESTONES` a run reached."""
    calls = stop.remote_calls if stop else ()
    workers = [call for call in calls if call.startswith("WorkerDict.")]
    reached = {
        "Ray up": any(marker in line for line in driver_lines(output) for marker in RAY_STARTED),
        "TaskRunner running": any(call.startswith("TaskRunner") and call.endswith(".run") for call in calls),
        "workers started": bool(workers),
        "workers built": any(call != "WorkerDict.__init__" for call in workers),
        "init_model": any(call.endswith("init_model") for call in workers),
    }
    return [name for name in MILESTONES if reached[name]]


# What a worker on a machine without a GPU fails with, first: the error text, and what raised it.
GPU_ABSENT: dict[str, str] = {
    "ProcessGroupNCCL is only supported with GPUs, no GPUs found": (
        "torch.distributed.init_process_group creating the NCCL backend of verl's process group "
        "(verl/utils/distributed.py, initialize_global_process_group_ray: backend cpu:gloo,cuda:nccl)"
    ),
    # A CPU build of torch (the acceptance venvs' torch where a CPU wheel is at hand:
    # scripts/verl_acceptance.sh) has no NCCL at all: the same call, the same missing GPU.
    "Distributed package doesn't have NCCL built in": (
        "torch.distributed.init_process_group creating the NCCL backend of verl's process group with a "
        "CPU build of torch (verl/utils/distributed.py, initialize_global_process_group_ray: backend "
        "cpu:gloo,cuda:nccl)"
    ),
    # verl 0.8.0 names the device by torch.cuda.is_available() (utils/device.py, get_device_name): "cpu"
    # without a GPU, so the same call asks torch for one backend twice on the CPU.
    "The custom backend string argument is invalid: cpu:gloo,cpu:nccl": (
        "torch.distributed.init_process_group refusing the backend string verl builds without a CUDA "
        "device (verl/utils/distributed.py, initialize_global_process_group_ray: cpu:gloo,<device>:nccl "
        "with <device> = cpu)"
    ),
}


def missing_gpu(stop: Stop | None) -> str | None:
    """Why ``stop`` is the missing GPU (the row of :data:`GPU_ABSENT`), None when it is something else."""
    if stop is None:
        return None
    return next((why for text, why in GPU_ABSENT.items() if text in stop.error), None)

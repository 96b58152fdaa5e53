"""Sweep jobs never share training state: each job its own experiment name and its own output paths.

verl names a run by ``trainer.experiment_name`` (the tracking run, and through
``trainer.default_local_dir``'s default, ``checkpoints/<project>/<experiment>``, where its checkpoints
go and where ``trainer.resume_mode: auto`` resumes from). Every job of a sweep starts from the same
config, so left alone every job would log under one name and resume from and overwrite the others'
checkpoints.

So in a sweep, jobs that would share an experiment name each get their own: the name with the job's
swept values appended (:func:`job_name`; ``gsm8k_critic.optim.lr=1e-05``), the same for the same values
on every machine, so a sweep run again resumes each job from its own checkpoints. A name the jobs
already have each to themselves (it is swept, or interpolates a swept key) is kept. Then every output
path verl writes per run (:data:`RUN_OUTPUTS`) that some jobs still share while they use it (a
``default_local_dir`` set to a fixed path, say) stops the sweep before anything runs
(:func:`shared_output_problems`), with a fix.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from verl_roles.errors import Problem

# The key that names a run.
EXPERIMENT_NAME = "trainer.experiment_name"

Values = Mapping[str, object]


def _checkpoints_in_use(values: Values) -> bool:
    freq = values.get("trainer.save_freq")
    saves = isinstance(freq, int) and not isinstance(freq, bool) and freq > 0 or freq is True
    return saves or values.get("trainer.resume_mode") not in ("disable", None)


def _set(key: str) -> Callable[[Values], bool]:
    return lambda values: values.get(key) not in (None, "")


def _enabled(key: str) -> Callable[[Values], bool]:
    return lambda values: values.get(key) is True


@dataclass(frozen=True)
class RunOutput:
    """A path verl writes one run's output to: its key, what goes there, when the run uses it (from the
    resolved values of :data:`READ_KEYS`), and what sharing it does."""

    key: str
    holds: str
    in_use: Callable[[Values], bool]
    harm: str


RUN_OUTPUTS: tuple[RunOutput, ...] = (
    RunOutput("trainer.default_local_dir", "checkpoints", _checkpoints_in_use,
              "each job would resume from and overwrite the others' checkpoints"),
    RunOutput("trainer.default_hdfs_dir", "checkpoint copies", _set("trainer.default_hdfs_dir"),
              "the jobs would overwrite each other's checkpoint copies"),
    RunOutput("trainer.rollout_data_dir", "rollout dumps", _set("trainer.rollout_data_dir"),
              "the jobs would write their rollouts into one folder, mixed"),
    RunOutput("trainer.validation_data_dir", "validation generations", _set("trainer.validation_data_dir"),
              "the jobs would write their validation generations into one folder, mixed"),
    RunOutput("global_profiler.save_path", "profiles", _set("global_profiler.tool"),
              "the jobs would overwrite each other's profiles"),
    *(
        RunOutput(f"skip.{kind}.dump_dir", "dumped generations", _enabled(f"skip.{kind}.enable"),
                  "the jobs would load and overwrite each other's dumped generations")
        for kind in ("rollout", "async_rollout", "rollout_tq")
    ),
)

# Every key read to decide where a job writes and whether it does.
READ_KEYS: tuple[str, ...] = tuple(dict.fromkeys([
    EXPERIMENT_NAME, "trainer.save_freq", "trainer.resume_mode", "global_profiler.tool",
    *(output.key for output in RUN_OUTPUTS),
    *(f"skip.{kind}.enable" for kind in ("rollout", "async_rollout", "rollout_tq")),
]))

# Characters a name keeps; any other becomes `_` (a name is also a path: no `/`, no spaces).
_UNSAFE = re.compile(r"[^A-Za-z0-9._=,+-]")
_MAX_SUFFIX = 100


def job_suffix(swept: Sequence[tuple[str, str]]) -> str:
    """The swept values of a job as a name part: ``critic.optim.lr=1e-05,model_engine=megatron``; a long
    one is cut and given a hash of the whole, so it stays unique."""
    text = _UNSAFE.sub("_", ",".join(f"{key}={value}" for key, value in swept))
    if len(text) > _MAX_SUFFIX:
        digest = hashlib.sha256(text.encode("utf-8")).hexdigest()[:10]
        text = f"{text[: _MAX_SUFFIX - 11]}-{digest}"
    return text


def job_name(name: str, swept: Sequence[tuple[str, str]]) -> str:
    """The experiment name of a sweep job whose jobs would otherwise share ``name``."""
    suffix = job_suffix(swept)
    return f"{name}_{suffix}" if suffix else name


@dataclass(frozen=True)
class JobOutputs:
    """What one job of a sweep would write where: its number, its swept values, and the resolved values
    of :data:`READ_KEYS`."""

    number: int
    swept: tuple[tuple[str, str], ...]
    values: Mapping[str, object]


def assign_names(jobs: Sequence[JobOutputs]) -> dict[int, str]:
    """Job number -> its own experiment name, for the jobs that would share one; the others keep theirs."""
    by_name: dict[object, list[JobOutputs]] = {}
    for job in jobs:
        by_name.setdefault(job.values.get(EXPERIMENT_NAME), []).append(job)
    assigned: dict[int, str] = {}
    for name, sharing in by_name.items():
        if len(sharing) > 1:
            for job in sharing:
                assigned[job.number] = job_name(str(name), job.swept)
    return assigned


def shared_output_problems(jobs: Sequence[JobOutputs]) -> list[Problem]:
    """An output path that several jobs use and share (after :func:`assign_names`): one problem each."""
    problems = []
    for output in RUN_OUTPUTS:
        users: dict[object, list[int]] = {}
        for job in jobs:
            if output.in_use(job.values):
                users.setdefault(job.values.get(output.key), []).append(job.number)
        for value, numbers in users.items():
            if len(numbers) < 2:
                continue
            shown = ", ".join(f"#{n}" for n in numbers[:6]) + (" ..." if len(numbers) > 6 else "")
            problems.append(Problem(
                key=output.key,
                message=f"is {value!r} for {len(numbers)} jobs of this sweep ({shown}), which write their "
                f"{output.holds} there: {output.harm}",
                fix=f"make it one path per job, e.g. {output.key}='/path/${{trainer.experiment_name}}' "
                "(every job gets its own trainer.experiment_name), or sweep it; nothing was launched or "
                "written",
            ))
    return problems

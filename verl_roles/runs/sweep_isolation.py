"""Sweep jobs never share training state: each job its own experiment name and its own output paths.

verl names a run by ``trainer.experiment_name`` (the tracking run, and through
``trainer.default_local_dir``'s default, ``checkpoints/<project>/<experiment>``, where its checkpoints
go and where ``trainer.resume_mode: auto`` resumes from). Every job of a sweep starts from the same
config, so left alone every job would log under one name and resume from and overwrite the others'
checkpoints.

So in a sweep, jobs that would share an experiment name each get their own: the name with the job's
swept values appended (:func:`job_name`; ``gsm8k_critic.optim.lr=1e-05``), the same for the same values
on every machine, so a sweep run again resumes each job from its own checkpoints. A name the jobs
already have each to themselves (it is swept, or interpolates a swept key) is kept; swept values that
only differ in characters a name cannot hold (``a b`` and ``a_b``) get a hash of the values as typed,
so two jobs never end up with one name. Then the experiment name and every output path verl writes per
run (:data:`RUN_OUTPUTS`) that some jobs still share while they use it (a ``default_local_dir`` set to
a fixed path, say) stops the sweep before anything runs (:func:`shared_output_problems`), with a fix.
Paths are compared as the folders they name, from the folder the sweep is planned in (where verl is
started: ``ck``, ``./ck`` and ``ck/`` are one folder).
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from verl_roles.base.errors import Problem

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


def _always(values: Values) -> bool:
    return True


def _profiling(role: str) -> Callable[[Values], bool]:
    """A role's profiler writes when it is enabled and has a tool (its own, or the global one)."""
    def profiling(values: Values) -> bool:
        tool = values.get(f"{role}.profiler.tool") or values.get("global_profiler.tool")
        return values.get(f"{role}.profiler.enable") is True and tool not in (None, "")

    return profiling


@dataclass(frozen=True)
class RunOutput:
    """A name or path verl writes one run's output under: its key, what goes there, when the run uses it
    (from the resolved values of :data:`READ_KEYS`), what sharing it does, and whether it is a path."""

    key: str
    holds: str
    in_use: Callable[[Values], bool]
    harm: str
    path: bool = True


# Roles with a profiler of their own (its save_path follows global_profiler.save_path unless set).
PROFILED_ROLES = ("actor_rollout_ref.actor", "actor_rollout_ref.ref", "actor_rollout_ref.rollout", "critic")

RUN_OUTPUTS: tuple[RunOutput, ...] = (
    RunOutput(EXPERIMENT_NAME, "tracking run, logs and checkpoint folder name", _always,
              "the jobs would log into one tracking run (wandb, tensorboard, the file logger) and mix their "
              "metrics", path=False),
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
        RunOutput(f"{role}.profiler.save_path", "profiles", _profiling(role),
                  "the jobs would overwrite each other's profiles")
        for role in PROFILED_ROLES
    ),
    RunOutput("ray_kwargs.timeline_json_file", "Ray timeline", _set("ray_kwargs.timeline_json_file"),
              "each job would overwrite the others' timeline"),
    RunOutput("actor_rollout_ref.rollout.trace.experiment_name", "rollout traces",
              _set("actor_rollout_ref.rollout.trace.backend"),
              "the jobs would log their rollout traces under one name", path=False),
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
    *(f"{role}.profiler.{key}" for role in PROFILED_ROLES for key in ("enable", "tool")),
    "actor_rollout_ref.rollout.trace.backend",
]))

# Characters a name keeps; any other becomes `_` (a name is also a path: no `/`, no spaces).
_UNSAFE = re.compile(r"[^A-Za-z0-9._=,+-]")
_MAX_SUFFIX = 100


def job_suffix(swept: Sequence[tuple[str, str]]) -> str:
    """The swept values of a job as a name part: ``critic.optim.lr=1e-05,model_engine=megatron``. One
    whose characters had to be replaced (``a b`` -> ``a_b``), or that is too long and is cut, ends in a
    hash of the values as typed, so different values never give one name."""
    typed = ",".join(f"{key}={value}" for key, value in swept)
    text = _UNSAFE.sub("_", typed)
    if text == typed and len(text) <= _MAX_SUFFIX:
        return text
    digest = hashlib.sha256(typed.encode("utf-8", "surrogateescape")).hexdigest()[:10]
    return f"{text[: _MAX_SUFFIX - 11]}-{digest}"


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


def in_use(job: JobOutputs) -> list[str]:
    """The keys of :data:`RUN_OUTPUTS` that ``job`` writes under."""
    return [output.key for output in RUN_OUTPUTS if output.in_use(job.values)]


def folder_of(value: object, start: str | None = None) -> object:
    """The folder a path value names, for comparing two jobs' paths: made absolute from ``start`` (the
    current folder), ``~`` expanded, ``.``/``..`` and trailing slashes gone, links followed. A URL
    (``hdfs://...``) and anything that is not a string is compared as it is."""
    if not isinstance(value, str) or "://" in value or not value:
        return value
    return os.path.realpath(os.path.join(start or os.getcwd(), os.path.expanduser(value)))


def shared_output_problems(jobs: Sequence[JobOutputs]) -> list[Problem]:
    """An output name or path that several jobs use and share (after :func:`assign_names`): one problem
    each."""
    problems = []
    start = os.getcwd()
    for output in RUN_OUTPUTS:
        users: dict[object, list[int]] = {}
        spelled: dict[object, list[object]] = {}
        for job in jobs:
            if output.in_use(job.values):
                value = job.values.get(output.key)
                same = folder_of(value, start) if output.path else value
                users.setdefault(same, []).append(job.number)
                if value not in spelled.setdefault(same, []):
                    spelled[same].append(value)
        for same, numbers in users.items():
            if len(numbers) < 2:
                continue
            values = spelled[same]
            what = repr(values[0]) if len(values) == 1 else (
                " and ".join(repr(v) for v in values[:3]) + f" (all the folder {same})")
            shown = ", ".join(f"#{n}" for n in numbers[:6]) + (" ..." if len(numbers) > 6 else "")
            problems.append(Problem(
                key=output.key,
                message=f"is {what} for {len(numbers)} jobs of this sweep ({shown}), which write their "
                f"{output.holds} there: {output.harm}",
                fix=_fix(output),
            ))
    return problems


def _fix(output: RunOutput) -> str:
    if output.key == EXPERIMENT_NAME:
        example = "trainer.experiment_name='exp_${critic.optim.lr}'"
        return f"give each job its own name: sweep it, or interpolate a swept key ({example}); nothing was " \
            "launched or written"
    example = "'/path/${trainer.experiment_name}'" if output.path else "'${trainer.experiment_name}'"
    what = "path" if output.path else "name"
    return (f"make it one {what} per job, e.g. {output.key}={example} (every job gets its own "
            "trainer.experiment_name), or sweep it; nothing was launched or written")

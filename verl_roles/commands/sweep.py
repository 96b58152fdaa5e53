"""Sweeps (``python -m verl_roles.main -m ...``): every job's status and the sweep's ``sweep_summary.csv``.

A job never stops the sweep: the main job records its own error and returns an outcome
(:func:`ok` / :func:`failed`), and a job whose overrides do not even compose gets a placeholder
config (:func:`failed_job_config`) that the main job reports as failed.

Jobs may run in this process (Hydra's basic launcher), in worker processes (``hydra/launcher=joblib``)
or on other machines (``hydra/launcher=submitit_slurm``), so the status travels through files:
:class:`SweepSummary`, a Hydra callback declared in ``conf/ppo_trainer.yaml`` (``hydra.callbacks``),
writes each job's outcome to ``<sweep dir>/.verl_roles_jobs/<num>.json`` from ``on_job_end`` (which runs
wherever the job ran), and at the end of the multirun, in the launching process, gathers them into
``<sweep dir>/sweep_summary.csv``, which the main job reads for its exit code (:func:`read_records`).
"""

from __future__ import annotations

import csv
import io
import json
import shutil
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from hydra.core.utils import JobReturn, JobStatus
from hydra.experimental.callback import Callback
from hydra.types import RunMode
from omegaconf import DictConfig, OmegaConf

from verl_roles.api import job_outcome
from verl_roles.cmdline import CommandLine
from verl_roles.output import write_atomic
from verl_roles.sweep_grid import swept_keys

SUMMARY_FILE = "sweep_summary.csv"
STATUS_DIR = ".verl_roles_jobs"
# A failed job's full error, in its own directory (the summary holds its one-line headline).
ERROR_FILE = "error.txt"
# The columns of sweep_summary.csv; one column per swept key goes after `job`.
SUMMARY_COLUMNS = ("job", "status", "error", "output_dir", "overrides")


def task_overrides(hydra_cfg: DictConfig) -> list[str]:
    """A job's overrides as typed (not resolved: ``x=${y}`` stays as written)."""
    return [str(item) for item in OmegaConf.to_container(hydra_cfg.overrides.task, resolve=False)]


def ok() -> dict[str, str]:
    """The return value of a job that wrote its files."""
    return {"status": "ok", "error": ""}


def failed(headline: str) -> dict[str, str]:
    """The return value of a job that failed; ``headline`` is its error on one line."""
    return {"status": "failed", "error": " ".join(headline.split())}


@dataclass(frozen=True)
class JobRecord:
    """One row of ``sweep_summary.csv``; ``swept`` holds the value of each swept key (filled in when
    the summary is written, from the job's overrides)."""

    job: int
    overrides: str
    status: str
    error: str
    output_dir: str
    override_list: tuple[str, ...] = ()
    swept: tuple[tuple[str, str], ...] = field(default=(), compare=False)


@dataclass(frozen=True)
class Summary:
    """What a finished sweep reports: its rows and where the CSV is."""

    path: Path
    records: tuple[JobRecord, ...]

    @property
    def failures(self) -> tuple[JobRecord, ...]:
        return tuple(r for r in self.records if r.status != "ok")


class SweepSummary(Callback):
    """Hydra callback: job statuses to files, and ``sweep_summary.csv`` when the multirun ends."""

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        status_dir = Path(str(config.hydra.sweep.dir)) / STATUS_DIR
        shutil.rmtree(status_dir, ignore_errors=True)

    def on_job_end(self, config: DictConfig, job_return: JobReturn, **kwargs: Any) -> None:
        if config.hydra.get("mode") != RunMode.MULTIRUN:
            return
        record = _record(config, job_return)
        path = Path(str(config.hydra.sweep.dir)) / STATUS_DIR / f"{record.job}.json"
        write_atomic(path, json.dumps(asdict(record), sort_keys=True) + "\n")

    def on_multirun_end(self, config: DictConfig, **kwargs: Any) -> None:
        keys = swept_keys_of(task_overrides(config.hydra))
        summary = write_summary(Path(str(config.hydra.sweep.dir)), keys)
        total, bad = len(summary.records), len(summary.failures)
        print(f"verl_roles: sweep of {total} jobs: {total - bad} ok, {bad} failed; summary in {summary.path}")


def _record(config: DictConfig, job_return: JobReturn) -> JobRecord:
    outcome: dict[str, str]
    value = job_outcome(job_return)
    if job_return.status == JobStatus.COMPLETED and isinstance(value, dict):
        outcome = value
    elif job_return.status == JobStatus.COMPLETED:
        outcome = ok()
    else:
        outcome = failed(f"{type(value).__name__}: {value}")
    overrides = task_overrides(config.hydra)
    return JobRecord(
        job=int(config.hydra.job.num),
        overrides=" ".join(overrides),
        status=outcome.get("status", "failed"),
        error=outcome.get("error", ""),
        output_dir=str(config.hydra.runtime.output_dir),
        override_list=tuple(overrides),
    )


def swept_keys_of(overrides: Sequence[str]) -> list[str]:
    """The keys a multirun sweeps, from its overrides as typed (``a=1,2`` sweeps ``a``)."""
    return swept_keys(CommandLine.of(overrides))


def _swept_values(record: JobRecord, keys: Sequence[str]) -> tuple[tuple[str, str], ...]:
    """The value a job has for each swept key, read from its overrides."""
    values = {o.key: o.value_text or "" for o in CommandLine.of(record.override_list).overrides}
    return tuple((key, values.get(key, "")) for key in keys)


def summary_columns(keys: Sequence[str]) -> list[str]:
    """The header of sweep_summary.csv for a sweep over ``keys``."""
    return [SUMMARY_COLUMNS[0], *keys, *SUMMARY_COLUMNS[1:]]


def write_summary(sweep_dir: Path, keys: Sequence[str] = ()) -> Summary:
    """Gather the job statuses under ``sweep_dir`` into ``sweep_summary.csv`` (sorted by job number),
    with one column per swept key of ``keys``."""
    status_dir = sweep_dir / STATUS_DIR
    records = sorted(
        (_read_status(p) for p in status_dir.glob("*.json")),
        key=lambda r: r.job,
    )
    records = [replace(record, swept=_swept_values(record, keys)) for record in records]
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(summary_columns(keys))
    for record in records:
        row = asdict(record)
        writer.writerow([row["job"], *(value for _, value in record.swept),
                         *(row[column] for column in SUMMARY_COLUMNS[1:])])
    path = sweep_dir / SUMMARY_FILE
    write_atomic(path, buffer.getvalue())
    shutil.rmtree(status_dir, ignore_errors=True)
    return Summary(path=path, records=tuple(records))


def _read_status(path: Path) -> JobRecord:
    data = json.loads(path.read_text(encoding="utf-8"))
    data["override_list"] = tuple(data.get("override_list", ()))
    data.pop("swept", None)
    return JobRecord(**data)


def read_summary(path: Path) -> list[dict[str, str]]:
    """The rows of a ``sweep_summary.csv``."""
    with path.open(encoding="utf-8", newline="") as handle:
        return list(csv.DictReader(handle))


def read_records(sweep_dir: Path) -> Summary | None:
    """The summary the callback wrote into ``sweep_dir``, or None when there is none."""
    path = sweep_dir / SUMMARY_FILE
    if not path.is_file():
        return None
    records = tuple(
        JobRecord(**{column: row[column] for column in SUMMARY_COLUMNS}) for row in read_summary(path)
    )
    return Summary(path=path, records=tuple(replace(r, job=int(r.job)) for r in records))


def sweep_error_text(summary: Summary) -> str:
    """One paragraph for the end of a sweep with failed jobs: how many, which, and the first error."""
    first = summary.failures[0]
    shown = ", ".join(f"#{r.job} ({r.overrides})" for r in summary.failures[:5])
    more = "" if len(summary.failures) <= 5 else f" and {len(summary.failures) - 5} more"
    ok = len(summary.records) - len(summary.failures)
    others = {0: "no job wrote its files", 1: "the other job wrote its files"}.get(
        ok, f"the other {ok} jobs wrote their files"
    )
    return (
        f"{len(summary.failures)} of {len(summary.records)} sweep jobs failed: {shown}{more}; "
        f"{others}. Job #{first.job}: {first.error} "
        f"Every job's status and error is in {summary.path}, each failed job's full error in "
        f"{ERROR_FILE} in its directory. Fix: correct the failed jobs' values as their {ERROR_FILE} says "
        "(`verl-roles check-sweep` with the same overrides checks every job without running any), then "
        "run the sweep again"
    )

"""Sweeps (``python -m verl_roles.main -m ...``): each job's record, and the sweep's ``sweep_summary.csv``.

Every job of a sweep is planned and validated before Hydra starts
(:func:`verl_roles.api.sweep_planning.plan_sweep`), so a job fails only while writing (a full disk, say).
Jobs may run in this process (Hydra's basic launcher), in worker processes (``hydra/launcher=joblib``)
or on other machines (``hydra/launcher=submitit_slurm``), so each job records its outcome in its own
folder: the marker file of the write protocol, with its status, and for a failed job its full error in
``error.txt``. When the launcher returns, the launching process reads every planned job's folder
(:func:`gather`), writes ``sweep_summary.csv`` into the sweep folder (still the staging folder: the
summary is part of the sweep that is swapped into place), and the invocation fails when a job did not
write its files or the summary cannot be written."""

from __future__ import annotations

import csv
import io
import json
import os
import signal
import socket
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from verl_roles.api.sweep_planning import PlannedJob, SweepPlan
from verl_roles.runs.sweep_isolation import EXPERIMENT_NAME, RUN_OUTPUTS
from verl_roles.runs.write_protocol import MARKER, RUN, marker_text, write_atomic

SUMMARY_FILE = "sweep_summary.csv"
# A failed job's full error, in its own directory (the summary holds its one-line headline).
ERROR_FILE = "error.txt"
# Where each job writes, per row (its experiment name and checkpoint folder); then a column for every
# other output of verl's (sweep_isolation.RUN_OUTPUTS) that a job of the sweep writes to.
OUTPUT_COLUMNS = (EXPERIMENT_NAME, "trainer.default_local_dir")
# The columns of sweep_summary.csv; one column per swept key goes after `job`.
SUMMARY_COLUMNS = ("job", "status", "error", "output_dir", *OUTPUT_COLUMNS, "overrides")


def ok() -> dict[str, str]:
    """The outcome of a job that wrote its files."""
    return {"status": "ok", "error": ""}


def failed(headline: str) -> dict[str, str]:
    """The outcome of a job that failed; ``headline`` is its error on one line."""
    return {"status": "failed", "error": " ".join(headline.split())}


def job_marker(outcome: dict[str, str]) -> str:
    """The marker file of a sweep job's folder: a run of verl_roles, with the job's outcome."""
    record = json.loads(marker_text(RUN))
    record.update(outcome)
    return json.dumps(record, sort_keys=True) + "\n"


@dataclass(frozen=True)
class JobRecord:
    """One row of ``sweep_summary.csv``."""

    job: int
    swept: tuple[tuple[str, str], ...]
    status: str
    error: str
    output_dir: str
    outputs: tuple[str, ...]
    overrides: str


@dataclass(frozen=True)
class Summary:
    """What a finished sweep reports: its rows and where the CSV is."""

    path: Path
    records: tuple[JobRecord, ...]

    @property
    def failures(self) -> tuple[JobRecord, ...]:
        return tuple(r for r in self.records if r.status != "ok")


def _outcome(folder: Path) -> dict[str, str]:
    try:
        record = json.loads((folder / MARKER).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return failed("the job wrote nothing (it did not run, or was stopped; see the launcher's log)")
    if not isinstance(record, dict) or record.get("status") not in ("ok", "failed"):
        return failed("the job's folder holds no record of its outcome")
    return {"status": str(record["status"]), "error": str(record.get("error", ""))}


def output_columns(plan: SweepPlan) -> tuple[str, ...]:
    """The outputs the summary lists: the experiment name, the checkpoint folder, and every other output
    some job of ``plan`` writes to."""
    used = [output.key for output in RUN_OUTPUTS if output.key not in OUTPUT_COLUMNS
            and any(output.in_use(job.outputs) for job in plan.jobs)]
    return (*OUTPUT_COLUMNS, *used)


def gather(plan: SweepPlan, staging: Path) -> list[JobRecord]:
    """Every planned job's record, read from its folder under ``staging`` (rows named by final paths)."""
    assert plan.target is not None
    columns = output_columns(plan)
    records = []
    for job in plan.jobs:
        outcome = _outcome(staging / job.subdir)
        records.append(JobRecord(
            job=job.number,
            swept=tuple((key, job.point.value_of(key)) for key in plan.keys),
            status=outcome["status"],
            error=outcome["error"],
            output_dir=str(plan.target / job.subdir),
            outputs=tuple(_text(job.outputs.get(key)) for key in columns),
            overrides=" ".join(job.point.overrides),
        ))
    return records


def _text(value: object) -> str:
    return "" if value is None else str(value)


def summary_columns(keys: Sequence[str], outputs: Sequence[str] = OUTPUT_COLUMNS) -> list[str]:
    """The header of sweep_summary.csv for a sweep over ``keys`` whose jobs write to ``outputs``: a swept
    key named like one of the other columns (``+job=1,2``) is written ``swept:job``, so every column name
    is one column."""
    fixed = [SUMMARY_COLUMNS[0], *SUMMARY_COLUMNS[1:4], *outputs, SUMMARY_COLUMNS[-1]]
    return [fixed[0], *(f"swept:{k}" if k in fixed else k for k in keys), *fixed[1:]]


def write_summary(plan: SweepPlan, staging: Path) -> Summary:
    """``sweep_summary.csv`` (one row per job, by job number) into the staging folder; a failure to write
    it is a ConfigError (the sweep then fails: a sweep that cannot record its results is not done)."""
    assert plan.target is not None
    records = gather(plan, staging)
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(summary_columns(plan.keys, output_columns(plan)))
    for r in records:
        writer.writerow([r.job, *(value for _, value in r.swept), r.status, r.error, r.output_dir,
                         *r.outputs, r.overrides])
    write_atomic(staging / SUMMARY_FILE, buffer.getvalue())
    return Summary(path=plan.target / SUMMARY_FILE, records=tuple(records))


def read_summary(path: Path) -> list[dict[str, str]]:
    """The rows of a ``sweep_summary.csv``."""
    with path.open(encoding="utf-8", newline="") as handle:
        return list(csv.DictReader(handle))


def sweep_error_text(summary: Summary) -> str:
    """One paragraph for the end of a sweep with failed jobs: how many, which, and the first error."""
    first = summary.failures[0]
    shown = ", ".join(f"#{r.job} ({r.overrides})" for r in summary.failures[:5])
    more = "" if len(summary.failures) <= 5 else f" and {len(summary.failures) - 5} more"
    ok_count = len(summary.records) - len(summary.failures)
    others = {0: "no job wrote its files", 1: "the other job wrote its files"}.get(
        ok_count, f"the other {ok_count} jobs wrote their files"
    )
    return (
        f"{len(summary.failures)} of {len(summary.records)} sweep jobs failed: {shown}{more}; "
        f"{others}. Job #{first.job}: {first.error} "
        f"Every job's status and error is in {summary.path}, each failed job's full error in "
        f"{ERROR_FILE} in its directory. Fix: correct what the failed jobs' {ERROR_FILE} says, then run the "
        "sweep again"
    )


def job_folder(plan: SweepPlan, job: PlannedJob) -> Path:
    assert plan.target is not None
    return plan.target / job.subdir


# --- workers on this machine ---------------------------------------------------------------------

_WATCHED: set[int] = set()


def _process_identity(pid: int) -> str | None:
    """What tells process ``pid`` from a later one given the same number: its start time (Linux), or
    just that it exists; None when there is no such process."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        pass
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return None
    except OSError:
        pass
    return "alive"


def this_process() -> tuple[str, int, str | None]:
    """The launching process as a worker finds it again: its machine, number and start time."""
    return socket.gethostname(), os.getpid(), _process_identity(os.getpid())


def end_with_launcher(launcher: tuple[str, int, str | None]) -> None:
    """In a worker the launching process started on this machine (a joblib worker, a local submitit job):
    end as soon as the launching process has ended, however it ended. Killed outright (SIGKILL), it
    cannot stop its workers, which would go on writing into a sweep nobody will commit, then wait for
    work for minutes. The launching process itself, and a job on another machine, are left alone."""
    host, pid, identity = launcher
    if host != socket.gethostname() or pid == os.getpid() or os.getpid() in _WATCHED or identity is None:
        return
    _WATCHED.add(os.getpid())

    def watch() -> None:
        while _process_identity(pid) == identity:
            time.sleep(0.5)
        os.kill(os.getpid(), signal.SIGKILL)  # at once: no clean-up of a sweep nobody commits

    threading.Thread(target=watch, name="verl_roles: end with the launcher", daemon=True).start()

"""``verl-roles launch``: write a run directory exactly as the main job does, then train on it with verl.

The run directory is composed, validated and written by the main job's own code (same overrides, same
files, same errors); then verl's trainer runs in a child process on the ``resolved.yaml`` it holds:

    PYTHON -m verl.trainer.main_ppo --config-path RUN_DIR --config-name resolved hydra.run.dir=RUN_DIR/verl

and its exit code is ours. ``hydra.run.dir`` only keeps verl's own Hydra log and ``.hydra/`` folder in
a subfolder of the run directory (verl would otherwise write them under ``outputs/`` too, where a run
started in the same second would share our folder); it changes nothing in the config.

Before anything is written, the chosen Python (``--verl-python``, default: this one) is asked whether
it has verl and which version: none stops the launch with the way to install it; a version other than
the one we write configs for (:data:`VERL_TARGET_VERSION`) is a warning naming both. An invalid config
stops the launch with the main job's error: nothing written, nothing started. ``--run-dir DIR`` skips
composing and trains on a run directory written before, e.g. by one job of a sweep.
"""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

from verl_roles.verl_target import VERL_TARGET_VERSION, install_hint

TRAINER_MODULE = "verl.trainer.main_ppo"
EXIT_USAGE = 2

USAGE = f"""\
usage: verl-roles launch [--verl-python PYTHON] [--trainer-module MODULE] [hydra overrides...]
       verl-roles launch [--verl-python PYTHON] [--trainer-module MODULE] --run-dir DIR

Compose, validate and write a run directory exactly as `python -m verl_roles.main [overrides]`, then
run verl's trainer on its resolved.yaml and exit with the trainer's exit code:
  PYTHON -m {TRAINER_MODULE} --config-path RUN_DIR --config-name resolved hydra.run.dir=RUN_DIR/verl

options:
  --verl-python PYTHON     the Python that has verl=={VERL_TARGET_VERSION} (default: this one)
  --trainer-module MODULE  verl's entry point to run (default: {TRAINER_MODULE})
  --run-dir DIR            train on a run directory written before (e.g. one job of a sweep)

An invalid config writes nothing and starts nothing. A sweep (-m) is composed with
`python -m verl_roles.main -m ...`; then launch each job with `verl-roles launch --run-dir JOB_DIR`."""

# Asked of the chosen Python: is verl importable, and which version is installed (without importing
# verl, which takes seconds).
PROBE = """\
import importlib.metadata, importlib.util, json
found = importlib.util.find_spec("verl") is not None
try:
    version = importlib.metadata.version("verl")
except importlib.metadata.PackageNotFoundError:
    version = None
print(json.dumps({"found": found, "version": version}))
"""


@dataclass
class LaunchOptions:
    verl_python: str = sys.executable
    trainer_module: str = TRAINER_MODULE
    run_dir: Path | None = None
    overrides: list[str] = field(default_factory=list)
    show_help: bool = False


class UsageError(Exception):
    """A launch option is missing its value or used wrongly; the message is the paragraph to print."""


@dataclass(frozen=True)
class VerlProbe:
    found: bool
    version: str | None


OPTIONS = {"--verl-python": "verl_python", "--trainer-module": "trainer_module", "--run-dir": "run_dir"}


def parse(args: list[str]) -> LaunchOptions:
    """Launch's own options, in any position; everything else is the main job's command line."""
    options, index = LaunchOptions(), 0
    while index < len(args):
        arg = args[index]
        name, has_value, value = arg.partition("=")
        if arg in ("-h", "--help"):
            options.show_help = True
        elif name in OPTIONS:
            if not has_value:
                if index + 1 >= len(args):
                    raise UsageError(
                        f"{name} needs a value. Fix: write `{name} VALUE` (`verl-roles launch --help`)."
                    )
                index, value = index + 1, args[index + 1]
            setattr(options, OPTIONS[name], Path(value) if name == "--run-dir" else value)
        else:
            options.overrides.append(arg)
        index += 1
    if options.run_dir is not None and options.overrides:
        raise UsageError(
            f"--run-dir trains on a run directory written before, so the overrides "
            f"({' '.join(options.overrides)}) would be ignored. Fix: drop them, or compose a new run "
            "directory without --run-dir."
        )
    return options


def probe_verl(python: str) -> VerlProbe | None:
    """What ``python`` has of verl; None when ``python`` cannot be run at all."""
    try:
        result = subprocess.run([python, "-c", PROBE], capture_output=True, text=True, timeout=120)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if result.returncode != 0:
        return None
    lines = result.stdout.strip().splitlines()
    try:
        answer = json.loads(lines[-1]) if lines else None
    except ValueError:
        answer = None
    if not isinstance(answer, dict) or "found" not in answer:
        return None  # not a Python that ran the probe (e.g. /bin/true)
    version = answer.get("version")
    return VerlProbe(found=bool(answer["found"]), version=str(version) if version is not None else None)


def not_installed(python: str, probe: VerlProbe | None) -> str:
    where = f"the Python at {python}" if probe is not None else f"{python} (it could not be run)"
    return (
        f"verl_roles error: verl is not installed for {where}, and `verl-roles launch` trains with verl's "
        f"trainer. Fix: {install_hint()}. Nothing was written and nothing was started."
    )


def version_warning(python: str, version: str | None) -> str | None:
    if version == VERL_TARGET_VERSION:
        return None
    installed = f"verl {version}" if version else "a verl whose version is not recorded (no package metadata)"
    return (
        f"verl_roles warning: {python} has {installed}, but verl_roles writes configs for verl "
        f"{VERL_TARGET_VERSION}. The launch goes ahead; if verl refuses the config, install "
        f'verl=={VERL_TARGET_VERSION} (`pip install "verl_roles[verl]"`) or a verl_roles release made for '
        f"{version}."
    )


def write_run_dir(overrides: list[str]) -> tuple[int, Path | None]:
    """The main job on ``overrides``: (its exit code, the run directory it wrote or None).

    The main job plans the run before anything exists, so an invalid config writes nothing; a sweep is
    refused before it is planned (launch trains one run)."""
    from verl_roles.commands.main import run_main_job

    code, run_dirs = run_main_job(list(overrides), single_run_only=True)
    return code, (run_dirs[0] if code == 0 and run_dirs else None)


def trainer_command(options: LaunchOptions, run_dir: Path) -> list[str]:
    """verl's command line for ``run_dir``. The run folder's own path is a flag's value (taken as it is);
    as an override value (``hydra.run.dir``) it is quoted for Hydra's grammar, so a folder named
    ``lr=1e-5,bs=8`` or with non-ASCII letters reaches verl's Hydra unchanged."""
    from verl_roles.omegaconf_adapter.override_text import quoted_string

    run_dir = run_dir.resolve()
    return [
        options.verl_python,
        "-m",
        options.trainer_module,
        "--config-path",
        str(run_dir),
        "--config-name",
        "resolved",
        f"hydra.run.dir={quoted_string(str(run_dir / 'verl'))}",
    ]


def exit_code_of(returncode: int) -> int:
    """A child killed by signal N exits as a shell reports it, 128 + N."""
    return 128 - returncode if returncode < 0 else returncode


def run(args: list[str]) -> int:
    """Entry point of ``verl-roles launch``; returns the exit code."""
    from verl_roles.commands.reporting import run_reporting_errors

    args = list(args)
    outcome: list[int] = []
    code = run_reporting_errors(lambda: outcome.append(_launch(args)), args)
    return outcome[0] if outcome and code == 0 else code


def _launch(args: list[str]) -> int:
    try:
        options = parse(list(args))
    except UsageError as error:
        print(f"verl_roles error: {error}", file=sys.stderr)
        return EXIT_USAGE
    if options.show_help:
        print(USAGE)
        return 0
    probe = probe_verl(options.verl_python)
    if probe is None or not probe.found:
        print(not_installed(options.verl_python, probe), file=sys.stderr)
        return EXIT_USAGE
    warning = version_warning(options.verl_python, probe.version)
    if warning:
        print(warning, file=sys.stderr)
    if options.run_dir is not None:
        from verl_roles.planning import check_written_run

        run_dir = options.run_dir
        check_written_run(run_dir)
        workdir = composed_in(run_dir)
    else:
        code, written = write_run_dir(options.overrides)
        if code or written is None:
            return code  # an invalid config (nothing written), or e.g. --cfg job (nothing to train)
        run_dir, workdir = written, Path.cwd()
    command = trainer_command(options, run_dir)
    where = "" if workdir == Path.cwd() else f" in {workdir} (where the run was composed)"
    print(f"verl_roles: starting verl{where}: {shlex.join(command)}", flush=True)
    return exit_code_of(run_trainer(command, workdir))


def composed_in(run_dir: Path) -> Path:
    """The folder a run was composed in (Hydra's record of it, ``.hydra/hydra.yaml``): verl starts there,
    so the run's relative paths (data files, checkpoint folder) mean what they meant when it was composed.
    Without the record: the current folder."""
    record = run_dir / ".hydra" / "hydra.yaml"
    try:
        import yaml

        cwd = yaml.safe_load(record.read_text(encoding="utf-8"))["hydra"]["runtime"]["cwd"]
    except (OSError, ValueError, KeyError, TypeError, yaml.YAMLError):
        return Path.cwd()
    folder = Path(str(cwd))
    return folder if folder.is_dir() else Path.cwd()


def run_trainer(command: list[str], workdir: Path) -> int:
    """Run verl's trainer in its own process group and wait for it; Ctrl-C, SIGTERM and SIGHUP sent to
    launch reach the trainer and everything it started, so stopping launch stops the training."""
    import signal

    process = subprocess.Popen(command, cwd=workdir, process_group=0)

    def forward(signum: int, frame: object) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(process.pid, signum)

    saved = {s: signal.signal(s, forward) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
    try:
        while True:
            try:
                return process.wait()
            except KeyboardInterrupt:
                continue
    finally:
        for number, handler in saved.items():
            signal.signal(number, handler)

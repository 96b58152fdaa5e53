"""``verl-roles launch``: write a run directory exactly as the main job does, then train on it with verl.

The run directory is composed, validated and written by the main job's own code (same overrides, same
files, same errors); then verl's trainer runs in a child process on the ``resolved.yaml`` it holds:

    PYTHON -m verl.trainer.main_ppo --config-path RUN_DIR --config-name resolved hydra.run.dir=RUN_DIR/verl

and its exit code is ours. ``hydra.run.dir`` only keeps verl's own Hydra log and ``.hydra/`` folder in
a subfolder of the run directory (verl would otherwise write them under ``outputs/`` too, where a run
started in the same second would share our folder); it changes nothing in the config.

Before anything is written, the chosen Python (``--verl-python``, default: this one) is asked whether
it has verl and which release (its package metadata; verl is not imported). None, or a release
verl_roles does not write configs for, stops the launch with the way to install one. The config is
written for the installed release: a command line that does not choose ``verl_version`` gets
``verl_version=<installed>``; one that chooses another release is refused, naming both and the fix (a
config written for one release and run on another is what silently changes behaviour). An invalid
config stops the launch with the main job's error: nothing written, nothing started. ``--run-dir DIR``
skips composing and trains on a run directory written before, e.g. by one job of a sweep; its
``resolved.yaml`` must be written for the installed release too.

Before verl's trainer starts (and before a fresh run is swapped into place), verl's own checks run on
the run in the chosen Python (:mod:`verl_roles.commands.launch_checks`): its ``validate_config``, every
conversion of its trainer and workers, and its workers' ``init_model`` and critic worker on CPU. When
verl would refuse the run, launch stops in seconds with one paragraph (exit 2): a fresh run is not
written, a ``--run-dir`` folder is left as it was, and Ray never starts. ``--skip-verl-checks`` starts
the trainer without them.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

from verl_roles.base import releases
from verl_roles.base.errors import ConfigError, Problem, shell_line
from verl_roles.commands.child_processes import ends_with, finish_within
from verl_roles.commands.launch_checks import run_checks
from verl_roles.commands.main import MAIN_FLAGS, BeforeCommit, run_main_job
from verl_roles.inputs.cmdline import CommandLine
from verl_roles.inputs.flags import NO_VALUE, REQUIRED, FlagSpec
from verl_roles.shell.command import Command, Invocation, Words
from verl_roles.shell.reporting import say
from verl_roles.validation import placeholders

TRAINER_MODULE = "verl.trainer.main_ppo"

VERL_PYTHON = FlagSpec(
    ("--verl-python",), REQUIRED, value_name="a Python interpreter", metavar="PYTHON",
    help=f"the Python that has verl, one of {', '.join(releases.supported())} (default: this one)",
)
TRAINER = FlagSpec(
    ("--trainer-module",), REQUIRED, value_name="a module name", metavar="MODULE",
    help=f"verl's entry point to run (default: {TRAINER_MODULE})",
)
RUN_DIR = FlagSpec(
    ("--run-dir",), REQUIRED, value_name="a run directory", metavar="DIR",
    help="train on a run directory written before (e.g. one job of a sweep) instead of composing one",
)
SKIP_CHECKS = FlagSpec(
    ("--skip-verl-checks",), NO_VALUE,
    help="start verl's trainer without running verl's own checks of the run first (they take seconds)",
)
LAUNCH_FLAGS: tuple[FlagSpec, ...] = (VERL_PYTHON, TRAINER, RUN_DIR, SKIP_CHECKS)

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
    checks: bool = True


@dataclass(frozen=True)
class VerlProbe:
    found: bool
    version: str | None


def options_of(invocation: Invocation) -> LaunchOptions:
    """Launch's own options, typed anywhere; every other argument is the main job's command line."""
    run_dir = invocation.value(RUN_DIR)
    options = LaunchOptions(
        verl_python=invocation.value(VERL_PYTHON) or sys.executable,
        trainer_module=invocation.value(TRAINER) or TRAINER_MODULE,
        run_dir=Path(run_dir) if run_dir is not None else None,
        overrides=invocation.line.without(*LAUNCH_FLAGS).argv(),
        checks=not invocation.given(SKIP_CHECKS),
    )
    if options.run_dir is not None and options.overrides:
        raise ConfigError([Problem(
            key=RUN_DIR.name,
            message="trains on a run directory written before, so the other arguments "
            f"({' '.join(options.overrides)}) would be ignored",
            fix="drop them, or compose a new run directory without --run-dir",
        )])
    return options


# How long the chosen Python may take to say whether it has verl (it starts and reads package metadata;
# verl is not imported), before launch says so instead of waiting.
PROBE_SECONDS = 30


def probe_verl(python: str) -> VerlProbe | None:
    """What ``python`` has of verl; None when ``python`` cannot be run at all; a :class:`ConfigError` when
    it does not answer in :data:`PROBE_SECONDS`."""
    try:
        # In a process group of its own: on time-out, everything it started ends with it.
        probe = subprocess.Popen([python, "-c", PROBE], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE, text=True, process_group=0)
    except OSError:
        return None
    finished = finish_within(probe, PROBE_SECONDS)  # the time-out, Ctrl-C: the probe and all it started end
    if finished is None:
        raise ConfigError([Problem(
            key=VERL_PYTHON.name,
            message=f"{python} did not say within {PROBE_SECONDS} seconds whether it has verl (it was asked "
            "to read verl's package metadata, not to import it); nothing was written and nothing was started",
            fix=f"check that it starts (`{python} -c pass`), or pass the Python of your verl environment "
            "with --verl-python",
        )])
    out, _ = finished
    if probe.returncode != 0:
        return None
    lines = out.strip().splitlines()
    try:
        answer = json.loads(lines[-1]) if lines else None
    except ValueError:
        answer = None
    if not isinstance(answer, dict) or "found" not in answer:
        return None  # not a Python that ran the probe (e.g. /bin/true)
    version = answer.get("version")
    return VerlProbe(found=bool(answer["found"]), version=str(version) if version is not None else None)


def not_installed(python: str, probe: VerlProbe | None, wanted: str) -> ConfigError:
    if probe is None:
        # No Python answered: installing into it cannot work. Say what is at that path instead.
        found = shutil.which(python) if os.sep not in python else (python if os.path.exists(python) else None)
        what = ("does not exist" if found is None else
                "is no Python that runs (it could not answer whether it has verl)")
        return ConfigError([Problem(
            key=VERL_PYTHON.name, message=f"{python} {what}, so verl's trainer cannot run there; nothing was "
            "written and nothing was started",
            fix=f"point --verl-python at the Python of an environment that has verl {wanted} (e.g. "
            "/path/to/venv/bin/python), or make one and use it: `python -m venv verl-env && "
            f"{releases.install_command(wanted, 'verl-env/bin/python')}`, then --verl-python "
            "verl-env/bin/python",
        )])
    where = f"the Python at {python}"
    return ConfigError([Problem(
        key="verl",
        message=f"is not installed for {where}, and `verl-roles launch` trains with verl's trainer; nothing "
        "was written and nothing was started",
        fix=releases.install_hint(wanted, python=python),
    )])


def installed_release(python: str, version: str | None, wanted: str) -> str:
    """The supported release ``python`` has, else the error naming the releases verl_roles writes for."""
    if releases.is_supported(version):
        return str(version)
    installed = f"verl {version}" if version else "a verl whose version is not recorded (no package metadata)"
    raise ConfigError([Problem(
        key="verl",
        message=f"{python} has {installed}, and verl_roles writes configs for verl "
        f"{', '.join(releases.supported())} only; nothing was written and nothing was started",
        fix=releases.install_hint(wanted, python=python),
    )])


def wanted_release(options: LaunchOptions) -> str:
    """The release the launch asks for, whose install a hint names: the one a ``--run-dir``'s
    resolved.yaml was written for, or the one the command line chooses, else the default."""
    if options.run_dir is not None:
        written = written_release(options.run_dir)
        return written if releases.is_supported(written) else releases.DEFAULT_RELEASE
    try:
        command = CommandLine.parse(options.overrides)
        return command.release() if command.chose(releases.VERSION_KEY) else releases.DEFAULT_RELEASE
    except ConfigError:
        return releases.DEFAULT_RELEASE  # the main job words what is wrong with the line


def for_release(overrides: list[str], release: str, python: str) -> list[str]:
    """The main job's command line written for the installed ``release``: ``verl_version=<release>``
    added when the line chooses none; a line that chooses another release is refused."""
    command = CommandLine.parse(overrides)
    if not command.chose(releases.VERSION_KEY):
        return [*overrides, releases.choice(release)]
    chosen = command.release()
    if chosen != release:
        raise ConfigError([Problem(
            key=releases.VERSION_KEY,
            message=f"is {chosen}, but {python} has verl {release}: the config would be written for one "
            "release and trained on another; nothing was written and nothing was started",
            origin=f"the command line override `{releases.choice(chosen)}`",
            fix=f"drop `{releases.choice(chosen)}` (launch then writes the config for verl {release}), or "
            f"{releases.install_hint(chosen, python)}",
        )])
    return overrides


def written_release(run_dir: Path) -> str | None:
    """The ``verl_version`` a run directory's resolved.yaml records (None when it cannot be read)."""
    import yaml

    try:
        resolved = yaml.safe_load((run_dir / "resolved.yaml").read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError):
        return None
    written = resolved.get(releases.VERSION_KEY) if isinstance(resolved, dict) else None
    return None if written is None else str(written)


def written_for(run_dir: Path, release: str, python: str) -> None:
    """A run directory written before must be written for the installed ``release``."""
    if not (run_dir / "resolved.yaml").is_file():
        return  # check_written_run has said what is wrong with the folder
    written = written_release(run_dir)
    if written != release:
        raise ConfigError([Problem(
            key=releases.VERSION_KEY,
            message=f"of {run_dir / 'resolved.yaml'} is {written}, but {python} has verl {release}; nothing "
            "was started",
            fix=f"compose the run again with {releases.choice(release)} (or let launch compose it), or "
            f"{releases.install_hint(str(written), python)}",
        )])


def refuse_written_placeholders(run_dir: Path, release: str, workdir: Path) -> None:
    """A run directory written before whose model or data path is still the shipped placeholder (the same
    text, and nothing at that path, read from where the run was composed) is refused as a fresh run is."""
    import yaml
    from omegaconf import OmegaConf

    from verl_roles.api.composition import compose
    from verl_roles.validation.rules.values import get

    try:
        written = yaml.safe_load((run_dir / "resolved.yaml").read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError):
        return  # check_written_run has said what is wrong with the folder
    stock = compose([releases.choice(release)])
    unset = []
    for path in placeholders.USER_PATHS:
        value = written
        for part in path.key.split("."):
            value = value.get(part) if isinstance(value, dict) else None
        placeholder = get(stock, path.key)
        if OmegaConf.is_config(placeholder):
            placeholder = OmegaConf.to_container(placeholder)
        if value == placeholder and not all(
            (workdir / os.path.expanduser(str(item))).exists()
            for item in (value if isinstance(value, list) else [value])
        ):
            unset.append((path.key, path.what, str(placeholder)))
    if unset:
        raise ConfigError(placeholders.launch_problems(unset, written=True))


def write_run_dir(overrides: list[str], before_commit: BeforeCommit | None = None) -> tuple[int, Path | None]:
    """The main job on ``overrides``: (its exit code, the run directory it wrote or None).

    The main job plans the run before anything exists, so an invalid config writes nothing; a sweep is
    refused before it is planned (launch trains one run); ``before_commit`` sees the run's files before
    they are put in place, and refuses the run by raising."""
    code, run_dirs = run_main_job(list(overrides), single_run_only=True, before_commit=before_commit)
    return code, (run_dirs[0] if code == 0 and run_dirs else None)


def verl_checks(options: LaunchOptions, release: str, workdir: Path) -> BeforeCommit | None:
    """verl's own checks of a run (staged or written before), said in one line when they pass; None
    with ``--skip-verl-checks``."""
    if not options.checks:
        return None

    def check(run_dir: Path, shown_as: Path) -> None:
        say(run_checks(options.verl_python, run_dir, release, workdir, shown_as).passed())

    return check


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


def _launch(invocation: Invocation) -> int:
    options = options_of(invocation)
    if options.run_dir is not None:
        from verl_roles.api.planning import check_written_run

        # The folder first (a sweep's own folder, a folder of no run): no verl needed to say so.
        check_written_run(options.run_dir)
    probe = probe_verl(options.verl_python)
    if probe is None or not probe.found:
        raise not_installed(options.verl_python, probe, wanted_release(options))
    release = installed_release(options.verl_python, probe.version, wanted_release(options))
    if options.run_dir is not None:
        run_dir = options.run_dir
        written_for(run_dir, release, options.verl_python)
        workdir = composed_in(run_dir)
        refuse_written_placeholders(run_dir, release, workdir)
        check = verl_checks(options, release, workdir)
        if check is not None:
            check(run_dir, run_dir)
    else:
        workdir = Path.cwd()
        code, written = write_run_dir(for_release(options.overrides, release, options.verl_python),
                                      verl_checks(options, release, workdir))
        if code or written is None:
            return code  # an invalid config or one verl refuses (nothing written), or e.g. --cfg job
        run_dir = written
    command = trainer_command(options, run_dir)
    where = "" if workdir == Path.cwd() else f" in {workdir} (where the run was composed)"
    print(f"verl_roles: starting verl{where}: {shell_line(command)}", flush=True)
    return exit_code_of(run_trainer(command, workdir))


COMMAND = Command(
    name="launch",
    summary="write a run directory as the main job does, then train on it with verl",
    action=_launch,
    flags=LAUNCH_FLAGS,
    words=Words.OWN,
    passes=MAIN_FLAGS,
    passes_note="Every other argument is the main job's (its flags and overrides: python -m verl_roles.main "
    "--help).",
    usage=(
        "[--verl-python PYTHON] [--trainer-module MODULE] [--skip-verl-checks] [hydra overrides...]",
        "[--verl-python PYTHON] [--trainer-module MODULE] [--skip-verl-checks] --run-dir DIR",
    ),
    about=f"""\
Compose, validate and write a run directory exactly as `python -m verl_roles.main [overrides]`, written
for the verl release PYTHON has (verl_version=<that release> unless the line chooses it; another
release is refused), then run verl's trainer on its resolved.yaml and exit with the trainer's exit code:
  PYTHON -m {TRAINER_MODULE} --config-path RUN_DIR --config-name resolved hydra.run.dir=RUN_DIR/verl

Before the trainer starts, verl's own checks run on the run in PYTHON (validate_config, every conversion
of its trainer and workers, its workers' init_model and critic worker on CPU, without Ray); a run verl
refuses stops there with one paragraph. An invalid config, or one verl refuses, writes nothing and starts
nothing. A sweep (-m) is composed with `python -m verl_roles.main -m ...`; then launch each job with
`verl-roles launch --run-dir JOB_DIR`.""",
    examples=("verl-roles launch --verl-python ~/verl-env/bin/python model_engine=megatron",),
)


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
    launch reach the trainer and everything it started, so stopping launch stops the training; killed
    outright, launch takes the trainer's process with it (:func:`child_processes.ends_with`)."""
    process = subprocess.Popen(command, cwd=workdir, process_group=0,
                               preexec_fn=ends_with(os.getpid()))  # noqa: PLW1509 - no threads here

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

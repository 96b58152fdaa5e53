"""Shared helpers for the suite: running the CLI as a user types it, and the repo's paths."""

from __future__ import annotations

import contextlib
import functools
import importlib
import importlib.util
import io
import logging
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings
from omegaconf import OmegaConf

from verl_roles import releases
from verl_roles.program import tune_garbage_collection

# The suite's hypothesis profile: few examples, the same ones on every run (derandomized, no example
# database on disk), so a run is deterministic and a failure reproduces; a property asks for its own
# count within it. The long, random, shrinking run is benchmarks/fuzz_long.py. HYPOTHESIS_PROFILE=dev
# draws new examples on every run (hypothesis' defaults).
settings.register_profile(
    "ci", max_examples=25, derandomize=True, database=None, deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile("dev", deadline=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))

REPO = Path(__file__).resolve().parent.parent
CONF = REPO / "conf"
DATA = Path(__file__).resolve().parent / "data"


# The Python processes the suite starts (the CLI as typed, pip, the snapshot script, the xdist workers)
# keep their bytecode in one folder of the session, as a user's Python keeps it beside the sources: each
# would otherwise compile verl_roles anew where PYTHONDONTWRITEBYTECODE=1 is set (as in some sandboxes).
# Nothing is written into the checkout; the folder is removed at the end. Set by the process that
# starts the workers, before it starts them.
# A process with the folder set reads bytecode only from it, not from the __pycache__ beside installed
# sources: the folder starts with links to the bytecode that the packages this process has imported
# (Python's own, pytest, Hydra, OmegaConf, ...) already have beside their sources. Each worker would
# otherwise compile all of them again, at once, at every run (about 1.3 CPU-seconds a worker). A link is
# only read: Python checks a file's bytecode against its source as it does beside it, and replaces the
# link (never the file it points to) with bytecode of its own when they differ.
_PYCACHE = pytest.StashKey[tuple[str, dict[str, str | None]]]()


def _link_installed_bytecode(folder: str) -> None:
    """Link, under ``folder`` as a bytecode prefix lays it out, the bytecode found beside the sources of
    each package (and top-level module folder) this process has imported."""
    tag = f".{sys.implementation.cache_tag}.pyc"
    roots: set[str] = set()
    for name, module in list(sys.modules.items()):
        origin = getattr(getattr(module, "__spec__", None), "origin", None)
        if not isinstance(origin, str) or not origin.endswith(".py"):
            continue
        top = sys.modules.get(name.partition(".")[0])
        package = getattr(top, "__path__", None)
        roots.update(package or [os.path.join(os.path.dirname(origin), "__pycache__")])
    for root in roots:
        for where, _, names in os.walk(root):
            if os.path.basename(where) != "__pycache__":
                continue
            target = os.path.join(folder, os.path.abspath(os.path.dirname(where)).lstrip(os.sep))
            for name in names:
                # name.cpython-311.pyc only: not optimized (.opt-1) nor assertion-rewritten bytecode.
                if name.endswith(tag) and name.count(".") == tag.count("."):
                    os.makedirs(target, exist_ok=True)
                    with contextlib.suppress(FileExistsError):
                        os.symlink(os.path.join(where, name), os.path.join(target, name))


def pytest_configure(config: pytest.Config) -> None:
    # The suite's processes collect garbage as the programs do (verl_roles.program): a worker spent about
    # 8 of its ~75 CPU-seconds in Python's collector at its default thresholds, about 3 at these.
    tune_garbage_collection()
    if hasattr(config, "workerinput") or os.environ.get("PYTHONPYCACHEPREFIX"):
        return
    folder = tempfile.mkdtemp(prefix="verl_roles-tests-bytecode-")
    _link_installed_bytecode(folder)
    saved = {name: os.environ.get(name) for name in ("PYTHONPYCACHEPREFIX", "PYTHONDONTWRITEBYTECODE")}
    config.stash[_PYCACHE] = (folder, saved)
    os.environ["PYTHONPYCACHEPREFIX"] = folder
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    # One process fills the folder with what the suite's processes import, before several start at once:
    # CPython names its temporary bytecode file after id(path), the same in identical processes, so three
    # that compile one module at the same moment can publish a truncated file ("marshal data too short";
    # the joblib launcher's four workers did).
    subprocess.run([sys.executable, "-c", _WARM_UP], env=os.environ.copy(), check=False,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


# What the suite's processes import: the CLI, both launcher plugins and what their workers import.
_WARM_UP = """
import importlib
for name in ("verl_roles.main", "verl_roles.cli", "verl_roles.commands.launch", "pytest", "xdist",
             "hypothesis", "concurrent.futures.process", "multiprocessing.pool", "joblib",
             "joblib.externals.loky", "joblib.externals.loky.backend.popen_loky_posix",
             "hydra_plugins.hydra_joblib_launcher.joblib_launcher", "submitit",
             "hydra_plugins.hydra_submitit_launcher.submitit_launcher", "runpy"):
    try:
        importlib.import_module(name)
    except Exception:
        pass
"""


def pytest_unconfigure(config: pytest.Config) -> None:
    folder, saved = config.stash.get(_PYCACHE, (None, {}))
    if folder is None:
        return
    for name, value in saved.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value
    shutil.rmtree(folder, ignore_errors=True)


# What a developer may have set for their own debugging; the CLI runs of the suite run without it.
_NOT_INHERITED = ("HYDRA_FULL_ERROR", "VERL_ROLES_DEBUG")


def cli_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in _NOT_INHERITED}
    env["PYTHONHASHSEED"] = "0"
    return env


def run(args: list[str], cwd: Path, module: str = "verl_roles.main") -> subprocess.CompletedProcess[str]:
    """Run ``python -m <module> ARGS`` in ``cwd`` and capture its output."""
    return subprocess.run(
        [sys.executable, "-m", module, *args],
        cwd=cwd,
        env=cli_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )


def run_in_process(
    args: list[str], cwd: Path, module: str = "verl_roles.main"
) -> subprocess.CompletedProcess[str]:
    """:func:`run` without a new interpreter: the module's ``main`` (what ``python -m MODULE`` and the
    console scripts call) with ``ARGS`` in ``cwd``, the environment as :func:`cli_env` leaves it, its
    output captured. For every case where the process itself is not the point; a few tests keep
    :func:`run` for what only a real process shows (the exit status a shell sees, signals, Hydra's
    flags that configure logging, a fresh interpreter). An exception that escapes ``main`` fails the
    test, as a traceback would. A main job without ``hydra.run.dir`` writes under ``cwd`` as the real
    one does; Hydra's logging is configured as in a real run, and put back after the test."""
    entry = importlib.import_module(module).main
    out, err = io.StringIO(), io.StringIO()
    previous = Path.cwd()
    saved = {name: os.environ.pop(name) for name in _NOT_INHERITED if name in os.environ}
    os.chdir(cwd)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                code = entry(list(args))
            except SystemExit as stop:
                code = stop.code if isinstance(stop.code, int) else int(stop.code is not None)
    finally:
        os.chdir(previous)
        os.environ.update(saved)
    return subprocess.CompletedProcess([module, *args], code, out.getvalue(), err.getvalue())


def assert_user_error(result: subprocess.CompletedProcess[str], *phrases: str) -> None:
    """A user mistake: non-zero exit, no traceback, and the message carries each phrase."""
    output = result.stdout + result.stderr
    assert result.returncode != 0, output
    assert "Traceback" not in output, output
    for phrase in phrases:
        assert phrase in output, f"{phrase!r} not in:\n{output}"


def main_in_process(
    args: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> tuple[int, str, str]:
    """``python -m verl_roles.main ARGS`` run in this process (same code path, no interpreter start-up).

    Output goes to ``tmp_path/out``; returns (exit code, stdout, stderr). A traceback is never expected.
    """
    from verl_roles.main import main

    code = main(
        [*args, f"hydra.run.dir={tmp_path / 'out'}", "hydra/job_logging=none", "hydra/hydra_logging=none"]
    )
    captured = capsys.readouterr()
    assert "Traceback" not in captured.out + captured.err, captured.out + captured.err
    return code, captured.out, captured.err


def flat(cfg) -> dict[str, object]:
    """Dotted key -> resolved leaf value (an empty dict or list counts as a leaf)."""
    out: dict[str, object] = {}

    def walk(node, prefix):
        if isinstance(node, dict) and node:
            for key, value in node.items():
                walk(value, f"{prefix}.{key}" if prefix else str(key))
        else:
            out[prefix] = node

    walk(OmegaConf.to_container(cfg, resolve=True), "")
    return out


def arrived(cfg, override: str) -> None:
    """Assert that ``key=value`` reached the composed ``cfg``: the key (or, for a legacy key, the
    current key it is read as) holds the value the override typed (Hydra's parser reads it)."""
    from verl_roles import legacy
    from verl_roles.cmdline import hydra_parse

    parsed = hydra_parse(override)
    key, value = parsed.key_or_group, parsed.value()
    translated = legacy.find(key)
    if translated is not None:
        entry, key = translated
        value = entry.convert(value) if getattr(entry, "convert", None) else value
    node = OmegaConf.select(cfg, key, default=KeyError)
    assert node is not KeyError, f"{override}: {key} is not in the composed config"
    got = OmegaConf.to_container(node) if OmegaConf.is_config(node) else node
    assert got == value, f"{override}: {key} holds {got!r}, not {value!r}"


def write(path: Path, text: str) -> Path:
    """Write a text file, creating its folder."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def read_overrides(path: Path) -> list[str]:
    lines = path.read_text(encoding="utf-8").splitlines()
    return [line for line in lines if line.strip() and not line.startswith("#")]


def group_options(group: str) -> list[str]:
    """Every option of a config group, read from the config tree itself."""
    return sorted(p.stem for p in (CONF / group).glob("*.yaml"))


@pytest.fixture
def in_tmp(tmp_path: Path) -> Path:
    """An unrelated working directory for CLI runs."""
    return tmp_path


@pytest.fixture(autouse=True)
def _logging_as_it_was():
    """A Hydra run in this process configures logging (handlers on the streams a test captured, which
    are closed afterwards); put every logger back as it was, so no later test logs to a closed stream."""
    names = list(logging.root.manager.loggerDict)
    loggers = [logging.getLogger(), *(logging.getLogger(name) for name in names)]
    saved = [(lg, list(lg.handlers), lg.level, lg.disabled, lg.propagate) for lg in loggers]
    yield
    for lg, handlers, level, disabled, propagate in saved:
        lg.handlers[:] = handlers
        lg.setLevel(level)
        lg.disabled, lg.propagate = disabled, propagate


@functools.cache
def installed_verl_release() -> str | None:
    """The version of the verl that :func:`verl_python` names (None without one), read from its package
    metadata without importing verl."""
    python, _ = verl_python()
    if python is None:
        return None
    probe = "import importlib.metadata as m; print(m.version('verl'))"
    try:
        found = subprocess.run([python, "-c", probe], capture_output=True, text=True, timeout=120)
    except OSError:
        return None
    return found.stdout.strip() or None if found.returncode == 0 else None


def verl_python() -> tuple[str | None, str]:
    """The Python to run verl in, or None and why the suite is skipped."""
    chosen = os.environ.get("VERL_PYTHON")
    if chosen:
        return chosen, f"VERL_PYTHON={chosen}"
    if importlib.util.find_spec("verl") is not None:
        return sys.executable, "this interpreter imports verl"
    return None, (
        "verl is not importable here: set VERL_PYTHON to a Python with a verl release verl_roles supports "
        f'({", ".join(releases.supported())}: '
        f'`pip install -e ".[{releases.extra(releases.DEFAULT_RELEASE)}]"` from this checkout '
        "in a separate venv; .ci/run does this for each) to run this suite"
    )


# Modules whose tests start real processes (signals, launchers, pip, shell scripts, bash completion):
# scheduled first, so that pytest-xdist's workers end on the many short tests instead of one waiting
# for the other's long one. Only the order changes; each test still runs on its own.
SLOW_FIRST = (
    "test_run_dirs.py", "test_wheel.py", "test_sweep.py", "test_snapshots.py", "test_finding_keys.py",
    "test_readme.py", "test_check_sweep.py", "test_main_cli.py",
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    rank = {name: index for index, name in enumerate(SLOW_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(SLOW_FIRST)))

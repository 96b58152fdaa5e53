"""Shared helpers for the suite: running the CLI as a user types it, and the repo's paths."""

from __future__ import annotations

import contextlib
import functools
import glob
import importlib
import importlib.util
import io
import logging
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings
from hypothesis.configuration import set_hypothesis_home_dir
from omegaconf import OmegaConf

from verl_roles.base import releases
from verl_roles.base.program import tune_garbage_collection
from verl_roles.inputs.paths import flat_leaves

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
# Hypothesis keeps its caches (the Unicode tables it builds) in `.hypothesis/` of the working directory,
# the checkout, unless told otherwise: the suite writes nothing into the checkout
# (_the_checkout_stays_as_it_was below), so they live in the system's temporary folder, reused from run
# to run as the checkout's were.
set_hypothesis_home_dir(os.path.join(tempfile.gettempdir(), f"verl_roles-hypothesis-{os.getuid()}"))

REPO = Path(__file__).resolve().parent.parent
CONF = REPO / "conf"
DATA = Path(__file__).resolve().parent / "data"


# The Python processes the suite starts (the CLI as typed, pip, the snapshot script, the xdist workers)
# keep their bytecode in one folder, as a user's Python keeps it beside the sources: each would otherwise
# compile verl_roles (and pytest rewrite every test module) anew where PYTHONDONTWRITEBYTECODE=1 is set
# (as in some sandboxes). Nothing is written into the checkout: the folder is in the system's temporary
# folder, one per user, and kept from run to run as a bytecode cache is (Python checks each file against
# its source before it uses it). Set by the process that starts the workers, before it starts them.
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
    # The suite's processes collect garbage as the programs do (verl_roles.base.program): a worker spent about
    # 8 of its ~75 CPU-seconds in Python's collector at its default thresholds, about 3 at these.
    tune_garbage_collection()
    if hasattr(config, "workerinput") or os.environ.get("PYTHONPYCACHEPREFIX"):
        return
    folder = os.path.join(tempfile.gettempdir(), f"verl_roles-tests-bytecode-{os.getuid()}")
    os.makedirs(folder, exist_ok=True)
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
    return flat_leaves(OmegaConf.to_container(cfg, resolve=True))


def arrived(cfg, override: str) -> None:
    """Assert that ``key=value`` reached the composed ``cfg``: the key (or, for a legacy key, the
    current key it is read as) holds the value the override typed (Hydra's parser reads it)."""
    from verl_roles import legacy
    from verl_roles.inputs.cmdline import hydra_parse

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
        "verl is not importable here: `scripts/verl_acceptance.sh RELEASE` builds a venv with a verl "
        f'release verl_roles supports ({", ".join(releases.supported())}) and runs these tests there '
        "(docs/testing.md), or set VERL_PYTHON to a Python that has one"
    )


# Modules whose tests start real processes (signals, launchers, pip, shell scripts, bash completion):
# scheduled first, so that pytest-xdist's workers end on the many short tests instead of one waiting
# for the other's long one. Only the order changes; each test still runs on its own.
SLOW_FIRST = (
    "test_run_dirs.py", "test_wheel.py", "test_sweep.py", "test_snapshots.py", "test_finding_keys.py",
    "test_readme.py", "test_check_sweep.py", "test_main_cli.py",
)


# Catalogues run in full by the suite, sampled by the fast tier: test -> one parameter in how many it
# runs (the first and then evenly spaced, the same on every run; the rest carry the slow mark). Each
# costs a second or more of a worker in full; `sampled` marks the catalogues of tests/bad_inputs.py and the
# chunks of the migrate property the same way where they are declared.
FAST_TIER_SAMPLES = {
    "test_readme.py::test_readme_example_runs_as_documented": 3,
    "test_passed_on.py::test_a_key_the_receiving_library_takes_is_accepted_silently_through_every_channel": 4,
    "test_passed_on.py::test_a_key_the_receiving_call_does_not_take_is_refused_through_every_channel": 3,
    "test_key_docs_agree.py::test_the_doc_names_exactly_the_values_validation_accepts": 4,
    "test_compose_cache.py::test_plain_composition_equals_hydras_merge_node_for_node": 3,
    "test_compose_cache.py::test_cached_compose_and_fast_resolution_equal_stock_hydra": 2,
    "test_compose_cache.py::test_composition_equals_stock_hydra_node_for_node": 2,
    "test_explain.py::test_chain_is_exact_for_every_key": 4,
    "test_explain_releases.py::test_a_renamed_key_points_to_the_name_of_the_composed_release": 2,
    "test_errors.py::test_debug_shows_the_traceback_of_every_command_and_only_with_it": 4,
    "test_errors.py::test_cli_mistake_is_one_actionable_paragraph": 3,
    "test_gate.py::test_a_key_our_lora_block_does_not_have_is_refused_through_every_channel": 3,
    "test_gate.py::test_code_chosen_through_an_interpolation_is_refused_through_every_channel": 3,
    "test_sweep_outputs.py::test_what_jobs_would_share_stops_the_sweep_before_anything_runs": 3,
    "test_releases.py::test_a_key_of_another_release_gets_one_verdict_through_every_channel": 3,
    "test_roles.py::test_user_option_changes_only_the_keys_it_sets": 2,
    "test_legacy_reward.py::test_no_legacy_reward_override_of_an_example_is_silent": 4,
    "test_rules.py::test_every_name_verl_registers_composes_without_a_warning": 4,
    "test_verl_surface.py::test_every_verl_leaf_is_present_with_verls_value_or_allow_listed": 3,
}


def _sample_for_the_fast_tier(items: list[pytest.Item]) -> None:
    seen: dict[str, int] = {}
    for item in items:
        name = f"{item.path.name}::{getattr(item, 'originalname', item.name)}"
        every = FAST_TIER_SAMPLES.get(name)
        if every is None:
            continue
        index = seen[name] = seen.get(name, -1) + 1
        if index % every:
            item.add_marker(pytest.mark.slow)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    _sample_for_the_fast_tier(items)
    for item in items:
        # A test of verl itself runs verl's code in processes of their own, for minutes: never in the
        # fast tier, even where VERL_PYTHON is set.
        if item.get_closest_marker("verl") is not None and item.get_closest_marker("slow") is None:
            item.add_marker(pytest.mark.slow)
    rank = {name: index for index, name in enumerate(SLOW_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(SLOW_FIRST)))


# --- The fast tier's samples ------------------------------------------------------------------------

def sampled(params: Iterable[object], every: int, group: Callable[[object], object] | None = None) -> list:
    """The parameters of a catalogue or a property, each one run by the full suite; the fast tier
    (``-m "not slow"``) runs a sample of them: the first of each ``group`` (by the value ``group``
    gives a parameter's values) and one in ``every`` of the rest, spread evenly and the same on every
    run. The others carry the ``slow`` mark. A ``pytest.param`` keeps its id and its marks."""
    params = list(params)
    seen: set[object] = set()
    out = []
    for index, param in enumerate(params):
        values, marks, id_ = (param.values, list(param.marks), param.id) if _is_param_set(param) else (
            (param,), [], None)
        key = group(values[0] if len(values) == 1 else values) if group is not None else None
        first_of_group = group is not None and key not in seen
        seen.add(key)
        if not (first_of_group or index % every == 0):
            marks.append(pytest.mark.slow)
        out.append(pytest.param(*values, marks=marks, id=id_))
    return out


def _is_param_set(param: object) -> bool:
    return type(param).__name__ == "ParameterSet" and hasattr(param, "marks")


# --- Tests that can fail: nothing left behind -------------------------------------------------------
# A test that leaves a process running, or writes into the checkout, fails (in its teardown), whoever
# started or wrote it. The processes: this process adopts every orphan of its descendants (Linux's child
# subreaper), so a process that a test's child started and abandoned is still among this process's
# children, listed by the kernel in /proc. The checkout: its files and folders are listed before and
# after each test module and the whole session; one made or removed fails the module (the session).

_PR_SET_CHILD_SUBREAPER = 36
# How long a test's processes may take to end after it (a child killed in the test's last line).
_PROCESS_GRACE_S = 5.0
# What pytest itself and an editable install keep in the checkout.
_CHECKOUT_OWN = (".pytest_cache", "verl_roles.egg-info", ".git", ".ruff_cache", "__pycache__")


def _become_subreaper() -> None:
    if sys.platform.startswith("linux"):
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)


def _living_children() -> dict[int, str]:
    """This process's children that still run (not zombies): pid -> command line."""
    pids: set[int] = set()
    for path in glob.glob(f"/proc/{os.getpid()}/task/*/children"):
        with contextlib.suppress(OSError):
            pids.update(int(pid) for pid in Path(path).read_text().split())
    living = {}
    for pid in pids:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]
            if state in ("Z", "X"):
                with contextlib.suppress(ChildProcessError):
                    os.waitpid(pid, os.WNOHANG)  # an adopted orphan that ended: nobody else waits for it
                continue
            command = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except (OSError, IndexError):
            continue
        living[pid] = command.strip()
    return living


@pytest.fixture(autouse=True)
def _no_process_left_behind() -> Iterator[None]:
    before = set(_living_children())
    yield
    deadline = time.monotonic() + _PROCESS_GRACE_S
    pause = 0.005
    while (left := {pid: cmd for pid, cmd in _living_children().items() if pid not in before}):
        if time.monotonic() > deadline:
            for pid in left:
                with contextlib.suppress(OSError):
                    os.kill(pid, 9)
            listed = "; ".join(f"{pid}: {cmd[:200]}" for pid, cmd in sorted(left.items()))
            pytest.fail(f"the test left processes running (killed now): {listed}", pytrace=False)
        time.sleep(pause)
        pause = min(pause * 2, 0.2)


def _checkout_paths() -> frozenset[str]:
    """Every file and folder of the checkout, but what pytest and pip keep there (names only: a file a
    developer edits while the suite runs is not the suite's writing)."""
    found: set[str] = set()
    for root, folders, files in os.walk(REPO):
        folders[:] = [name for name in folders if name not in _CHECKOUT_OWN]
        relative = os.path.relpath(root, REPO)
        found.update(os.path.normpath(os.path.join(relative, name)) for name in (*folders, *files))
    return frozenset(found)


def _difference(before: frozenset[str], after: frozenset[str]) -> str:
    return "; ".join(f"{what}: {sorted(paths)[:10]}" for what, paths in
                     (("new", after - before), ("gone", before - after)) if paths)


@pytest.fixture(autouse=True, scope="module")
def _the_checkout_stays_as_it_was() -> Iterator[None]:
    before = _checkout_paths()
    yield
    changed = _difference(before, _checkout_paths())
    if changed:
        pytest.fail(f"a test of this module wrote into the checkout ({changed})", pytrace=False)


_CHECKOUT = pytest.StashKey[frozenset[str]]()


def pytest_sessionstart(session: pytest.Session) -> None:
    _become_subreaper()
    if not hasattr(session.config, "workerinput"):
        session.config.stash[_CHECKOUT] = _checkout_paths()


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    before = session.config.stash.get(_CHECKOUT, None)
    if before is None:
        return
    changed = _difference(before, _checkout_paths())
    if changed:
        reporter = session.config.pluginmanager.get_plugin("terminalreporter")
        if reporter is not None:
            reporter.write_line(f"the suite wrote into the checkout ({changed})", red=True)
        session.exitstatus = pytest.ExitCode.TESTS_FAILED

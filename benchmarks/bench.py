"""How fast verl_roles composes, measured against references taken in the same run.

    python benchmarks/bench.py            # everything (about a minute on 2 cores)
    python benchmarks/bench.py --quick    # fewer repetitions, a 16-point sweep
    python benchmarks/bench.py --verl-python VENV_0_9_1/bin/python --verl-python VENV_0_8_0/bin/python
    python benchmarks/bench.py --cli-only --baseline /tmp/before   # the CLI against another checkout

Prints, each as a ratio to its reference where an issue sets a target:

- CLI end to end (``python -m verl_roles.main model_engine=megatron``) against a bare Hydra
  hello-world app (target <= 2.3x) and a plain Hydra app composing and resolving our own conf/ tree,
  all as fresh processes;
- in-process ``verl_roles.compose`` of the megatron config for every supported verl release
  (``verl_version=R``), median of repeated calls with different overrides, split into compose / the
  steps after it (legacy, roles, resolve, validate), next to Hydra's own compose API on conf/ (no
  caches, no gate, no steps) plus ``OmegaConf.resolve`` in the same process;
- every snapshot of ``_generated/`` rendered in-process, and ``generate_trainer_config.sh --check``
  end to end (target < 2 s);
- a 64-point sweep with Hydra's basic launcher (and joblib when installed): jobs per second and the
  per-job time on top of one in-process compose;
- with ``--verl-python PYTHON`` (repeatable: a Python where a verl release is installed, e.g. a venv of
  ``verl_roles[verl-0-8-0]``): that release's own compose + resolve of its ``ppo_trainer``
  (``model_engine=megatron``, different overrides each call), timed in-process in a child process of
  that Python, and our in-process compose for the same release as a ratio of it (target <= 0.15x);
  and, next to the CLI, a plain Hydra app over that verl's own config tree (compose and resolve
  ``ppo_trainer`` with ``model_engine=megatron``, verl not imported) as a fresh process of that Python
  (target: ours <= 0.7x of it).

Child processes run as on a user's machine: with a bytecode cache (``PYTHONPYCACHEPREFIX`` in the
benchmark's temporary folder, even where ``PYTHONDONTWRITEBYTECODE=1`` is set, as in some sandboxes;
``--inherit-bytecode-settings`` keeps this environment's settings instead), filled by one warm-up
run of each command.

Times are wall-clock medians (``time.perf_counter``); a busy machine shows up as noise, so compare
ratios, and rerun before trusting a change of a few percent. Nothing here is asserted by the tests.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

# A plain Hydra app over our own conf/ tree: what Hydra alone costs for the config we compose.
OUR_TREE_APP = '''
import hydra
from omegaconf import DictConfig, OmegaConf


@hydra.main(version_base=None, config_path=CONF, config_name="ppo_trainer")
def app(cfg: DictConfig) -> None:
    OmegaConf.resolve(cfg)


if __name__ == "__main__":
    app()
'''

HELLO_APP = '''
import hydra
from omegaconf import DictConfig


@hydra.main(version_base=None, config_path=".", config_name="config")
def app(cfg: DictConfig) -> None:
    print(f"hello {cfg.name}")


if __name__ == "__main__":
    app()
'''

# A plain Hydra app over verl's own config tree, run by the --verl-python Python: what starting a
# trainer with verl's configs costs in Hydra alone (compose and resolve; verl itself is not imported,
# only its config folder is found).
VERL_TREE_APP = '''
import importlib.util
import os

import hydra
from omegaconf import DictConfig, OmegaConf

(VERL_DIR,) = importlib.util.find_spec("verl").submodule_search_locations
CONFIG_DIR = os.path.join(VERL_DIR, "trainer", "config")


@hydra.main(version_base=None, config_path=CONFIG_DIR, config_name="ppo_trainer")
def app(cfg: DictConfig) -> None:
    OmegaConf.resolve(cfg)


if __name__ == "__main__":
    app()
'''


def for_this_hydra(app: str) -> str:
    """An app of this Python's Hydra as its users write it: Hydra 1.4 deprecates ``version_base`` (and warns
    on it), so the apps run by this Python drop it there."""
    from verl_roles.compat import HYDRA_1_4

    return app.replace("version_base=None, ", "") if HYDRA_1_4 else app


def median_ms(samples: Sequence[float]) -> float:
    return statistics.median(samples) * 1000


def timed(action: Callable[[], object]) -> float:
    start = time.perf_counter()
    action()
    return time.perf_counter() - start


# Set by main() for every child process: unless --inherit-bytecode-settings, a bytecode cache in the
# benchmark's temporary folder.
CHILD_SETTINGS: dict[str, str] = {}
_DROPPED = ("HYDRA_FULL_ERROR",)


def child_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in _DROPPED}
    env["PYTHONPATH"] = str(REPO) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env.update(CHILD_SETTINGS)
    if "PYTHONPYCACHEPREFIX" in CHILD_SETTINGS:
        env.pop("PYTHONDONTWRITEBYTECODE", None)
    env.update(extra)
    return env


def run_process(args: list[str], cwd: Path, env: dict[str, str]) -> float:
    start = time.perf_counter()
    result = subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True)
    elapsed = time.perf_counter() - start
    if result.returncode != 0:
        raise SystemExit(f"benchmark command failed: {' '.join(args)}\n{result.stderr}")
    return elapsed


def row(label: str, value: str, note: str = "") -> None:
    print(f"  {label:<52} {value:>12}  {note}")


# --- CLI end to end -------------------------------------------------------------------------------


def bench_cli(work: Path, repeats: int, verl_pythons: dict[str, str], baseline: Path | None = None) -> None:
    print("CLI end to end (fresh process each, median of", repeats, "runs after one warm-up run each)")
    hello = work / "hello"
    hello.mkdir()
    (hello / "app.py").write_text(for_this_hydra(textwrap.dedent(HELLO_APP)), encoding="utf-8")
    (hello / "config.yaml").write_text("# The name to greet.\nname: world\n", encoding="utf-8")
    (work / "our_tree_app.py").write_text(
        for_this_hydra(textwrap.dedent(OUR_TREE_APP)).replace("CONF", repr(str(REPO / "conf"))),
        encoding="utf-8",
    )
    python = sys.executable
    commands = {
        "hello": ([python, str(hello / "app.py"), f"hydra.run.dir={work / 'h'}-{{n}}"], child_env()),
        "ours": (
            [python, "-m", "verl_roles.main", "model_engine=megatron", f"hydra.run.dir={work / 'o'}-{{n}}"],
            child_env(),
        ),
        "our_tree": ([python, str(work / "our_tree_app.py"), "model_engine=megatron",
                      f"hydra.run.dir={work / 't'}-{{n}}"], child_env()),
    }
    if baseline is not None:
        env = child_env()
        env["PYTHONPATH"] = str(baseline) + env["PYTHONPATH"][len(str(REPO)):]
        run_dir = f"hydra.run.dir={work / 'b'}-{{n}}"
        commands["baseline"] = ([python, "-m", "verl_roles.main", "model_engine=megatron", run_dir], env)
    if verl_pythons:
        (work / "verl_tree_app.py").write_text(textwrap.dedent(VERL_TREE_APP), encoding="utf-8")
    for release, verl_python in verl_pythons.items():
        commands[f"verl {release}"] = (
            [verl_python, str(work / "verl_tree_app.py"), "model_engine=megatron",
             "actor_rollout_ref.rollout.name=vllm", f"hydra.run.dir={work / ('v' + release)}-{{n}}"],
            child_env(),
        )
    # Every run writes a folder of its own (a run refuses a folder that holds another run's files).
    def numbered(args: list[str], n: int) -> list[str]:
        return [arg.replace("{n}", str(n)) for arg in args]

    for args, env in commands.values():  # fills the bytecode cache
        run_process(numbered(args, 0), work, env)
    samples: dict[str, list[float]] = {name: [] for name in commands}
    for n in range(1, repeats + 1):  # interleaved, so a burst of load hits every command alike
        for name, (args, env) in commands.items():
            samples[name].append(run_process(numbered(args, n), work, env))
    hello_ms = median_ms(samples["hello"])
    ours_ms = median_ms(samples["ours"])
    tree_ms = median_ms(samples["our_tree"])
    row("bare Hydra hello world", f"{hello_ms:.0f} ms")
    row("python -m verl_roles.main model_engine=megatron", f"{ours_ms:.0f} ms",
        f"ratio {ours_ms / hello_ms:.2f}x (target <= 2.3x)")
    row("plain Hydra app composing our conf/ (megatron)", f"{tree_ms:.0f} ms",
        f"verl_roles.main / it: {ours_ms / tree_ms:.2f}x")
    base_ms = median_ms(samples["baseline"]) if baseline is not None else None
    if base_ms is not None:
        row(f"the same command, checkout {baseline.name}", f"{base_ms:.0f} ms",
            f"ratio {base_ms / hello_ms:.2f}x; this checkout / it: {ours_ms / base_ms:.2f}x")
    for release in verl_pythons:
        verl_tree_ms = median_ms(samples[f"verl {release}"])
        row(f"plain Hydra app composing verl {release}'s own tree (megatron)", f"{verl_tree_ms:.0f} ms")
        row("  verl_roles.main / that app", f"{ours_ms / verl_tree_ms:.2f}x", "target <= 0.7x")
        if base_ms is not None:
            row(f"  checkout {baseline.name} / that app", f"{base_ms / verl_tree_ms:.2f}x")


# --- in-process compose ---------------------------------------------------------------------------


def bench_compose(repeats: int) -> dict[str, float]:
    """Median ms of ``verl_roles.compose`` per supported release, and its split and reference."""
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir
    from omegaconf import OmegaConf

    import verl_roles
    from verl_roles import legacy
    from verl_roles.api.composition import compose_with_choices, step_inputs
    from verl_roles.base import releases
    from verl_roles.compat import VERSION_BASE
    from verl_roles.inputs.cmdline import CommandLine
    from verl_roles.steps.pipeline import finalize

    def overrides(i: int, release: str) -> list[str]:
        return ["model_engine=megatron", releases.choice(release), f"critic.optim.lr={i + 1}e-6",
                f"trainer.total_epochs={i + 1}"]

    def split_once(i: int, release: str) -> dict[str, float]:
        times = {}
        start = time.perf_counter()
        command = legacy.read_command_line(CommandLine.of(overrides(i, release))).command
        cfg, choices = compose_with_choices(command.config_name, command.texts())
        times["compose"] = time.perf_counter() - start
        start = time.perf_counter()
        finalize(cfg, step_inputs(command, choices))
        times["steps (legacy, roles, resolve, validate)"] = time.perf_counter() - start
        return times

    print(f"In-process verl_roles.compose, megatron, different overrides each call (median of {repeats})")
    found: dict[str, float] = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for release in releases.supported():
            verl_roles.compose(overrides(repeats, release))  # the first call fills the caches
            total = [timed(lambda i=i, r=release: verl_roles.compose(overrides(i, r)))
                     for i in range(repeats)]
            splits = [split_once(i, release) for i in range(repeats)]
            found[release] = median_ms(total)
            row(f"verl_roles.compose, verl_version={release}", f"{found[release]:.1f} ms", "target <= 60 ms")
            for step in splits[0]:
                row(f"  {step}", f"{median_ms([s[step] for s in splits]):.1f} ms")
        with initialize_config_dir(config_dir=str(REPO / "conf"), **VERSION_BASE):
            def stock(i: int) -> None:
                default = releases.DEFAULT_RELEASE
                OmegaConf.resolve(hydra_compose("ppo_trainer", overrides=overrides(i, default)))

            stock(repeats)
            reference = median_ms([timed(lambda i=i: stock(i)) for i in range(repeats)])
    row("Hydra's compose API on conf/ + OmegaConf.resolve (no gate, no steps)", f"{reference:.1f} ms",
        f"verl_roles.compose ({releases.DEFAULT_RELEASE}) / it: "
        f"{found[releases.DEFAULT_RELEASE] / reference:.2f}x")
    return found


# --- verl's own composition ------------------------------------------------------------------------

# Run by the Python given with --verl-python: compose verl's own config tree (from the installed package)
# with Hydra's compose API and resolve it, as verl's entry point does, N times in one process, and
# print one time per call in milliseconds. Different overrides each call, as for ours.
VERL_COMPOSE = """
import os, statistics, sys, time
import verl
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

repeats = int(sys.argv[1])
config_dir = os.path.join(os.path.dirname(verl.__file__), "trainer", "config")
with initialize_config_dir(config_dir=config_dir, version_base=None):
    def once(i):
        cfg = compose("ppo_trainer", overrides=[
            "model_engine=megatron", f"critic.optim.lr={i + 1}e-6", f"trainer.total_epochs={i + 1}",
            "actor_rollout_ref.rollout.name=vllm",
        ])
        OmegaConf.resolve(cfg)
    once(repeats)
    for i in range(repeats):
        start = time.perf_counter()
        once(i)
        print((time.perf_counter() - start) * 1000)
print("verl", verl.__version__, file=sys.stderr)
"""


def installed_release(verl_python: str) -> str:
    probe = "import importlib.metadata as m; print(m.version('verl'))"
    done = subprocess.run([verl_python, "-c", probe], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"--verl-python {verl_python}: no verl there ({done.stderr.strip()[-200:]})")
    return done.stdout.strip()


def bench_verl_reference(verl_python: str, release: str, repeats: int, compose_ms: dict[str, float]) -> None:
    print(f"verl {release}'s own compose + resolve in-process, megatron, different overrides each call "
          f"(median of {repeats})")
    done = subprocess.run(
        [verl_python, "-c", VERL_COMPOSE, str(repeats)],
        capture_output=True, text=True, env=child_env(HYDRA_FULL_ERROR="1"), check=False,
    )
    if done.returncode != 0:
        last_line = done.stderr.strip().splitlines()[-1] if done.stderr.strip() else f"exit {done.returncode}"
        row(f"verl could not be composed with {verl_python}", "-", last_line)
        return
    verl_ms = statistics.median(float(line) for line in done.stdout.split())
    row(f"  verl {release}: compose + resolve", f"{verl_ms:.1f} ms")
    if release in compose_ms:
        row(f"  verl_roles.compose (verl_version={release}) / verl's",
            f"{compose_ms[release] / verl_ms:.2f}x",
            "target <= 0.15x")
    else:
        row(f"  verl {release} is not a release verl_roles supports", "-")


# --- snapshots ------------------------------------------------------------------------------------


def bench_snapshots(work: Path, repeats: int) -> None:
    print("Snapshots (_generated/)")
    if importlib.util.find_spec("verl_roles.commands.snapshots") is None:
        row("no verl_roles.commands.snapshots module", "-")
        return
    from verl_roles.commands import snapshots

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        in_process = [timed(snapshots.render_all) for _ in range(repeats)]
    count = len(snapshots.VARIANTS)
    row(f"all {count} snapshots rendered in-process", f"{median_ms(in_process):.0f} ms")
    script = REPO / "scripts" / "generate_trainer_config.sh"
    if script.is_file():
        env = child_env(PYTHON=sys.executable)
        runs = max(1, repeats // 2)
        check = [run_process(["bash", str(script), "--check"], REPO, env) for _ in range(runs)]
        row("scripts/generate_trainer_config.sh --check", f"{median_ms(check):.0f} ms", "target < 2000 ms")


# --- sweeps ---------------------------------------------------------------------------------------


def bench_sweep(work: Path, points: int, compose_ms: float) -> None:
    side = int(points ** 0.5)
    actor = ",".join(f"{i + 1}e-6" for i in range(side))
    critic = ",".join(f"{i + 1}e-5" for i in range(points // side))
    grid = ["model_engine=megatron", f"actor_rollout_ref.actor.optim.lr={actor}", f"critic.optim.lr={critic}"]
    python = sys.executable
    print(f"A {side * (points // side)}-point sweep (fresh process, python -m verl_roles.main -m ...)")

    def sweep(name: str, *extra: str) -> float:
        args = [python, "-m", "verl_roles.main", "-m", *extra, *grid, f"hydra.sweep.dir={work / name}"]
        return run_process(args, work, child_env())

    one = run_process(
        [python, "-m", "verl_roles.main", "-m", "model_engine=megatron", "critic.optim.lr=1e-5,2e-5",
         f"hydra.sweep.dir={work / 'two'}"], work, child_env())
    launchers = [("basic launcher", [])]
    if importlib.util.find_spec("hydra_plugins.hydra_joblib_launcher") is not None:
        launchers.append(("joblib launcher, 2 workers", ["hydra/launcher=joblib", "hydra.launcher.n_jobs=2"]))
    jobs = side * (points // side)
    for label, extra in launchers:
        total = sweep(label.split()[0], *extra)
        per_job_ms = (total - one) / (jobs - 2) * 1000
        row(label, f"{jobs / total:.1f} jobs/s", f"{total:.1f} s in all")
        row("  per job (beyond a 2-job sweep)", f"{per_job_ms:.0f} ms",
            f"{per_job_ms - compose_ms:+.0f} ms over one in-process compose ({compose_ms:.0f} ms)")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer repetitions and a 16-point sweep")
    parser.add_argument(
        "--inherit-bytecode-settings",
        action="store_true",
        help="child processes keep this environment's bytecode settings (e.g. PYTHONDONTWRITEBYTECODE=1) "
        "instead of a warm bytecode cache of their own, as a user's installation has",
    )
    parser.add_argument(
        "--verl-python",
        metavar="PYTHON",
        action="append",
        default=[],
        help="a Python where a verl release is installed: time its own compose + resolve as the reference "
        "of ours for that release (repeatable, one per release)",
    )
    parser.add_argument(
        "--baseline",
        metavar="CHECKOUT",
        type=Path,
        help="another checkout of verl_roles (e.g. `git worktree add /tmp/before HEAD~3`): its CLI is timed "
        "in the same run, interleaved, so a change is measured against what it changed",
    )
    parser.add_argument("--cli-only", action="store_true", help="only the CLI measurements")
    args = parser.parse_args(argv)
    repeats = 5 if args.quick else 25
    cli_repeats = 3 if args.quick else 7
    machine = f"Python {platform.python_version()}, {os.cpu_count()} CPUs, {platform.machine()}"
    print(f"verl_roles benchmark: {machine}")
    sys.path.insert(0, str(REPO))
    with tempfile.TemporaryDirectory(prefix="verl_roles_bench_") as tmp:
        work = Path(tmp)
        if not args.inherit_bytecode_settings:
            CHILD_SETTINGS["PYTHONPYCACHEPREFIX"] = str(work / "pycache")
        inherited = f"inherited (PYTHONDONTWRITEBYTECODE={os.environ.get('PYTHONDONTWRITEBYTECODE', '')!r})"
        print("bytecode:", inherited if args.inherit_bytecode_settings else "children keep a bytecode cache")
        verl_pythons = {installed_release(python): python for python in args.verl_python}
        bench_cli(work, cli_repeats, verl_pythons, args.baseline.resolve() if args.baseline else None)
        if args.cli_only:
            return 0
        compose_ms = bench_compose(repeats)
        for release, python in verl_pythons.items():
            bench_verl_reference(python, release, repeats, compose_ms)
        bench_snapshots(work, max(3, repeats // 5))
        from verl_roles.base import releases

        bench_sweep(work, 16 if args.quick else 64, compose_ms[releases.DEFAULT_RELEASE])
    return 0


if __name__ == "__main__":
    sys.exit(main())

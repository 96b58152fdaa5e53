"""How fast verl_roles composes, measured against references taken in the same run.

    python benchmarks/bench.py            # everything (about a minute on 2 cores)
    python benchmarks/bench.py --quick    # fewer repetitions, a 16-point sweep

Prints, each as a ratio to its reference where the issue sets a target:

- CLI end to end (``python -m verl_roles.main model_engine=megatron``) against a bare Hydra
  hello-world app, both as fresh processes, next to the same command with stock Hydra composition
  (``VERL_ROLES_NO_CACHE=1``);
- in-process ``verl_roles.compose`` of the megatron config, median of repeated calls with different
  overrides, split into compose / legacy+roles / resolve / validate (target <= 60 ms), next to stock
  Hydra composition (``VERL_ROLES_NO_CACHE=1``) in the same process;
- every snapshot of ``_generated/`` rendered in-process, and ``generate_trainer_config.sh --check``
  end to end (target < 2 s);
- a 64-point sweep with Hydra's basic launcher (and joblib when installed): jobs per second and the
  per-job time on top of one in-process compose;
- with ``--verl-python PYTHON`` (a Python where verl is installed, e.g. a venv with ``verl==0.9.1``): verl's
  own compose + resolve of its ``ppo_trainer`` (``model_engine=megatron``, different overrides each
  call), timed in-process in a child process of that Python, and our in-process compose as a ratio of it
  (target <= 0.15x); and, next to the CLI, a plain Hydra app over verl's own config tree (compose and
  resolve ``ppo_trainer`` with ``model_engine=megatron``, verl not imported) as a fresh process of that
  Python (target: ours about 0.6x of it).

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


def median_ms(samples: Sequence[float]) -> float:
    return statistics.median(samples) * 1000


def timed(action: Callable[[], object]) -> float:
    start = time.perf_counter()
    action()
    return time.perf_counter() - start


# Set by main() for every child process: unless --inherit-bytecode-settings, a bytecode cache in the
# benchmark's temporary folder.
CHILD_SETTINGS: dict[str, str] = {}
_DROPPED = ("HYDRA_FULL_ERROR", "VERL_ROLES_NO_CACHE")


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


def bench_cli(work: Path, repeats: int, verl_python: str | None) -> None:
    print("CLI end to end (fresh process each, median of", repeats, "runs after one warm-up run each)")
    hello = work / "hello"
    hello.mkdir()
    (hello / "app.py").write_text(textwrap.dedent(HELLO_APP), encoding="utf-8")
    (hello / "config.yaml").write_text("# The name to greet.\nname: world\n", encoding="utf-8")
    python = sys.executable

    def ours(run_dir: str, **env: str) -> tuple[list[str], dict[str, str]]:
        args = [python, "-m", "verl_roles.main", "model_engine=megatron", f"hydra.run.dir={work / run_dir}"]
        return args, child_env(**env)

    commands = {
        "hello": ([python, str(hello / "app.py"), f"hydra.run.dir={work / 'h'}"], child_env()),
        "ours": ours("o"),
        "stock": ours("s", VERL_ROLES_NO_CACHE="1"),
    }
    if verl_python:
        (work / "verl_tree_app.py").write_text(textwrap.dedent(VERL_TREE_APP), encoding="utf-8")
        commands["verl_tree"] = (
            [verl_python, str(work / "verl_tree_app.py"), "model_engine=megatron",
             "actor_rollout_ref.rollout.name=vllm", f"hydra.run.dir={work / 'v'}"],
            child_env(),
        )
    for args, env in commands.values():  # fills the bytecode cache
        run_process(args, work, env)
    samples: dict[str, list[float]] = {name: [] for name in commands}
    for _ in range(repeats):  # interleaved, so a burst of load hits every command alike
        for name, (args, env) in commands.items():
            samples[name].append(run_process(args, work, env))
    hello_ms = median_ms(samples["hello"])
    ours_ms = median_ms(samples["ours"])
    stock_ms = median_ms(samples["stock"])
    row("bare Hydra hello world", f"{hello_ms:.0f} ms")
    row("python -m verl_roles.main model_engine=megatron", f"{ours_ms:.0f} ms",
        f"ratio {ours_ms / hello_ms:.2f}x")
    row("  same, stock Hydra loader (VERL_ROLES_NO_CACHE=1)", f"{stock_ms:.0f} ms",
        f"ratio {stock_ms / hello_ms:.2f}x")
    if verl_python:
        verl_tree_ms = median_ms(samples["verl_tree"])
        row("plain Hydra app composing verl's own tree (megatron)", f"{verl_tree_ms:.0f} ms")
        row("  verl_roles.main / that app", f"{ours_ms / verl_tree_ms:.2f}x", "target about 0.6x")


# --- in-process compose ---------------------------------------------------------------------------


def bench_compose(repeats: int) -> float:
    import verl_roles
    from verl_roles import legacy, pipeline
    from verl_roles.cmdline import CommandLine
    from verl_roles.hydra_adapter.loader import NO_CACHE_ENV, compose_raw, compose_with_choices, stock_config
    from verl_roles.layout import PRIMARY_CONFIG
    from verl_roles.roles import apply_roles
    from verl_roles.rules import RULES, validate

    def overrides(i: int) -> list[str]:
        return ["model_engine=megatron", f"critic.optim.lr={i + 1}e-6", f"trainer.total_epochs={i + 1}"]

    def split_once(i: int) -> dict[str, float]:
        times = {}
        start = time.perf_counter()
        command = legacy.read_command_line(CommandLine.of(overrides(i))).command
        cfg, choices = compose_with_choices(command.config_name, command.texts())
        times["compose"] = time.perf_counter() - start
        start = time.perf_counter()
        legacy.normalize_config(cfg, command, stock_config)
        report = apply_roles(cfg, command, choices)
        times["legacy+roles"] = time.perf_counter() - start
        start = time.perf_counter()
        resolved = pipeline.resolve(cfg)
        times["resolve"] = time.perf_counter() - start
        start = time.perf_counter()
        validate(resolved, RULES, extra=report.problems)
        times["validate"] = time.perf_counter() - start
        return times

    print(f"In-process verl_roles.compose, megatron, different overrides each call (median of {repeats})")
    verl_roles.compose(overrides(repeats))  # the first call fills the caches
    total = [timed(lambda i=i: verl_roles.compose(overrides(i))) for i in range(repeats)]
    splits = [split_once(i) for i in range(repeats)]
    total_ms = median_ms(total)
    row("verl_roles.compose", f"{total_ms:.1f} ms", "target <= 60 ms")
    for step in ("compose", "legacy+roles", "resolve", "validate"):
        row(f"  {step}", f"{median_ms([s[step] for s in splits]):.1f} ms")

    os.environ[NO_CACHE_ENV] = "1"
    try:
        stock_runs = max(3, repeats // 5)
        stock = [timed(lambda i=i: verl_roles.compose(overrides(i))) for i in range(stock_runs)]
        stock_raw = [timed(lambda i=i: compose_raw(PRIMARY_CONFIG, overrides(i))) for i in range(stock_runs)]
    finally:
        del os.environ[NO_CACHE_ENV]
    cached_raw = [timed(lambda i=i: compose_raw(PRIMARY_CONFIG, overrides(i))) for i in range(repeats)]
    row("  same, stock Hydra loader (VERL_ROLES_NO_CACHE=1)", f"{median_ms(stock):.1f} ms",
        f"{median_ms(stock) / total_ms:.1f}x slower")
    row("  Hydra composition alone: cached / stock", f"{median_ms(cached_raw):.1f} ms",
        f"stock {median_ms(stock_raw):.1f} ms")
    return total_ms


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


def bench_verl_reference(verl_python: str, repeats: int, compose_ms: float) -> None:
    print("verl's own compose + resolve in-process, megatron, different overrides each call "
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
    version = done.stderr.strip().splitlines()[-1]
    row(f"  {version}: compose + resolve", f"{verl_ms:.1f} ms")
    row("  verl_roles.compose / verl's", f"{compose_ms / verl_ms:.2f}x", "target <= 0.15x")


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
        help="a Python where verl is installed: time verl's own compose + resolve as the reference of ours",
    )
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
        bench_cli(work, cli_repeats, args.verl_python)
        compose_ms = bench_compose(repeats)
        if args.verl_python:
            bench_verl_reference(args.verl_python, repeats, compose_ms)
        bench_snapshots(work, max(3, repeats // 5))
        bench_sweep(work, 16 if args.quick else 64, compose_ms)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""verl as the judge: command lines composed by verl_roles, then taken through the installed verl's own
pre-Ray checks by one ``tests/verl_driver.py`` process (issues 10, 19 and 27).

Each case is composed in this process with ``python -m verl_roles.main`` (the same code path a user
runs), writing a run directory, and handed to the driver as soon as it is written, so verl's import and
the first checks overlap the composing. The driver runs, in the Python named by ``VERL_PYTHON``,
``validate_config``, every ``omega_conf_to_dataclass`` of verl's trainer and workers and verl's own Hydra
entry point up to ``run_ppo``; and, for the control, the same overrides through verl's own config tree.

Used by tests/test_verl_acceptance.py (the listed cases and the population properties) and
scripts/verl_oracle.py (a long population run with a report by class).
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import shlex
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from verl_population import MODEL

TESTS = Path(__file__).resolve().parent
DRIVER = TESTS / "verl_driver.py"
DRIVER_TIMEOUT_S = 1800
# Worker processes the driver forks after importing verl (the 2-core CI machine: both cores).
DRIVER_JOBS = 2


@dataclass(frozen=True)
class Case:
    """One command line: its name in test ids and in the known-failures table, its arguments for
    verl_roles and, when they differ, for verl's own entry point (the control)."""

    name: str
    args: tuple[str, ...]
    files: dict[str, str] = field(default_factory=dict, hash=False)  # file name -> text, next to the run
    control_args: tuple[str, ...] | None = None

    def line(self) -> str:
        """The case as a user types it (a failing draw of a property is printed so)."""
        return "python -m verl_roles.main " + " ".join(shlex.quote(arg) for arg in self.args)

    def argv(self, model_dir: Path, files_dir: Path, control: bool = False) -> list[str]:
        args = self.control_args if control and self.control_args is not None else self.args
        out = []
        for arg in args:
            arg = arg.replace(MODEL, str(model_dir))
            for name in self.files:
                arg = arg.replace("{" + name + "}", str(files_dir / name))
            out.append(arg)
        return out


@dataclass
class Composed:
    """A case composed by the main job: the arguments as typed, the exit code, stderr, the run dir."""

    argv: list[str]
    exit_code: int
    stderr: str
    run_dir: Path
    files_dir: Path


def driver_env(home: Path) -> dict[str, str]:
    """Offline, no user cache, fixed hash seed: nothing downloaded, nothing read from the machine."""
    env = {key: value for key, value in os.environ.items() if not key.startswith(("HF_", "HYDRA_", "VERL_"))}
    env.update(
        HF_HUB_OFFLINE="1",
        TRANSFORMERS_OFFLINE="1",
        HF_DATASETS_OFFLINE="1",
        HF_HOME=str(home / "hf_home"),
        TOKENIZERS_PARALLELISM="false",
        PYTHONHASHSEED="0",
        VERL_LOGGING_LEVEL="WARNING",
    )
    return env


def compose_case(case: Case, model_dir: Path, work: Path, index: int) -> Composed:
    """``python -m verl_roles.main ARGS`` in this process, writing ``work/runs/<index>``."""
    from verl_roles.main import main

    files_dir = work / "files" / str(index)
    for name, text in case.files.items():
        (files_dir / name).parent.mkdir(parents=True, exist_ok=True)
        (files_dir / name).write_text(text, encoding="utf-8")
    run_dir = work / "runs" / str(index)
    argv = case.argv(model_dir, files_dir)
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main([*argv, f"hydra.run.dir={run_dir}", "hydra/job_logging=none", "hydra/hydra_logging=none"])
    return Composed(argv=argv, exit_code=code, stderr=err.getvalue(), run_dir=run_dir, files_dir=files_dir)


class DriverFailed(RuntimeError):
    """The driver process itself failed (not a case): its exit code and the tail of its log."""


def compose_and_check(
    python: str,
    work: Path,
    cases: list[Case],
    model_dir: Path,
    policy: Any,
    known_failures: list[list[str]] = (),  # type: ignore[assignment]
) -> tuple[dict[str, Composed], dict[str, Any]]:
    """Compose every case in this process and hand each to one driver process as soon as it is written.

    ``policy(case, composed)`` says when the driver runs the control for a case: ``"always"``,
    ``"never"`` or ``"on unknown failure"`` (a failed step that no ``known_failures`` row explains)."""
    manifest = {
        "jobs": DRIVER_JOBS,
        "known_failures": list(known_failures),
        "model_dir": str(model_dir),
        "work_dir": str(work),
    }
    manifest_path, results_path, log_path = work / "manifest.json", work / "results.json", work / "driver.log"
    manifest_path.write_text(json.dumps(manifest, indent=1), encoding="utf-8")
    composed: dict[str, Composed] = {}
    with log_path.open("w", encoding="utf-8") as log:
        driver = subprocess.Popen(
            [python, str(DRIVER), str(manifest_path), str(results_path)],
            cwd=work,
            env=driver_env(work),
            stdin=subprocess.PIPE,
            stdout=log,
            stderr=subprocess.STDOUT,
            text=True,
        )
        try:
            for index, case in enumerate(cases):
                composed[case.name] = compose_case(case, model_dir, work, index)
                done = composed[case.name]
                entry = {
                    "name": case.name,
                    "run_dir": str(done.run_dir) if done.exit_code == 0 else None,
                    "control_overrides": case.argv(model_dir, done.files_dir, control=True),
                    "control": policy(case, done),
                }
                driver.stdin.write(json.dumps(entry) + "\n")
                driver.stdin.flush()
            driver.stdin.close()
            code = driver.wait(timeout=DRIVER_TIMEOUT_S)
        finally:
            if driver.poll() is None:
                driver.kill()
    if code != 0 or not results_path.exists():
        tail = log_path.read_text(encoding="utf-8")[-4000:]
        raise DriverFailed(f"the verl driver failed (exit {code}):\n{tail}")
    return composed, json.loads(results_path.read_text(encoding="utf-8"))


def one_line(text: str) -> str:
    return " ".join(text.split())


# --------------------------------------------------------------------------------------------------
# Reading the driver's results.


COMPOSITION_ERRORS = (
    "ConfigCompositionException",
    "ConfigAttributeError",
    "ConfigKeyError",
    "MissingConfigException",
    "OverrideParseException",
    "ValidationError",
    "ConfigTypeError",
)


def is_composition_error(error: str) -> bool:
    return error.split(":", 1)[0] in COMPOSITION_ERRORS


def failed_steps(steps: list[dict[str, Any]]) -> dict[str, str]:
    """step -> error of every failed step."""
    return {step["step"]: step.get("error", "") for step in steps if step["status"] == "failed"}


def control_verdict(result: dict[str, Any]) -> tuple[str, dict[str, str]]:
    """What verl's own config tree did with the same overrides: ``runs``, ``cannot compose`` (keys
    only verl_roles has) or ``refuses``; and the steps that failed there too."""
    steps = result.get("control", {}).get("steps", [])
    entry = next((step for step in steps if step["step"] == "entry_point"), None)
    failed = failed_steps(steps)
    if entry is None or entry["status"] == "ok":
        return "runs", failed
    if is_composition_error(entry.get("error", "")):
        return "cannot compose", failed
    return "refuses", failed


def verl_accepts_control(result: dict[str, Any]) -> bool:
    """verl's own tree composed the overrides and every pre-Ray step passed on what it built."""
    steps = result.get("control", {}).get("steps", [])
    return bool(steps) and not failed_steps(steps)

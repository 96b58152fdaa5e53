"""``verl-roles launch``'s checks before Ray: verl's own checks of the run, in the trainer's Python.

:mod:`verl_roles.upstream.verl_prelaunch` is run by file path in the Python that will train (it imports verl,
never verl_roles), on the run folder (a fresh run's staging folder, before it is swapped into place),
in the folder the trainer will start in, with the release's conversion calls from the package data.
It answers with verl's steps; the first failed one becomes our one paragraph: the verl step, verl's
error and the line of verl that raised it, the keys of the run the error or that line names (when they
can be told), and a fix. A Python whose verl cannot run the checks is refused the same way.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from verl_roles.base import releases
from verl_roles.base.errors import ConfigError, Problem, counted, one_paragraph
from verl_roles.commands.child_processes import ends_with, finish_within
from verl_roles.shell.reporting import say

# How long verl's checks may take (importing verl is most of it: 10 to 20 seconds on a small machine;
# the model's config and tokenizer are read from its path, or fetched from the hub as verl would).
CHECK_SECONDS = 600

# What each verl step is, in the paragraph, and the section its keys are looked for in.
STEP_SCOPES: dict[str, tuple[str, str]] = {
    "validate_config": ("verl's validate_config, which its entry point runs first", ""),
    "worker init_model": ("verl's actor/rollout worker's init_model, which the workers run once Ray has "
                          "started them", "actor_rollout_ref"),
    "critic worker": ("verl's critic worker, which the trainer builds once Ray is up", "critic"),
}


@dataclass(frozen=True)
class Verdict:
    """verl's answer on a run: its steps (``step``, ``status``, ``error`` or ``reason``) and the time."""

    release: str
    steps: list[dict[str, Any]]
    seconds: float

    def failure(self) -> dict[str, Any] | None:
        return next((step for step in self.steps if step["status"] == "failed"), None)

    def passed(self) -> str:
        """The one line saying what passed, and what a CPU check could not evaluate."""
        ran = [step for step in self.steps if step["status"] == "ok"]
        conversions = sum(step["step"].startswith("convert ") for step in ran)
        named = [step["step"] for step in ran if not step["step"].startswith("convert ")]
        parts = [*named[:1], counted(conversions, "conversion"), *named[1:]]
        unchecked = sorted({reason.split("not evaluated: ", 1)[1] for step in ran
                            if "not evaluated: " in (reason := str(step.get("reason", "")))})
        tail = f"; not evaluated here: {'; '.join(unchecked)}" if unchecked else ""
        return (f"verl_roles: verl {self.release} accepts the run before Ray ({', '.join(parts)}; "
                f"{self.seconds:.0f} s){tail}")


def checks_file() -> Path:
    """verl_roles/upstream/verl_prelaunch.py, where this copy of verl_roles has it."""
    spec = importlib.util.find_spec("verl_roles.upstream.verl_prelaunch")
    assert spec is not None and spec.origin is not None
    return Path(spec.origin)


def run_checks(python: str, run_dir: Path, release: str, workdir: Path, shown_as: Path) -> Verdict:
    """verl's checks of ``run_dir`` in ``python``, started in ``workdir``; a :class:`ConfigError` when
    verl refuses the run or the checks cannot run. ``shown_as`` is the folder the user knows the run by
    (a fresh run is checked in its staging folder)."""
    command = [python, str(checks_file()), str(run_dir),
               "--release-data", str(releases.RELEASES_DIR / f"{release}.json")]
    say(f"verl_roles: checking the run with verl {release}'s own checks in {python} (no Ray)")
    started = time.monotonic()
    out, err, code = _run(command, workdir, python)
    if code < 0:
        raise killed(python, -code)
    answer = _answer(out)
    if answer is None or "steps" not in answer:
        raise cannot_check(python, release, answer, err, code)
    verdict = Verdict(release, answer["steps"], time.monotonic() - started)
    failed = verdict.failure()
    if failed is not None:
        raise refusal(failed, release, run_dir, shown_as)
    return verdict


def _run(command: list[str], workdir: Path, python: str) -> tuple[str, str, int]:
    """The checks' process, in a process group of its own: a time-out or Ctrl-C ends it and all it
    started; launch killed outright takes it along (:func:`ends_with`)."""
    process = subprocess.Popen(command, cwd=workdir, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True, process_group=0,
                               preexec_fn=ends_with(os.getpid()))  # noqa: PLW1509 - no threads here
    finished = finish_within(process, CHECK_SECONDS)
    if finished is None:
        raise ConfigError([Problem(
            key="verl",
            message=f"did not finish its checks of the run within {CHECK_SECONDS} seconds in {python} (they "
            "import verl and read the model's config and tokenizer); nothing was written and nothing was "
            "started",
            fix="check that the model path is reachable from this machine, or add --skip-verl-checks to "
            "start verl's trainer without them",
        )])
    out, err = finished
    return out, err, process.returncode


def _answer(out: str) -> dict[str, Any] | None:
    lines = out.strip().splitlines()
    try:
        answer = json.loads(lines[-1]) if lines else None
    except ValueError:
        return None
    return answer if isinstance(answer, dict) else None


def killed(python: str, signum: int) -> ConfigError:
    """verl's checks were ended by a signal before they answered: nothing is known of the config."""
    try:
        name = signal.Signals(signum).name
    except ValueError:
        name = f"signal {signum}"
    return ConfigError([Problem(
        key="verl",
        message=f"its checks of the run in {python} were ended by {name} before they answered, so nothing "
        "is known yet of what verl thinks of the config (the system's out-of-memory killer sends SIGKILL, "
        "as `kill -9` does); nothing was written and nothing was started",
        fix="launch again; if the machine was short of memory, free some first, or add --skip-verl-checks "
        "to start verl's trainer without the checks",
    )])


def cannot_check(
    python: str, release: str, answer: dict[str, Any] | None, err: str, code: int
) -> ConfigError:
    """verl's checks could not run in ``python`` (a verl that lacks what its trainer imports, a crash)."""
    if answer is not None and "error" in answer:
        what = f"{answer['error']}" + (f" ({answer['at']})" if answer.get("at") else "")
    else:
        tail = one_paragraph("\n".join(err.strip().splitlines()[-3:])) or "no output"
        what = f"exit code {code}: {tail}"
    return ConfigError([Problem(
        key="verl",
        message=f"could not run its own checks of the run in {python}: {what}; its trainer would stop on "
        "the same; nothing was written and nothing was started",
        fix=f"{releases.install_hint(release, python)}; or add --skip-verl-checks to start verl's trainer "
        "without the checks",
    )])


def refusal(step: dict[str, Any], release: str, run_dir: Path, shown_as: Path) -> ConfigError:
    """The paragraph for verl's first failed step on the run."""
    name = str(step["step"])
    what, scope = STEP_SCOPES.get(name, _conversion_scope(name))
    error = str(step.get("error", "")).replace("<run dir>", str(shown_as))
    where = ""
    if step.get("at"):
        code = str(step.get("code", ""))
        where = f" ({step['at']})" if not code or code in error else f" ({step['at']}: `{code}`)"
    values = _keys(run_dir)
    keys = keys_named(f"{error} {step.get('code', '')}", values, scope)
    shown = ", ".join(f"{key}={_text(values[key])}" for key in keys if not isinstance(values[key], dict))
    named = " or ".join(f"`{key}`" for key in keys)
    fix = (f"change {named} so that verl's check holds (`verl-roles explain KEY` with the same overrides "
           "names where a value came from), then launch again" if keys else
           "change the values this check of verl reads so that it holds, then launch again")
    return ConfigError([Problem(
        key=", ".join(keys) if keys else (scope or "the config"),
        message=f"verl {release} refuses the run in `{name}` ({what}; run here before Ray): {error}{where}"
        + (f"; the run has {shown}" if shown else "") + "; nothing was written and nothing was started",
        fix=fix,
    )])


def _conversion_scope(step: str) -> tuple[str, str]:
    """``convert SECTION[ as CLASS]``: verl's conversion of that section, its keys under it."""
    section = step.removeprefix("convert ").split(" as ", 1)[0].removesuffix(".<tool>")
    return f"verl's conversion of {section} to its dataclass, on the way to its workers", section


# A dotted name or a name with an underscore, as verl's messages and code write keys.
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*")
# Objects verl's code reaches keys through, which are not part of a key.
_HOLDERS = ("self.config.", "self.", "config.", "cfg.")


def keys_named(text: str, values: dict[str, Any], scope: str) -> list[str]:
    """The keys of the run (under ``scope``) that ``text`` names: a dotted name or a name with an
    underscore that ends exactly one key there, first tried whole, then without its leading parts (a
    name that ends several keys names none)."""
    inside = [key for key in values if not scope or key == scope or key.startswith(scope + ".")]
    found: list[str] = []
    for name in _NAME.findall(text):
        for holder in _HOLDERS:
            name = name.removeprefix(holder)
        parts = name.split(".")
        for start in range(len(parts)):
            tail = ".".join(parts[start:])
            if "." not in tail and "_" not in tail:
                break
            matches = [key for key in inside if key == tail or key.endswith("." + tail)]
            if len(matches) == 1:
                if matches[0] not in found:
                    found.append(matches[0])
                break
            if matches:
                break
    # A section named beside keys under it (hydra's full_key of a dataclass) adds nothing.
    return [key for key in found if not any(other.startswith(key + ".") for other in found)]


def _keys(run_dir: Path) -> dict[str, Any]:
    """Every key of the run's resolved.yaml (sections and leaves), by dotted key."""
    import yaml

    try:
        tree = yaml.safe_load((run_dir / "resolved.yaml").read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError):
        return {}
    keys: dict[str, Any] = {}

    def walk(node: Any, prefix: str) -> None:
        if prefix:
            keys[prefix] = node
        if isinstance(node, dict):
            for key, value in node.items():
                walk(value, f"{prefix}.{key}" if prefix else str(key))

    walk(tree, "")
    return keys


def _text(value: Any) -> str:
    return "null" if value is None else str(value).lower() if isinstance(value, bool) else str(value)

"""Shared helpers for the suite: running the CLI as a user types it, and the repo's paths."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
CONF = REPO / "conf"
DATA = Path(__file__).resolve().parent / "data"


def cli_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("HYDRA_FULL_ERROR", "VERL_ROLES_DEBUG")}
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


def assert_user_error(result: subprocess.CompletedProcess[str], *phrases: str) -> None:
    """A user mistake: non-zero exit, no traceback, and the message carries each phrase."""
    output = result.stdout + result.stderr
    assert result.returncode != 0, output
    assert "Traceback" not in output, output
    for phrase in phrases:
        assert phrase in output, f"{phrase!r} not in:\n{output}"


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

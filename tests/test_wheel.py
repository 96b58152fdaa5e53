"""The built wheel carries the config tree: a non-editable install runs from any directory."""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

from conftest import CONF, REPO, cli_env


def _build_wheel(work: Path) -> Path:
    src = work / "src"
    src.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(REPO / name, src / name)
    shutil.copytree(REPO / "conf", src / "conf", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(REPO / "verl_roles", src / "verl_roles", ignore=shutil.ignore_patterns("__pycache__"))
    dist = work / "dist"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "-q",
            "-w",
            str(dist),
            str(src),
        ],
        check=True,
        capture_output=True,
        text=True,
    )
    (wheel,) = dist.glob("verl_roles-*.whl")
    return wheel


def test_wheel_ships_conf_and_runs_from_unrelated_dir(tmp_path: Path):
    wheel = _build_wheel(tmp_path)
    names = set(zipfile.ZipFile(wheel).namelist())
    for yaml_file in CONF.rglob("*.yaml"):
        assert f"verl_roles/conf/{yaml_file.relative_to(CONF).as_posix()}" in names, yaml_file
    assert "verl_roles/verl_reference.json" in names

    site = tmp_path / "site"
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "--no-deps", "-q", "--target", str(site), str(wheel)],
        check=True,
        capture_output=True,
        text=True,
    )
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    env = cli_env()
    env["PYTHONPATH"] = str(site)
    where = subprocess.run(
        [sys.executable, "-c", "import verl_roles; print(verl_roles.__file__)"],
        cwd=elsewhere,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    assert where.stdout.strip().startswith(str(site)), where.stdout
    result = subprocess.run(
        [sys.executable, "-m", "verl_roles.main", "model_engine=megatron", "hydra.run.dir=run"],
        cwd=elsewhere,
        env=env,
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stderr
    assert "model_engine: megatron" in (elsewhere / "run" / "resolved.yaml").read_text()

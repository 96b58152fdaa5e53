"""Golden snapshots in _generated/: fresh, portable, exactly what the main job writes, and the
generator script (``--check`` and regeneration) on a temporary copy of the repo."""

from __future__ import annotations

import getpass
import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from conftest import REPO, cli_env

from verl_roles.base import releases
from verl_roles.base.layout import DEFAULT_ENGINE, ENGINES
from verl_roles.commands import snapshots
from verl_roles.commands.snapshots import VARIANTS, Variant
from verl_roles.inputs.cmdline import CommandLine
from verl_roles.main import main as main_job

# One pytest-xdist worker runs this module (`--dist loadgroup`, pyproject): every snapshot is rendered
# once (the module fixture below), not once per worker that gets a test of this module.
pytestmark = [pytest.mark.stack, pytest.mark.xdist_group("snapshots")]

GENERATED = REPO / "_generated"
SCRIPT = REPO / "scripts" / "generate_trainer_config.sh"
FIX = "scripts/generate_trainer_config.sh"


@pytest.fixture(scope="module")
def rendered() -> dict[str, str]:
    """Every snapshot composed from conf/ now, once for this module (also checks ``same_as``)."""
    return snapshots.render_all()


def assert_fresh(variant: Variant, text: str, generated_dir: Path = GENERATED) -> None:
    """The golden comparison: the committed snapshot equals the composed text, else show the diff."""
    diff = snapshots.snapshot_diff(variant, text, generated_dir)
    if diff:
        pytest.fail(f"{variant.filename} is stale; run {FIX} and commit _generated/.\n{diff}", pytrace=False)


@pytest.mark.parametrize("variant", VARIANTS, ids=lambda v: v.filename)
def test_committed_snapshot_is_fresh(variant: Variant, rendered: dict[str, str]):
    assert_fresh(variant, rendered[variant.filename])


def test_variant_list_is_the_generated_dir():
    assert sorted(p.name for p in GENERATED.iterdir()) == sorted(v.filename for v in VARIANTS)
    assert {"_generated_ppo_trainer.yaml", "_generated_ppo_megatron_trainer.yaml"} <= {
        v.filename for v in VARIANTS
    }


def test_every_release_has_snapshots_of_the_default_engines():
    pinned = {(CommandLine.parse(list(v.composition.overrides)).release(),
               next((o.partition("=")[2] for o in v.composition.overrides if o.startswith("model_engine=")),
                    DEFAULT_ENGINE)) for v in VARIANTS}
    assert {(r, e) for r in releases.supported() for e in (DEFAULT_ENGINE, "megatron")} <= pinned


def test_every_engine_has_a_snapshot():
    overrides = [o for v in VARIANTS for o in v.composition.overrides]
    pinned = {o.partition("=")[2] for o in overrides if o.startswith("model_engine=")}
    assert set(ENGINES) <= pinned | {DEFAULT_ENGINE}


@pytest.mark.parametrize("variant", VARIANTS, ids=lambda v: v.filename)
def test_snapshot_header_names_engine_and_command_and_nothing_machine_specific(variant: Variant):
    text = (GENERATED / variant.filename).read_text(encoding="utf-8")
    head = [line for line in text.splitlines() if line.startswith("#")]
    body = text[len("\n".join(head)) + 1 :]
    chosen = [o.partition("=")[2] for o in variant.composition.overrides if o.startswith("model_engine=")]
    engine = chosen[-1] if chosen else DEFAULT_ENGINE
    assert f"# model_engine: {engine}" in head
    release = CommandLine.parse(list(variant.composition.overrides)).release()
    assert any(line.startswith(f"# Target trainer: verl {release} ") for line in head)
    assert yaml.safe_load(body)[releases.VERSION_KEY] == release
    assert f"\nmodel_engine: {engine}\n" in body
    assert f"# Composed as: {variant.composition.command()}" in head
    assert any(FIX in line for line in head)
    for private in (str(REPO), str(Path.home()), socket.gethostname()):
        assert private not in text
    assert getpass.getuser() not in "\n".join(head)


def test_snapshot_body_is_exactly_the_resolved_yaml_of_the_main_job(tmp_path: Path):
    variant = next(v for v in VARIANTS if v.filename == "_generated_ppo_megatron_trainer.yaml")
    assert main_job([*variant.composition.overrides, f"hydra.run.dir={tmp_path}"]) == 0
    written = (tmp_path / "resolved.yaml").read_text(encoding="utf-8")
    committed = (GENERATED / variant.filename).read_text(encoding="utf-8")
    assert committed == snapshots.header(variant, written) + written


def test_golden_comparison_fails_with_a_readable_diff_when_a_default_changed(
    tmp_path: Path, rendered: dict[str, str]
):
    # A committed snapshot from before `trainer.total_epochs` changed its default.
    variant = VARIANTS[0]
    stale = rendered[variant.filename].replace("\n  total_epochs: 30\n", "\n  total_epochs: 20\n")
    assert stale != rendered[variant.filename]
    (tmp_path / variant.filename).write_text(stale, encoding="utf-8")
    with pytest.raises(pytest.fail.Exception) as failure:
        assert_fresh(variant, rendered[variant.filename], tmp_path)
    message = str(failure.value)
    assert "-  total_epochs: 20\n+  total_epochs: 30\n" in message
    assert f"--- _generated/{variant.filename} (committed)" in message
    assert FIX in message


def test_check_reports_stale_missing_and_unlisted_files_and_writes_nothing(
    tmp_path: Path, rendered: dict[str, str], capsys: pytest.CaptureFixture[str]
):
    shutil.copytree(GENERATED, tmp_path, dirs_exist_ok=True)
    stale_name, missing_name = VARIANTS[0].filename, VARIANTS[1].filename
    stale_path = tmp_path / stale_name
    stale_path.write_text(stale_path.read_text().replace("\n  nnodes: 1\n", "\n  nnodes: 4\n"))
    (tmp_path / missing_name).unlink()
    (tmp_path / "_generated_old_variant.yaml").write_text("old: true\n")
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}

    assert snapshots.check(tmp_path, rendered=rendered) == 1
    out = capsys.readouterr().out
    assert "-  nnodes: 4\n+  nnodes: 1\n" in out
    assert f"--- _generated/{missing_name} (missing)" in out
    assert "_generated_old_variant.yaml is not in VARIANTS" in out
    assert "3 snapshot files in _generated/ are stale" in out and FIX in out
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == before


def test_a_snapshot_that_is_not_utf8_is_stale_and_generating_repairs_it(
    tmp_path: Path, rendered: dict[str, str], capsys: pytest.CaptureFixture[str]
):
    shutil.copytree(GENERATED, tmp_path, dirs_exist_ok=True)
    damaged = tmp_path / VARIANTS[0].filename
    damaged.write_bytes(damaged.read_bytes() + b"# caf\xe9\n")

    assert snapshots.check(tmp_path, rendered=rendered) == 1
    assert f"stale: _generated/{VARIANTS[0].filename}" in capsys.readouterr().out
    assert snapshots.generate(tmp_path, rendered=rendered) == 0
    assert damaged.read_bytes() == rendered[VARIANTS[0].filename].encode("utf-8")
    assert snapshots.check(tmp_path, rendered=rendered) == 0


def test_a_missing_generated_folder_is_stale_and_generating_makes_it(
    tmp_path: Path, rendered: dict[str, str], capsys: pytest.CaptureFixture[str]
):
    generated = tmp_path / "_generated"
    assert snapshots.check(generated, rendered=rendered) == 1
    assert not generated.exists()
    assert snapshots.generate(generated, rendered=rendered) == 0
    assert snapshots.check(generated, rendered=rendered) == 0
    capsys.readouterr()


def test_check_is_quiet_and_zero_when_fresh(rendered: dict[str, str], capsys: pytest.CaptureFixture[str]):
    assert snapshots.check(GENERATED, rendered=rendered) == 0
    assert capsys.readouterr().out == f"{len(VARIANTS)} snapshots in _generated/ are fresh.\n"


def test_generator_refuses_another_checkouts_config_tree(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    assert snapshots.main(["--root", str(tmp_path), "--check"]) == 2
    err = capsys.readouterr().err
    assert "verl_roles error: conf/" in err and "not from" in err and FIX in err
    assert not (tmp_path / "_generated").exists()


# --- the script itself, on a temporary copy of the repo ------------------------------------------


def copy_repo(dest: Path) -> Path:
    for name in ("conf", "verl_roles", "scripts", "_generated"):
        shutil.copytree(REPO / name, dest / name, symlinks=True, ignore=shutil.ignore_patterns("__pycache__"))
    return dest


def run_script(repo: Path, *args: str, path_dirs: tuple[Path, ...] = (), seed: str = "0"):
    env = cli_env()
    env.pop("PYTHON", None)
    env.pop("PYTHONPATH", None)
    env["PYTHONHASHSEED"] = seed
    dirs = [*path_dirs, Path(sys.executable).parent]
    env["PATH"] = os.pathsep.join([*map(str, dirs), env.get("PATH", "")])
    return subprocess.run(
        [str(repo / "scripts" / "generate_trainer_config.sh"), *args],
        cwd=repo / "conf",
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def snapshot_bytes(repo: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted((repo / "_generated").iterdir())}


@pytest.mark.slow
def test_script_check_fails_on_a_changed_default_with_a_diff_and_writes_nothing(tmp_path: Path):
    repo = copy_repo(tmp_path / "repo")
    baseline = repo / "conf" / "engine" / "megatron.yaml"
    text = baseline.read_text(encoding="utf-8")
    assert "\noptimizer_offload: false\n" in text
    changed = text.replace("\noptimizer_offload: false\n", "\noptimizer_offload: true\n")
    baseline.write_text(changed, encoding="utf-8")
    committed = snapshot_bytes(repo)

    # Another process with a random hash seed: the snapshots the change does not touch regenerate
    # byte-identically, so only the megatron ones are reported.
    check = run_script(repo, "--check", seed="random")
    assert check.returncode == 1, check.stdout + check.stderr
    megatron = {v.filename for v in VARIANTS if "model_engine=megatron" in v.composition.overrides}
    for variant in VARIANTS:
        shown = f"--- _generated/{variant.filename} (committed)" in check.stdout
        assert shown == (variant.filename in megatron), variant.filename
    assert "-      optimizer_offload: false\n+      optimizer_offload: true\n" in check.stdout
    assert f"Fix: run {FIX}" in check.stdout and "Traceback" not in check.stderr
    assert snapshot_bytes(repo) == committed


def test_regenerating_writes_only_changes_is_byte_identical_and_drops_unlisted_files(
    tmp_path: Path, rendered: dict[str, str], capsys: pytest.CaptureFixture[str]
):
    generated = tmp_path / "_generated"
    generated.mkdir()
    (generated / "_generated_old_variant.yaml").write_text("old: true\n")
    (generated / "notes.txt").write_text("not the generator's\n")
    assert snapshots.generate(generated, rendered=rendered) == 0
    first = snapshot_bytes(tmp_path)
    assert first == {**snapshot_bytes(REPO), "notes.txt": b"not the generator's\n"}
    assert "_generated_old_variant.yaml (removed" in capsys.readouterr().out
    umask = os.umask(0o022)
    os.umask(umask)
    assert (generated / VARIANTS[0].filename).stat().st_mode & 0o777 == 0o666 & ~umask

    # Composing again gives the same text (the golden tests compare this process's composition with
    # files another process wrote), so a second run changes nothing.
    assert snapshots.generate(generated, rendered=rendered) == 0
    assert snapshot_bytes(tmp_path) == first
    assert capsys.readouterr().out == f"{len(VARIANTS)} snapshots in _generated/: none changed\n"


@pytest.mark.slow
def test_script_without_an_importable_verl_roles_says_what_to_do(tmp_path: Path):
    # A python3 first on PATH that does not see the installed dependencies (hydra, omegaconf).
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "python3").write_text(f'#!/bin/sh\nexec "{sys.executable}" -S "$@"\n')
    (fake / "python3").chmod(0o755)
    result = run_script(copy_repo(tmp_path / "repo"), "--check", path_dirs=(fake,))
    assert result.returncode == 2
    assert "cannot import verl_roles" in result.stderr and "pip install -e ." in result.stderr
    assert "Traceback" not in result.stderr


def test_the_snapshot_page_lists_every_variant_the_script_writes():
    """docs/snapshots.md's table is the one `docs_table()` writes from VARIANTS: a variant added (or
    dropped) changes the page, or this fails with the table to paste."""
    page = (REPO / "docs" / "snapshots.md").read_text(encoding="utf-8")
    table = snapshots.docs_table()
    assert table in page, f"paste this table into docs/snapshots.md:\n{table}"

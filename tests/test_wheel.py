"""Installs behave: the built wheel carries the config tree and reads only its own (whatever the working
directory), a source checkout reads its own, and an editable install works from every folder."""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from conftest import CONF, REPO, cli_env

# One pytest-xdist worker runs this module (`--dist loadgroup`, pyproject): the wheel (built and
# installed by a module fixture: two pip runs) is built once, not once per worker that gets a test.
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("wheel")]


def _source_copy(into: Path) -> Path:
    """A copy of the checkout's build inputs (as a clone has them), in ``into``."""
    into.mkdir(parents=True)
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(REPO / name, into / name)
    shutil.copytree(REPO / "conf", into / "conf", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(
        REPO / "verl_roles", into / "verl_roles", symlinks=True, ignore=shutil.ignore_patterns("__pycache__")
    )
    return into


def _build_wheel(work: Path) -> Path:
    src = _source_copy(work / "src")
    dist = work / "dist"
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(dist)]
        + [str(src)],
        check=True,
        capture_output=True,
        text=True,
    )
    (wheel,) = dist.glob("verl_roles-*.whl")
    return wheel


def _python(args: list[str], cwd: Path, path: list[Path]) -> subprocess.CompletedProcess[str]:
    env = cli_env()
    env["PYTHONPATH"] = ":".join(str(p) for p in path)
    command = [sys.executable, *args]
    return subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=120)


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The wheel installed into a folder of its own (``pip install --target``)."""
    work = tmp_path_factory.mktemp("wheel")
    wheel = _build_wheel(work)
    names = set(zipfile.ZipFile(wheel).namelist())
    for yaml_file in CONF.rglob("*.yaml"):
        assert f"verl_roles/conf/{yaml_file.relative_to(CONF).as_posix()}" in names, yaml_file
    site = work / "site"
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "--no-deps", "-q", "--target", str(site), str(wheel)],
        check=True,
        capture_output=True,
        text=True,
    )
    return site


def test_wheel_ships_conf_and_runs_from_unrelated_dir(installed: Path, tmp_path: Path):
    where = _python(["-c", "import verl_roles; print(verl_roles.__file__)"], tmp_path, [installed])
    assert where.stdout.strip().startswith(str(installed)), where.stdout + where.stderr
    args = ["-m", "verl_roles.main", "model_engine=megatron", "hydra.run.dir=run"]
    result = _python(args, tmp_path, [installed])
    assert result.returncode == 0, result.stderr
    assert "model_engine: megatron" in (tmp_path / "run" / "resolved.yaml").read_text()
    assert "verl_roles warning" not in result.stderr


def _clone_with_other_epochs(tmp_path: Path) -> Path:
    """A checkout whose conf/ says trainer.total_epochs: 999 (the shipped tree says 30)."""
    clone = _source_copy(tmp_path / "clone")
    trainer = clone / "conf" / "trainer" / "trainer.yaml"
    text = trainer.read_text(encoding="utf-8")
    assert "\ntotal_epochs: 30\n" in text
    trainer.write_text(text.replace("\ntotal_epochs: 30\n", "\ntotal_epochs: 999\n"), encoding="utf-8")
    return clone


def test_installed_package_reads_its_own_conf_inside_a_checkout(installed: Path, tmp_path: Path):
    clone = _clone_with_other_epochs(tmp_path)
    # `python -P` (like a console script) does not put the working directory on the path: the installed
    # copy runs, and reads its own tree although the working directory is a checkout with another one.
    result = _python(["-P", "-m", "verl_roles.main", "hydra.run.dir=run"], clone, [installed])
    assert result.returncode == 0, result.stderr
    assert "total_epochs: 30" in (clone / "run" / "resolved.yaml").read_text()
    assert "verl_roles warning" not in result.stderr
    # ... unless --config-dir says otherwise: a role option from the checkout's folder.
    option = clone / "mine" / "role" / "critic" / "slow.yaml"
    option.parent.mkdir(parents=True)
    option.write_text("# @package critic\noptim:\n  lr: 2.0e-06\n", encoding="utf-8")
    args = ["-P", "-m", "verl_roles.main", "--config-dir", "mine", "role/critic=slow", "hydra.run.dir=run2"]
    result = _python(args, clone, [installed])
    assert result.returncode == 0, result.stderr
    assert "lr: 2.0e-06" in (clone / "run2" / "roles" / "critic.yaml").read_text()


def test_checkout_that_shadows_an_installed_copy_says_so(installed: Path, tmp_path: Path):
    clone = _clone_with_other_epochs(tmp_path)
    # `python -m` inside a checkout runs the checkout (Python puts the working directory first): its code
    # and its conf/ go together, and a notice names both copies.
    result = _python(["-m", "verl_roles.main", "hydra.run.dir=run"], clone, [installed])
    assert result.returncode == 0, result.stderr
    assert "total_epochs: 999" in (clone / "run" / "resolved.yaml").read_text()
    notice = [line for line in result.stderr.splitlines() if line.startswith("verl_roles warning")]
    assert len(notice) == 1, result.stderr
    assert f"running the source checkout {clone}" in notice[0] and str(installed) in notice[0]


def test_a_copy_installed_from_the_checkout_runs_inside_it_without_a_notice(tmp_path: Path):
    # The README's quick start in a fresh clone: `pip install .`, then `python -m verl_roles.main` inside
    # the clone. The checkout runs, and it is the source that was installed: no notice.
    clone = _source_copy(tmp_path / "clone")
    site = tmp_path / "site"
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "--no-deps", "--no-build-isolation", "-q",
         "--target", str(site), str(clone)],
        check=True, capture_output=True, text=True,
    )
    result = _python(["-m", "verl_roles.main", "model_engine=megatron", "hydra.run.dir=run"], clone, [site])
    assert result.returncode == 0, result.stderr
    assert "verl_roles warning" not in result.stderr, result.stderr
    assert "model_engine: megatron" in (clone / "run" / "resolved.yaml").read_text()


def test_editable_install_runs_from_the_checkouts_parent_folder(tmp_path: Path):
    # A clone keeps the repository's name, so its parent folder holds a `verl_roles/` directory (the
    # clone) with no __init__.py: Python would import it as an empty namespace package unless the
    # editable install is a path entry for the checkout, which a regular package beats.
    clone = _source_copy(tmp_path / "verl_roles")
    built = tmp_path / "editable"
    build = f"from setuptools import build_meta; build_meta.build_editable({str(built)!r})"
    subprocess.run([sys.executable, "-c", build], cwd=clone, check=True, capture_output=True, text=True)
    (wheel,) = built.glob("*.whl")
    archive = zipfile.ZipFile(wheel)
    (pth,) = [name for name in archive.namelist() if name.endswith(".pth")]
    entries = archive.read(pth).decode().split()
    assert entries == [str(clone)], entries  # a path entry, not an import hook
    # Run from the parent folder with that entry on the path, as the installed .pth file puts it.
    for args in (
        ["-m", "verl_roles.main", "model_engine=megatron", "hydra.run.dir=run"],
        ["-c", "import verl_roles; print(verl_roles.compose([]).trainer.total_epochs)"],
        ["-m", "verl_roles.cli", "explain", "trainer.total_epochs"],
    ):
        result = _python(args, tmp_path, [clone])
        assert result.returncode == 0 and "Traceback" not in result.stderr, (args, result.stderr)
    assert "model_engine: megatron" in (tmp_path / "run" / "resolved.yaml").read_text()


def test_an_editable_install_of_this_checkout_runs_inside_it_without_a_notice():
    # `pip install -e .` leaves verl_roles.egg-info in the checkout, which Python finds first inside
    # it: that is the checkout's own build metadata, not another installed copy.
    from importlib import metadata

    from verl_roles.base.installation import _installed_source

    folder, editable = _installed_source(metadata.Distribution.at(_site_dist_info()))
    if not (editable and folder == REPO.resolve()):
        pytest.skip("the suite does not run from an editable install of this checkout")
    if not (REPO / "verl_roles.egg-info" / "PKG-INFO").is_file():
        pytest.skip("the editable install left no verl_roles.egg-info in the checkout")
    result = subprocess.run([sys.executable, "-m", "verl_roles.main", "--help"], cwd=REPO, env=cli_env(),
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert "verl_roles warning" not in result.stderr, result.stderr


def _site_dist_info() -> Path:
    """The dist-info folder of the verl_roles installed in this Python's site-packages."""
    import sysconfig

    found = sorted(Path(sysconfig.get_paths()["purelib"]).glob("verl_roles-*.dist-info"))
    if not found:
        pytest.skip("verl_roles is not installed in this Python")
    return found[0]


def test_every_package_of_the_source_tree_is_in_the_wheel():
    # pyproject.toml finds the packages (setuptools' find, its [tool.setuptools.packages.find]): every folder
    # of the package that holds Python code is one (an __init__.py makes it so; a folder without one would
    # be left out of every installed copy, as verl_roles/commands/ once was).
    import tomllib

    from setuptools import find_packages

    project = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
    found_by = project["tool"]["setuptools"]["packages"]["find"]
    packaged = set(find_packages(str(REPO / found_by["where"][0]), include=found_by["include"]))
    with_code = {
        ".".join(source.parent.relative_to(REPO).parts)
        for source in (REPO / "verl_roles").rglob("*.py")
        if "conf" not in source.relative_to(REPO).parts
    }
    missing = sorted(with_code - packaged)
    assert not missing, f"folders of code no installed copy has: {missing}"

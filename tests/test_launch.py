"""`verl-roles launch`: write the run directory as the main job does, then run verl's trainer on it.

Without GPUs and mostly without verl: a fake ``verl`` package (a ``verl.trainer.main_ppo`` that records
its arguments and exits with a chosen code, plus the package metadata that carries its version) on the
child processes' PYTHONPATH stands in for the trainer. One test runs the real verl 0.9.1 where it is
available, with only ``run_ppo`` replaced (tests/verl_reach_ray.py).
"""

from __future__ import annotations

import json
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
import yaml
from conftest import REPO, cli_env, main_in_process, verl_python
from verl_known_failures import explaining_row

from verl_roles import releases
from verl_roles.cli import main as cli_main

DEFAULT = releases.DEFAULT_RELEASE
OLDEST = releases.supported()[0]

QUIET = ["hydra/job_logging=none", "hydra/hydra_logging=none"]
TRAINER = """\
import json, os, sys
record = {"argv": sys.argv[1:], "cwd": os.getcwd(), "module": __name__, "spec": __spec__.name}
with open(os.environ["FAKE_VERL_RECORD"], "w") as handle:
    json.dump(record, handle)
sys.exit(int(os.environ.get("FAKE_VERL_EXIT", "0")))
"""


def fake_verl(root: Path, version: str = DEFAULT) -> Path:
    """A package named verl with the given version and a trainer module that records its call."""
    (root / "verl" / "trainer").mkdir(parents=True)
    (root / "verl" / "__init__.py").write_text(f'__version__ = "{version}"\n', encoding="utf-8")
    (root / "verl" / "trainer" / "__init__.py").write_text("", encoding="utf-8")
    (root / "verl" / "trainer" / "main_ppo.py").write_text(TRAINER, encoding="utf-8")
    info = root / f"verl-{version}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(
        f"Metadata-Version: 2.1\nName: verl\nVersion: {version}\n", encoding="utf-8"
    )
    return root


@pytest.fixture
def trainer(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The fake verl on the children's path; returns the file its trainer writes its call into."""
    record = tmp_path / "trainer_call.json"
    monkeypatch.setenv("PYTHONPATH", str(fake_verl(tmp_path / "fake")))
    monkeypatch.setenv("FAKE_VERL_RECORD", str(record))
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    return record


def launch(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = cli_main(["launch", *args])
    captured = capsys.readouterr()
    assert "Traceback" not in captured.out + captured.err, captured.out + captured.err
    return code, captured.out, captured.err


def run_dirs(root: Path) -> list[Path]:
    return sorted(path.parent for path in root.rglob("resolved.yaml"))


@pytest.mark.parametrize("trainer_exit", [0, 3])
def test_launch_writes_the_run_dir_then_trains_on_it_and_exits_with_the_trainers_code(
    trainer: Path, trainer_exit: int, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
):
    monkeypatch.setenv("FAKE_VERL_EXIT", str(trainer_exit))
    code, out, _ = launch(["critic.optim.lr=2e-5", *QUIET], capsys)
    assert code == trainer_exit
    [run_dir] = run_dirs(Path.cwd())
    call = json.loads(trainer.read_text(encoding="utf-8"))
    assert call["spec"] == "verl.trainer.main_ppo" and call["module"] == "__main__"
    assert call["argv"] == [
        "--config-path",
        str(run_dir.resolve()),
        "--config-name",
        "resolved",
        f"hydra.run.dir='{run_dir.resolve() / 'verl'}'",
    ]
    assert call["cwd"] == str(Path.cwd())
    assert "verl_roles: starting verl:" in out and "-m verl.trainer.main_ppo --config-path" in out


def test_the_run_dir_is_exactly_what_the_main_job_writes(
    trainer: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
):
    overrides = ["model_engine=megatron", "critic.megatron.param_offload=true"]
    assert launch([*overrides, *QUIET], capsys)[0] == 0
    [launched] = run_dirs(Path.cwd())
    code, _, _ = main_in_process(overrides, tmp_path / "main_job", capsys)
    assert code == 0
    main_dir = tmp_path / "main_job" / "out"
    for name in (
        "resolved.yaml",
        "roles/actor.yaml",
        "roles/critic.yaml",
        "roles/ref.yaml",
        "roles/rollout.yaml",
    ):
        assert (launched / name).read_bytes() == (main_dir / name).read_bytes(), name


def test_an_invalid_config_writes_nothing_and_starts_nothing(
    trainer: Path, capsys: pytest.CaptureFixture[str]
):
    code, _, err = launch(["critic.optim.lr=-1", *QUIET], capsys)
    assert code == 2
    assert "critic.optim.lr" in err and "Fix:" in err
    assert list(Path.cwd().iterdir()) == []
    assert not trainer.exists()


def test_a_sweep_is_refused_with_the_way_to_launch_its_jobs(
    trainer: Path, capsys: pytest.CaptureFixture[str]
):
    code, _, err = launch(["-m", "critic.optim.lr=1e-5,2e-5", *QUIET], capsys)
    assert code == 2
    assert "python -m verl_roles.main -m" in err and "verl-roles launch --run-dir" in err
    assert list(Path.cwd().iterdir()) == [] and not trainer.exists()


def written_release(run_root: Path) -> str:
    [run_dir] = run_dirs(run_root)
    return yaml.safe_load((run_dir / "resolved.yaml").read_text(encoding="utf-8"))[releases.VERSION_KEY]


def test_the_config_is_written_for_the_installed_release(
    trainer: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
):
    """No verl_version on the line: launch writes the config for the release the trainer's Python has."""
    monkeypatch.setenv("PYTHONPATH", str(fake_verl(tmp_path / "old", version=OLDEST)))
    code, _, err = launch(QUIET, capsys)
    assert code == 0 and trainer.exists(), err
    assert written_release(Path.cwd()) == OLDEST


def test_another_chosen_release_is_refused_naming_both(
    trainer: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
):
    monkeypatch.setenv("PYTHONPATH", str(fake_verl(tmp_path / "old", version=OLDEST)))
    code, _, err = launch([releases.choice(DEFAULT), *QUIET], capsys)
    assert code == 2 and not trainer.exists()
    assert f"is {DEFAULT}, but" in err and f"has verl {OLDEST}" in err and releases.extra(DEFAULT) in err
    # One paragraph (a checkout run beside another installed copy adds its one-line notice before it).
    errors = [line for line in err.strip().splitlines() if not line.startswith("verl_roles warning")]
    assert len(errors) == 1 and list(Path.cwd().iterdir()) == [], err


def test_a_release_verl_roles_does_not_support_is_refused(
    trainer: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
):
    monkeypatch.setenv("PYTHONPATH", str(fake_verl(tmp_path / "old", version="0.1.0")))
    code, _, err = launch(QUIET, capsys)
    assert code == 2 and not trainer.exists()
    assert "verl 0.1.0" in err and ", ".join(releases.supported()) in err
    assert list(Path.cwd().iterdir()) == []


def test_a_run_dir_written_for_another_release_is_refused(
    trainer: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
):
    assert main_in_process([releases.choice(DEFAULT)], tmp_path / "job", capsys)[0] == 0
    monkeypatch.setenv("PYTHONPATH", str(fake_verl(tmp_path / "old", version=OLDEST)))
    code, _, err = launch(["--run-dir", str(tmp_path / "job" / "out")], capsys)
    assert code == 2 and not trainer.exists()
    assert f"is {DEFAULT}, but" in err and releases.choice(OLDEST) in err


def test_run_dir_trains_on_a_folder_written_before(
    trainer: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
):
    assert main_in_process(["trainer.total_epochs=2"], tmp_path / "job", capsys)[0] == 0
    job = tmp_path / "job" / "out"
    code, _, _ = launch(["--run-dir", str(job)], capsys)
    assert code == 0
    assert json.loads(trainer.read_text(encoding="utf-8"))["argv"][:2] == [
        "--config-path",
        str(job.resolve()),
    ]
    assert list(Path.cwd().iterdir()) == []


def test_run_dir_without_resolved_yaml_or_with_overrides_is_a_usage_error(
    trainer: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
):
    code, _, err = launch(["--run-dir", str(tmp_path)], capsys)
    assert code == 2 and "no resolved.yaml" in err
    code, _, err = launch(["--run-dir", str(tmp_path), "critic.optim.lr=1e-5"], capsys)
    assert code == 2 and "would be ignored" in err
    assert not trainer.exists()


def test_without_verl_one_paragraph_says_how_to_install_the_extra(tmp_path: Path):
    """As a user types it, with a Python that has no verl: nothing written, nothing started."""
    env = {key: value for key, value in cli_env().items() if key != "PYTHONPATH"}
    result = subprocess.run(
        [sys.executable, "-m", "verl_roles.cli", "launch", "critic.optim.lr=2e-5"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr
    paragraph = result.stderr.strip()
    assert "\n" not in paragraph
    assert f'pip install "verl_roles[{releases.extra(DEFAULT)}]"' in paragraph
    assert f"verl=={DEFAULT}" in paragraph
    assert "--verl-python" in paragraph
    assert list(tmp_path.iterdir()) == []


def test_a_verl_python_that_cannot_run_is_named(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    code, _, err = launch(["--verl-python", str(tmp_path / "no-python")], capsys)
    assert code == 2 and "could not be run" in err and str(tmp_path / "no-python") in err


def test_the_verl_extra_installs_the_default_release_with_what_its_trainer_imports():
    project = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    assert project["optional-dependencies"]["verl"] == [f"verl[verl-core]=={DEFAULT}"]


# --------------------------------------------------------------------------------------------------
# The real verl, where it is installed.


def test_launch_with_the_real_verl_reaches_the_point_where_verl_starts_ray(tmp_path: Path):
    python, why = verl_python()
    if python is None:
        pytest.skip(why)
    tests = Path(__file__).resolve().parent
    model = tmp_path / "model"
    env = {**cli_env(), "PYTHONPATH": str(tests), "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    env["HF_HOME"] = str(tmp_path / "hf_home")
    subprocess.run([python, str(tests / "verl_driver.py"), "--build-model", str(model)], env=env, check=True)
    args = [
        f"actor_rollout_ref.model.path={model}",
        f"critic.model.path={model}",
        "actor_rollout_ref.rollout.name=vllm",
        "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=2",
        "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=2",
        "critic.ppo_micro_batch_size_per_gpu=2",
    ]
    result = subprocess.run(
        [sys.executable, "-m", "verl_roles.cli", "launch", "--verl-python", python, "--trainer-module"]
        + ["verl_reach_ray", *args],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    [run_dir] = run_dirs(tmp_path)
    assert (run_dir / "verl").is_dir(), result.stderr[-3000:]  # verl's Hydra ran, in its own subfolder
    if result.returncode != 0:
        last = result.stderr.strip().splitlines()[-1] if result.stderr.strip() else ""
        row = explaining_row("launch", "entry_point", last)
        assert row is not None, (
            f"verl refused what launch wrote (exit {result.returncode}):\n{result.stderr[-3000:]}"
        )
        pytest.xfail(row.reason)
    assert "reached run_ppo" in result.stdout


def test_the_install_hint_names_the_interpreter_it_is_for(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    """`--verl-python PY` without verl: the pip command installs into PY, not into this venv."""
    import importlib.util
    import shlex

    if importlib.util.find_spec("verl") is not None:
        pytest.skip("verl is importable here; the hint is for a Python without it")
    # This interpreter outside its venv (no pyvenv.cfg next to it): a Python with no verl, at a path
    # with a space in it, as a user may have.
    other = tmp_path / "my pythons" / "python3"
    other.parent.mkdir()
    other.symlink_to(Path(sys.executable).resolve())
    code, out, err = launch(["--verl-python", str(other)], capsys)
    assert code == 2 and out == ""
    paragraph = err.strip().splitlines()[-1]
    assert f"is not installed for the Python at {other}" in paragraph
    assert f'`{shlex.quote(str(other))} -m pip install "verl_roles[{releases.extra(DEFAULT)}]"`' in paragraph
    assert f"into {other}" in paragraph


def test_a_sweep_folder_is_named_with_its_jobs_before_verl_is_probed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
):
    from verl_roles import main as main_module

    sweep = tmp_path / "sweep"
    assert main_module.main(["-m", "trainer.total_epochs=1,2,3", f"hydra.sweep.dir={sweep}", *QUIET]) == 0
    capsys.readouterr()
    # No verl at all (a Python that cannot run): the folder is what is wrong, and it is said first.
    code, out, err = launch(["--run-dir", str(sweep), "--verl-python", str(tmp_path / "no-python")], capsys)
    assert code == 2 and out == ""
    paragraph = err.strip().splitlines()[-1]
    assert f"--run-dir {sweep}: is the folder of a multirun sweep" in paragraph
    assert "multirun.yaml" in paragraph and "its folder: 0, 1, 2" in paragraph
    assert f"pick one job, e.g. `--run-dir {sweep / '0'}`" in paragraph
    assert "could not be run" not in paragraph and "not installed" not in paragraph

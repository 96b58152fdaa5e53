"""`verl-roles launch`: write the run directory as the main job does, then run verl's trainer on it.

Without GPUs and mostly without verl: a fake ``verl`` package (a ``verl.trainer.main_ppo`` that records
its arguments and exits with a chosen code, plus the package metadata that carries its version) on the
child processes' PYTHONPATH stands in for the trainer. It has none of verl's own checks, so those tests
launch with ``--skip-verl-checks`` unless they are about the checks. Where a real verl is installed
(``VERL_PYTHON``), launch runs verl's checks before Ray (a run verl's worker would refuse is refused in
seconds, nothing written), and its trainer for real, on a local Ray with a logical GPU, next to verl's
own entry point on the same overrides: both must get as far as a CPU machine allows and stop at the same
place, on the missing GPU (tests/verl_ray.py).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
import tomllib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import verl_ray
import yaml
from conftest import REPO, cli_env, installed_verl_release, main_in_process, verl_python

from verl_roles.base import releases
from verl_roles.cli import main as cli_main

DEFAULT = releases.DEFAULT_RELEASE
OLDEST = releases.supported()[0]

QUIET = ["hydra/job_logging=none", "hydra/hydra_logging=none"]
TRAINER = """\
import json, os, sys
record = {"argv": sys.argv[1:], "cwd": os.getcwd(), "module": __name__, "spec": __spec__.name,
          "hydra_full_error": os.environ.get("HYDRA_FULL_ERROR")}
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


SKIP_CHECKS = "--skip-verl-checks"
# What only the user can know; launch refuses a run whose paths are still the shipped placeholders.
PATHS = ["actor_rollout_ref.model.path=/models/tiny", "data.train_files=/data/train.parquet",
         "data.val_files=/data/test.parquet"]


def launch(
    args: list[str], capsys: pytest.CaptureFixture[str], *, verl_checks: bool = False, paths: bool = True
) -> tuple[int, str, str]:
    """``verl-roles launch ARGS`` in this process, with the user's paths set (unless ``paths`` is False or
    it trains on a ``--run-dir``); the fake verl has none of verl's checks to run, so they are skipped
    unless ``verl_checks``."""
    given = PATHS if paths and "--run-dir" not in args else []
    code = cli_main(["launch", *args, *given, *(() if verl_checks else (SKIP_CHECKS,))])
    captured = capsys.readouterr()
    assert "Traceback" not in captured.out + captured.err, captured.out + captured.err
    return code, captured.out, captured.err


@pytest.mark.parametrize("users", [None, "0", "1"])
def test_the_trainer_gets_the_users_hydra_full_error(
    trainer: Path, users: str | None, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
):
    # Our error boundary asks Hydra to re-raise while we compose; verl's own Hydra must still report its
    # errors the way the user set it up, as when verl runs alone.
    if users is None:
        monkeypatch.delenv("HYDRA_FULL_ERROR", raising=False)
    else:
        monkeypatch.setenv("HYDRA_FULL_ERROR", users)
    code, _, _ = launch(QUIET, capsys)
    assert code == 0
    assert json.loads(trainer.read_text(encoding="utf-8"))["hydra_full_error"] == users


def write_job(overrides: list[str], where: Path, capsys: pytest.CaptureFixture[str]) -> int:
    """The main job on ``overrides`` with the user's paths set, as a run launch trains on is written."""
    return main_in_process([*overrides, *PATHS], where, capsys)[0]


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
    assert write_job(overrides, tmp_path / "main_job", capsys) == 0
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


def test_a_model_or_data_path_left_at_its_placeholder_is_refused_before_anything_is_written(
    trainer: Path, capsys: pytest.CaptureFixture[str]
):
    # The main job writes such a run (its summary names the paths "to set"); launch would start Ray on it.
    code, out, err = launch(["data.train_files=/data/train.parquet", *QUIET], capsys, paths=False)
    assert code == 2 and not trainer.exists() and list(Path.cwd().iterdir()) == []
    assert "starting verl" not in out
    model = "actor_rollout_ref.model.path: is still the shipped placeholder ~/models/deepseek-llm-7b-chat"
    assert model in err
    assert "data.val_files: is still the shipped placeholder ~/data/rlhf/gsm8k/test.parquet" in err
    assert "data.train_files" not in err  # set by the user, whatever it names
    assert "Fix: set it on the command line, `actor_rollout_ref.model.path=<path>`" in err


def test_a_run_dir_written_with_placeholder_paths_is_refused_and_left_as_it_was(
    trainer: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
):
    assert main_in_process(PATHS[:1], tmp_path / "job", capsys)[0] == 0
    job = tmp_path / "job" / "out"
    before = folder_state(job)
    code, _, err = launch(["--run-dir", str(job)], capsys)
    assert code == 2 and not trainer.exists() and folder_state(job) == before
    assert "data.train_files: is still the shipped placeholder ~/data/rlhf/gsm8k/train.parquet" in err
    assert "actor_rollout_ref.model.path" not in err
    assert "compose the run again with `data.train_files=<path>`" in err


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
    assert write_job([releases.choice(DEFAULT)], tmp_path / "job", capsys) == 0
    monkeypatch.setenv("PYTHONPATH", str(fake_verl(tmp_path / "old", version=OLDEST)))
    code, _, err = launch(["--run-dir", str(tmp_path / "job" / "out")], capsys)
    assert code == 2 and not trainer.exists()
    assert f"is {DEFAULT}, but" in err and releases.choice(OLDEST) in err


def test_run_dir_trains_on_a_folder_written_before(
    trainer: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
):
    assert write_job(["trainer.total_epochs=2"], tmp_path / "job", capsys) == 0
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


def extra_requirements(release: str) -> list[str]:
    """What pyproject.toml's extra for ``release`` installs."""
    project = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    return project["optional-dependencies"][releases.extra(release)]


def pip_command(python: str, release: str) -> str:
    """The install command a hint must name: the extra's requirements, into ``python`` (verl_roles is
    not on a package index, so `pip install "verl_roles[EXTRA]"` would fail on a fresh machine)."""
    import shlex

    return f"{python} -m pip install {' '.join(shlex.quote(item) for item in extra_requirements(release))}"


@pytest.mark.parametrize("chosen", [None, OLDEST])
def test_without_verl_one_paragraph_says_how_to_install_the_chosen_release(
    tmp_path: Path, chosen: str | None
):
    """As a user types it, with a Python that has no verl: the pip command for the release the line
    chooses (the default one otherwise), with the extra's requirements; nothing written, nothing started."""
    env = {key: value for key, value in cli_env().items() if key != "PYTHONPATH"}
    release = chosen or DEFAULT
    line = ["critic.optim.lr=2e-5", *((releases.choice(chosen),) if chosen else ())]
    result = subprocess.run(
        [sys.executable, "-m", "verl_roles.cli", "launch", *line],
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
    assert f"`{pip_command(sys.executable, release)}`" in paragraph
    assert "verl_roles[" not in paragraph
    assert f"verl=={release}" in paragraph and f"install verl {release} into" in paragraph
    assert "--verl-python" in paragraph
    assert list(tmp_path.iterdir()) == []


def test_a_verl_release_that_is_not_supported_gets_the_hint_of_the_run_dirs_release(
    trainer: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
):
    assert write_job([releases.choice(OLDEST)], tmp_path / "job", capsys) == 0
    monkeypatch.setenv("PYTHONPATH", str(fake_verl(tmp_path / "odd", version="0.1.0")))
    code, _, err = launch(["--run-dir", str(tmp_path / "job" / "out")], capsys)
    assert code == 2 and not trainer.exists()
    assert f"`{pip_command(sys.executable, OLDEST)}`" in err


def test_a_verl_python_that_cannot_run_is_named(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    # Nothing at the path, or no Python there: the fix never installs into it, it names one to make.
    (tmp_path / "not-python").write_text("#!/bin/sh\nexit 1\n", encoding="utf-8")
    (tmp_path / "not-python").chmod(0o755)
    for path, what in ((tmp_path / "no-python", "does not exist"), (tmp_path / "not-python", "is no Python")):
        code, _, err = launch(["--verl-python", str(path)], capsys)
        assert code == 2 and f"--verl-python: {path} {what}" in err, err
        assert f"{path} -m pip" not in err and "python -m venv verl-env" in err


def test_a_verl_that_cannot_run_its_checks_is_refused_before_the_run_is_in_place(
    trainer: Path, capsys: pytest.CaptureFixture[str]
):
    """The fake verl has a version and a trainer but none of verl's own code: its checks cannot run,
    which is said in one paragraph naming the install and the way around; the staged run is not put in
    place and the trainer never starts."""
    code, out, err = launch(["critic.optim.lr=2e-5", *QUIET], capsys, verl_checks=True)
    assert code == 2 and not trainer.exists()
    paragraph = err.strip().splitlines()[-1]
    assert paragraph.startswith("verl_roles error: verl: could not run its own checks of the run in ")
    assert "No module named" in paragraph and SKIP_CHECKS in paragraph
    assert f"`{pip_command(sys.executable, DEFAULT)}`" in paragraph
    assert "starting verl" not in out
    assert list(Path.cwd().iterdir()) == []


def test_a_run_dir_is_left_as_it_was_when_verls_checks_refuse(
    trainer: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
):
    assert write_job([], tmp_path / "job", capsys) == 0
    job = tmp_path / "job" / "out"
    before = folder_state(job)
    code, _, err = launch(["--run-dir", str(job)], capsys, verl_checks=True)
    assert code == 2 and "could not run its own checks" in err and not trainer.exists()
    assert folder_state(job) == before


# A stand-in for verl's Python that answers verl's checks with a given answer: the probe and the trainer
# run in this Python (with the fake verl on the path), the checks file prints ANSWER.
ANSWERING = """#!/bin/sh
case "$1" in
  *verl_prelaunch.py) cat {answer}; {end};;
esac
exec {python} "$@"
"""


def answering_python(tmp_path: Path, answer: dict | str, code: int = 0, signal: str = "") -> Path:
    """``code``: the checks' exit code; ``signal``: a signal the checks' process ends by instead."""
    (tmp_path / "answer.json").write_text(answer if isinstance(answer, str) else json.dumps(answer),
                                          encoding="utf-8")
    python = tmp_path / "answering" / "python"
    python.parent.mkdir()
    end = f"kill -{signal} $$" if signal else f"exit {code}"
    python.write_text(ANSWERING.format(answer=tmp_path / "answer.json", end=end, python=sys.executable),
                      encoding="utf-8")
    python.chmod(0o755)
    return python


def steps(*failed: dict[str, str], reason: str = "") -> dict:
    """An answer of verl's checks: validate_config and one conversion pass, then ``failed``."""
    ok = [{"step": "validate_config", "status": "ok"}, {"step": "convert critic", "status": "ok"},
          {"step": "worker init_model", "status": "ok", "reason": reason}]
    return {"verl_version": DEFAULT, "steps": ok[: 3 - len(failed)] + list(failed)}


def test_verls_refusal_is_one_paragraph_naming_the_step_the_keys_and_their_values(
    trainer: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
):
    # A refusal verl_roles' own rules do not foresee (the stand-in refuses what verl_roles accepts).
    assertion = "assert self.config.actor.ppo_epochs <= self.config.rollout.n"
    refused = {"step": "worker init_model", "status": "failed", "error": f"AssertionError: {assertion}",
               "at": "verl/workers/engine_workers.py:616", "code": assertion}
    python = answering_python(tmp_path, steps(refused))
    line = ["--verl-python", str(python), "actor_rollout_ref.actor.ppo_epochs=2", *QUIET]
    code, out, err = launch(line, capsys, verl_checks=True)
    assert code == 2 and not trainer.exists()
    [paragraph] = [line for line in err.strip().splitlines() if not line.startswith("verl_roles warning")]
    assert paragraph.startswith(
        "verl_roles error: actor_rollout_ref.actor.ppo_epochs, actor_rollout_ref.rollout.n: "
        f"verl {DEFAULT} refuses the run in `worker init_model`")
    assert "(verl/workers/engine_workers.py:616)" in paragraph
    assert "the run has actor_rollout_ref.actor.ppo_epochs=2, actor_rollout_ref.rollout.n=1" in paragraph
    assert "nothing was written and nothing was started. Fix: change `actor_rollout_ref.actor" in paragraph
    assert "starting verl" not in out
    assert list(Path.cwd().iterdir()) == []


def test_a_run_verl_accepts_is_said_in_one_line_with_what_was_not_evaluated_then_trained(
    trainer: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
):
    python = answering_python(tmp_path, steps(reason="role actor_rollout; not evaluated: the engine"))
    code, out, _ = launch(["--verl-python", str(python), *QUIET], capsys, verl_checks=True)
    assert code == 0 and trainer.exists()
    assert (f"verl_roles: verl {DEFAULT} accepts the run before Ray (validate_config, 1 conversion, "
            "worker init_model; ") in out
    assert "; not evaluated here: the engine" in out
    assert out.index("accepts the run") < out.index("starting verl")
    assert len(run_dirs(Path.cwd())) == 1


@pytest.mark.parametrize("answer", ["not json", {"error": "ModuleNotFoundError: No module named 'torch'"}])
def test_checks_that_cannot_run_are_refused_with_what_happened(
    trainer: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], answer: dict | str
):
    python = answering_python(tmp_path, answer, code=1 if answer == "not json" else 0)
    code, _, err = launch(["--verl-python", str(python), *QUIET], capsys, verl_checks=True)
    assert code == 2 and not trainer.exists()
    paragraph = err.strip().splitlines()[-1]
    assert "verl: could not run its own checks of the run in" in paragraph and SKIP_CHECKS in paragraph
    assert ("exit code 1" if answer == "not json" else "No module named 'torch'") in paragraph
    assert list(Path.cwd().iterdir()) == []


def test_checks_ended_by_a_signal_are_not_worded_as_verls_verdict(
    trainer: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
):
    # The out-of-memory killer ends the checks' process: its partial answer says nothing of the config.
    python = answering_python(tmp_path, steps(), signal="KILL")
    code, _, err = launch(["--verl-python", str(python), *QUIET], capsys, verl_checks=True)
    assert code == 2 and not trainer.exists()
    paragraph = err.strip().splitlines()[-1]
    assert "were ended by SIGKILL before they answered" in paragraph and "refuses" not in paragraph
    assert "pip install" not in paragraph and SKIP_CHECKS in paragraph
    assert list(Path.cwd().iterdir()) == []


def folder_state(folder: Path) -> dict[str, tuple[int, bytes]]:
    """Every file under ``folder`` with its modification time and content."""
    return {str(path.relative_to(folder)): (path.stat().st_mtime_ns, path.read_bytes())
            for path in sorted(folder.rglob("*")) if path.is_file()}


def test_the_verl_extra_installs_the_default_release_with_what_its_trainer_imports():
    project = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    assert project["optional-dependencies"]["verl"] == [f"verl[verl-core]=={DEFAULT}"]


# --------------------------------------------------------------------------------------------------
# The real verl, where it is installed.


@dataclass
class RealVerl:
    python: str
    release: str
    model: str
    env: dict[str, str]


@pytest.fixture(scope="module")
def real_verl(tmp_path_factory: pytest.TempPathFactory) -> RealVerl:
    python, why = verl_python()
    if python is None:
        pytest.skip(why)
    work = tmp_path_factory.mktemp("launch_checks")
    # Offline as the Ray runs, without HYDRA_FULL_ERROR (which asks verl_roles for tracebacks too).
    env = {key: value for key, value in ray_env(work).items() if key != "HYDRA_FULL_ERROR"}
    model = work / "model"
    driver = str(Path(__file__).resolve().parent / "verl_driver.py")
    subprocess.run([python, driver, "--build-model", str(model)], env=env, check=True, timeout=300)
    return RealVerl(python=python, release=installed_verl_release() or DEFAULT, model=str(model), env=env)


# What a run needs before verl's checks can pass (the tiny model, a rollout engine, micro batches).
LAUNCHABLE = (
    "actor_rollout_ref.model.path={model}",
    "data.train_files=train.parquet",
    "data.val_files=test.parquet",
    "actor_rollout_ref.rollout.name=vllm",
    "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=2",
    "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=2",
    "trainer.n_gpus_per_node=8",
)
# A run verl_roles accepts and verl refuses: verl reads the model's files (its tokenizer, its config), which
# verl_roles does not open; a folder that holds no model is refused by verl's own checks before Ray.
NOT_A_MODEL = "actor_rollout_ref.model.path={empty}"


def edited_run(run_dir: Path, path: tuple[str, ...], value: object) -> None:
    """``resolved.yaml`` of ``run_dir`` with one value changed by hand, as a user might after writing it."""
    resolved = run_dir / "resolved.yaml"
    config = yaml.safe_load(resolved.read_text(encoding="utf-8"))
    section = config
    for part in path[:-1]:
        section = section[part]
    section[path[-1]] = value
    resolved.write_text(yaml.safe_dump(config), encoding="utf-8")


def launch_real(verl: RealVerl, args: list[str], cwd: Path) -> tuple[subprocess.CompletedProcess[str], float]:
    """``verl-roles launch --verl-python VERL ARGS`` as typed, in ``cwd``; the result and its seconds."""
    started = time.monotonic()
    result = subprocess.run(
        [sys.executable, "-m", "verl_roles.cli", "launch", "--verl-python", verl.python, *args],
        cwd=cwd, env=verl.env, capture_output=True, text=True, timeout=600,
    )
    return result, time.monotonic() - started


@pytest.mark.verl
@pytest.mark.xdist_group("verl-launch-checks")
def test_launch_refuses_in_seconds_what_verl_would_refuse_after_ray(real_verl: RealVerl, tmp_path: Path):
    """verl's own checks, run by launch before Ray, on a run verl_roles' rules accept (a model folder
    that holds no model): exit 2, one paragraph (the verl step, verl's words and line), nothing written,
    verl's trainer (and so Ray) never started."""
    empty = tmp_path / "empty-model"
    empty.mkdir()
    work = tmp_path / "work"
    work.mkdir()
    args = [arg.format(model=real_verl.model) for arg in LAUNCHABLE]
    result, seconds = launch_real(real_verl, [*args, NOT_A_MODEL.format(empty=empty), *QUIET], work)
    assert result.returncode == 2, result.stdout + result.stderr
    assert "Traceback" not in result.stderr
    errors = [line for line in result.stderr.strip().splitlines()
              if not line.startswith("verl_roles warning")]
    assert len(errors) == 1, result.stderr
    paragraph = errors[0]
    assert f"verl {real_verl.release} refuses the run in `" in paragraph
    assert "HFModelConfig" in paragraph and "(verl/" in paragraph
    assert "nothing was written and nothing was started" in paragraph
    assert "starting verl" not in result.stdout
    assert list(work.iterdir()) == []
    print(f"launch refused by verl's checks: {seconds:.1f} s")


@pytest.mark.verl
@pytest.mark.xdist_group("verl-launch-checks")
def test_launch_runs_verls_checks_then_the_trainer_and_checks_a_run_dir_the_same_way(
    real_verl: RealVerl, tmp_path: Path
):
    """A run verl accepts: one line says so (with what a CPU cannot evaluate), then the trainer starts
    (here a stand-in module that records its call); the same run as ``--run-dir`` is checked again, and a
    folder verl refuses is left as it was."""
    trainer_dir = tmp_path / "trainer"
    trainer_dir.mkdir()
    (trainer_dir / "recording_trainer.py").write_text(TRAINER, encoding="utf-8")
    env = {**real_verl.env, "PYTHONPATH": str(trainer_dir), "FAKE_VERL_RECORD": str(tmp_path / "call.json")}
    verl = RealVerl(real_verl.python, real_verl.release, real_verl.model, env)
    work = tmp_path / "work"
    work.mkdir()
    args = [arg.format(model=verl.model) for arg in LAUNCHABLE]
    run = ["--trainer-module", "recording_trainer", *args, f"hydra.run.dir={work / 'run'}", *QUIET]
    result, seconds = launch_real(verl, run, work)
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"verl_roles: verl {verl.release} accepts the run before Ray (validate_config, " in result.stdout
    assert "worker init_model, critic worker;" in result.stdout
    assert (tmp_path / "call.json").exists() and (work / "run" / "resolved.yaml").exists()
    print(f"launch with verl's checks: {seconds:.1f} s")

    refused = tmp_path / "refused"
    shutil.copytree(work / "run", refused)
    empty = tmp_path / "empty-model"
    empty.mkdir()
    for path in (("actor_rollout_ref", "model", "path"), ("critic", "model", "path")):
        edited_run(refused, path, str(empty))
    before = folder_state(refused)
    (tmp_path / "call.json").unlink()
    result, _ = launch_real(verl, ["--trainer-module", "recording_trainer", "--run-dir", str(refused)], work)
    assert result.returncode == 2 and f"verl {verl.release} refuses the run in `" in result.stderr
    assert folder_state(refused) == before and not (tmp_path / "call.json").exists()


# The two runs the issue names (19, item 6): GRPO on the dp engine (no critic; the reference policy for
# the KL loss) and PPO on Megatron with a critic. Each case's overrides are typed as a user of verl would,
# once to `verl-roles launch` and once to verl's own entry point; both run with the tiny model and data,
# on one logical GPU.
RAY_CASES: dict[str, tuple[str, ...]] = {
    "dp-grpo": (
        "algorithm.adv_estimator=grpo",
        "actor_rollout_ref.actor.use_kl_loss=true",
        "actor_rollout_ref.rollout.n=2",
    ),
    "megatron-ppo-critic": (
        "model_engine=megatron",
        "algorithm.adv_estimator=gae",
        "critic.model.path={model}",
        "critic.ppo_micro_batch_size_per_gpu=2",
    ),
}
RAY_COMMON = (
    "actor_rollout_ref.model.path={model}",
    "actor_rollout_ref.rollout.name=vllm",
    "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=2",
    "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=2",
    "actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu=2",
    "actor_rollout_ref.actor.ppo_mini_batch_size=4",
    "data.train_files={data}",
    "data.val_files={data}",
    "data.train_batch_size=4",
    "trainer.n_gpus_per_node=1",
    "trainer.nnodes=1",
    # The rollout's TP*DP*PP must divide the GPUs (verl's worker asserts it in init_model, which launch's
    # checks run before Ray; the default TP of 2 does not divide one GPU).
    "actor_rollout_ref.rollout.tensor_model_parallel_size=1",
    "trainer.logger=[console]",
    # verl's TransferQueue starts one Ray actor per storage unit (8 by default): one is enough here.
    "transfer_queue.backend.SimpleStorage.num_data_storage_units=1",
)
# How far each case gets on a CPU machine, and why it stops there (read from verl's code; the test
# checks both runs reach it and stop at the same place, on the missing GPU).
RAY_REACHES: dict[str, tuple[str, str]] = {
    "dp-grpo": (
        "init_model",
        "the actor/rollout/ref worker is built, its init_model converts the model and reference policy "
        "configs, then builds the reference policy's TrainingWorker, whose process group needs NCCL",
    ),
    "megatron-ppo-critic": (
        "workers started",
        "the TaskRunner converts the critic's config, then the colocated worker starts; the critic's "
        "TrainingWorker opens its NCCL process group in its constructor, before any init_model (and "
        "before verl's megatron engine, whose megatron.core the CPU install does not have, is looked up)",
    ),
}


@dataclass
class RayRuns:
    """The Ray heads (one for our launches, one for verl's own) and what the runs need."""

    python: str
    work: Path
    env: dict[str, str]
    ours: verl_ray.RayHead
    verls: verl_ray.RayHead
    inputs: dict[str, str]


@pytest.fixture(scope="module")
def ray_runs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RayRuns]:
    python, why = verl_python()
    if python is None:
        pytest.skip(why)
    work = tmp_path_factory.mktemp("launch_ray")
    inputs = {"model": str(work / "model"), "data": str(work / "data" / "train.parquet")}
    env = ray_env(work)
    driver = str(Path(__file__).resolve().parent / "verl_driver.py")
    for flag, path in (("--build-model", inputs["model"]), ("--build-data", inputs["data"])):
        subprocess.run([python, driver, flag, path], env=env, check=True, timeout=300)
    # One head per side, each serving one run per case (a logical GPU for each, so a run never waits
    # for the previous run's placement group to be released).
    with verl_ray.ray_heads(python, env, work, count=2, gpus=len(RAY_CASES)) as (ours, verls):
        yield RayRuns(python=python, work=work, env=env, ours=ours, verls=verls, inputs=inputs)


def ray_env(work: Path) -> dict[str, str]:
    """Offline, no user cache or Ray token, nothing inherited that names another Hydra, verl or Ray.

    HYDRA_FULL_ERROR=1: verl's Hydra prints the whole traceback the test reads. (Our error boundary sets
    it for the whole of a command, and launch's trainer inherits it: without it here, verl's own run
    would print Hydra's shortened traceback and ours the whole one.)"""
    env = {k: v for k, v in cli_env().items() if not k.startswith(("HF_", "HYDRA_", "VERL_", "RAY_"))}
    env.update(
        HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", HF_DATASETS_OFFLINE="1", HF_HOME=str(work / "hf_home"),
        TOKENIZERS_PARALLELISM="false", PYTHONUNBUFFERED="1", RAY_AUTH_MODE="disabled",
        RAY_USAGE_STATS_ENABLED="0", HYDRA_FULL_ERROR="1",
    )
    return env


@pytest.mark.verl
@pytest.mark.xdist_group("verl-ray")
@pytest.mark.parametrize("case", list(RAY_CASES))
def test_launch_runs_verl_as_far_as_the_missing_gpu_and_stops_where_verls_own_config_does(
    case: str, ray_runs: RayRuns
):
    """`verl-roles launch` and verl's own entry point, on the same overrides, side by side: Ray up, the
    TaskRunner, the workers, and one stop, on the missing GPU, at the same place with the same error."""
    overrides = [arg.format(**ray_runs.inputs) for arg in (*RAY_CASES[case], *RAY_COMMON)]
    folder = ray_runs.work / case
    folder.mkdir()
    # side: (command line, Ray head, name of its folder and log)
    sides = {
        "verl_roles": ([sys.executable, "-m", "verl_roles.cli", "launch", "--verl-python", ray_runs.python,
                        *overrides, f"hydra.run.dir={folder / 'ours'}"], ray_runs.ours, "ours"),
        "verl's own config": ([ray_runs.python, "-m", "verl.trainer.main_ppo", *overrides,
                               f"hydra.run.dir={folder / 'verl'}"], ray_runs.verls, "verl"),
    }
    started = {
        side: verl_ray.Run(argv, ray_runs.env | {"RAY_ADDRESS": head.address}, folder, folder / f"{name}.log")
        for side, (argv, head, name) in sides.items()
    }
    runs = {side: run.finish() for side, run in started.items()}
    stops = {side: verl_ray.stopping_point(run.output) for side, run in runs.items()}
    for side, run in runs.items():
        assert not run.timed_out, f"{side}: no end after {run.seconds:.0f} s:\n{run.output[-4000:]}"
        assert run.returncode != 0 and stops[side], f"{side}: exit {run.returncode}:\n{run.output[-4000:]}"
    ours, verls = stops["verl_roles"], stops["verl's own config"]
    assert ours == verls, (
        f"verl_roles' run stopped elsewhere than verl's own config:\nverl_roles:\n{ours.describe()}\n"
        f"verl's own config:\n{verls.describe()}"
    )
    assert verl_ray.missing_gpu(ours), f"the run did not stop on the missing GPU:\n{ours.describe()}"
    farthest, why = RAY_REACHES[case]
    expected = list(verl_ray.MILESTONES[: verl_ray.MILESTONES.index(farthest) + 1])
    for side, run in runs.items():
        reached = verl_ray.milestones(run.output, stops[side])
        assert reached == expected, f"{side}: reached {reached}, not {expected} ({why}):\n{ours.describe()}"


# A run that starts a child in a process group of its own (as Ray starts its workers); the child starts
# one more, which writes the three process ids and waits, as they all do.
SPAWNER = """\
import os, subprocess, sys, time
depth, record = int(sys.argv[1]), sys.argv[2]
if depth < 2:
    itself = f"CODE = {CODE!r}\\n{CODE}"
    subprocess.Popen([sys.executable, "-c", itself, str(depth + 1), record],
                     process_group=0 if depth == 0 else None)
else:
    with open(record, "w") as out:
        out.write(f"{os.getppid()} {os.getpid()}")
time.sleep(600)
"""


@pytest.mark.slow
def test_a_run_that_outlives_its_timeout_is_stopped_with_every_process_it_started(tmp_path: Path):
    """The Ray runs' guarantee, without Ray: a run past its timeout ends, and so does everything it
    started, in other process groups too."""
    record = tmp_path / "pids"
    code = f"CODE = {SPAWNER!r}\n{SPAWNER}"
    run = verl_ray.Run([sys.executable, "-c", code, "0", str(record)], cli_env(), tmp_path, tmp_path / "log")
    deadline = time.monotonic() + 60
    while not (record.exists() and record.read_text()):
        assert run.process.poll() is None and time.monotonic() < deadline, (tmp_path / "log").read_text()
        time.sleep(0.1)
    started = [run.process.pid, *map(int, record.read_text().split())]
    assert all(verl_ray.alive(pid) for pid in started)
    assert set(started) <= set(verl_ray.session_members(run.process.pid))
    finished = run.finish(timeout_s=1)
    assert finished.timed_out and finished.returncode is None
    assert not any(verl_ray.alive(pid) for pid in started)


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
    assert f"`{pip_command(shlex.quote(str(other)), DEFAULT)}`" in paragraph
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

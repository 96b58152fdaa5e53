"""Sections verl passes on to another library (verl_roles/upstream/passed_on.py): a key added there is judged
by what the receiving call accepts, with one verdict through every channel (command line, primary config,
option file, search-path option file, Python API), for every supported release."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from conftest import verl_python
from test_gate import CHANNELS, Content, channel_arguments, run_api, run_main

from verl_roles.base import releases
from verl_roles.cli import main as cli
from verl_roles.upstream.passed_on import PASSED_ON, passed_on
from verl_roles.validation.schema import verl_names

RAY_INIT = "ray_kwargs.ray_init"

# (key, YAML value, command-line value): keys the receiving library takes, or that a free mapping holds.
ACCEPTED = {
    "a ray.init parameter verl's config does not set": (f"{RAY_INIT}.num_gpus", "1", "1"),
    "a hidden ray.init parameter (popped from **kwargs)": (f"{RAY_INIT}._temp_dir", "/tmp/ray", "/tmp/ray"),
    "a runtime_env field (Ray hands unknown ones to plugins)": (f"{RAY_INIT}.runtime_env.env_vars.MY_FLAG",
                                                               "on", "on"),
    "a vLLM engine argument": ("actor_rollout_ref.rollout.engine_kwargs.vllm.swap_space", "4", "4"),
    "a value nested in a passed-on override": (
        "actor_rollout_ref.model.override_config.moe_config.num_experts",
        "4", "4"),
    "a Hugging Face config override": ("actor_rollout_ref.model.override_config.rope_theta", "10000",
                                       "10000"),
}
# (key, words the refusal holds): a near miss is named with the real parameter, any other name with the list.
REFUSED = {
    "a near miss of a ray.init parameter": (f"{RAY_INIT}.num_cpu", [f"did you mean `{RAY_INIT}.num_cpus`"]),
    "a name ray.init does not take": (f"{RAY_INIT}.gpus_per_worker",
                                      ["ray.init", "would raise", f"verl-roles keys '{RAY_INIT}.*'"]),
}


@pytest.mark.parametrize("channel", CHANNELS)
@pytest.mark.parametrize("case", list(ACCEPTED))
def test_a_key_the_receiving_library_takes_is_accepted_silently_through_every_channel(
    case: str, channel: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
):
    key, yaml, cli_value = ACCEPTED[case]
    overrides, config_name, config_dir = channel_arguments(channel, Content(key, yaml, cli_value, add=True),
                                                           tmp_path)
    code, output = run_main(overrides, config_name, config_dir, tmp_path, capsys)
    assert code == 0, output
    assert key not in output, output  # neither refused nor warned about
    written = (tmp_path / "run" / "resolved.yaml").read_text(encoding="utf-8")
    assert key.rpartition(".")[2] in written
    assert run_api(overrides, config_name, config_dir) is None


@pytest.mark.parametrize("channel", CHANNELS)
@pytest.mark.parametrize("case", list(REFUSED))
def test_a_key_the_receiving_call_does_not_take_is_refused_through_every_channel(
    case: str, channel: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
):
    key, words = REFUSED[case]
    content = Content(key, "1", "1", add=True)
    overrides, config_name, config_dir = channel_arguments(channel, content, tmp_path)
    code, output = run_main(overrides, config_name, config_dir, tmp_path, capsys)
    assert code == 2, output
    assert key in output and all(word in output for word in words), output
    assert "Traceback" not in output and not (tmp_path / "run").exists()
    message = run_api(overrides, config_name, config_dir)
    assert message is not None and key in message and all(word in message for word in words)


@pytest.mark.parametrize("release", releases.supported())
def test_each_release_judges_ray_init_by_the_ray_installed_with_it(
    release: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
):
    accepted = verl_names("ray_init_parameter", release)
    assert {"address", "num_cpus", "num_gpus", "runtime_env"} <= set(accepted)
    choice = releases.choice(release)
    code, output = run_main([choice, f"+{RAY_INIT}.num_gpus=1"], "ppo_trainer", None, tmp_path, capsys)
    assert code == 0, output
    code, output = run_main([choice, f"+{RAY_INIT}.num_gpu=1"], "ppo_trainer", None, tmp_path, capsys)
    assert code == 2 and f"did you mean `{RAY_INIT}.num_gpus`" in output, output
    assert f"verl {release}" in output, output


def test_a_known_key_of_a_passed_on_section_keeps_its_type(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
):
    code, output = run_main([f"{RAY_INIT}.num_cpus=many"], "ppo_trainer", None, tmp_path, capsys)
    assert code == 2 and f"{RAY_INIT}.num_cpus" in output and "wrong type" in output, output


def test_keys_lists_what_a_passed_on_section_takes(capsys: pytest.CaptureFixture[str]):
    assert cli(["keys", f"{RAY_INIT}.*"]) == 0
    out = capsys.readouterr().out
    assert f"{RAY_INIT}.num_cpus: int | None" in out  # the typed key, as before
    line = next(line for line in out.splitlines() if line.startswith(f"{RAY_INIT}.*:"))
    assert "Ray" in line
    assert ", ".join(verl_names("ray_init_parameter", releases.DEFAULT_RELEASE)) in out
    assert f"{RAY_INIT}.runtime_env.*: passed on to Ray" in out


def test_explain_names_an_unset_parameter_of_a_passed_on_section(capsys: pytest.CaptureFixture[str]):
    assert cli(["explain", f"{RAY_INIT}.num_gpus"]) == 2
    err = capsys.readouterr().err
    assert "is not set" in err and "ray.init" in err and f"+{RAY_INIT}.num_gpus=VALUE" in err, err


def test_every_row_names_a_section_some_release_has():
    every = {path for release in releases.supported() for path in releases.reference(release)["leaves"]}
    for row in PASSED_ON:
        assert any(path == row.section or path.startswith(f"{row.section}.") for path in every), row.section
        assert passed_on(row.section) is row
        if row.parameters:
            for release in releases.supported():
                assert verl_names(row.parameters, release), (row.section, release)


@pytest.mark.verl
def test_verl_makes_each_call_the_table_names():
    """Each row's call, as verl writes it, is in the file it names of the installed verl."""
    python, why = verl_python()
    if python is None:
        pytest.skip(why)
    where = "import os, verl; print(os.path.dirname(os.path.dirname(verl.__file__)))"
    found = subprocess.run([python, "-c", where], capture_output=True, text=True, check=True)
    root = Path(found.stdout.strip())
    for row in PASSED_ON:
        file, _, call = row.verl_source.partition(": ")
        assert call in (root / file).read_text(encoding="utf-8"), row.section


@pytest.mark.parametrize(("override", "words"), [
    (f"{RAY_INIT}.num_gpus=1", ["is not set", "ray.init", f"+{RAY_INIT}.num_gpus=1"]),
    (f"{RAY_INIT}.num_gpu=1", [f"did you mean `{RAY_INIT}.num_gpus`", f"+{RAY_INIT}.num_gpus=1",
                               f"verl-roles keys '{RAY_INIT}.*'"]),
    ("actor_rollout_ref.rollout.engine_kwargs.vllm.swap_space=4",
     ["is not set", "vLLM", "+actor_rollout_ref.rollout.engine_kwargs.vllm.swap_space=4"]),
])
def test_changing_a_parameter_the_config_does_not_set_says_to_add_it(
    override: str, words: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
):
    """Without `+`, Hydra refuses a key the config lacks: the paragraph says how to pass it on, and a near
    miss names the real parameter (typed with `+`, since the config does not set it either)."""
    code, output = run_main([override], "ppo_trainer", None, tmp_path, capsys)
    assert code == 2 and all(word in output for word in words), output
    assert not (tmp_path / "run").exists()


def test_a_runtime_env_field_of_a_release_whose_config_lacks_it_is_still_rays_to_read(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
):
    """verl 0.8.0's config has no ray_init.runtime_env, yet verl 0.8.0 hands ray_init.runtime_env to Ray: a
    field of it is added with `+`, not refused as a key of another release."""
    oldest, key = releases.supported()[0], f"{RAY_INIT}.runtime_env.py_executable"
    choice = releases.choice(oldest)
    code, output = run_main([choice, f"{key}=python3"], "ppo_trainer", None, tmp_path, capsys)
    assert code == 2 and f"+{key}=python3" in output and "only" not in output, output
    code, output = run_main([choice, f"+{key}=python3"], "ppo_trainer", None, tmp_path, capsys)
    assert code == 0, output

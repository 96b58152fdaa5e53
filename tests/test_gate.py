"""The gate (verl_roles/validation/gate.py) by class, not by case: the same content reaches a run through
every channel (the command line, a primary config under --config-dir, an option file of a user's group under
--config-dir or under hydra.searchpath, the Python API), and gets the same verdict through each. A
refused run writes nothing and runs nothing; an accepted one runs what it says.

Code run from a config is detected by its side effect: a folder made by ``os.makedirs`` or a module of
the test's own whose import leaves a file.
"""

from __future__ import annotations

import itertools
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from conftest import write

import verl_roles
from verl_roles.base.errors import ConfigError
from verl_roles.main import main

# What Hydra/OmegaConf do decides these tests' outcome: CI runs them on both stacks.
pytestmark = pytest.mark.stack

PRIMARY = "defaults:\n  - ppo_trainer\n  - _self_\n"
CHANNELS = ("command-line", "primary-config", "option-file", "search-path-option-file")
_MODULES = itertools.count()


@dataclass(frozen=True)
class Content:
    """One setting as a user writes it: ``key`` (dotted), its value as YAML text (``yaml``) and as override
    text (``cli``, None when the command line cannot carry it), ``+`` when the command line adds it."""

    key: str
    yaml: str
    cli: str | None = None
    add: bool = False


def nested(key: str, value: str) -> str:
    parts = key.split(".")
    lines = [f"{'  ' * depth}{part}:" for depth, part in enumerate(parts[:-1])]
    return "\n".join([*lines, f"{'  ' * (len(parts) - 1)}{parts[-1]}: {value}"]) + "\n"


def channel_arguments(channel: str, content: Content, folder: Path) -> tuple[list[str], str, str | None]:
    """(overrides, config name, config dir) that bring ``content`` through ``channel``."""
    body = nested(content.key, content.yaml)
    if channel == "command-line":
        return [f"{'+' if content.add else ''}{content.key}={content.cli}"], "ppo_trainer", None
    if channel == "primary-config":
        write(folder / "conf" / "mine.yaml", PRIMARY + body)
        return [], "mine", str(folder / "conf")
    if channel == "option-file":
        write(folder / "conf" / "exp" / "mine.yaml", "# @package _global_\n" + body)
        return ["+exp=mine"], "ppo_trainer", str(folder / "conf")
    write(folder / "searched" / "exp" / "mine.yaml", "# @package _global_\n" + body)
    return [f"hydra.searchpath=[file://{folder / 'searched'}]", "+exp=mine"], "ppo_trainer", None


def run_main(overrides: list[str], config_name: str, config_dir: str | None, folder: Path,
             capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    flags = ["--config-name", config_name] + (["--config-dir", config_dir] if config_dir else [])
    code = main([*flags, *overrides, f"hydra.run.dir={folder / 'run'}"])
    captured = capsys.readouterr()
    return code, captured.out + captured.err


def run_api(overrides: list[str], config_name: str, config_dir: str | None) -> str | None:
    """The API's verdict: None when it composed, else the ConfigError's text (nothing else may escape)."""
    try:
        verl_roles.compose(overrides, config_name=config_name, config_dir=config_dir)
    except ConfigError as error:
        return str(error)
    return None


def refused_by_main_and_api(overrides: list[str], config_name: str, config_dir: str | None, folder: Path,
                            capsys: pytest.CaptureFixture[str], phrase: str, *also: str) -> str:
    """The main job refuses (exit 2, ``phrase`` and each of ``also`` in its one paragraph, no run folder)
    and the API raises a ConfigError naming ``phrase``; returns the main job's output."""
    code, output = run_main(overrides, config_name, config_dir, folder, capsys)
    assert code == 2 and phrase in output and all(text in output for text in also), output
    assert not (folder / "run").exists()
    message = run_api(overrides, config_name, config_dir)
    assert message is not None and phrase in message
    return output


@pytest.fixture
def importable(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[str, Path]]:
    """A module of this test's own, never imported before, whose import makes the file it returns."""
    name = f"verl_roles_gate_probe_{next(_MODULES)}"
    marker = tmp_path / "IMPORTED"
    write(tmp_path / "modules" / f"{name}.py", f"open({str(marker)!r}, 'w').close()\nstream = None\n")
    monkeypatch.syspath_prepend(str(tmp_path / "modules"))
    yield name, marker
    sys.modules.pop(name, None)


# --------------------------------------------------------------------------- code through an interpolation


def _code_contents(tmp_path: Path, module: str) -> dict[str, tuple[Content, dict[str, str]]]:
    made = tmp_path / "MADE"
    callback = f"{{_target_: os.makedirs, name: {made}}}"
    return {
        # A callback decoded from the environment: Hydra instantiates whatever the text says.
        "callback-from-env": (
            Content("hydra.callbacks.probe", "${oc.decode:${oc.env:GATE_PROBE}}",
                    "'${oc.decode:${oc.env:GATE_PROBE}}'", add=True),
            {"GATE_PROBE": callback}),
        # A logging stream from the environment: Python's logging imports an ext:// value.
        "logging-stream-from-env": (
            Content("hydra.job_logging.handlers.console.stream", "${oc.env:GATE_PROBE}",
                    "${oc.env:GATE_PROBE}"),
            {"GATE_PROBE": f"ext://{module}.stream"}),
        # A logging class chosen through an interpolation with a default.
        "logging-class-from-select": (
            Content("hydra.job_logging.handlers.console.class", f"${{oc.select:nope,{module}.stream}}",
                    f"${{oc.select:nope,{module}.stream}}"),
            {}),
    }


@pytest.mark.parametrize("channel", CHANNELS)
@pytest.mark.parametrize("name", ["callback-from-env", "logging-stream-from-env",
                                  "logging-class-from-select"])
def test_code_chosen_through_an_interpolation_is_refused_through_every_channel(
    name: str, channel: str, tmp_path: Path, importable: tuple[str, Path], monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
):
    module, imported = importable
    content, env = _code_contents(tmp_path, module)[name]
    for variable, value in env.items():
        monkeypatch.setenv(variable, value)
    overrides, config_name, config_dir = channel_arguments(channel, content, tmp_path)
    code, output = run_main(overrides, config_name, config_dir, tmp_path, capsys)
    assert code == 2 and "Traceback" not in output, output
    assert content.key.rpartition(".")[0] in output and "Fix:" in output, output
    assert not (tmp_path / "MADE").exists() and not imported.exists()
    assert not (tmp_path / "run").exists()
    message = run_api(overrides, config_name, config_dir)
    assert message is not None and content.key.rpartition(".")[0] in message
    assert not (tmp_path / "MADE").exists() and not imported.exists()


@pytest.mark.parametrize("channel", ["command-line", "primary-config"])
def test_an_interpolation_hydra_fills_when_it_runs_is_not_refused(
    channel: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
):
    """Hydra's own idiom for a log file: a reference to the run's folder, known only when Hydra runs."""
    content = Content("hydra.job_logging.handlers.file.filename", "${hydra.runtime.output_dir}/my.log",
                      "${hydra.runtime.output_dir}/my.log")
    overrides, config_name, config_dir = channel_arguments(channel, content, tmp_path)
    code, output = run_main(overrides, config_name, config_dir, tmp_path, capsys)
    assert code == 0, output
    assert (tmp_path / "run" / "my.log").is_file()


def test_an_interpolation_through_a_resolver_that_cannot_resolve_yet_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
):
    code, output = run_main(["hydra.job_logging.handlers.console.stream=${oc.env:GATE_SURELY_UNSET}"],
                            "ppo_trainer", None, tmp_path, capsys)
    assert code == 2 and "hydra.job_logging.handlers.console.stream" in output and "Fix:" in output, output
    assert not (tmp_path / "run").exists()


# --------------------------------------------------------------------------- a user's file never read


SHADOWING = {
    # The shipped default role option, the primary config and an engine option, each under its own name.
    "role-option": ("role/critic/default.yaml", "# @package critic\noptim:\n  lr: 3.0e-05\n", [],
                    "role/critic/default.yaml"),
    "primary-config": ("ppo_trainer.yaml", "trainer:\n  nnodes: 4\n", [], "ppo_trainer.yaml"),
    "engine-option": ("model_engine/megatron.yaml", "# @package _global_\ntrainer:\n  nnodes: 4\n",
                      ["model_engine=megatron"], "model_engine"),
    # A release of the user's own: verl_roles' releases are generated data, not options a folder adds.
    "release-option": ("verl_version/0.7.0.yaml", "# @package _global_\n{}\n", ["verl_version=0.7.0"],
                       "verl_version"),
}


@pytest.mark.parametrize("channel", ["config-dir", "search-path"])
@pytest.mark.parametrize("name", list(SHADOWING))
def test_a_file_of_a_users_folder_that_would_never_be_read_is_refused(
    name: str, channel: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
):
    """Hydra reads the first file of a name on the search path, and verl_roles' own tree comes first: a
    user's file of the same name would silently not apply."""
    relative, text, overrides, phrase = SHADOWING[name]
    write(tmp_path / "mine" / relative, text)
    if channel == "config-dir":
        args, config_dir = overrides, str(tmp_path / "mine")
    else:
        args, config_dir = [f"hydra.searchpath=[file://{tmp_path / 'mine'}]", *overrides], None
    refused_by_main_and_api(args, "ppo_trainer", config_dir, tmp_path, capsys, phrase, "Fix:")


def test_a_users_option_under_a_name_of_its_own_applies(tmp_path: Path):
    options = tmp_path / "mine" / "role" / "critic"
    write(options / "mine.yaml", "# @package critic\noptim:\n  lr: 3.0e-05\n")
    write(options / "default.yaml", "# @package critic\noptim:\n  lr: 4.0e-05\n")
    cfg = verl_roles.compose(["role/critic=mine"], config_dir=str(tmp_path / "mine"))
    assert cfg.critic.optim.lr == 3.0e-05


# --------------------------------------------------------------------------- no key without an effect


LORA_MISSPELLINGS = ("critic.model.lora.rnk", "actor_rollout_ref.model.lora.target_modulez")


# A critic's role option sets only critic keys: the actor's key has every channel but that one.
@pytest.mark.parametrize(("key", "channel"), [
    (key, channel) for key in LORA_MISSPELLINGS for channel in (*CHANNELS, "role-option")
    if channel != "role-option" or key.startswith("critic.")
])
def test_a_key_our_lora_block_does_not_have_is_refused_through_every_channel(
    key: str, channel: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
):
    """The LoRA block is verl_roles' own (its flat keys are derived from it): a misspelt key in it would
    leave LoRA as it was, without a word. verl types the block as a mapping, which does not make it free."""
    content = Content(key, "8", "8", add=True)
    if channel == "role-option":
        write(tmp_path / "conf" / "role" / "critic" / "mine.yaml",
              "# @package critic\n" + nested(key.removeprefix("critic."), "8"))
        overrides, config_name, config_dir = ["role/critic=mine"], "ppo_trainer", str(tmp_path / "conf")
    else:
        overrides, config_name, config_dir = channel_arguments(channel, content, tmp_path)
    refused_by_main_and_api(overrides, config_name, config_dir, tmp_path, capsys, key, "did you mean")


# ------------------------------------------------------------------ a config source that adds nothing


@pytest.mark.parametrize("what", ["missing", "a-file"])
@pytest.mark.parametrize("channel", ["config-dir", "command-line", "primary-config"])
def test_a_folder_of_config_files_that_is_no_folder_is_refused_through_every_channel(
    what: str, channel: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
):
    """Hydra skips a search-path entry it cannot read with a warning: every file meant to be there would
    silently not apply, as with a --config-dir that is no folder."""
    folder = tmp_path / "options"
    if what == "a-file":
        write(folder, "trainer:\n  nnodes: 2\n")
    if channel == "config-dir":
        overrides, config_name, config_dir = [], "ppo_trainer", str(folder)
    elif channel == "command-line":
        overrides, config_name, config_dir = [f"hydra.searchpath=[file://{folder}]"], "ppo_trainer", None
    else:
        write(tmp_path / "conf" / "mine.yaml", f"{PRIMARY}hydra:\n  searchpath:\n    - file://{folder}\n")
        overrides, config_name, config_dir = [], "mine", str(tmp_path / "conf")
    refused_by_main_and_api(overrides, config_name, config_dir, tmp_path, capsys, str(folder), "Fix:")


# ------------------------------------------------------------------ a config too deep to write


@pytest.mark.parametrize("override", [
    "+trainer." + ".".join(["a"] * 400) + "=1",
    "+trainer." + ".".join(["a"] * 60) + "=" + "[" * 60 + "]" * 60,
])
def test_an_override_nesting_the_config_too_deep_is_refused_by_every_command(
    override: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
):
    """A key of many sections nests the config as deep as a value of many brackets: the main job failed
    writing it (RecursionError), the API accepted it."""
    refused_by_main_and_api([override], "ppo_trainer", None, tmp_path, capsys, "levels deep", "Fix:")
    from verl_roles.cli import main as cli

    assert cli(["show", override]) == 2
    assert "levels deep" in capsys.readouterr().err


def test_a_key_of_a_few_sections_more_than_verl_has_is_not_refused_for_its_depth():
    with pytest.warns(UserWarning, match="trainer.a is not a key"):
        cfg = verl_roles.compose(["+trainer." + ".".join(["a"] * 20) + "=1"])
    assert cfg.trainer.a is not None


# ------------------------------------------------------------------ sweeps a config describes


@pytest.mark.parametrize("params", [
    "{hydra.job.chdir: 'true'}", "{'+hydra.callbacks.probe._target_': os.makedirs, trainer.nnodes: '1,2'}"])
def test_hydra_settings_among_a_configs_sweeper_params_are_refused_by_the_sweep_and_check_sweep(
    params: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
):
    """The basic sweeper hands every param to every job as an override: a Hydra setting there was no job
    the sweep planned (an internal error, exit 70)."""
    write(tmp_path / "conf" / "mine.yaml", f"{PRIMARY}hydra:\n  sweeper:\n    params: {params}\n")
    flags = ["--config-dir", str(tmp_path / "conf"), "--config-name", "mine"]
    code = main(["-m", *flags, f"hydra.sweep.dir={tmp_path / 'sweep'}", "hydra/job_logging=none"])
    output = capsys.readouterr().err
    assert code == 2 and ("hydra.sweeper.params.hydra" in output or "hydra.sweeper.params.+hydra" in output)
    assert "Fix:" in output and not (tmp_path / "sweep").exists()
    from verl_roles.cli import main as cli

    assert cli(["check-sweep", *flags]) == 2
    assert "hydra.sweeper.params" in capsys.readouterr().err


# ------------------------------------------------------------------ where Hydra writes a run's files


@pytest.mark.parametrize("channel", ["command-line", "primary-config"])
@pytest.mark.parametrize("mode", ["run", "sweep"])
def test_a_job_name_that_is_no_plain_file_name_is_refused(
    channel: str, mode: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
):
    """Hydra names the job's log file after hydra.job.name: `../../x` wrote x.log outside the run's folder."""
    content = Content("hydra.job.name", "../../escaped", "../../escaped")
    overrides, config_name, config_dir = channel_arguments(channel, content, tmp_path)
    flags = ["--config-name", config_name] + (["--config-dir", config_dir] if config_dir else [])
    folder = tmp_path / "a" / "b" / "run"
    where = (["-m", "trainer.nnodes=1,2", f"hydra.sweep.dir={folder}"] if mode == "sweep"
             else [f"hydra.run.dir={folder}"])
    code = main([*flags, *overrides, *where])
    output = capsys.readouterr().err
    assert code == 2 and "hydra.job.name" in output and "Fix:" in output, output
    assert not (tmp_path / "a").exists() and not (tmp_path / "escaped.log").exists()


# ------------------------------------------------------------------ a key verl reads, removed


@pytest.mark.parametrize("removal", ["~trainer.default_local_dir", "~algorithm.kl_ctrl", "~reward",
                                     "~distillation"])
def test_removing_a_key_verl_has_from_a_plain_section_is_named_by_every_command(
    removal: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
):
    """verl reads its plain sections key by key, some keys with a default (``distillation``), others
    directly (its ray trainer reads trainer.default_local_dir at the first checkpoint, maybe hours in): a
    removal is named, never silent. `~reward` removes the group that builds the section."""
    key = removal.lstrip("~")
    code, output = run_main([removal], "ppo_trainer", None, tmp_path, capsys)
    assert code == 0 and f"{key} is removed" in output, output
    with pytest.warns(UserWarning, match=f"{key} is removed"):
        verl_roles.compose([removal])
    from verl_roles.cli import main as cli

    assert cli(["show", "--keys", "trainer.nnodes", removal]) == 0
    assert f"{key} is removed" in capsys.readouterr().err


def test_removing_a_key_the_value_tables_check_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    code, output = run_main(["~trainer.nnodes"], "ppo_trainer", None, tmp_path, capsys)
    assert code == 2 and "trainer.nnodes" in output and "Fix:" in output, output
    assert not (tmp_path / "run").exists()


def test_removing_a_field_of_a_section_verl_builds_as_a_dataclass_is_not_refused():
    """The dataclass gives the field its default."""
    cfg = verl_roles.compose(["~actor_rollout_ref.rollout.val_kwargs"])
    assert "val_kwargs" not in cfg.actor_rollout_ref.rollout


# ------------------------------------------------------------------ a group choice, through a defaults list


@pytest.mark.parametrize("channel", ["command-line", "primary-config", "option-file"])
@pytest.mark.parametrize(("option", "phrase"), [("${oc.env:GATE_ENGINE}", "interpolation"),
                                                ("../../x", "path")])
def test_a_group_choice_gets_the_command_lines_verdict_through_a_defaults_list(
    channel: str, option: str, phrase: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
):
    """`model_engine=${oc.env:E}` was refused on the command line and chose the engine from a primary
    config's `override model_engine: ${oc.env:E}`."""
    monkeypatch.setenv("GATE_ENGINE", "megatron")
    group = "model_engine" if phrase == "interpolation" else "role/critic"
    if channel == "command-line":
        overrides, config_name, config_dir = [f"{group}={option}"], "ppo_trainer", None
    elif channel == "primary-config":
        write(tmp_path / "conf" / "mine.yaml",
              f"defaults:\n  - ppo_trainer\n  - override {group}: {option!r}\n  - _self_\n")
        overrides, config_name, config_dir = [], "mine", str(tmp_path / "conf")
    else:
        write(tmp_path / "conf" / "exp" / "mine.yaml",
              f"# @package _global_\ndefaults:\n  - override /{group}: {option!r}\n")
        overrides, config_name, config_dir = ["+exp=mine"], "ppo_trainer", str(tmp_path / "conf")
    refused_by_main_and_api(overrides, config_name, config_dir, tmp_path, capsys, phrase, "Fix:")


# ------------------------------------------------------------------ a user's value a shipped file replaces


@pytest.mark.parametrize("channel", ["primary-config", "option-file"])
def test_a_users_value_that_a_shipped_file_replaces_is_refused(
    channel: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
):
    """`_self_` (or an option of the user's) before ppo_trainer: Hydra merges verl_roles' files after the
    user's, and trainer.nnodes: 4 silently stayed 1."""
    if channel == "primary-config":
        write(tmp_path / "mine" / "mine.yaml",
              "defaults:\n  - _self_\n  - ppo_trainer\ntrainer:\n  nnodes: 4\n")
    else:
        write(tmp_path / "mine" / "mine.yaml", "defaults:\n  - exp: four\n  - ppo_trainer\n  - _self_\n")
        write(tmp_path / "mine" / "exp" / "four.yaml", "# @package _global_\ntrainer:\n  nnodes: 4\n")
    refused_by_main_and_api([], "mine", str(tmp_path / "mine"), tmp_path, capsys, "trainer.nnodes", "_self_")


def test_a_users_value_the_shipped_files_agree_with_or_do_not_set_is_not_refused(tmp_path: Path):
    write(tmp_path / "mine" / "mine.yaml", "defaults:\n  - _self_\n  - ppo_trainer\ntrainer:\n  nnodes: 1\n"
          "my_notes:\n  owner: me\n")
    with pytest.warns(UserWarning, match="my_notes"):
        cfg = verl_roles.compose([], config_name="mine", config_dir=str(tmp_path / "mine"))
    assert cfg.my_notes.owner == "me"


def test_a_plain_logging_setting_through_an_interpolation_is_not_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
):
    """A level names no code: read from the environment it is accepted (the level check read the text of
    the interpolation as a level name)."""
    monkeypatch.setenv("GATE_LEVEL", "WARNING")
    code, output = run_main(["hydra.job_logging.root.level=${oc.env:GATE_LEVEL}"], "ppo_trainer", None,
                            tmp_path, capsys)
    assert code == 0, output

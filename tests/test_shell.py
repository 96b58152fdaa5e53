"""The one command shell: every command of verl-roles declared once, and what is derived from the
declarations (the table, --help, --version, completion, flag problems, the error boundary), through the
CLI as a user types it. In-process, with one real process for the console script and one bash session."""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from conftest import REPO, assert_user_error, cli_env, main_in_process, run, run_in_process

import verl_roles
from verl_roles.base.layout import ENGINE_ALIASES, ENGINES, ROLE_SECTIONS
from verl_roles.base.releases import DEFAULT_RELEASE, supported
from verl_roles.cli import main as cli
from verl_roles.commands import completion, snapshots
from verl_roles.shell import command as shell_command
from verl_roles.shell.command import Command, Words
from verl_roles.shell.table import COMMAND_MODULES, command_table

# What Hydra/OmegaConf do decides these tests' outcome: CI runs them on both stacks.
pytestmark = pytest.mark.stack

TABLE = command_table()
NAMES = sorted(TABLE)


def cli_run(args: list[str], tmp_path: Path) -> subprocess.CompletedProcess[str]:
    return run_in_process(args, cwd=tmp_path, module="verl_roles.cli")


def test_every_command_module_declares_the_command_named_after_it():
    assert sorted(TABLE) == sorted(module.replace("_", "-") for module in COMMAND_MODULES)
    for name, declared in TABLE.items():
        assert declared.name == name and declared.summary and declared.action


def test_every_module_that_declares_a_command_of_verl_roles_is_listed():
    """A command module the list in cli.py misses would be a command nobody can run: each module under
    verl_roles/commands whose ``COMMAND`` is a command of verl-roles (no program of its own) is listed."""
    import importlib
    import pkgutil

    import verl_roles.commands as package

    declaring = set()
    for info in pkgutil.iter_modules(package.__path__):
        declared = getattr(importlib.import_module(f"{package.__name__}.{info.name}"), "COMMAND", None)
        if isinstance(declared, Command) and not declared.program:
            declaring.add(info.name)
    assert declaring == set(COMMAND_MODULES)


def test_the_global_help_is_the_table_of_the_declarations(tmp_path: Path):
    result = cli_run(["--help"], tmp_path)
    assert result.returncode == 0, result.stderr
    listed = {line.split()[0]: line.split(None, 1)[1] for line in result.stdout.splitlines()
              if line.startswith("  ") and not line.lstrip().startswith("-")}
    assert listed == {name: TABLE[name].summary for name in NAMES}
    assert "--version" in result.stdout and "verl-roles completion bash" in result.stdout


@pytest.mark.parametrize("name", NAMES)
def test_each_commands_help_is_its_usage_flags_and_examples(name: str, tmp_path: Path):
    declared = TABLE[name]
    result = cli_run([name, "--help"], tmp_path)
    assert result.returncode == 0 and result.stderr == "", result.stderr
    out = result.stdout
    assert out.startswith(f"usage: verl-roles {name}")
    for flag in declared.flags:
        assert flag.spelling in out, flag
        assert flag.help.split()[0] in out, flag
    for example in declared.examples:
        assert example in out
    assert "--debug" in out and "-h, --help" in out
    assert max(len(line) for line in out.splitlines()) <= 110


def test_version_names_the_package_and_the_verl_release_it_writes_for(tmp_path: Path, capsys):
    project = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    assert verl_roles.__version__ == project["version"]
    expected = f"verl_roles {verl_roles.__version__} (writes trainer configs for verl {DEFAULT_RELEASE};"
    result = cli_run(["--version"], tmp_path)
    assert result.returncode == 0 and result.stdout.startswith(expected), result.stdout
    assert f"verl_version= picks one of {', '.join(supported())}" in result.stdout
    code, out, err = main_in_process(["--version"], tmp_path, capsys)
    assert code == 0 and out.startswith(expected), err
    assert not (tmp_path / "out").exists()


@pytest.mark.slow
def test_the_console_script_runs_help_and_version():
    """The installed entry point itself (one real process): exit 0, the version line."""
    script = Path(sys.executable).with_name("verl-roles")
    if not script.exists():
        pytest.skip(f"verl-roles is not installed next to {sys.executable}")
    result = subprocess.run([str(script), "--version"], env=cli_env(), capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 0, result.stderr
    assert DEFAULT_RELEASE in result.stdout and verl_roles.__version__ in result.stdout


@pytest.mark.parametrize(
    ("args", "phrases"),
    [
        (["shwo"], ["shwo: is not a command", "did you mean `verl-roles show`?"]),
        (["--verison"], ["--verison: is not an option of verl-roles", "did you mean `--version`?"]),
        (["show", "--kyes=x"], ["--kyes: is not an option of show", "did you mean `--keys`?"]),
        (["roles", "--config-nme=x"], ["--config-nme: is not an option of roles",
                                          "did you mean `--config-name`?"]),
        (["keys", "--role"], ["--role: is not an option of keys"]),
        (["show", "--role"], ["--role: needs a role", "write `--role ROLE`"]),
        (["launch", "--run-dir"], ["--run-dir: needs a run directory"]),
        (["launch", "--verl-python", "python3", "--run-dir", "x", "trainer.nnodes=2"], ["would be ignored"]),
        (["check-sweep", "trainer.nnodes"], ["trainer.nnodes: is not an override"]),
        (["completion", "zsh"], ["zsh: names no shell", "verl-roles completion bash"]),
    ],
    ids=["command", "global-flag", "flag", "config-flag", "flag-of-another", "no-value", "launch-no-value",
         "launch-run-dir-and-overrides", "bare-word", "shell"],
)
def test_usage_mistakes_are_one_paragraph(args: list[str], phrases: list[str], tmp_path: Path):
    result = cli_run(args, tmp_path)
    assert_user_error(result, *phrases)
    assert result.returncode == 2 and result.stderr.count("\n") == 1 and result.stdout == ""
    assert list(tmp_path.iterdir()) == []


def test_the_snapshot_script_has_the_same_shell(capsys):
    assert snapshots.main(["--chek"]) == 2
    err = capsys.readouterr().err
    assert "--chek: is not an option of scripts/generate_trainer_config.sh" in err
    assert "did you mean `--check`?" in err
    assert snapshots.main(["extra"]) == 2
    assert "extra: is not an argument of scripts/generate_trainer_config.sh" in capsys.readouterr().err
    assert snapshots.main(["--help"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("usage: scripts/generate_trainer_config.sh [--check] [--root DIR]")


@pytest.mark.parametrize("name", [*NAMES, "snapshots"])
def test_every_command_runs_inside_the_error_boundary(name: str, monkeypatch: pytest.MonkeyPatch, capsys):
    """A bug anywhere in a command (here: in the parse) is one paragraph and exit code 70; a stdout that
    is closed is one paragraph and exit code 2: never a traceback."""

    def broken(*args: object) -> None:
        raise RuntimeError("a bug")

    entry = (lambda args: snapshots.main(args)) if name == "snapshots" else (lambda args: cli([name, *args]))
    monkeypatch.setattr(shell_command, "parse", broken)
    assert entry([]) == 70
    err = capsys.readouterr().err
    assert err.startswith("verl_roles error: internal error: verl_roles failed with RuntimeError: a bug")
    monkeypatch.undo()
    monkeypatch.setattr(sys, "stdout", None)
    assert entry(["--help"]) == 2
    assert "standard output is closed" in capsys.readouterr().err


def _entry(name: str):  # noqa: ANN202 - a command's entry point on its arguments
    if name == "snapshots":
        return snapshots.main
    if name == "main":
        from verl_roles.main import main

        return main
    return lambda args: cli([name, *args])


def _interrupt_in_disguise(*args: object) -> None:
    """Ctrl-C landing where Python or a library turns it into another error (a class being created)."""
    try:
        raise KeyboardInterrupt
    except KeyboardInterrupt as interrupt:
        raise RuntimeError("Error calling __set_name__") from interrupt


@pytest.mark.parametrize("name", [*NAMES, "snapshots", "main"])
def test_every_command_names_a_deleted_current_folder_and_a_disguised_ctrl_c(
    name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys
):
    """The environment, not a bug: a current folder deleted under the shell is one paragraph and exit 2;
    Ctrl-C is exit 130 also when it reaches the command as another error."""
    from verl_roles.commands import main as main_job

    gone = tmp_path / "gone"
    gone.mkdir()
    monkeypatch.chdir(gone)
    gone.rmdir()
    assert _entry(name)([]) == 2
    err = capsys.readouterr().err
    assert err.startswith("verl_roles error: the current folder: no longer exists") and "internal" not in err
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(shell_command, "parse", _interrupt_in_disguise)
    monkeypatch.setattr(main_job, "read_command_line", _interrupt_in_disguise)
    assert _entry(name)([]) == 130
    assert capsys.readouterr().err.startswith("verl_roles: interrupted (Ctrl-C)")
    assert list(tmp_path.iterdir()) == []


# --- completion -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("verl-roles ", NAMES),
        ("verl-roles ex", ["explain", "export-slime"]),
        ("verl-roles --v", ["--version"]),
        ("verl-roles show --", ["--role", "--keys", "--config-name", "--config-dir", "--help", "--debug"]),
        ("verl-roles show --role ", list(ROLE_SECTIONS)),
        ("verl-roles show --role=c", ["critic"]),
        ("verl-roles export-slime --o", ["--output"]),
        ("verl-roles launch --r", ["--run-dir", "--resolve", "--run"]),
        ("verl-roles completion ", ["bash"]),
        ("verl-roles nosuch ", []),
        ("verl-roles show --config-dir ", []),
    ],
)
def test_completion_of_commands_flags_and_flag_values(line: str, expected: list[str]):
    assert completion.candidates(line) == expected
    if "=" in line:
        assert completion.candidates(line, wordbreaks=" ") == [f"--role={role}" for role in expected]


def test_completion_of_overrides_is_the_main_jobs_after_our_own_flags(tmp_path: Path):
    option = "# @package critic\nmegatron:\n  param_offload: true\n"
    (tmp_path / "myconf/role/critic").mkdir(parents=True)
    (tmp_path / "myconf/role/critic/offload.yaml").write_text(option, encoding="utf-8")
    engines = sorted([*ENGINES, *ENGINE_ALIASES])
    # bash's default word breaks cut at `=`; with Hydra's script installed `=` is no break.
    assert completion.candidates("verl-roles show --role critic model_engine=") == engines
    assert completion.candidates("verl-roles roles model_engine=", wordbreaks=" ") == [
        f"model_engine={engine}" for engine in engines
    ]
    line = "verl-roles keys --config-dir {} kl role/critic="
    assert completion.candidates(line.format(tmp_path / "myconf")) == ["default", "offload"]
    line = "verl-roles diff model_engine=dp -- model_engine=megatron megatron.tensor_m"
    assert completion.candidates(line) == ["megatron.tensor_model_parallel_size="]


@pytest.mark.slow
def test_completion_through_bash(tmp_path: Path):
    """As a user installs it: `eval "$(verl-roles completion bash)"`, then TAB. Bash calls the function
    with the line typed; here a bash session calls it the same way."""
    script = Path(sys.executable).with_name("verl-roles")
    if not script.exists() or shutil.which("bash") is None:
        pytest.skip("needs the verl-roles console script and bash")
    lines = ["verl-roles sh", "verl-roles show --ro", "verl-roles show model_engine=meg"]
    session = ['eval "$(verl-roles completion bash)"', "complete -p verl-roles"]
    for line in lines:
        session += [
            f"COMP_LINE={shlex.quote(line)}; COMP_POINT=${{#COMP_LINE}}; COMP_WORDS=($COMP_LINE)",
            'COMPREPLY=(); _verl_roles_complete; echo "${COMPREPLY[*]}"',
        ]
    env = {**cli_env(), "PATH": f"{script.parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    result = subprocess.run(["bash", "--norc", "--noprofile", "-c", "\n".join(session)], cwd=tmp_path,
                            env=env, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    registered, command, flag, option = result.stdout.splitlines()
    assert registered.endswith("-F _verl_roles_complete verl-roles")
    assert (command, flag, option) == ("show", "--role", "megatron")


def test_words_of_each_command_are_declared():
    assert TABLE["keys"].words is Words.KEYS and TABLE["explain"].words is Words.KEYS
    assert {name for name, declared in TABLE.items() if declared.words is Words.OVERRIDES} == {
        "check-sweep", "export-slime", "roles", "show",
    }


@pytest.mark.slow
def test_a_real_process_for_a_usage_mistake(tmp_path: Path):
    result = run(["show", "--kyes", "x"], cwd=tmp_path, module="verl_roles.cli")
    assert result.returncode == 2
    assert_user_error(result, "did you mean `--keys`?")

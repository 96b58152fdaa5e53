"""A way around ~900 keys: `verl-roles keys`, `verl-roles roles`, the main job's --help and shell
completion through the `verl-roles-main` console script."""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import CONF, assert_user_error, cli_env, main_in_process, run_in_process, write

from verl_roles.base.layout import ENGINE_ALIASES, ENGINES
from verl_roles.base.releases import engine_choice
from verl_roles.cli import main as cli

# What Hydra/OmegaConf do decides these tests' outcome: CI runs them on both stacks.
pytestmark = pytest.mark.stack

MEGATRON = "model_engine=megatron"


def comment_above(file: Path, field: str) -> str:
    """The comment line right above ``field:`` in a config file, read independently of verl_roles."""
    lines = file.read_text(encoding="utf-8").splitlines()
    index = next(i for i, line in enumerate(lines) if line.strip().startswith(f"{field}:"))
    return lines[index - 1].strip().lstrip("#").strip()


def keys_output(capsys, *args: str) -> list[str]:
    assert cli(["keys", *args]) == 0
    return capsys.readouterr().out.splitlines()


def test_keys_lists_type_default_and_the_comment_above_each_field(capsys):
    assert keys_output(capsys, "actor_rollout_ref.actor.optim.lr", "trainer.nnodes") == [
        "actor_rollout_ref.actor.optim.lr: float = 1.0e-06",
        f"    {comment_above(CONF / 'optim/fsdp.yaml', 'lr')}",
        "trainer.nnodes: int = 1",
        f"    {comment_above(CONF / 'trainer/trainer.yaml', 'nnodes')}",
    ]


def test_keys_of_an_engine_show_interpolations_and_what_they_resolve_to(capsys):
    lines = keys_output(capsys, "critic.megatron.param_offload", MEGATRON)
    assert lines == [
        "critic.megatron.param_offload: bool = ${megatron.param_offload} (false)",
        f"    {comment_above(CONF / 'engine/megatron_role.yaml', 'param_offload')}",
    ]
    # A section's name lists every key under it.
    lines = keys_output(capsys, "megatron", MEGATRON)
    assert "megatron.tensor_model_parallel_size: int = 1" in lines
    assert not any(line.startswith("critic.") for line in lines)


@pytest.mark.parametrize("engine", ENGINES)
def test_every_key_has_its_comment(capsys, engine):
    lines = keys_output(capsys, *engine_choice(engine))
    keys = [i for i, line in enumerate(lines) if not line.startswith(" ")]
    assert len(keys) > 600
    uncommented = [lines[i] for i in keys if i + 1 >= len(lines) or not lines[i + 1].startswith("    ")]
    assert uncommented == []


def test_keys_read_the_comments_of_a_users_role_option(tmp_path: Path, capsys):
    write(
        tmp_path / "myconf/role/critic/slow.yaml",
        "# @package critic\n# A slow critic (this header documents no field).\n\noptim:\n\n"
        "  # Half the stock critic rate.\n  lr: 5.0e-06\n\n  # A note: |\n  betas: [0.9, 0.95]\n",
    )
    config_dir = str(tmp_path / "myconf")
    wanted = ["critic.optim.lr", "critic.optim.betas", "role/critic=slow"]
    lines = keys_output(capsys, "--config-dir", config_dir, *wanted)
    assert lines == [
        "critic.optim.lr: float = 5.0e-06",
        "    Half the stock critic rate.",
        "critic.optim.betas: tuple[float, float] = [0.9, 0.95]",
        "    A note: |",
    ]


def test_keys_mistakes(tmp_path: Path):
    assert_user_error(
        run_in_process(["keys", "megatron.tensor*"], cwd=tmp_path, module="verl_roles.cli"),
        "megatron.tensor*: matches no key", "add model_engine=megatron",
    )
    assert_user_error(run_in_process(["keys", "--role", "x"], cwd=tmp_path, module="verl_roles.cli"),
                      "--role: is not an option of keys")


def role_table(lines: list[str]) -> dict[str, dict[str, str]]:
    """``verl-roles roles`` output read by its header: key -> {role: value} (columns by name, so a role
    added to the layout table does not move the ones a test reads)."""
    header = lines[0].split()[1:]
    return {line.split()[0]: dict(zip(header, line.split()[1:], strict=False)) for line in lines[1:]
            if line and not line.startswith("(")}


def test_roles_prints_one_table_of_the_differences(capsys):
    assert cli(["roles", MEGATRON, "critic.megatron.param_offload=true"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split()[:5] == ["key", "actor", "critic", "ref", "rollout"]
    rows = role_table(lines)
    shown = ("actor", "critic", "ref", "rollout")
    assert [rows["megatron.param_offload"][role] for role in shown] == ["false", "true", "false", "-"]
    assert [rows["optim.lr"][role] for role in shown] == ["1.0e-06", "1.0e-05", "-", "-"]
    # Keys every role has with one value are not shown.
    assert "megatron.tensor_model_parallel_size" not in rows


def test_roles_aligns_the_fsdp_critic_block_and_leaves_out_an_untrained_critic(capsys):
    assert cli(["roles", "critic.fsdp.param_offload=true"]) == 0
    rows = role_table(capsys.readouterr().out.splitlines())
    assert [rows["fsdp_config.param_offload"][role] for role in ("actor", "critic", "ref", "rollout")] == [
        "false", "true", "false", "-"]
    assert cli(["roles", "algorithm.adv_estimator=grpo"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert "critic" not in lines[0].split() and lines[0].split()[:4] == ["key", "actor", "ref", "rollout"]
    assert lines[-2] == (
        "(critic left out: it is not trained, algorithm.adv_estimator=grpo trains no critic; only gae does)"
    )


def test_main_help_lists_only_the_groups_a_user_picks(tmp_path: Path, capsys):
    option = "# @package critic\nmegatron:\n  param_offload: true\n"
    write(tmp_path / "myconf/role/critic/offload.yaml", option)
    code, out, err = main_in_process(["--help", "--config-dir", str(tmp_path / "myconf")], tmp_path, capsys)
    assert code == 0, err
    lines = out.splitlines()
    assert len(lines) < 60
    listed = [line.split(None, 1) for line in lines if line.startswith(("  model", "  role", "  hydra/"))]
    groups = {name: options for name, options in listed}
    assert groups["model_engine"] == ", ".join(sorted([*ENGINES, *ENGINE_ALIASES]))
    assert groups["role/critic"] == "default, offload"
    assert "basic" in groups["hydra/launcher"]
    for internal in ("actor", "engine", "lora", "optim", "profiler", "rollout"):
        assert not any(line.strip().startswith(f"{internal} ") for line in lines), internal
    assert not (tmp_path / "out").exists()


def console_script(name: str) -> Path:
    script = Path(sys.executable).parent / name
    if not script.exists():
        pytest.skip(f"{name} is not installed next to {sys.executable}")
    return script


@pytest.mark.slow
def test_shell_completion_through_the_console_script(tmp_path: Path):
    """As the README says: `eval "$(verl-roles-main -sc install=bash)"` in bash, then TAB. Bash calls the
    installed completion function with the line typed; here a bash session calls it the same way."""
    main_script = console_script("verl-roles-main")
    if shutil.which("bash") is None:
        pytest.skip("bash is not installed")
    lines = [
        "verl-roles-main ",
        "verl-roles-main model_engine=",
        "verl-roles-main model_engine=megatron megatron.tensor_m",
    ]
    session = ['eval "$(verl-roles-main -sc install=bash)"', "complete -p verl-roles-main"]
    for line in lines:
        session += [
            f"COMP_LINE={shlex.quote(line)}; COMP_POINT=${{#COMP_LINE}}; words=($COMP_LINE)",
            '[ "${COMP_LINE: -1}" = " " ] && COMP_CWORD=${#words[@]} || COMP_CWORD=$((${#words[@]} - 1))',
            'COMPREPLY=(); hydra_bash_completion; echo "${COMPREPLY[*]}"',
        ]
    env = {**cli_env(), "PATH": f"{main_script.parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    result = subprocess.run(["bash", "--norc", "--noprofile", "-c", "\n".join(session)], cwd=tmp_path,
                            env=env, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    registered, top, engines, key = result.stdout.splitlines()
    assert registered.endswith("-F hydra_bash_completion verl-roles-main")
    assert {"model_engine=", "role/", "trainer."} <= set(top.split())
    assert not {"actor=", "engine=", "lora=", "optim="} & set(top.split())
    options = sorted([*ENGINES, *ENGINE_ALIASES])
    assert engines.split() == [f"model_engine={option}" for option in options]
    assert key.split() == ["megatron.tensor_model_parallel_size="]
    assert os.access(main_script, os.X_OK)


def entries(lines: list[str]) -> dict[str, str]:
    """``keys`` output as key -> its comment (the indented line under it)."""
    found: dict[str, str] = {}
    for index, line in enumerate(lines):
        if not line.startswith(" "):
            following = lines[index + 1] if index + 1 < len(lines) else ""
            found[line.split(":", 1)[0]] = following.strip() if following.startswith("    ") else ""
    return found


def test_keys_word_without_glob_characters_searches_names_and_comments(capsys):
    every = entries(keys_output(capsys))
    expected = [key for key, comment in every.items() if "kl" in key.lower() or "kl" in comment.lower()]
    found = list(entries(keys_output(capsys, "kl")))
    assert found == expected
    assert "algorithm.kl_penalty" in found and "actor_rollout_ref.actor.kl_loss_type" in found
    assert any("kl" not in key for key in found)  # found by its comment alone
    # A word that names a key or section in full lists that, not every key mentioning it.
    assert list(entries(keys_output(capsys, "trainer.nnodes"))) == ["trainer.nnodes"]


@pytest.mark.parametrize(
    ("args", "phrases"),
    [
        (["keys", "nnodez"], ["nnodez: matches no key", "`trainer.nnodes`",
                              "searches the names and comments"]),
        (["keys", "critic.optim.lrr"], ["did you mean `critic.optim.lr`?"]),
        (["show", "--keys", "critic.optim.lrr"], ["--keys critic.optim.lrr: matches no key",
                                                   "did you mean `critic.optim.lr`?"]),
        (["show", "--keys", "learning_rate"], ["did you mean", "`actor_rollout_ref.actor.optim.lr`",
                                               "`critic.optim.lr`"]),
    ],
    ids=["keys-word", "keys-path", "show-path", "show-abbreviation"],
)
def test_no_match_suggests_the_nearest_keys(args: list[str], phrases: list[str], tmp_path: Path):
    assert_user_error(run_in_process(args, cwd=tmp_path, module="verl_roles.cli"), *phrases)


def test_roles_hides_what_differs_by_construction_fits_120_columns_and_says_how_to_see_all(capsys):
    assert cli(["roles", MEGATRON, "critic.megatron.param_offload=true"]) == 0
    lines = capsys.readouterr().out.splitlines()
    rows = role_table(lines)
    # No class names, no qat rows (the rollout's qat follows the actor's engine block).
    assert "_target_" not in rows and not any(key.startswith("qat.") for key in rows)
    assert [rows["megatron.param_offload"][role] for role in ("actor", "critic", "ref", "rollout")] == [
        "false", "true", "false", "-"]
    assert lines[-1] == (
        "(3 more rows differ by construction, e.g. _target_: `verl-roles roles --all` shows every row)")
    assert all(len(line) <= 120 for line in lines)
    assert cli(["roles", "--all", MEGATRON]) == 0
    everything = {line.split()[0] for line in capsys.readouterr().out.splitlines()[1:]}
    assert {"_target_", "qat.ignore_patterns"} <= everything


def test_a_long_value_wraps_inside_120_columns(capsys):
    long = ",".join(f"module_{n:02d}_with_a_long_name" for n in range(8))
    assert cli(["roles", f"actor_rollout_ref.actor.checkpoint.save_contents=[{long}]"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert all(len(line) <= 120 for line in lines)
    assert sum("module_07_with_a_long_name" in line for line in lines) == 2  # save and load, each wrapped

"""Every user mistake ends as one paragraph naming the key, the problem, where it came from and the fix.

Table-driven through the CLI as typed (in-process ``verl_roles.main.main``), plus the Python API
raising the same message, plus one real subprocess for the exit code and ``--debug``.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from conftest import assert_user_error, main_in_process, run, run_in_process, write

import verl_roles
from verl_roles.base.layout import ROLES, TRAINED_SECTIONS
from verl_roles.compat import VERSION_BASE
from verl_roles.main import main

# What Hydra/OmegaConf do decides these tests' outcome: CI runs them on both stacks.
pytestmark = pytest.mark.stack

# (case id, command line, phrases the message must carry)
CASES: list[tuple[str, list[str], list[str]]] = [
    (
        "unknown-key-did-you-mean",
        ["trainer.nnodez=2"],
        [
            "trainer.nnodez",
            "not in struct",
            "did you mean `trainer.nnodes`",
            "+trainer.nnodez=2",
            "command line override `trainer.nnodez=2`",
        ],
    ),
    (
        "unknown-nested-key",
        ["actor_rollout_ref.actor.ppo_mini_batch_siz=64"],
        ["did you mean `actor_rollout_ref.actor.ppo_mini_batch_size`", "ppo_mini_batch_size=64"],
    ),
    (
        "group-name-typo",
        ["model_enginez=megatron"],
        ["model_enginez", "did you mean `model_engine`", "model_engine=megatron"],
    ),
    (
        "group-path-typo",
        ["role/critc=default"],
        ["role/critc", "not a config group", "did you mean `role/critic=default`"],
    ),
    (
        "unknown-group-option",
        ["model_engine=deepspeed"],
        ["model_engine", "no option 'deepspeed'", "one of dp, fsdp, megatron"],
    ),
    (
        "unknown-group-option-close",
        ["model_engine=megatorn"],
        ["did you mean `model_engine=megatron`"],
    ),
    (
        "engine-set-in-a-section",
        ["actor_rollout_ref.actor.model_engine=megatron"],
        ["actor_rollout_ref.actor.model_engine", "top-level", "write `model_engine=megatron`"],
    ),
    (
        "megatron-role-key-under-dp",
        ["actor_rollout_ref.actor.megatron.tensor_model_parallel_size=2"],
        [
            "exists only with model_engine=megatron",
            "composed with model_engine=dp",
            "add `model_engine=megatron`",
        ],
    ),
    (
        "megatron-baseline-key-under-dp",
        ["megatron.tensor_model_parallel_size=2"],
        ["megatron.tensor_model_parallel_size", "add `model_engine=megatron`"],
    ),
    (
        # The command line chose the engine: the fix switches it, it does not add a second one.
        "fsdp-key-under-megatron",
        ["model_engine=megatron", "fsdp.param_offload=true"],
        [
            "fsdp.param_offload",
            "exists only with model_engine=dp",
            "the command line chose model_engine=megatron: switch it to model_engine=dp, or drop "
            "`fsdp.param_offload=true`",
        ],
    ),
    (
        # Near in name (lr abbreviates learning_rate) and of a type that takes 1e-6; clip_grad, spelt
        # nearer as a whole path, is not offered.
        "did-you-mean-abbreviation-and-type",
        ["actor_rollout_ref.actor.optim.learning_rate=1e-6"],
        [
            "did you mean `actor_rollout_ref.actor.optim.lr`? Write `actor_rollout_ref.actor.optim.lr=1e-06`",
        ],
    ),
    (
        # A path missing its first sections: every key that ends with it, never another role's key.
        "did-you-mean-a-shortened-path",
        ["actor.optim.lr=1e-6"],
        ["did you mean `actor_rollout_ref.actor.optim.lr`? Write `actor_rollout_ref.actor.optim.lr=1e-06`"],
    ),
    (
        # The case as typed: no top-level optim; every trained role's learning rate is offered.
        "did-you-mean-each-roles-key",
        ["optim.learning_rate=1e-6"],
        [
            "did you mean one of these keys? Write "
            + " or ".join(f"`{section}.optim.lr=1e-06`" for section in TRAINED_SECTIONS)
            + "; if you mean to add a new key, write `+optim.learning_rate=1e-06`",
        ],
    ),
    (
        "did-you-mean-the-sections-left-out",
        ["rollout.n=4"],
        ["did you mean one of these keys? Write `actor_rollout_ref.rollout.n=4` or"],
    ),
    (
        "did-you-mean-in-another-section",
        ["actor_rollout_ref.optim.lr=1e-6"],
        ["did you mean `actor_rollout_ref.actor.optim.lr`?"],
    ),
    (
        "internal-group-with-an-engine",
        ["actor=megatron"],
        [
            "actor: is an internal config group (files the engine and role options mount), not a choice",
            "the groups you choose are model_engine, verl_version, role/actor, role/critic",
            "write `model_engine=megatron`",
        ],
    ),
    (
        "internal-group-with-an-option",
        ["critic=mine"],
        ["critic: is an internal config group", "`role/critic=mine`"],
    ),
    (
        "command-line-config-path",
        ["--config-path=config", "--config-name=my_trainer"],
        ["--config-path config: replaces verl_roles' own config tree", "write `--config-dir config` instead"],
    ),
    (
        "command-line-config-path-absolute",
        ["--config-path=/nonexistent/verl/config"],
        [
            "replaces verl_roles' own config tree with a folder without ppo_trainer",
            "write `--config-dir /nonexistent/verl/config` instead",
        ],
    ),
    (
        "plus-on-an-existing-key",
        ["+trainer.nnodes=2"],
        ["trainer.nnodes", "already exists", "write `trainer.nnodes=2`", "++trainer.nnodes=2"],
    ),
    (
        "interpolation-to-a-missing-key",
        ["trainer.total_epochs=${trainer.nnodez}"],
        [
            "trainer.total_epochs",
            "`${trainer.nnodez}`",
            "did you mean `${trainer.nnodes}`",
            "command line override",
        ],
    ),
    (
        "wrong-type",
        ["trainer.nnodes=abc"],
        [
            "trainer.nnodes: has the wrong type",
            "Got 'abc'",
            "Expected an integer",
            "command line override `trainer.nnodes=abc`",
        ],
    ),
    (
        "mini-batch-larger-than-train-batch",
        ["data.train_batch_size=64"],
        ["actor_rollout_ref.actor.ppo_mini_batch_size: is 256 prompts, more than data.train_batch_size = 64"],
    ),
    (
        "micro-batch-set-two-ways",
        [
            "actor_rollout_ref.actor.ppo_micro_batch_size=8",
            "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=2",
        ],
        ["refuses both", "remove actor_rollout_ref.actor.ppo_micro_batch_size"],
    ),
    (
        "micro-batch-does-not-divide",
        ["actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=3"],
        ["ppo_micro_batch_size_per_gpu: (3) does not divide the 32 samples"],
    ),
    (
        "megatron-parallel-does-not-fit-gpus",
        ["model_engine=megatron", "megatron.tensor_model_parallel_size=3"],
        ["TP*PP*CP = 3*1*1 = 3 does not divide the 8 GPUs"],
    ),
    (
        "enum",
        ["actor_rollout_ref.actor.loss_agg_mode=token_mean"],
        [
            "is not a loss aggregation mode",
            "Got 'token_mean'",
            "seq-mean-token-sum-norm",
            "did you mean actor_rollout_ref.actor.loss_agg_mode=token-mean?",
        ],
    ),
    (
        "range",
        ["actor_rollout_ref.rollout.gpu_memory_utilization=1.5"],
        ["gpu_memory_utilization: is out of range", "Got 1.5", "a fraction in (0, 1]"],
    ),
    (
        "required-path",
        ["actor_rollout_ref.model.path=null"],
        ["actor_rollout_ref.model.path: is required but empty"],
    ),
    # A name that differs from a real one only by case or `-`/`_` is that name mistyped: refused even when
    # added with `+` (the run would train on the real key's value), guessed whatever the case.
    (
        "added-key-differs-only-by-case",
        ["+trainer.NNODES=2"],
        ["trainer.NNODES", "did you mean `trainer.nnodes`", "command line override `+trainer.NNODES=2`"],
    ),
    (
        "added-key-differs-only-by-dash",
        ["+trainer.n-gpus-per-node=4"],
        ["did you mean `trainer.n_gpus_per_node`"],
    ),
    (
        "key-in-capitals",
        ["trainer.NNODES=2"],
        ["did you mean `trainer.nnodes`? Write `trainer.nnodes=2`."],
    ),
    (
        "group-in-capitals",
        ["MODEL_ENGINE=megatron"],
        ["did you mean `model_engine`"],
    ),
    (
        "group-option-in-capitals",
        ["model_engine=MEGATRON"],
        ["did you mean `model_engine=megatron`"],
    ),
    (
        "role-option-in-capitals",
        ["role/critic=DEFAULT"],
        ["did you mean `role/critic=default`"],
    ),
    # The data-parallel size is spelled with what it comes to (it read as "dp = ... = 1" with dp at 8).
    (
        "mini-batch-share-names-the-data-parallel-size",
        ["actor_rollout_ref.actor.ppo_mini_batch_size=4"],
        ["gives each of the 8 data-parallel ranks no sample",
         "4*1/8, dp = GPUs / (ulysses_sequence_parallel_size = 1) = 8/1 = 8)"],
    ),
    (
        "override-syntax",
        ["data.train_batch_size=[1"],
        ["`data.train_batch_size=[1`", "not a valid Hydra override", "override_grammar"],
    ),
]


# Suggestions that must never be made for these command lines (the key or value typed, a key of
# another type, an internal group).
NEVER_SUGGESTED: list[tuple[list[str], list[str]]] = [
    (["actor_rollout_ref.actor.optim.learning_rate=1e-6"], ["clip_grad"]),
    (["optim.learning_rate=1e-6"], ["clip_grad"]),
    # The actor's key typed without its first section is never answered with the critic's.
    (["actor.optim.lr=1e-6"], ["`critic.optim.lr"]),
    (["ref.log_prob_micro_batch_size_per_gpu=4"], ["`critic."]),
    (["actor=megatron"], ["did you mean `actor`", "Write `actor=megatron`"]),
    (["actor_rollout_ref.actor.optim.lrr=abc"], ["did you mean"]),  # lr takes a number, not 'abc'
    (["model_enginez=megatron"], ["`actor`", "`engine`", "`optim`"]),
    # The key typed is the real one but for case: adding it under that spelling is no fix.
    (["trainer.NNODES=2"], ["+trainer.NNODES"]),
]


@pytest.mark.parametrize(("args", "absent"), NEVER_SUGGESTED, ids=[" ".join(a) for a, _ in NEVER_SUGGESTED])
def test_suggestions_are_never_what_was_typed_nor_of_another_type(args, absent, tmp_path, capsys):
    code, out, err = main_in_process(args, tmp_path, capsys)
    assert code == 2
    for phrase in absent:
        assert phrase not in err, err


def test_a_baseline_value_is_reported_once_at_the_key_set(tmp_path, capsys):
    code, _, err = main_in_process(
        ["model_engine=megatron", "megatron.tensor_model_parallel_size=3"], tmp_path, capsys
    )
    assert code == 2
    assert err.count("verl_roles error:") == 1 and "problems in the config" not in err
    head = "megatron.tensor_model_parallel_size: TP*PP*CP = 3*1*1 = 3 does not divide the 8 GPUs"
    assert err.startswith(f"verl_roles error: {head}")
    assert "actor, ref and critic follow this value" in err
    assert "came from the command line override `megatron.tensor_model_parallel_size=3`" in err
    assert "config files" not in err


def test_an_engine_key_outside_an_engine_sweep_says_to_split_the_sweep(tmp_path, capsys):
    code = main(["-m", "model_engine=dp,megatron", "megatron.tensor_model_parallel_size=2",
                 f"hydra.sweep.dir={tmp_path / 's'}"])
    err = capsys.readouterr().err
    assert code == 2
    assert "add `model_engine=megatron`" not in err
    assert "The sweep `model_engine=dp,megatron` runs both engines" in err
    split = "run one sweep per engine: `-m model_engine=megatron megatron.tensor_model_parallel_size=2 ...`"
    assert split in err


def test_summary_leaves_out_a_critic_that_is_not_trained(tmp_path, capsys):
    # GRPO with the KL term in the actor's loss: no critic, a reference policy.
    grpo = ["algorithm.adv_estimator=grpo", "actor_rollout_ref.actor.use_kl_loss=true"]
    code, out, err = main_in_process(grpo, tmp_path, capsys)
    assert code == 0, err
    rows = [line.split()[0] for line in out.splitlines() if line.startswith("  ")]
    # The last line names the paths still at their placeholders (no model or data set here).
    assert rows == [*(role.name for role in ROLES if role.name != "critic"), "trainer", "to"]
    # The defaults (GAE, no KL term): a critic, and no reference policy (verl builds none, so no row).
    code, out, err = main_in_process([], tmp_path / "gae", capsys)
    rows = [line.split()[0] for line in out.splitlines() if line.startswith("  ")]
    assert rows[:3] == ["actor", "critic", "rollout"] and "ref" not in rows


def _assert_one_paragraph_error(code: int, output: str, tmp_path: Path, phrases: list[str]) -> str:
    assert code == 2, output
    assert "Traceback" not in output, output
    assert output.count("verl_roles error:") == 1, output
    message = output[output.index("verl_roles error:") :]
    for phrase in phrases:
        assert phrase in message, f"{phrase!r} not in:\n{message}"
    assert not (tmp_path / "out" / "resolved.yaml").exists()
    return message


@pytest.mark.parametrize(("args", "phrases"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_cli_mistake_is_one_actionable_paragraph(args, phrases, tmp_path, capsys):
    code, out, err = main_in_process(args, tmp_path, capsys)
    output = out + err
    _assert_one_paragraph_error(code, output, tmp_path, phrases)


def test_yaml_syntax_error_in_a_user_config_dir_names_file_and_line(tmp_path, capsys):
    option = tmp_path / "conf" / "role" / "critic" / "broken.yaml"
    option.parent.mkdir(parents=True)
    option.write_text("# @package critic\noptim:\n  lr: [1e-5\nppo_epochs: 2\n", encoding="utf-8")
    code, out, err = main_in_process(
        ["--config-dir", str(tmp_path / "conf"), "role/critic=broken"], tmp_path, capsys
    )
    output = out + err
    _assert_one_paragraph_error(code, output, tmp_path, ["broken.yaml", "not valid YAML", "line 4"])


@pytest.mark.parametrize(
    "overrides",
    [["trainer.nnodez=2"], ["model_engine=deepspeed"]],
    ids=["unknown-key", "unknown-option"],
)
def test_python_api_raises_our_error_with_the_cli_message(overrides, tmp_path, capsys):
    with pytest.raises(verl_roles.ConfigError) as raised:
        verl_roles.compose(overrides)
    code, out, err = main_in_process(overrides, tmp_path, capsys)
    output = out + err
    assert code == 2
    assert f"verl_roles error: {raised.value}" in output


def test_python_api_names_a_deleted_current_folder(tmp_path, monkeypatch):
    gone = tmp_path / "gone"
    gone.mkdir()
    monkeypatch.chdir(gone)
    gone.rmdir()
    with pytest.raises(verl_roles.ConfigError, match="the current folder: no longer exists"):
        verl_roles.compose([])


@pytest.mark.slow
def test_subprocess_exit_code_no_traceback(in_tmp: Path):
    result = run(["trainer.nnodez=2", "hydra.run.dir=out"], cwd=in_tmp)
    assert_user_error(result, "did you mean `trainer.nnodes`")
    assert result.returncode == 2
    assert not (in_tmp / "out" / "resolved.yaml").exists()


def test_debug_flag_adds_the_traceback_and_keeps_the_verdict(tmp_path, capsys):
    assert main(["trainer.nnodez=2", f"hydra.run.dir={tmp_path}", "--debug"]) == 2
    err = capsys.readouterr().err
    assert "Traceback" in err and "verl_roles.base.errors.ConfigError" in err
    assert err.count("verl_roles error: ") == 1 and "did you mean `trainer.nnodes`" in err


# A mistake for each verl-roles command (its --debug run adds the traceback, its plain run has none).
COMMAND_MISTAKES: dict[str, list[str]] = {
    "show": ["trainer.nnodez=2"],
    "explain": ["trainer.nnodez"],
    "keys": ["nothing.here"],
    "roles": ["trainer.nnodez=2"],
    "diff": ["trainer.nnodez=2", "--"],
    "check-sweep": ["trainer.nnodez=1,2"],
    "export-slime": ["trainer.nnodez=2"],
    "migrate": ["critic.model.lora_rank=4", "critic.model.lora.rank=8"],
}


@pytest.mark.parametrize("how", ["--debug", "HYDRA_FULL_ERROR=1", "VERL_ROLES_DEBUG=1"])
@pytest.mark.parametrize("command", sorted(COMMAND_MISTAKES))
def test_debug_shows_the_traceback_of_every_command_and_only_with_it(command: str, how: str, capsys,
                                                                     monkeypatch):
    from verl_roles.cli import main as cli

    assert cli([command, *COMMAND_MISTAKES[command]]) == 2
    plain = capsys.readouterr().err
    assert "verl_roles error: " in plain and "Traceback" not in plain
    flag = [how] if how.startswith("--") else []
    if not flag:
        monkeypatch.setenv(*how.split("="))
    # The traceback comes on top of the same paragraph and the same exit code.
    assert cli([command, *flag, *COMMAND_MISTAKES[command]]) == 2
    err = capsys.readouterr().err
    assert "Traceback" in err and err.endswith(plain)


def test_every_problem_is_reported_together():
    with pytest.raises(verl_roles.ConfigError) as raised:
        verl_roles.compose(
            [
                "trainer.nnodes=abc",
                "actor_rollout_ref.rollout.name=vlm",
                "actor_rollout_ref.rollout.gpu_memory_utilization=1.5",
                "actor_rollout_ref.actor.clip_ratio_c=0.5",
            ]
        )
    error = raised.value
    assert [p.key for p in error.problems] == [
        "trainer.nnodes",
        "actor_rollout_ref.rollout.name",
        "actor_rollout_ref.rollout.gpu_memory_utilization",
        "actor_rollout_ref.actor.clip_ratio_c",
    ]
    assert str(error).startswith("4 problems in the config:")
    assert "did you mean actor_rollout_ref.rollout.name=vllm?" in str(error)


def test_every_problem_says_where_its_value_came_from():
    with pytest.raises(verl_roles.ConfigError) as info:
        verl_roles.compose(
            ["data.train_batch_size=16", "actor_rollout_ref.rollout.gpu_memory_utilization=1.5"]
        )
    by_key = {problem.key: problem.render() for problem in info.value.problems}
    from_files = by_key["actor_rollout_ref.actor.ppo_mini_batch_size"]
    assert "came from the config files" in from_files
    assert "`verl-roles explain actor_rollout_ref.actor.ppo_mini_batch_size`" in from_files
    from_command_line = by_key["actor_rollout_ref.rollout.gpu_memory_utilization"]
    assert "command line override `actor_rollout_ref.rollout.gpu_memory_utilization=1.5`" in from_command_line
    fix = "Fix: set actor_rollout_ref.rollout.gpu_memory_utilization to a fraction in (0, 1]."
    assert fix in from_command_line


@pytest.mark.parametrize(
    ("args", "phrase"),
    [
        ([], "no command given"),
        (["bogus"], "bogus: is not a command"),
        (["explain"], "no key to explain"),
        (["export-slime", "-o"], "-o: needs a file name"),
        (["migrate", "critic.model.lora_rank=4", "critic.model.lora.rank=8"], "different values"),
    ],
    ids=["no-command", "unknown-command", "explain-no-key", "export-slime-no-file", "migrate-conflict"],
)
def test_verl_roles_command_mistake_is_one_paragraph_on_stderr(args, phrase, capsys):
    from verl_roles.cli import main as cli_main

    code = cli_main(args)
    captured = capsys.readouterr()
    assert code == 2 and not captured.out
    assert captured.err.startswith("verl_roles error: ") and captured.err.count("\n") == 1, captured.err
    assert phrase in captured.err


# Library errors with no typed detail (Hydra's bare texts, OmegaConf errors whose outer message is empty
# or names no key): (case id, overrides, {file: text} under --config-dir, phrases the message carries).
UNTYPED_LIBRARY_ERRORS: list[tuple[str, list[str], dict[str, str], list[str]]] = [
    ("sweep-glob-in-a-run", ["model_engine=glob(*)"], {}, ["single run (no -m)", "-m model_engine=glob(*)"]),
    ("sweep-list-in-a-run", ["model_engine=dp,megatron"], {}, ["single run (no -m)"]),
    ("sweep-range-in-a-run", ["trainer.nnodes=range(1,3)"], {}, ["single run (no -m)"]),
    ("forced-group", ["++model_engine=megatron"], {}, ["model_engine", "`model_engine=megatron`"]),
    ("added-group-that-is-chosen", ["+model_engine=megatron"], {}, ["model_engine", "drop the `+`"]),
    ("a-set-in-a-file", ["+exp=mine"],
     {"exp/mine.yaml": "# @package _global_\ntrainer:\n  logger: !!set {a: null}\n"},
     ["trainer.logger", "!!set"]),
    ("a-null-key-in-a-file", ["+exp=mine"], {"exp/mine.yaml": "# @package _global_\ntrainer:\n  null: x\n"},
     ["trainer", "write every key as a name"]),
    ("a-section-set-to-a-list", ["--config-name", "mine"],
     {"mine.yaml": "defaults:\n  - ppo_trainer\n  - _self_\ncritic: []\n"}, ["mine.yaml", "section"]),
    ("a-list-for-a-single-value", ["trainer.nnodes=${oc.decode:'[1,2]'}"], {},
     ["trainer.nnodes", "plain value"]),
    ("hydra-resolver-in-the-trainer-config", ["trainer.default_local_dir=${hydra:runtime.output_dir}/ckpt"],
     {}, ["trainer.default_local_dir", "${hydra:...}", "write the value itself"]),
]


@pytest.mark.parametrize(("args", "files", "phrases"), [c[1:] for c in UNTYPED_LIBRARY_ERRORS],
                         ids=[c[0] for c in UNTYPED_LIBRARY_ERRORS])
def test_a_library_error_without_typed_detail_is_one_paragraph_with_a_key_and_a_fix_everywhere(
    args: list[str], files: dict[str, str], phrases: list[str], tmp_path: Path, capsys
):
    """The main job, `verl-roles show` and the API word it alike (show and the API passed Hydra's bare text
    on, `config: ...`, some with no text at all)."""
    from verl_roles.cli import main as cli

    for name, text in files.items():
        (tmp_path / "conf" / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "conf" / name).write_text(text, encoding="utf-8")
    flags = ["--config-dir", str(tmp_path / "conf")] if files else []
    code, out, err = main_in_process([*flags, *args], tmp_path, capsys)
    message = _assert_one_paragraph_error(code, out + err, tmp_path, [*phrases, "Fix:"])
    assert not message.startswith("verl_roles error: config:"), message
    assert cli(["show", *flags, *args]) == 2
    shown = capsys.readouterr().err
    assert all(phrase in shown for phrase in [*phrases, "Fix:"]), shown
    config_name = args[args.index("--config-name") + 1] if "--config-name" in args else "ppo_trainer"
    overrides = [a for a in args if a not in ("--config-name", config_name)]
    with pytest.raises(verl_roles.ConfigError) as raised:
        verl_roles.compose(overrides, config_name=config_name, config_dir=flags[1] if flags else None)
    assert all(phrase in str(raised.value) for phrase in [*phrases, "Fix:"]), str(raised.value)


@pytest.mark.parametrize(("kwargs", "phrase"), [
    ({"overrides": None}, "overrides"), ({"overrides": "trainer.nnodes=2"}, "overrides"),
    ({"overrides": [b"trainer.nnodes=2"]}, "overrides"), ({"overrides": {"trainer.nnodes": 2}}, "overrides"),
    ({"config_name": None}, "config_name"), ({"config_name": 5}, "config_name"),
    ({"config_dir": b"/tmp"}, "config_dir"), ({"config_dir": 3}, "config_dir"),
], ids=["none", "one-string", "bytes", "a-dict", "no-name", "int-name", "bytes-dir", "int-dir"])
def test_python_api_arguments_of_the_wrong_type_raise_only_config_error(kwargs: dict, phrase: str):
    with pytest.raises(verl_roles.ConfigError, match=phrase):
        verl_roles.compose(**kwargs)


def test_a_key_set_in_a_users_option_file_is_reported_at_its_file_and_line(tmp_path):
    """A problem with a key that a user's option file sets names that file and line (not a shipped one,
    and not the files in general)."""
    (tmp_path / "role" / "critic").mkdir(parents=True)
    (tmp_path / "role" / "critic" / "slow.yaml").write_text(
        "# @package critic\n# A slower critic.\noptim:\n  lrr: 3.0e-06\n", encoding="utf-8")
    with pytest.raises(verl_roles.ConfigError) as info:
        verl_roles.compose(["role/critic=slow"], config_dir=tmp_path)
    [problem] = info.value.problems
    assert problem.key == "critic.optim.lrr"
    assert f"came from the file {tmp_path / 'role' / 'critic' / 'slow.yaml'}, line 4" in problem.render()


def test_python_api_takes_a_path_object_as_config_dir(tmp_path: Path):
    """A pathlib.Path is how Python code names a folder: refusing it refused a valid input."""
    option = tmp_path / "role" / "critic" / "mine.yaml"
    option.parent.mkdir(parents=True)
    option.write_text("# @package critic\noptim:\n  lr: 3.0e-05\n", encoding="utf-8")
    assert verl_roles.compose(["role/critic=mine"], config_dir=tmp_path).critic.optim.lr == 3.0e-05


def test_hydras_resolver_gets_one_verdict_also_inside_a_running_hydra_app(tmp_path: Path, capsys):
    """Inside the caller's own Hydra app (or after a Hydra job in a notebook) Hydra's job state is set;
    the API and show resolved `${hydra:runtime.output_dir}` against it instead of refusing it as the
    main job does (test_show left such a state behind and test_errors failed after it)."""
    from hydra import compose, initialize_config_dir
    from hydra.core.hydra_config import HydraConfig

    from verl_roles.cli import main as cli

    (tmp_path / "app").mkdir()
    (tmp_path / "app" / "app.yaml").write_text("x: 1\n", encoding="utf-8")
    override = "trainer.default_local_dir=${hydra:runtime.output_dir}/ckpt"
    saved = HydraConfig.instance().cfg
    try:
        with initialize_config_dir(config_dir=str(tmp_path / "app"), **VERSION_BASE):
            HydraConfig.instance().set_config(compose("app", return_hydra_config=True))
            with pytest.raises(verl_roles.ConfigError, match="only a running Hydra job answers"):
                verl_roles.compose([override])
            assert cli(["show", override]) == 2
    finally:
        HydraConfig.instance().cfg = saved
    assert "only a running Hydra job answers" in capsys.readouterr().err


# Terminal escape sequences a hostile file or name may hold: set the window title, clear the screen.
TITLE, CLEAR = "\x1b]0;PWNED\x07", "\x1b[2J"
# The same in a double-quoted YAML scalar (YAML escapes: a file holds no raw control character).
YAML_TITLE, YAML_CLEAR = "\\e]0;PWNED\\a", "\\e[2J"
SLIME_KEY = f'megatron:\n  - role: actor\n    overrides:\n      "lr{YAML_TITLE}": 1\n'
# (id, command, arguments, files) -> a message (error or warning) that echoes the hostile text.
HOSTILE: list[tuple[str, str, list[str], dict[str, str]]] = [
    ("option-file-key", "verl_roles.main", ["--config-dir", "{d}/conf", "role/critic=bad"],
     {"conf/role/critic/bad.yaml": f'# @package critic\noptim:\n  "lr{YAML_TITLE}{YAML_CLEAR}": 1\n'}),
    ("option-file-value", "verl_roles.main", ["--config-dir", "{d}/conf", "role/critic=bad"],
     {"conf/role/critic/bad.yaml": f'# @package critic\nppo_epochs: "two{YAML_CLEAR}"\n'}),
    ("slime-file-key", "verl_roles.main", ["model_engine=megatron", "megatron_config_path={d}/slime.yaml"],
     {"slime.yaml": SLIME_KEY}),
    ("command-line-key", "verl_roles.main", [f"trainer.nnodez{CLEAR}=1"], {}),
    ("command-line-new-key-warning", "verl_roles.main", [f"+trainer.my_note{TITLE}=1"], {}),
    ("config-dir-path", "verl_roles.cli", ["show", "--config-dir", f"{{d}}/no{CLEAR}pe"], {}),
    ("explain-key", "verl_roles.cli", ["explain", f"trainer.x{TITLE}"], {}),
    ("check-sweep-value", "verl_roles.cli", ["check-sweep", f"trainer.project_name=a,b{CLEAR}",
                                             "trainer.nnodes=0"], {}),
]


@pytest.mark.parametrize(("command", "args", "files"), [h[1:] for h in HOSTILE], ids=[h[0] for h in HOSTILE])
def test_hostile_text_in_a_message_is_shown_escaped(command: str, args: list[str], files: dict[str, str],
                                                   tmp_path: Path):
    for name, text in files.items():
        write(tmp_path / name, text)
    args = [arg.replace("{d}", str(tmp_path)) for arg in args]
    if command == "verl_roles.main":
        args.append(f"hydra.run.dir={tmp_path / 'run'}")
    result = run_in_process(args, tmp_path, module=command)
    output = result.stdout + result.stderr
    assert "\x1b" not in output and "\x07" not in output, output
    assert "\\x1b" in output, output


def test_a_current_folder_named_in_another_encoding_gets_one_verdict(tmp_path: Path):
    """A folder whose name holds a Latin-1 byte: every command that writes a run (or plans one: the main
    job, a sweep, check-sweep) refuses it in one paragraph, since the run's UTF-8 files name it (it was exit
    70 once they were written); what writes nothing (show, the API) composes as anywhere else."""
    folder = Path(os.fsdecode(os.fsencode(str(tmp_path)) + b"/caf\xe9"))
    folder.mkdir()
    phrase = "holds a byte that is not UTF-8 text"
    for module, args in (("verl_roles.main", []), ("verl_roles.main", ["-m", "trainer.nnodes=1,2"]),
                         ("verl_roles.cli", ["check-sweep", "trainer.nnodes=1,2"])):
        result = run_in_process(args, folder, module=module)
        assert result.returncode == 2, result.stderr
        assert f"the current folder: is {tmp_path}/caf\\xe9, the folder the command runs in" in result.stderr
        assert phrase in result.stderr
        assert "Traceback" not in result.stderr and list(folder.iterdir()) == []
    assert run_in_process(["show"], folder, module="verl_roles.cli").returncode == 0
    previous = Path.cwd()
    os.chdir(folder)
    try:
        assert verl_roles.compose([]).trainer.nnodes == 1
    finally:
        os.chdir(previous)


def test_a_warning_the_callers_filter_makes_an_error_is_a_config_error_not_a_bug():
    """``warnings.simplefilter("error", InertValueWarning)`` in the caller's process: compose raises
    ConfigError worded as the warning (was "internal error, a bug of verl_roles")."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error", verl_roles.InertValueWarning)
        with pytest.raises(verl_roles.ConfigError) as raised:
            verl_roles.compose(["model_engine=megatron", "actor_rollout_ref.actor.optim.betas=[0.9,0.95]"])
    text = str(raised.value)
    assert "internal error" not in text and "bug" not in text
    assert text.startswith("InertValueWarning: actor_rollout_ref.actor.optim.betas")
    assert "raised as an error by this process's warnings filter" in text

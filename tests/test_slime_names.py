"""slime fidelity, judged against slime's own parser (`parse_megatron_role_args` in slime's
slime/utils/arguments.py): slime's argparse names are read and written, slime's leniency is followed
where it is harmless (a warning), its strictness where it is strict (`megatron: null`)."""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest
import yaml
from conftest import assert_user_error, flat, run_in_process
from omegaconf import OmegaConf

import verl_roles
from verl_roles.cli import main as cli_main
from verl_roles.slime.names import KEYS_BY_NAME

MEGATRON = "model_engine=megatron"

# slime/Megatron names slime applies that verl-roles used to refuse: (role, name, file value, config key,
# resolved value).
NEW_NAMES = [
    ("critic", "micro_batch_size", 2, "critic.ppo_micro_batch_size_per_gpu", 2),
    ("critic", "offload_train", True, "critic.megatron.param_offload", True),
    ("critic", "offload_train", True, "critic.megatron.optimizer_offload", True),
    ("critic", "use_precision_aware_optimizer", "true", "critic.optim.use_precision_aware_optimizer", True),
    ("critic", "exp_avg_dtype", "bf16", "critic.optim.exp_avg_dtype", "bf16"),
    ("critic", "exp_avg_sq_dtype", "bf16", "critic.optim.exp_avg_sq_dtype", "bf16"),
    ("critic", "main_grads_dtype", "bf16", "critic.optim.main_grads_dtype", "bf16"),
    ("actor", "use_dynamic_batch_size", True, "actor_rollout_ref.actor.use_dynamic_bsz", True),
    ("actor", "max_tokens_per_gpu", "8192", "actor_rollout_ref.actor.ppo_max_token_len_per_gpu", 8192),
]


def slime_file(path: Path, entries: dict[str, dict[str, object]], extra: str = "") -> Path:
    items = [{"name": "default", "role": role, "overrides": values} for role, values in entries.items()]
    body = {"megatron": items}
    path.write_text(extra + yaml.safe_dump(body, sort_keys=False), encoding="utf-8")
    return path


def test_slime_names_are_read_through_the_main_job(in_tmp: Path):
    entries: dict[str, dict[str, object]] = {}
    for role, name, value, _, _ in NEW_NAMES:
        entries.setdefault(role, {})[name] = value
    slime_file(in_tmp / "roles.yaml", entries)
    result = run_in_process([MEGATRON, "megatron_config_path=roles.yaml", "hydra.run.dir=out"], cwd=in_tmp)
    assert result.returncode == 0, result.stderr
    resolved = flat(OmegaConf.load(in_tmp / "out" / "resolved.yaml"))
    for _, name, _, key, expected in NEW_NAMES:
        assert resolved[key] == expected, (name, key, resolved[key])
    # The other roles are untouched: the actor keeps the baseline's offload and the optimizer's dtypes.
    assert resolved["actor_rollout_ref.actor.megatron.param_offload"] is False
    assert resolved["actor_rollout_ref.actor.optim.exp_avg_dtype"] == "fp32"


@pytest.mark.parametrize("name", sorted({name for _, name, _, _, _ in NEW_NAMES}))
def test_each_new_name_is_in_the_table(name: str):
    assert name in KEYS_BY_NAME


def export(args: list[str], capsys) -> tuple[int, str, str]:
    code = cli_main(["export-slime", *args])
    captured = capsys.readouterr()
    assert "Traceback" not in captured.out + captured.err
    return code, captured.out, captured.err


def test_export_writes_slime_names_and_reads_back(tmp_path: Path, capsys):
    overrides = [
        MEGATRON,
        "critic.optim.use_precision_aware_optimizer=true",
        "critic.optim.exp_avg_dtype=bf16",
        "critic.optim.main_grads_dtype=bf16",
        "critic.ppo_micro_batch_size_per_gpu=2",
        "critic.megatron.param_offload=true",
        "critic.megatron.optimizer_offload=true",
        "actor_rollout_ref.actor.use_dynamic_bsz=true",
        "actor_rollout_ref.actor.ppo_max_token_len_per_gpu=8192",
    ]
    out = tmp_path / "roles.yaml"
    code, _, err = export([*overrides, "-o", str(out)], capsys)
    assert code == 0, err
    assert "slime has no argument" not in err and "cannot carry" not in err, err
    body = yaml.safe_load(out.read_text(encoding="utf-8"))
    assert body == {"megatron": [
        {"name": "default", "role": "actor", "overrides": {
            "use_dynamic_batch_size": True, "max_tokens_per_gpu": 8192,
        }},
        {"name": "default", "role": "critic", "overrides": {
            "lr": 1e-05, "use_precision_aware_optimizer": True, "exp_avg_dtype": "bf16",
            "main_grads_dtype": "bf16", "offload_train": True, "micro_batch_size": 2,
            # The critic follows the actor's use_dynamic_bsz here; slime's critic would not.
            "use_dynamic_batch_size": True,
        }},
    ]}
    line = next(x for x in out.read_text().splitlines() if x.startswith("# Read it back with: "))
    typed = shlex.split(line.removeprefix("# Read it back with: "))[3:]
    words = [w.replace("=FILE", f"={out}") for w in typed]
    assert words == [MEGATRON, f"megatron_config_path={out}"]
    read_back = flat(verl_roles.compose(words))
    read_back["megatron_config_path"] = None
    assert read_back == flat(verl_roles.compose(overrides))


def test_one_of_two_offload_switches_is_written_as_its_verl_path(capsys):
    code, text, err = export([MEGATRON, "critic.megatron.param_offload=true"], capsys)
    assert code == 0, err
    assert "megatron.param_offload: true" in text and "offload_train" not in text
    assert "slime has no argument for critic megatron.param_offload=true" in err


def test_what_slime_ignores_harmlessly_is_a_warning(in_tmp: Path):
    (in_tmp / "roles.yaml").write_text(
        "comment: exported for the 7B run\n"
        "megatron:\n"
        "  - name: default\n"
        "    role: critic\n"
        "    description: a higher learning rate\n"
        "    overrides: {}\n"
        "    args:\n"
        "      lr: 2e-5\n",
        encoding="utf-8",
    )
    result = run_in_process([MEGATRON, "megatron_config_path=roles.yaml", "hydra.run.dir=out"], cwd=in_tmp)
    assert result.returncode == 0, result.stderr
    assert "top-level key comment ignored: slime reads only the `megatron` list" in result.stderr
    assert "megatron[0] description: is not a key of a slime role entry; slime ignores it" in result.stderr
    # `args` beside an empty `overrides` is read, as slime reads it.
    assert OmegaConf.load(in_tmp / "out" / "resolved.yaml").critic.optim.lr == 2e-5


def test_a_misspelt_field_slime_reads_is_an_error(in_tmp: Path):
    text = "megatron:\n  - role: critic\n    overide: {lr: 2e-5}\n"
    (in_tmp / "roles.yaml").write_text(text, encoding="utf-8")
    result = run_in_process([MEGATRON, "megatron_config_path=roles.yaml", "hydra.run.dir=out"], cwd=in_tmp)
    assert_user_error(result, "megatron[0] overide: is not a key of a slime role entry",
                      "the entry would lose its `overrides`", "did you mean `overrides`?")
    assert not (in_tmp / "out").exists()


@pytest.mark.parametrize(
    "text", ["megatron:\n", "megatron: null\n", "megatron: ~\n"], ids=["empty", "null", "tilde"]
)
def test_a_null_megatron_list_is_refused_as_slime_refuses_it(in_tmp: Path, text: str):
    (in_tmp / "roles.yaml").write_text(text, encoding="utf-8")
    result = run_in_process([MEGATRON, "megatron_config_path=roles.yaml", "hydra.run.dir=out"], cwd=in_tmp)
    assert_user_error(result, "megatron_config_path=roles.yaml: `megatron:` is empty (null)",
                      "slime refuses it", "Fix: list the entries under `megatron:`", "megatron: []")
    output = result.stdout + result.stderr
    assert len([line for line in output.splitlines() if "megatron:` is empty" in line]) == 1
    assert not (in_tmp / "out").exists()


def test_an_empty_megatron_list_changes_no_role(tmp_path: Path):
    path = tmp_path / "roles.yaml"
    path.write_text("megatron: []\n", encoding="utf-8")
    with_file = flat(verl_roles.compose([MEGATRON, f"megatron_config_path={path}"]))
    with_file["megatron_config_path"] = None
    assert with_file == flat(verl_roles.compose([MEGATRON]))


def verdict(overrides: list[str]) -> str:
    try:
        verl_roles.compose(overrides)
    except verl_roles.ConfigError:
        return "refused"
    return "accepted"


@pytest.mark.parametrize(
    ("name", "value", "key"),
    [
        ("use_precision_aware_optimizer", "maybe", "critic.optim.use_precision_aware_optimizer"),
        ("use_precision_aware_optimizer", "false", "critic.optim.use_precision_aware_optimizer"),
        ("micro_batch_size", "two", "critic.ppo_micro_batch_size_per_gpu"),
        ("micro_batch_size", "4", "critic.ppo_micro_batch_size_per_gpu"),
        ("max_tokens_per_gpu", "-5", "critic.ppo_max_token_len_per_gpu"),
        ("exp_avg_dtype", "bf16", "critic.optim.exp_avg_dtype"),
        ("offload_train", "yes please", "critic.megatron.param_offload"),
    ],
)
def test_the_file_and_the_command_line_give_one_verdict(tmp_path: Path, name: str, value: str, key: str):
    path = tmp_path / "roles.yaml"
    text = f"megatron:\n  - role: critic\n    overrides:\n      {name}: {value!r}\n"
    path.write_text(text, encoding="utf-8")
    from_file = verdict([MEGATRON, f"megatron_config_path={path}"])
    typed = verdict([MEGATRON, f"{key}={value.replace(' ', '_')}"])
    assert from_file == typed, (name, value, from_file, typed)

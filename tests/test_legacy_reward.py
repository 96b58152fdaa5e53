"""Old reward keys keep working, never silently: each reaches verl 0.9.1's `reward.*` with a warning, or,
with no current equivalent, is an error naming what replaced it (a value that is what verl does anyway
is dropped with a warning). Through ``verl_roles.compose``, config files, the CLI and ``migrate``.
"""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest
from conftest import DATA, assert_user_error, read_overrides, run_in_process, write
from omegaconf import OmegaConf

import verl_roles
from verl_roles import legacy
from verl_roles.inputs.paths import dotted, leaves

REWARD_PREFIXES = ("reward_model.", "custom_reward_function.", "sandbox_fusion.", "reward_manager.")
EXAMPLES = DATA / "verl_examples"


def compose_warned(overrides: list[str], **kwargs: str) -> tuple[object, list[str]]:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        cfg = verl_roles.compose(overrides, **kwargs)
    return cfg, [str(w.message) for w in caught]


# One value per leaf key the table maps: (old key, value as typed, value expected at the new key).
SAMPLE_VALUES = {
    "reward_model.num_workers": ("4", 4),
    "reward_model.reward_manager": ("dapo", "dapo"),
    "reward_model.reward_loop_source": ("importlib", "importlib"),
    "reward_model.reward_loop_module_path": ("/m.py", "/m.py"),
    "reward_model.reward_loop_class_name": ("MyManager", "MyManager"),
    "reward_model.enable": ("true", True),
    "reward_model.enable_resource_pool": ("true", True),
    "reward_model.n_gpus_per_node": ("4", 4),
    "reward_model.nnodes": ("1", 1),
    "reward_model.model.path": ("/models/rm", "/models/rm"),
    "reward_model.rollout.tensor_model_parallel_size": ("4", 4),
    "reward_model.rollout.gpu_memory_utilization": ("0.3", 0.3),
    "custom_reward_function.path": ("/r.py", "/r.py"),
    "custom_reward_function.name": ("my_score", "my_score"),
    "sandbox_fusion.url": ("http://sandbox", "http://sandbox"),
    "sandbox_fusion.max_concurrent": ("8", 8),
    "reward_model.sandbox_fusion.url": ("http://sandbox", "http://sandbox"),
    "reward_model.sandbox_fusion.memory_limit_mb": ("512", 512),
    "reward_manager.name": ("dapo", "dapo"),
    "reward_manager.module.path": ("/m.py", "/m.py"),
}


def test_every_reward_entry_of_the_table_has_a_sample():
    olds = {entry.old for entry in legacy.LEGACY_KEYS if entry.reason == legacy._REWARD_REASON}
    covered = {old for old in olds if any(key == old or key.startswith(old + ".") for key in SAMPLE_VALUES)}
    assert olds - covered == {"reward_model.reward_kwargs"}  # tested on its own (a `+` key)


@pytest.mark.parametrize(("old", "typed", "expected"), [(k, *v) for k, v in SAMPLE_VALUES.items()])
def test_an_old_reward_key_reaches_reward_with_a_warning(old, typed, expected):
    new = legacy.find(old)[1]
    assert new.startswith("reward.")
    cfg, messages = compose_warned([f"{old}={typed}"])
    assert OmegaConf.select(cfg, new) == expected
    assert any(f"{old} is a deprecated key; it now sets {new}" in m for m in messages), messages
    # verl 0.9.1's own legacy keys stay in the config, null, as verl's config has them.
    assert OmegaConf.select(cfg, old, default="absent") in (None, "absent")


def test_reward_kwargs_added_with_plus_keep_their_plus():
    cfg, messages = compose_warned(
        [
            "+reward_model.reward_kwargs.max_resp_len=4096",
            "+reward_model.reward_kwargs.overlong_buffer_cfg.len=512",
        ]
    )
    assert cfg.reward.reward_kwargs.max_resp_len == 4096
    assert cfg.reward.reward_kwargs.overlong_buffer_cfg.len == 512
    assert any("was read as `+reward.reward_kwargs.max_resp_len=4096`" in m for m in messages)


def test_a_partial_legacy_section_keeps_the_current_defaults():
    cfg, _ = compose_warned(["custom_reward_function.path=/r.py"])
    assert cfg.reward.custom_reward_function.name == "compute_score"


def test_old_and_current_spelling_with_different_values_is_an_error():
    with pytest.raises(verl_roles.ConfigError, match="deprecated spelling of reward.reward_model.enable"):
        compose_warned(["reward_model.enable=true", "reward.reward_model.enable=false"])


def test_the_same_value_under_both_spellings_is_accepted():
    cfg, _ = compose_warned(["reward_model.reward_manager=dapo", "reward.reward_manager.name=dapo"])
    assert cfg.reward.reward_manager.name == "dapo"


# --- keys with no current equivalent ---------------------------------------------------------------

REFUSED = [
    ("reward_model.use_reward_loop", "false"),
    ("reward_model.strategy", "fsdp"),
    ("reward_model.micro_batch_size_per_gpu", "32"),
    ("reward_model.micro_batch_size", "64"),
    ("reward_model.max_length", "4096"),
    ("reward_model.use_dynamic_bsz", "true"),
    ("reward_model.forward_max_token_len_per_gpu", "8192"),
    ("reward_model.ulysses_sequence_parallel_size", "2"),
    ("reward_model.model.use_remove_padding", "true"),
    ("reward_model.model.fsdp_config.param_offload", "true"),
    ("reward_model.model.input_tokenizer", "/tok"),
    ("reward_model.model.trust_remote_code", "true"),
    ("reward_model.megatron.tensor_model_parallel_size", "2"),
]


def test_every_removed_entry_is_exercised():
    exercised = {legacy.find_removed(key).old for key, _ in REFUSED}
    exercised |= {"reward_model.launch_reward_fn_async"}
    untested = {e.old for e in legacy.REMOVED_KEYS} - exercised
    # The rest share the wording of the reward-model worker entries tested above.
    assert all(legacy.find_removed(old).replaced_by == legacy._RM_WORKER for old in untested)


@pytest.mark.parametrize(("key", "typed"), REFUSED)
def test_a_key_with_no_current_equivalent_is_an_error_naming_what_replaced_it(key, typed):
    with pytest.raises(verl_roles.ConfigError) as info:
        compose_warned([f"{key}={typed}"])
    (problem,) = info.value.problems
    assert problem.key == key
    assert "no equivalent" in problem.message
    assert "reward" in problem.fix and "remove it" in problem.fix
    assert f"`{key}={typed}`" in problem.render()


@pytest.mark.parametrize(
    ("key", "typed"),
    [
        ("reward_model.use_reward_loop", "true"),
        ("reward_model.launch_reward_fn_async", "true"),
        ("reward_model.launch_reward_fn_async", "false"),
    ],
)
def test_a_value_that_is_what_verl_does_anyway_is_dropped_with_a_warning(key, typed):
    _, messages = compose_warned([f"{key}={typed}"])
    expected = f"{key}={typed.capitalize()} is a legacy key with no current equivalent"
    assert any(m.startswith(expected) for m in messages)


def test_the_cli_refuses_a_removed_key_with_one_paragraph(in_tmp):
    result = run_in_process(["reward_model.micro_batch_size_per_gpu=32", "hydra.run.dir=out"], cwd=in_tmp)
    assert_user_error(
        result, "reward_model.micro_batch_size_per_gpu: is a legacy key", "reward.reward_model.rollout"
    )
    assert not (in_tmp / "out").exists()


# --- config files ------------------------------------------------------------------------------------

PRIMARY = """\
defaults:
  - ppo_trainer
  - _self_

reward_model:
  enable: true
  model:
    path: /models/rm
  rollout:
    gpu_memory_utilization: 0.4
  use_reward_loop: true
custom_reward_function:
  path: /r.py
"""


def test_old_reward_keys_in_a_config_file_move_to_reward(tmp_path: Path):
    write(tmp_path / "conf" / "old_run.yaml", PRIMARY)
    cfg, messages = compose_warned([], config_name="old_run", config_dir=str(tmp_path / "conf"))
    assert cfg.reward.reward_model.enable is True
    assert cfg.reward.reward_model.model_path == "/models/rm"
    assert cfg.reward.reward_model.rollout.gpu_memory_utilization == 0.4
    assert cfg.reward.custom_reward_function.path == "/r.py"
    assert cfg.reward_model.enable is None and cfg.custom_reward_function.path is None
    assert "use_reward_loop" not in cfg.reward_model
    moved = "reward_model.enable is a deprecated key; it now sets reward.reward_model.enable"
    assert any(moved in m for m in messages)
    assert any("reward_model.use_reward_loop=true is a legacy key" in m.lower() for m in messages)


def test_a_removed_key_in_a_config_file_is_an_error(tmp_path: Path):
    section = "custom_reward_function:"
    text = PRIMARY.replace(section, f"  micro_batch_size_per_gpu: 32\n{section}")
    write(tmp_path / "conf" / "old_run.yaml", text)
    with pytest.raises(verl_roles.ConfigError) as info:
        compose_warned([], config_name="old_run", config_dir=str(tmp_path / "conf"))
    (problem,) = info.value.problems
    assert problem.key == "reward_model.micro_batch_size_per_gpu" and problem.origin == "a config file"


# --- migrate -------------------------------------------------------------------------------------------


def test_migrate_prints_the_modern_reward_line(in_tmp):
    result = run_in_process(
        [
            "migrate",
            "reward_model.enable=True",
            "reward_model.model.path=/rm",
            "reward_model.use_reward_loop=True",
            "+reward_model.reward_kwargs.max_resp_len=4096",
            "reward_model.micro_batch_size_per_gpu=32",
        ],
        cwd=in_tmp,
        module="verl_roles.cli",
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == [
        "reward.reward_model.enable=True",
        "reward.reward_model.model_path=/rm",
        "+reward.reward_kwargs.max_resp_len=4096",
    ]
    assert "reward_model.use_reward_loop=True dropped, no current equivalent:" in result.stderr
    assert "reward_model.micro_batch_size_per_gpu=32 dropped, no current equivalent (review" in result.stderr


# --- verl's own example launches -------------------------------------------------------------------------


def legacy_reward_overrides(path: Path) -> list[str]:
    return [o for o in read_overrides(path) if o.lstrip("+").startswith(REWARD_PREFIXES)]


LAUNCHES = sorted(p for p in EXAMPLES.glob("*/*.txt") if legacy_reward_overrides(p))


def test_the_corpus_has_legacy_reward_launches():
    assert len(LAUNCHES) >= 30
    assert sum(len(legacy_reward_overrides(p)) for p in LAUNCHES) >= 200


@pytest.mark.parametrize("path", LAUNCHES, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_no_legacy_reward_override_of_an_example_is_silent(path):
    """Each old reward override of the launch reaches reward.* with a warning naming it, or the
    launch is refused naming it (composed alone: the launch's other keys are tested elsewhere)."""
    overrides = legacy_reward_overrides(path)
    keys = [o.lstrip("+").partition("=")[0] for o in overrides]
    try:
        cfg, messages = compose_warned(overrides)
    except verl_roles.ConfigError as error:
        # Refused: only for keys with no current equivalent, each named.
        assert error.problems and all(legacy.find_removed(p.key) and p.key in keys for p in error.problems)
        return
    for key in keys:
        assert any(m.startswith(key) for m in messages), f"no warning names {key}"
        hit = legacy.find(key)
        if hit is not None:
            assert hit[1].startswith("reward.")
            assert OmegaConf.select(cfg, hit[1], default="absent") != "absent"


def test_every_leaf_of_verls_legacy_reward_sections_is_mapped():
    stock = verl_roles.compose([])
    for section in ("reward_model", "custom_reward_function", "sandbox_fusion"):
        for key, _ in leaves(OmegaConf.to_container(stock[section]), (section,)):
            name = dotted(key)
            assert legacy.find(name) or legacy.find_removed(name), f"{name} maps nowhere"

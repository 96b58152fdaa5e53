"""Values verl would not read (issue 27): named, with the setting that makes them inert and verl's lines,
through every channel a user sets a value by; quiet for what the user did not set; a sweep over them is
refused. And the paths only the user can know, named until they are set."""

from __future__ import annotations

import fnmatch
import warnings
from pathlib import Path

import pytest
from conftest import run_in_process, write

import verl_roles
from verl_roles.base import releases
from verl_roles.upstream.inert_table import ROWS

KL_COEF = "algorithm.kl_ctrl.kl_coef=0.01"
A, RO, RF = "actor_rollout_ref.actor", "actor_rollout_ref.rollout", "actor_rollout_ref.ref"


def inert_messages(overrides: list[str], **kwargs: object) -> list[str]:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        verl_roles.compose(overrides, **kwargs)
    return [str(w.message) for w in caught if issubclass(w.category, verl_roles.InertValueWarning)]


def test_a_kl_coefficient_with_the_kl_term_off_is_named_with_the_setting_and_verls_line():
    (message,) = inert_messages([KL_COEF])
    assert message.startswith("algorithm.kl_ctrl.kl_coef (command line) would do nothing: here "
                              "algorithm.use_kl_in_reward=false")
    assert "verl 0.9.1: verl/trainer/ppo/v1/trainer_base.py:" in message
    assert "Fix: set algorithm.use_kl_in_reward=true" in message


def test_the_same_value_with_the_setting_on_is_quiet():
    assert inert_messages([KL_COEF, "algorithm.use_kl_in_reward=true"]) == []


def test_nothing_the_user_did_not_set_is_named():
    # verl's defaults hold inert values (clip_ratio beside clip_ratio_low/high, the ref's settings with no
    # KL term, the kl_ctrl block): not the user's doing, so quiet.
    for engine in ("dp", "megatron"):
        assert inert_messages([f"model_engine={engine}"]) == []


@pytest.mark.parametrize(
    ("overrides", "named", "setting"),
    [
        ([f"{A}.kl_loss_coef=0.1"], f"{A}.kl_loss_coef",
         f"{A}.use_kl_loss=false"),
        ([f"{RF}.fsdp_config.param_offload=true"], f"{RF}.fsdp_config",
         "no KL term"),
        ([f"{A}.use_kl_loss=true", "actor_rollout_ref.model.lora.rank=8",
          f"{RO}.name=sglang", f"{RF}.fsdp_config.param_offload=true"],
         f"{RF}.fsdp_config.param_offload", "LoRA on the policy"),
        ([f"{A}.use_dynamic_bsz=true", f"{A}.ppo_micro_batch_size_per_gpu=8"],
         f"{A}.ppo_micro_batch_size_per_gpu", f"{A}.use_dynamic_bsz=true"),
        (["critic.ppo_micro_batch_size_per_gpu=8"], "critic.ppo_micro_batch_size_per_gpu",
         "a critic is trained"),
        (["algorithm.adv_estimator=grpo", "critic.optim.lr=1e-4"], "critic.optim.lr",
         "algorithm.adv_estimator=grpo trains no critic"),
        ([f"+{RO}.engine_kwargs.sglang.attention_backend=fa3"],
         f"{RO}.engine_kwargs.sglang.attention_backend", f"{RO}.name=vllm"),
        ([f"{A}.clip_ratio=0.3"], f"{A}.clip_ratio",
         f"{A}.clip_ratio_low=0.2"),
        (["model_engine=megatron", f"{A}.optim.betas=[0.9,0.98]"],
         f"{A}.optim.betas", "model_engine=megatron"),
        (["algorithm.adv_estimator=grpo", "algorithm.lam=0.95"], "algorithm.lam",
         "algorithm.adv_estimator=grpo"),
    ],
)
def test_each_class_of_inert_value_is_named(overrides: list[str], named: str, setting: str):
    messages = inert_messages(overrides)
    assert any(named in m and setting in m for m in messages), messages


def test_a_backends_own_engine_kwargs_are_read():
    assert inert_messages(["actor_rollout_ref.rollout.name=sglang",
                           "+actor_rollout_ref.rollout.engine_kwargs.sglang.attention_backend=fa3"]) == []


def test_an_estimator_verl_does_not_register_is_never_judged():
    # A user's registered estimator may read lam: only names of verl's own registry are judged.
    messages = inert_messages(["algorithm.adv_estimator=my_registered_estimator", "algorithm.lam=0.9"])
    assert not any("algorithm.lam" in m for m in messages)


# --- channels: the same value gets the same verdict whatever brought it --------------------------------


def test_an_option_file_an_own_primary_config_and_a_slime_file_are_named_with_their_file(tmp_path: Path):
    confdir = tmp_path / "myconf"
    write(confdir / "role" / "actor" / "kl.yaml", "# @package actor_rollout_ref.actor\nkl_loss_coef: 0.2\n")
    option = inert_messages(["role/actor=kl"], config_dir=str(confdir))
    assert any(f"{A}.kl_loss_coef (the file" in m and "kl.yaml" in m for m in option), option
    write(confdir / "mine.yaml", "defaults:\n  - ppo_trainer\n  - _self_\nalgorithm:\n  kl_ctrl:\n"
                                 "    kl_coef: 0.3\n")
    primary = inert_messages([], config_name="mine", config_dir=str(confdir))
    assert any("algorithm.kl_ctrl.kl_coef (the file" in m and "mine.yaml" in m for m in primary), primary
    slime = write(tmp_path / "roles.yaml", "megatron:\n  - role: critic\n    overrides: {lr: 1e-5}\n")
    from_slime = inert_messages(["model_engine=megatron", f"megatron_config_path={slime}",
                                 "algorithm.adv_estimator=grpo"])
    assert any("critic.optim.lr (" in m and "roles.yaml" in m and "trains no critic" in m for m in from_slime)


def test_the_main_job_names_them_in_its_summary_and_writes_the_run(tmp_path: Path):
    result = run_in_process([KL_COEF, "hydra.run.dir=out"], cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "verl_roles warning: algorithm.kl_ctrl.kl_coef (command line) would do nothing" in result.stderr
    assert "inert   verl would not read: algorithm.kl_ctrl.kl_coef (under algorithm.use_kl_in_reward=false)" \
        in result.stdout
    assert (tmp_path / "out" / "resolved.yaml").is_file()


# --- sweeps -------------------------------------------------------------------------------------------


def test_a_sweep_over_an_inert_value_is_refused_before_anything_is_written(tmp_path: Path):
    args = ["-m", "algorithm.kl_ctrl.kl_coef=0.001,0.01", "hydra.sweep.dir=sweep"]
    result = run_in_process(args, cwd=tmp_path)
    assert result.returncode == 2, result.stdout + result.stderr
    assert "would train the same config" in result.stderr
    assert "algorithm.use_kl_in_reward=false" in result.stderr
    assert "Traceback" not in result.stderr and not (tmp_path / "sweep").exists()
    check = run_in_process(["check-sweep", "algorithm.kl_ctrl.kl_coef=0.001,0.01"], cwd=tmp_path,
                           module="verl_roles.cli")
    assert check.returncode == 2 and "would train the same config" in check.stderr


def test_a_sweep_over_it_with_the_setting_on_runs(tmp_path: Path):
    args = ["check-sweep", "algorithm.kl_ctrl.kl_coef=0.001,0.01", "algorithm.use_kl_in_reward=true"]
    result = run_in_process(args, cwd=tmp_path, module="verl_roles.cli")
    assert result.returncode == 0, result.stderr


# --- the table ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("release", releases.supported())
def test_every_row_of_a_release_cites_verl_and_names_keys_its_config_has(release: str):
    cited = releases.inert_sources(release)
    assert cited, f"verl {release} cites no row: freeze it again (scripts/freeze_verl_reference.py)"
    keys = releases.surface(release)
    for row in ROWS:
        if row.id not in cited:
            continue
        assert all(line.startswith("verl/") and line.rsplit(":", 1)[1].isdigit() for line in cited[row.id])
        # Some keys of a row exist in other releases only (sapo's policy_loss.tau_pos): one must be here.
        patterns = [glob.replace("{s}", scope).replace("{other}", "*").removesuffix(".*")
                    for glob in row.keys for scope in row.scopes or ("",)]
        assert any(fnmatch.filter(keys, pattern) for pattern in patterns), (row.id, row.keys)
    assert set(cited) <= {row.id for row in ROWS}


# --- paths only the user can know ---------------------------------------------------------------------


def test_the_summary_names_the_paths_still_at_their_placeholders(tmp_path: Path):
    result = run_in_process(["model_engine=megatron", "hydra.run.dir=out"], cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    line = next(line for line in result.stdout.splitlines() if "to set" in line)
    for key in ("actor_rollout_ref.model.path", "data.train_files", "data.val_files"):
        assert key in line
    assert "critic.model.path" not in line  # it follows the policy's model
    done = run_in_process(["actor_rollout_ref.model.path=/m", "data.train_files=/t.parquet",
                           "data.val_files=/v.parquet", "hydra.run.dir=out2"], cwd=tmp_path)
    assert done.returncode == 0 and "to set" not in done.stdout

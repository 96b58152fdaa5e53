"""slime's meaning, not only its names (issue 30, item 4): a slime name sets the verl key that has the
effect slime gives it, in the engine that runs (Megatron: a slime file is Megatron-only), or it is refused
with the reason. Each case goes both ways: a slime file read by the main job as a user types it, and
`verl-roles export-slime` writing the file slime reads."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from conftest import assert_user_error, flat, run_in_process
from omegaconf import OmegaConf

import verl_roles
from verl_roles.cli import main as cli_main

MEGATRON = "model_engine=megatron"
ACTOR_OPTIM = "actor_rollout_ref.actor.optim"


def slime_file(path: Path, entries: dict[str, dict[str, object]]) -> Path:
    items = [{"name": "default", "role": role, "overrides": values} for role, values in entries.items()]
    path.write_text(yaml.safe_dump({"megatron": items}, sort_keys=False), encoding="utf-8")
    return path


def main_job(cwd: Path, *overrides: str, run_dir: str = "out") -> dict[str, object]:
    """The resolved config the main job writes for ``overrides`` (typed in ``cwd``)."""
    result = run_in_process([MEGATRON, *overrides, f"hydra.run.dir={run_dir}"], cwd=cwd)
    assert result.returncode == 0, result.stdout + result.stderr
    return flat(OmegaConf.load(cwd / run_dir / "resolved.yaml"))


def export(capsys, *overrides: str) -> dict[str, dict[str, object]]:
    """Role -> overrides of the file `verl-roles export-slime` prints for ``overrides``."""
    code = cli_main(["export-slime", MEGATRON, *overrides])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert "Traceback" not in captured.out + captured.err
    body = yaml.safe_load(captured.out)
    return {entry["role"]: entry["overrides"] for entry in body["megatron"]}


# ---------------------------------------------------------------------------------------------------
# Adam's coefficients reach Megatron-Core's OptimizerConfig: verl's Megatron optimizer setup never
# passes optim.betas, and passes every key of optim.override_optimizer_config.


def test_adam_coefficients_reach_the_megatron_optimizer(in_tmp: Path):
    slime_file(in_tmp / "roles.yaml", {
        "actor": {"adam_beta1": 0.8, "adam_beta2": "0.98", "adam_eps": "1e-6"},
        "critic": {"adam_beta2": 0.95, "sgd_momentum": 0.5},
    })
    resolved = main_job(in_tmp, "megatron_config_path=roles.yaml")
    overrides = f"{ACTOR_OPTIM}.override_optimizer_config"
    assert resolved[f"{overrides}.adam_beta1"] == 0.8
    assert resolved[f"{overrides}.adam_beta2"] == 0.98
    assert resolved[f"{overrides}.adam_eps"] == 1e-6
    assert resolved["critic.optim.override_optimizer_config.adam_beta2"] == 0.95
    assert resolved["critic.optim.override_optimizer_config.sgd_momentum"] == 0.5
    # optim.betas, which the Megatron optimizer never reads, is not where slime's values go.
    assert resolved[f"{ACTOR_OPTIM}.betas"] == [0.9, 0.999]
    assert resolved["critic.optim.betas"] == [0.9, 0.999]


def test_adam_coefficients_are_exported_under_slime_names(capsys):
    overrides = (
        f"+{ACTOR_OPTIM}.override_optimizer_config.adam_beta2=0.98",
        f"+{ACTOR_OPTIM}.override_optimizer_config.adam_eps=1e-6",
    )
    assert export(capsys, *overrides)["actor"] == {"adam_beta2": 0.98, "adam_eps": 1e-6}
    # optim.betas does nothing under Megatron: it is written as its verl path, never as adam_beta*,
    # which would give slime's Adam coefficients that verl's does not have.
    actor = export(capsys, f"{ACTOR_OPTIM}.betas=[0.8,0.98]")["actor"]
    assert actor == {"optim.betas": [0.8, 0.98]}


def test_adam_coefficients_round_trip(tmp_path: Path, capsys):
    typed = [MEGATRON, f"+{ACTOR_OPTIM}.override_optimizer_config.adam_beta1=0.85"]
    out = tmp_path / "roles.yaml"
    assert cli_main(["export-slime", *typed[1:], MEGATRON, "-o", str(out)]) == 0, capsys.readouterr().err
    read_back = flat(verl_roles.compose([MEGATRON, f"megatron_config_path={out}"]))
    read_back["megatron_config_path"] = None
    assert read_back == flat(verl_roles.compose(typed))


# ---------------------------------------------------------------------------------------------------
# Schedule lengths: slime counts optimizer steps, verl's Megatron scheduler advances once per trainer
# step, which takes ppo_epochs * train_batch_size / ppo_mini_batch_size optimizer steps (4 by default).


def test_schedule_lengths_are_converted_to_trainer_steps(in_tmp: Path):
    slime_file(in_tmp / "roles.yaml", {
        "actor": {"lr_warmup_iters": 8, "lr_decay_iters": 100, "lr_wsd_decay_iters": "20"},
        "critic": {"lr_warmup_iters": 16, "lr_decay_iters": None},
    })
    result = run_in_process(
        [MEGATRON, "megatron_config_path=roles.yaml", "critic.ppo_epochs=2", "hydra.run.dir=out"], cwd=in_tmp
    )
    assert result.returncode == 0, result.stderr
    assert ("lr_warmup_iters=8: 8 optimizer steps = 2 trainer steps of 4 optimizer steps "
            "(actor_rollout_ref.actor.ppo_epochs=1 x data.train_batch_size=1024 / "
            "actor_rollout_ref.actor.ppo_mini_batch_size=256)") in result.stderr
    resolved = flat(OmegaConf.load(in_tmp / "out" / "resolved.yaml"))
    assert resolved[f"{ACTOR_OPTIM}.lr_warmup_steps"] == 2
    assert resolved[f"{ACTOR_OPTIM}.lr_decay_steps"] == 25
    assert resolved[f"{ACTOR_OPTIM}.lr_wsd_decay_steps"] == 5
    # The critic's trainer step takes 8 optimizer steps (its own ppo_epochs=2); null is the whole run.
    assert resolved["critic.optim.lr_warmup_steps"] == 2
    assert resolved["critic.optim.lr_decay_steps"] is None


def test_no_warmup_means_the_same_in_both_units(tmp_path: Path):
    path = slime_file(tmp_path / "roles.yaml", {"actor": {"lr_warmup_iters": 0}})
    # Even where a trainer step takes no whole number of optimizer steps (1024 prompts, mini-batches of 384).
    mini = "actor_rollout_ref.actor.ppo_mini_batch_size=384"
    cfg = verl_roles.compose([MEGATRON, f"megatron_config_path={path}", mini])
    assert cfg.actor_rollout_ref.actor.optim.lr_warmup_steps == 0


def test_a_count_that_is_no_whole_number_of_trainer_steps_is_refused(in_tmp: Path):
    slime_file(in_tmp / "roles.yaml", {"critic": {"lr_warmup_iters": 10}})
    result = run_in_process([MEGATRON, "megatron_config_path=roles.yaml", "hydra.run.dir=out"], cwd=in_tmp)
    assert_user_error(
        result, "megatron[0] (role critic) lr_warmup_iters: lr_warmup_iters=10 counts optimizer steps",
        "verl steps the scheduler once per trainer step", "each trainer step takes 4 optimizer steps",
        "Fix: write a multiple of 4 (8 or 12)", "`optim.lr_warmup_steps: N` in the entry",
    )
    assert not (in_tmp / "out").exists()


def test_a_count_is_refused_when_the_config_does_not_give_the_ratio(in_tmp: Path):
    slime_file(in_tmp / "roles.yaml", {"actor": {"lr_decay_iters": 400}})
    result = run_in_process(
        [MEGATRON, "megatron_config_path=roles.yaml", "data.gen_batch_size=2048", "hydra.run.dir=out"],
        cwd=in_tmp,
    )
    assert_user_error(result, "lr_decay_iters", "a trainer step trains on data.gen_batch_size=2048 prompts",
                      "`optim.lr_decay_steps: N` in the entry")
    # The count in trainer steps, as the verl path, is read as it is.
    slime_file(in_tmp / "roles.yaml", {"actor": {"optim.lr_decay_steps": 40}})
    resolved = main_job(in_tmp, "megatron_config_path=roles.yaml", "data.gen_batch_size=2048", run_dir="out2")
    assert resolved[f"{ACTOR_OPTIM}.lr_decay_steps"] == 40


def test_schedule_lengths_are_exported_in_optimizer_steps(tmp_path: Path, capsys):
    typed = [
        MEGATRON, f"{ACTOR_OPTIM}.lr_warmup_steps=2", "critic.optim.lr_decay_steps=10", "critic.ppo_epochs=2",
    ]
    written = export(capsys, *typed[1:])
    assert written["actor"] == {"lr_warmup_iters": 8}
    assert written["critic"] == {"lr": 1e-05, "lr_decay_iters": 80}
    out = tmp_path / "roles.yaml"
    assert cli_main(["export-slime", *typed, "-o", str(out)]) == 0, capsys.readouterr().err
    read_back = flat(verl_roles.compose([MEGATRON, "critic.ppo_epochs=2", f"megatron_config_path={out}"]))
    read_back["megatron_config_path"] = None
    assert read_back == flat(verl_roles.compose(typed))


def test_a_length_with_no_ratio_is_exported_as_its_verl_path(capsys):
    # 1024 prompts do not split into mini-batches of 384: no whole number of optimizer steps per step.
    mini = "actor_rollout_ref.actor.ppo_mini_batch_size=384"
    written = export(capsys, f"{ACTOR_OPTIM}.lr_warmup_steps=2", mini)
    assert written["actor"] == {"optim.lr_warmup_steps": 2}


def test_explain_shows_the_file_count_and_its_conversion(tmp_path: Path, capsys):
    path = slime_file(tmp_path / "roles.yaml", {"actor": {"lr_warmup_iters": 8}})
    code = cli_main(["explain", f"{ACTOR_OPTIM}.lr_warmup_steps", MEGATRON, f"megatron_config_path={path}"])
    out = capsys.readouterr().out
    assert code == 0
    assert f"{ACTOR_OPTIM}.lr_warmup_steps = 2" in out
    assert "overrides.lr_warmup_iters (8 optimizer steps = 2 trainer steps of 4 optimizer steps" in out

def test_a_warmup_given_both_ways_is_refused(in_tmp: Path):
    # slime uses the fraction when it is set, verl the steps when they are positive: opposite choices.
    slime_file(in_tmp / "roles.yaml", {"actor": {"lr_warmup_fraction": 0.1, "lr_warmup_iters": 8}})
    result = run_in_process([MEGATRON, "megatron_config_path=roles.yaml", "hydra.run.dir=out"], cwd=in_tmp)
    assert_user_error(result, "sets both `lr_warmup_fraction` and `lr_warmup_iters`",
                      "slime would warm up by the fraction", "Fix: keep one of them")


# ---------------------------------------------------------------------------------------------------
# The critic's dynamic batching: verl's critic follows the actor's use_dynamic_bsz, slime's critic gets
# the common baseline unless its own entry sets use_dynamic_batch_size.


def test_an_actor_only_dynamic_batch_size_leaves_the_critic_at_the_baseline(in_tmp: Path):
    slime_file(in_tmp / "roles.yaml", {"actor": {"use_dynamic_batch_size": True}})
    result = run_in_process([MEGATRON, "megatron_config_path=roles.yaml", "hydra.run.dir=out"], cwd=in_tmp)
    assert result.returncode == 0, result.stderr
    assert "critic.use_dynamic_bsz keeps false, its value without the slime file" in result.stderr
    resolved = flat(OmegaConf.load(in_tmp / "out" / "resolved.yaml"))
    assert resolved["actor_rollout_ref.actor.use_dynamic_bsz"] is True
    assert resolved["critic.use_dynamic_bsz"] is False
    # The baseline is what the command line gives, as in slime.
    typed = ("megatron_config_path=roles.yaml", "critic.use_dynamic_bsz=true")
    resolved = main_job(in_tmp, *typed, run_dir="out2")
    assert resolved["critic.use_dynamic_bsz"] is True


def test_the_critic_dynamic_batch_size_is_kept_on_export(tmp_path: Path, capsys):
    typed = [MEGATRON, "actor_rollout_ref.actor.use_dynamic_bsz=true"]
    written = export(capsys, *typed[1:])
    assert written["actor"] == {"use_dynamic_batch_size": True}
    assert written["critic"] == {"lr": 1e-05, "use_dynamic_batch_size": True}
    out = tmp_path / "roles.yaml"
    assert cli_main(["export-slime", *typed, "-o", str(out)]) == 0, capsys.readouterr().err
    read_back = flat(verl_roles.compose([MEGATRON, f"megatron_config_path={out}"]))
    read_back["megatron_config_path"] = None
    assert read_back == flat(verl_roles.compose(typed))
    # A critic without dynamic batching beside an actor with it: only the actor's is written.
    written = export(capsys, *typed[1:], "critic.use_dynamic_bsz=false")
    assert "use_dynamic_batch_size" not in written["critic"]


# ---------------------------------------------------------------------------------------------------
# `load`: slime's checkpoint root (latest_checkpointed_iteration.txt names the iteration) is resolved to
# the iteration folder verl's dist_checkpointing.load reads, or refused with the reason.


def checkpoint_root(root: Path, tracker: str, folder: str) -> Path:
    """A Megatron checkpoint root whose tracker says ``tracker``, holding the torch_dist ``folder``."""
    (root / folder).mkdir(parents=True)
    (root / folder / "metadata.json").write_text('{"sharded_backend": "torch_dist"}', encoding="utf-8")
    (root / "latest_checkpointed_iteration.txt").write_text(tracker + "\n", encoding="utf-8")
    return root


def test_a_checkpoint_root_is_resolved_to_its_iteration_folder(in_tmp: Path):
    actor = checkpoint_root(in_tmp / "ckpt" / "actor", "20", "iter_0000020")
    critic = checkpoint_root(in_tmp / "ckpt" / "critic", "release", "release")
    slime_file(in_tmp / "roles.yaml", {"actor": {"load": str(actor)}, "critic": {"load": str(critic)}})
    result = run_in_process([MEGATRON, "megatron_config_path=roles.yaml", "hydra.run.dir=out"], cwd=in_tmp)
    assert result.returncode == 0, result.stderr
    assert (f"{actor} is a checkpoint root: its latest_checkpointed_iteration.txt names iter_0000020, so "
            f"verl loads {actor}/iter_0000020") in result.stderr
    assert "not the optimizer state" in result.stderr
    resolved = flat(OmegaConf.load(in_tmp / "out" / "resolved.yaml"))
    assert resolved["actor_rollout_ref.actor.megatron.dist_checkpointing_path"] == f"{actor}/iter_0000020"
    assert resolved["actor_rollout_ref.actor.megatron.use_dist_checkpointing"] is True
    assert resolved["critic.megatron.dist_checkpointing_path"] == f"{critic}/release"


def test_an_iteration_folder_is_loaded_as_it_is(tmp_path: Path):
    folder = "/elsewhere/ckpt/iter_0000100"  # not on this machine: both slime and verl load it as it is
    path = slime_file(tmp_path / "roles.yaml", {"critic": {"load": folder}})
    cfg = verl_roles.compose([MEGATRON, f"megatron_config_path={path}"])
    assert cfg.critic.megatron.dist_checkpointing_path == folder


def test_a_load_with_no_folder_for_verl_is_refused(in_tmp: Path):
    (in_tmp / "hf").mkdir()
    (in_tmp / "hf" / "config.json").write_text("{}", encoding="utf-8")
    (in_tmp / "legacy" / "iter_0000005").mkdir(parents=True)
    (in_tmp / "legacy" / "latest_checkpointed_iteration.txt").write_text("5", encoding="utf-8")
    cases = {
        "/nowhere/ckpt": ["/nowhere/ckpt is not on this machine", "must be that folder itself",
                          "Fix: write the iteration folder (`load: /nowhere/ckpt/iter_0000100`"],
        str(in_tmp / "hf"): ["holds Hugging Face weights", f"set critic.model.path={in_tmp / 'hf'}"],
        str(in_tmp / "legacy"): ["names iter_0000005, which holds no metadata.json",
                                 "reads only the distributed (torch_dist) format"],
    }
    # A tracker that names no iteration: a lookalike digit, more digits than any run has iterations.
    for name, text in (("superscript", "\u00b2"), ("long", "9" * 5000)):
        (in_tmp / name).mkdir()
        (in_tmp / name / "latest_checkpointed_iteration.txt").write_text(text, encoding="utf-8")
        cases[str(in_tmp / name)] = ["which names no iteration", "ASCII digits",
                                     "Fix: name the iteration folder itself"]
    for value, phrases in cases.items():
        slime_file(in_tmp / "roles.yaml", {"critic": {"load": value}})
        typed = [MEGATRON, "megatron_config_path=roles.yaml", "hydra.run.dir=out"]
        result = run_in_process(typed, cwd=in_tmp)
        assert_user_error(result, "megatron[0] (role critic) overrides.load:", *phrases)
        assert not (in_tmp / "out").exists()


def test_load_is_exported_as_slime_loads_it(tmp_path: Path, capsys):
    on = "critic.megatron.use_dist_checkpointing=true"
    folder = "/ckpt/critic/iter_0000010"
    assert export(capsys, on, f"critic.megatron.dist_checkpointing_path={folder}")["critic"] == {
        "lr": 1e-05, "load": folder,
    }
    # A folder of another name would be a root or Hugging Face weights to slime: verl paths.
    written = export(capsys, on, "critic.megatron.dist_checkpointing_path=/models/mcore")["critic"]
    assert written == {"lr": 1e-05, "megatron.use_dist_checkpointing": True,
                       "megatron.dist_checkpointing_path": "/models/mcore"}
    typed = [MEGATRON, on, "critic.megatron.dist_checkpointing_path=/models/mcore"]
    out = tmp_path / "roles.yaml"
    assert cli_main(["export-slime", *typed, "-o", str(out)]) == 0, capsys.readouterr().err
    read_back = flat(verl_roles.compose([MEGATRON, f"megatron_config_path={out}"]))
    read_back["megatron_config_path"] = None
    assert read_back == flat(verl_roles.compose(typed))


# ---------------------------------------------------------------------------------------------------
# Values the chosen verl release refuses are refused, naming the slime file's entry.


def test_a_dtype_verl_refuses_is_refused_naming_the_entry(in_tmp: Path):
    # McoreOptimizerConfig.__post_init__ asserts fp32 or bf16 spellings for the three dtypes.
    values = {"use_precision_aware_optimizer": True, "exp_avg_dtype": "fp16"}
    slime_file(in_tmp / "roles.yaml", {"actor": values})
    result = run_in_process([MEGATRON, "megatron_config_path=roles.yaml", "hydra.run.dir=out"], cwd=in_tmp)
    assert_user_error(result, "actor_rollout_ref.actor.optim.exp_avg_dtype: is not a dtype verl 0.9.1's "
                      "Megatron optimizer config accepts", "Got 'fp16'",
                      "The value came from roles.yaml: megatron[0] (role actor) exp_avg_dtype")
    assert not (in_tmp / "out").exists()


def test_a_name_whose_key_the_release_lacks_is_refused(in_tmp: Path):
    # verl 0.8.0's McoreOptimizerConfig has no precision-aware optimizer (its setup passes no dtype).
    slime_file(in_tmp / "roles.yaml", {"critic": {"exp_avg_dtype": "bf16"}})
    typed = [MEGATRON, "verl_version=0.8.0", "megatron_config_path=roles.yaml", "hydra.run.dir=out"]
    result = run_in_process(typed, cwd=in_tmp)
    assert_user_error(result, "megatron[0] (role critic) overrides.exp_avg_dtype: sets "
                      "critic.optim.exp_avg_dtype, which is a key of verl 0.9.0 and verl 0.9.1 only",
                      "remove `exp_avg_dtype` from the entry")
    assert "not in struct" not in result.stderr
    assert not (in_tmp / "out").exists()


# ---------------------------------------------------------------------------------------------------
# A real slime argument with no verl key of the role is refused with what slime does with it and why
# verl-roles cannot map it; never "nothing would read it", which is false of an argument slime reads.


@pytest.mark.parametrize(
    ("name", "value", "phrases"),
    [
        ("no_load_optim", True, ["slime then restores no optimizer state from `load`",
                                 "loads the model weights only", "Fix: remove the key"]),
        ("start_weight_decay", 0.0, ["slime (Megatron) starts the weight decay at this value",
                                     "takes both ends from optim.weight_decay", "constant weight decay"]),
        ("ref_load", "/ckpt/ref", ["slime loads the reference model from this checkpoint",
                                   "actor_rollout_ref.ref.megatron.dist_checkpointing_path="]),
        ("ckpt_step", 100, ["instead of the one its latest_checkpointed_iteration.txt names",
                            "write that iteration folder as `load`"]),
    ],
)
def test_an_unmapped_slime_argument_is_refused_with_what_slime_does(in_tmp: Path, name, value, phrases):
    slime_file(in_tmp / "roles.yaml", {"actor": {name: value}})
    result = run_in_process([MEGATRON, "megatron_config_path=roles.yaml", "hydra.run.dir=out"], cwd=in_tmp)
    refused = f"overrides.{name}: is a slime/Megatron argument verl-roles cannot map"
    assert_user_error(result, refused, *phrases)
    assert "nothing would read it" not in result.stderr


def test_an_unknown_name_is_not_said_to_be_read_by_nothing(in_tmp: Path):
    # A Megatron argument verl-roles has no row for: slime reads it, verl would not.
    slime_file(in_tmp / "roles.yaml", {"actor": {"lr_warmup_samples": 100}})
    result = run_in_process([MEGATRON, "megatron_config_path=roles.yaml", "hydra.run.dir=out"], cwd=in_tmp)
    assert_user_error(result, "overrides.lr_warmup_samples: is not a key of the slime names verl-roles reads",
                      "no verl key is known to have its effect")
    assert "nothing would read it" not in result.stderr



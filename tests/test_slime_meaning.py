"""slime's meaning, not only its names (issue 30, item 4): a slime name sets the verl key that has the
effect slime gives it, in the engine that runs (Megatron: a slime file is Megatron-only), or it is refused
with the reason. Each case goes both ways: a slime file read by the main job as a user types it, and
`verl-roles export-slime` writing the file slime reads."""

from __future__ import annotations

from pathlib import Path

import yaml
from conftest import flat, run_in_process
from omegaconf import OmegaConf

import verl_roles
from verl_roles.cli import main as cli_main

MEGATRON = "model_engine=megatron"
ACTOR_OPTIM = "actor_rollout_ref.actor.optim"


def slime_file(path: Path, entries: dict[str, dict[str, object]]) -> Path:
    items = [{"name": "default", "role": role, "overrides": values} for role, values in entries.items()]
    path.write_text(yaml.safe_dump({"megatron": items}, sort_keys=False), encoding="utf-8")
    return path


def main_job(cwd: Path, *overrides: str) -> dict[str, object]:
    """The resolved config the main job writes for ``overrides`` (typed in ``cwd``)."""
    result = run_in_process([MEGATRON, *overrides, "hydra.run.dir=out"], cwd=cwd)
    assert result.returncode == 0, result.stdout + result.stderr
    return flat(OmegaConf.load(cwd / "out" / "resolved.yaml"))


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

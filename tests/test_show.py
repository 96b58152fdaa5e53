"""One truth on screen: ``verl-roles show`` prints what a run writes; Hydra's own views say they come
before the main job's steps."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import assert_user_error, main_in_process, run, run_in_process, write

from verl_roles.cli import main as cli
from verl_roles.main import main

# What Hydra/OmegaConf do decides these tests' outcome: CI runs them on both stacks.
pytestmark = pytest.mark.stack

MEGATRON = "model_engine=megatron"
SLIME = (
    "megatron:\n  - role: critic\n    overrides:\n      min_lr: 1e-6\n      lr_decay_style: cosine\n"
    "      lr_warmup_iters: 40\n"
)


@pytest.fixture
def run_args(tmp_path: Path) -> list[str]:
    """A run whose final config differs from Hydra's composition: a slime file, a legacy key and a
    stacked role option (the steps after composing change them)."""
    slime_file = write(tmp_path / "roles.yaml", SLIME)
    option = "# @package critic\nmegatron:\n  param_offload: true\n"
    write(tmp_path / "myconf/role/critic/offload.yaml", option)
    return [
        "--config-dir", str(tmp_path / "myconf"), MEGATRON, "role/critic=[offload]",
        f"megatron_config_path={slime_file}", "actor_rollout_ref.model.lora_rank=8",
    ]


def test_show_prints_exactly_what_the_run_writes(tmp_path: Path, run_args: list[str], capsys):
    code, _, err = main_in_process(run_args, tmp_path, capsys)
    assert code == 0, err
    out = tmp_path / "out"
    assert cli(["show", *run_args]) == 0
    assert capsys.readouterr().out == (out / "resolved.yaml").read_text()
    assert cli(["show", "--role", "critic", *run_args]) == 0
    shown = capsys.readouterr().out
    assert shown == (out / "roles/critic.yaml").read_text()
    # lr_warmup_iters counts optimizer steps: 40 of them are 10 trainer steps of 4.
    assert "min_lr: 1.0e-06" in shown and "lr_decay_style: cosine" in shown and "lr_warmup_steps: 10" in shown


def test_show_keys_lists_matching_keys_one_per_line(run_args: list[str], capsys):
    assert cli(["show", "--keys", "*.optim.lr", "--keys", "critic.optim.lr_*_style", *run_args]) == 0
    assert capsys.readouterr().out.splitlines() == [
        "actor_rollout_ref.actor.optim.lr: 1.0e-06",
        "critic.optim.lr: 1.0e-05",
        "critic.optim.lr_decay_style: cosine",
        "critic.optim.lr_wsd_decay_style: exponential",
    ]
    # The legacy key typed as lora_rank is shown where the run writes it.
    assert cli(["show", "--keys", "actor_rollout_ref.model.lora.r?nk", *run_args]) == 0
    assert capsys.readouterr().out.splitlines() == ["actor_rollout_ref.model.lora.rank: 8"]
    # Relative to --role; a section's name matches every key under it.
    assert cli(["show", "--role", "critic", "--keys", "megatron.*offload", *run_args]) == 0
    assert capsys.readouterr().out.splitlines() == [
        "megatron.param_offload: true",
        "megatron.optimizer_offload: false",
    ]


@pytest.mark.parametrize(
    ("args", "phrases"),
    [
        (["--role", "judge"], ["--role: 'judge' is not a role", "actor, critic, ref, rollout"]),
        (["--keys", "nothing.*"], ["--keys nothing.*: matches no key", "verl-roles keys"]),
        (["--keys"], ["--keys: needs a key pattern"]),
        (["trainer.nnodes"], ["trainer.nnodes: is not an override"]),
        (["--cfg", "job"], ["--cfg: is not an option of show"]),
        (["trainer.nnodez=2"], ["trainer.nnodez", "did you mean `trainer.nnodes`"]),
    ],
    ids=["bad-role", "no-match", "keys-without-value", "bare-word", "hydra-flag", "unknown-key"],
)
def test_show_mistakes_are_one_paragraph(tmp_path: Path, args: list[str], phrases: list[str]):
    assert_user_error(run_in_process(["show", *args], cwd=tmp_path, module="verl_roles.cli"), *phrases)


@pytest.mark.slow
def test_a_show_mistake_in_a_real_process(tmp_path: Path):
    """The console entry point itself: exit 2, one paragraph, no traceback."""
    result = run(["show", "trainer.nnodez=2"], cwd=tmp_path, module="verl_roles.cli")
    assert result.returncode == 2
    assert_user_error(result, "trainer.nnodez", "did you mean `trainer.nnodes`")


def test_hydra_views_point_to_show(tmp_path: Path, run_args: list[str]):
    result = run_in_process([*run_args, "--cfg", "job", "--resolve"], cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    # Hydra's view is the composition before the slime file: the critic's schedule is still the default.
    assert "lr_decay_style: cosine" not in result.stdout.split("critic:", 1)[1]
    notes = [line for line in result.stderr.splitlines() if line.startswith("verl_roles note:")]
    assert len(notes) == 1, result.stderr
    assert "before the main job reads legacy keys, applies the role options and the megatron_config_path" in (
        notes[0]
    )
    show = f"`verl-roles show --config-dir {tmp_path / 'myconf'} {MEGATRON} 'role/critic=[offload]'"
    assert show in notes[0]

    code = run_in_process([*run_args, "hydra.run.dir=out"], cwd=tmp_path)
    assert code.returncode == 0, code.stderr
    saved = (tmp_path / "out/.hydra/config.yaml").read_text()
    assert saved.startswith("# Hydra's composition of this run, before verl_roles read legacy keys")
    assert "# ../resolved.yaml (`verl-roles show`" in saved.splitlines()[2]


def test_every_view_spells_values_as_resolved_yaml_does(capsys):
    """One spelling of numbers and booleans: keys, roles, explain, diff and show --keys write a value as
    resolved.yaml does (1.0e-06, false), not as Python prints it (1e-06, False)."""
    key, flag = "critic.optim.lr", "critic.megatron.param_offload"
    args = [MEGATRON, "critic.optim.lr=2e-6"]
    assert cli(["show", *args]) == 0
    resolved = capsys.readouterr().out
    assert "lr: 2.0e-06" in resolved and "param_offload: false" in resolved
    assert cli(["show", "--keys", key, "--keys", flag, *args]) == 0
    assert sorted(capsys.readouterr().out.splitlines()) == [f"{flag}: false", f"{key}: 2.0e-06"]
    assert cli(["keys", key, flag, MEGATRON]) == 0
    listed = capsys.readouterr().out
    assert f"{key}: float = 1.0e-05" in listed
    assert f"{flag}: bool = ${{megatron.param_offload}} (false)" in listed
    assert cli(["explain", key, *args]) == 0
    explained = capsys.readouterr().out.splitlines()
    assert explained[0] == f"{key} = 2.0e-06" and explained[-1].endswith(": 2.0e-06")
    assert cli(["explain", flag, MEGATRON]) == 0
    assert capsys.readouterr().out.splitlines()[0] == f"{flag} = false"
    assert cli(["roles", *args]) == 0
    lines = capsys.readouterr().out.splitlines()
    row = next(line for line in lines if line.startswith("optim.lr "))
    lr = dict(zip(lines[0].split()[1:], row.split()[1:], strict=True))
    assert (lr["actor"], lr["critic"], lr["ref"]) == ("1.0e-06", "2.0e-06", "-")
    assert cli(["diff", MEGATRON, "--", *args, f"{flag}=true"]) == 1
    lines = capsys.readouterr().out.splitlines()
    assert lines[2:] == [f"changed {flag}: false -> true", f"changed {key}: 1.0e-05 -> 2.0e-06",
                         "2 keys differ: 0 added, 0 removed, 2 changed"]


def test_show_equals_resolved_yaml_byte_for_byte_for_any_text_value(tmp_path: Path, capsys):
    """Data is exact: whatever text a value holds (controls, marks of text direction, zero-width
    characters, quotes, non-ASCII letters), what `show` prints is byte for byte the resolved.yaml a run
    writes, and both read back to the text typed. (The human-text escaping of messages never reaches data;
    YAML's own double-quoted escapes keep it safe to show.)"""
    import itertools

    from hypothesis import given, settings
    from hypothesis import strategies as st
    from omegaconf import OmegaConf

    from verl_roles.omegaconf_adapter.override_text import quoted_string

    counter = itertools.count()
    counts = {"compared": 0, "refused": 0}
    special = st.sampled_from(["\u200f", "\u202e", "\u061c", "\u200b", "\ufeff", "\x1b", "\t", "'", '"', "\\",
                               "$", "é", "\u2066"])
    texts = st.lists(st.one_of(special, st.characters(blacklist_categories=("Cs",))), min_size=1, max_size=8)

    @settings(max_examples=12, deadline=None)
    @given(texts)
    def property_(chars: list[str]):
        text = "".join(chars)
        line = [f"trainer.project_name={quoted_string(text)}", "hydra/job_logging=none",
                "hydra/hydra_logging=none"]
        out = tmp_path / f"run{next(counter)}"
        code = main([*line, f"hydra.run.dir={out}"])
        capsys.readouterr()
        shown_code = cli(["show", *line])
        shown = capsys.readouterr().out
        assert shown_code == code
        if code != 0:
            counts["refused"] += 1
            return
        counts["compared"] += 1
        written = (out / "resolved.yaml").read_bytes()
        assert shown.encode("utf-8") == written
        assert OmegaConf.load(out / "resolved.yaml").trainer.project_name == text

    property_()
    assert counts["compared"] >= counts["refused"], counts

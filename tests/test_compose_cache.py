"""The cached composition gives exactly what stock Hydra gives, notices changed files, and keeps
no state a caller can see. (Speed itself is measured by benchmarks/, never asserted here.)"""

from __future__ import annotations

import pytest
from conftest import CONF, write
from hydra import compose as hydra_compose
from hydra import initialize_config_dir
from hydra.core.global_hydra import GlobalHydra
from node_fingerprint import fingerprint
from omegaconf import OmegaConf

import verl_roles
from verl_roles.api.composition import compose_full, compose_raw
from verl_roles.base import layout, releases
from verl_roles.compat import OMEGACONF_2_4, VERSION_BASE
from verl_roles.hydra_adapter import plain_compose
from verl_roles.hydra_adapter.caches import clear_caches
from verl_roles.inputs.cmdline import CommandLine
from verl_roles.omegaconf_adapter.yaml_dialect import load_yaml
from verl_roles.runs.run_files import to_yaml
from verl_roles.steps.flat_lora import add_flat_lora_keys
from verl_roles.steps.sequence_parallel import write_effective_sequence_parallel

# What Hydra/OmegaConf do decides these tests' outcome: CI runs them on both stacks.
pytestmark = pytest.mark.stack

# A group change, value overrides after the group choice and before it, adding and deleting keys, and
# a reference to a section.
OVERRIDE_SETS = [
    [],
    ["model_engine=megatron", "megatron.tensor_model_parallel_size=4", "critic.megatron.param_offload=true"],
    ["critic.optim.lr=2e-5", "model_engine=fsdp", "+trainer.extra_note=hello", "~trainer.val_before_train"],
    # A new key referring to a section (copied as OmegaConf copies it, after the override inside it).
    ["model_engine=megatron", "+trainer.custom_cls_copy=${data.custom_cls}", "data.custom_cls.name=x"],
]


def stock_hydra_and_omegaconf(overrides: list[str]) -> str:
    """The reference: Hydra's own compose API (its stock loader) on our tree, resolved by OmegaConf's own
    resolution, then the pipeline's steps after resolution (Megatron's sequence_parallel as verl uses
    it, verl's flat LoRA keys)."""
    with initialize_config_dir(config_dir=str(CONF), **VERSION_BASE):
        raw = hydra_compose(config_name="ppo_trainer", overrides=overrides)
    resolved = OmegaConf.create(OmegaConf.to_container(raw, resolve=True))
    write_effective_sequence_parallel(resolved, CommandLine.of(overrides), followed={})
    add_flat_lora_keys(resolved)
    return to_yaml(resolved)


@pytest.mark.parametrize("overrides", OVERRIDE_SETS, ids=lambda o: " ".join(o) or "defaults")
def test_cached_compose_and_fast_resolution_equal_stock_hydra(overrides):
    verl_roles.compose(["model_engine=megatron", "critic.optim.lr=7e-6"])  # warm the caches
    assert to_yaml(verl_roles.compose(overrides)) == stock_hydra_and_omegaconf(overrides)


def test_value_overrides_do_not_leak_into_later_calls():
    first = verl_roles.compose(["model_engine=megatron", "critic.optim.lr=9e-5", "+trainer.only_here=1"])
    second = verl_roles.compose(["model_engine=megatron"])
    assert first.critic.optim.lr == 9e-5
    assert second.critic.optim.lr != 9e-5
    assert "only_here" not in second.trainer


def test_a_failed_call_leaves_the_next_one_intact():
    with pytest.raises(Exception) as raised:
        verl_roles.compose(["model_engine=megatron", "critic.optim.no_such_key=1"])
    assert "no_such_key" in str(raised.value)
    assert verl_roles.compose(["model_engine=megatron"]).model_engine == "megatron"


def test_results_are_independent_objects():
    first = verl_roles.compose(["model_engine=megatron"])
    second = verl_roles.compose(["model_engine=megatron"])
    assert first is not second
    assert first.critic is not second.critic
    assert to_yaml(first) == to_yaml(second)


def test_no_global_hydra_state_and_caller_state_kept():
    GlobalHydra.instance().clear()
    verl_roles.compose(["model_engine=megatron"])
    assert not GlobalHydra.instance().is_initialized()

    from hydra import initialize_config_module

    with initialize_config_module(config_module="verl_roles.conf", **VERSION_BASE):
        caller = GlobalHydra.instance().hydra
        verl_roles.compose(["model_engine=dp"])
        assert GlobalHydra.instance().hydra is caller
    assert not GlobalHydra.instance().is_initialized()



def test_the_api_leaves_the_callers_garbage_collector_alone_and_the_programs_tune_theirs(capsys):
    """The programs collect garbage less often in their own process (verl_roles.base.program); the Python API
    runs in the caller's process and changes nothing there."""
    import gc

    from verl_roles.base.program import COLLECTOR_THRESHOLDS
    from verl_roles.main import main

    saved = gc.get_threshold()
    try:
        gc.set_threshold(700, 10, 10)
        verl_roles.compose(["model_engine=dp"])
        assert gc.get_threshold() == (700, 10, 10)
        assert main(["--help"]) == 0
        assert gc.get_threshold() == COLLECTOR_THRESHOLDS
    finally:
        gc.set_threshold(*saved)
    assert "verl_roles" in capsys.readouterr().out


def test_a_new_config_dir_reuses_the_shipped_files_and_composes_as_read_afresh(tmp_path):
    """Each --config-dir is a set of sources of its own; the shipped files it reads are parsed once per
    process for every set. What it composes equals a composition read with every cache empty, its own
    files included."""
    from verl_roles.hydra_adapter.caches import clear_caches

    write(tmp_path / "role/critic/slow.yaml", "# @package critic\noptim:\n  lr: 3.0e-06\n")
    overrides = ["model_engine=megatron", "role/critic=slow"]
    verl_roles.compose(["model_engine=megatron"])  # the shipped files, parsed for another set of sources
    warm = verl_roles.compose(overrides, config_dir=str(tmp_path))
    clear_caches()
    cold = verl_roles.compose(overrides, config_dir=str(tmp_path))
    assert to_yaml(warm) == to_yaml(cold)
    assert warm.critic.optim.lr == 3.0e-06


def test_a_changed_config_file_is_read_again(tmp_path):
    extra = tmp_path / "extra" / "note.yaml"
    overrides = [f"hydra.searchpath=[file://{tmp_path}]", "+extra@trainer.extra=note"]
    write(extra, "# A note.\nmessage: first\n")
    assert verl_roles.compose(overrides).trainer.extra.message == "first"
    write(extra, "# A note, edited.\nmessage: second edit\n")
    assert verl_roles.compose(overrides).trainer.extra.message == "second edit"
    write(tmp_path / "extra" / "other.yaml", "# Another note.\nmessage: other\n")
    other = [overrides[0], "+extra@trainer.extra=other"]
    assert verl_roles.compose(other).trainer.extra.message == "other"


def test_duplicate_yaml_key_is_still_an_error(tmp_path):
    write(tmp_path / "extra" / "dup.yaml", "# Twice.\nmessage: a\n\n# Again.\nmessage: b\n")
    with pytest.raises(Exception) as raised:
        verl_roles.compose([f"hydra.searchpath=[file://{tmp_path}]", "+extra@trainer.extra=dup"])
    assert "duplicate key 'message'" in str(raised.value)


@pytest.mark.parametrize("path", sorted(CONF.rglob("*.yaml")), ids=lambda p: str(p.relative_to(CONF)))
def test_fast_yaml_loader_reads_every_config_file_like_omegaconf(path):
    text = path.read_text(encoding="utf-8")
    fast, reference = load_yaml(text), OmegaConf.load(path)
    assert OmegaConf.to_container(fast) == OmegaConf.to_container(reference)
    assert OmegaConf.to_yaml(fast) == OmegaConf.to_yaml(reference)


@pytest.mark.parametrize(
    "text",
    ["a: 1e-5\nb: 1.0e+3\nc: .5\nd: 2001-12-14\ne: 0x1f\nf: yes\ng: ~\nh: '010'\ni: 1_000\nj: .inf\n"],
)
def test_fast_yaml_loader_keeps_omegaconf_scalar_rules(tmp_path, text):
    path = tmp_path / "scalars.yaml"
    path.write_text(text, encoding="utf-8")
    fast, reference = OmegaConf.to_container(load_yaml(text)), OmegaConf.to_container(OmegaConf.load(path))
    assert fast == reference
    assert [type(v) for v in fast.values()] == [type(v) for v in reference.values()]


# --- the plain composition of the task part (verl_roles/hydra_adapter/plain_compose.py) ---------------


@pytest.fixture
def plain_used(monkeypatch):
    """Counts the compositions whose task part was merged as plain data."""
    used = []
    plan = plain_compose.plan

    def counting(*args, **kwargs):
        found = plan(*args, **kwargs)
        used.append(found)
        return found

    monkeypatch.setattr(plain_compose, "plan", counting)
    return used


def hydras_merge_only(monkeypatch) -> None:
    def declined(*args, **kwargs):
        raise plain_compose.NotPlain("off for the reference")

    monkeypatch.setattr(plain_compose, "plan", declined)


def cold_full(overrides: list[str], config_dir: str | None = None):
    clear_caches()
    cfg = compose_full("ppo_trainer", overrides, config_dir)
    OmegaConf.clear_cache(cfg)  # ${now:...} values of this call
    return cfg


# Every engine under every release whose layer changes its files (the layer of a (release, engine) edits
# the files as they load, by one function on each path: each pair's edits differ), and one engine under
# a release with an empty layer: with nothing to apply, both paths merge the files as read, which the
# layered pairs merge too, for every engine.
ENGINES = list(layout.ENGINES)
LAYERED = [(engine, release) for release in releases.supported() for engine in ENGINES
           if any(releases.layer(release, engine).values())]
ENGINE_RELEASES = [*LAYERED, *[(ENGINES[0], release) for release in releases.supported()
                               if not any(releases.layer(release, ENGINES[0]).values())][:1]]


@pytest.mark.parametrize(("engine", "release"), ENGINE_RELEASES, ids=[f"{e}-{r}" for e, r in ENGINE_RELEASES])
def test_plain_composition_equals_hydras_merge_node_for_node(monkeypatch, plain_used, engine, release):
    overrides = [f"model_engine={engine}", releases.choice(release), "critic.optim.lr=3e-5",
                 "+trainer.extra=1", "~trainer.val_before_train", "hydra.job.chdir=false"]
    plain = cold_full(overrides)
    assert plain_used, "the plain composition was not used"
    hydras_merge_only(monkeypatch)
    assert fingerprint(plain) == fingerprint(cold_full(overrides))
    assert fingerprint(compose_full("ppo_trainer", overrides)) == fingerprint(plain)  # a memo hit


@pytest.mark.parametrize("overrides", OVERRIDE_SETS, ids=lambda o: " ".join(o) or "defaults")
def test_composition_equals_stock_hydra_node_for_node(plain_used, overrides):
    clear_caches()
    ours = compose_raw("ppo_trainer", overrides)
    assert plain_used
    with initialize_config_dir(config_dir=str(CONF), **VERSION_BASE):
        stock = hydra_compose(config_name="ppo_trainer", overrides=overrides)
    OmegaConf.clear_cache(ours), OmegaConf.clear_cache(stock)
    assert fingerprint(ours) == fingerprint(stock)


# A user's primary config that exercises the merge rules through files: Hydra settings beside task keys,
# _self_ first, a file at the top level, a reference merged over, None over a section, ??? over a value,
# a list replaced, and a `defaults` key inside a section (data, not a defaults list).
USER_PRIMARY = """defaults:
  - _self_
  - ppo_trainer
  - extra@_global_: top
  - override model_engine: megatron

hydra:
  job:
    name: mine
trainer:
  total_epochs: 7
  note: ${trainer.project_name}
"""
USER_TOP = """trainer:
  note: fixed
  logger: [console]
  total_epochs: ???
  section:
    defaults: [a, b]
data:
  custom_cls: null
"""


def test_plain_composition_of_a_users_files_equals_hydras_merge(monkeypatch, plain_used, tmp_path):
    write(tmp_path / "mine.yaml", USER_PRIMARY)
    write(tmp_path / "extra" / "top.yaml", USER_TOP)
    clear_caches()
    plain = compose_full("mine", [], str(tmp_path))
    OmegaConf.clear_cache(plain)
    assert plain_used
    assert plain.trainer.note == "fixed" and plain.trainer.total_epochs == 30  # ppo_trainer after _self_
    assert plain.data.custom_cls is None and plain.hydra.job.name == "mine"
    hydras_merge_only(monkeypatch)
    clear_caches()
    reference = compose_full("mine", [], str(tmp_path))
    OmegaConf.clear_cache(reference)
    assert fingerprint(plain) == fingerprint(reference)


def test_an_interpolated_default_is_resolved(tmp_path):
    """A defaults entry that interpolates a group choice (Hydra builds its map of known choices only
    where such an entry is)."""
    write(tmp_path / "mine.yaml", "defaults:\n  - ppo_trainer\n  - extra@trainer.extra: ${model_engine}\n"
          "  - _self_\n")
    for engine in ("dp", "megatron"):
        write(tmp_path / "extra" / f"{engine}.yaml", f"# For {engine}.\nmessage: {engine}\n")
    for engine in ("dp", "megatron"):
        cfg = compose_raw("mine", [f"model_engine={engine}"], str(tmp_path))
        assert cfg.trainer.extra.message == engine


@pytest.mark.parametrize("engine", ["dp", "megatron"])
def test_rules_read_the_values_omegaconfs_select_gives(engine):
    """The rules' reader (verl_roles.validation.rules.values.get, walking node contents where it can) gives
    what OmegaConf.select gives, for every key of a resolved config and for keys it does not hold."""
    from verl_roles.omegaconf_adapter.nodes import key_paths
    from verl_roles.validation.rules.values import UNSET, get

    cfg = verl_roles.compose([f"model_engine={engine}", "trainer.logger=[console,wandb]"])
    keys = [*key_paths(cfg), "trainer.logger.0", "no_such.key", "trainer.no_such_key", "trainer..x"]
    for key in keys:
        expected = OmegaConf.select(cfg, key, default=UNSET, throw_on_missing=False)
        found = get(cfg, key)
        assert found is expected or found == expected and type(found) is type(expected), key


def test_a_hydra_setting_that_refers_to_a_task_key_is_composed_by_hydras_merge(monkeypatch, plain_used,
                                                                               tmp_path):
    """Hydra's merge of the hydra node alone would resolve such a reference without the task keys: the
    plain composition declines it, and the result is Hydra's."""
    write(tmp_path / "mine.yaml", "defaults:\n  - ppo_trainer\n  - _self_\n\nhydra:\n  job:\n"
          "    name: ${trainer.project_name}\n")
    clear_caches()
    ours = compose_full("mine", [], str(tmp_path))
    OmegaConf.clear_cache(ours)
    assert not plain_used
    assert ours.hydra.job.name == ours.trainer.project_name
    hydras_merge_only(monkeypatch)
    clear_caches()
    reference = compose_full("mine", [], str(tmp_path))
    OmegaConf.clear_cache(reference)
    assert fingerprint(ours) == fingerprint(reference)


# References of every kind resolution meets: to a value through a chain, to a section (copied), to a
# section holding references, to a list, to null and to ???, inside a string, through a resolver, an
# escaped one, and a section that is itself a reference.
RESOLUTION_SETS = [
    ["model_engine=megatron",
     "critic.megatron.tensor_model_parallel_size=${megatron.pipeline_model_parallel_size}"],
    ["model_engine=dp", "+trainer.a=${trainer.b}", "+trainer.b=${trainer.c}", "+trainer.c=7",
     "+trainer.copy=${data.custom_cls}", "+trainer.loggers=${trainer.logger}",
     "+trainer.note=run-${trainer.project_name}-${trainer.c}", "+trainer.home=${oc.env:HOME}",
     "+trainer.escaped=\\${trainer.c}", "+trainer.nothing=null", "+trainer.to_null=${trainer.nothing}",
     "+trainer.missing=???", "+trainer.to_missing=${trainer.missing}"],
    ["model_engine=megatron", "+trainer.actor_copy=${actor_rollout_ref.actor}",
     "+trainer.section={x: ${trainer.project_name}, y: [1, ${trainer.total_epochs}]}",
     "+trainer.section_ref=${trainer.section}"],
]


def test_an_interpolation_to_a_missing_value_is_left_missing():
    """OmegaConf 2.3's resolve, on either stack: a key referring to a ``???`` is itself ``???`` afterwards (so
    a run names every mandatory value left), where OmegaConf 2.4's raises at the first reference."""
    from verl_roles.omegaconf_adapter.nodes import missing_keys, resolve_in_place

    cfg = compose_raw("ppo_trainer", ["+trainer.missing=???", "+trainer.to_missing=${trainer.missing}"])
    resolve_in_place(cfg)
    assert {"trainer.missing", "trainer.to_missing"} <= set(missing_keys(cfg))


@pytest.mark.parametrize("overrides", RESOLUTION_SETS, ids=["chain", "kinds", "sections"])
def test_fast_resolution_equals_omegaconfs_node_for_node(overrides):
    """verl_roles' resolution (plain references copied directly, the rest left to OmegaConf key by key)
    leaves every node as OmegaConf.resolve does: types, metadata, flags, parents and values."""
    import copy

    from verl_roles.omegaconf_adapter.nodes import resolve_in_place

    if OMEGACONF_2_4:
        # OmegaConf 2.4's resolve raises on an interpolation to ???, where 2.3's leaves ??? (as ours does on
        # both stacks: test_an_interpolation_to_a_missing_value_is_left_missing).
        overrides = [o for o in overrides if "${trainer.missing}" not in o]
    composed = compose_raw("ppo_trainer", overrides)
    ours, reference = copy.deepcopy(composed), copy.deepcopy(composed)
    followed: dict[str, str] = {}
    resolve_in_place(ours, followed)
    OmegaConf.resolve(reference)
    OmegaConf.clear_cache(ours), OmegaConf.clear_cache(reference)
    assert fingerprint(ours) == fingerprint(reference)
    assert all(OmegaConf.select(composed, key) == OmegaConf.select(composed, target)
               for key, target in followed.items())


@pytest.mark.parametrize("jobs", [0, 1, 3], ids=["run", "sweep-of-1", "sweep-of-3"])
def test_hydra_composes_once_per_run_and_once_per_sweep_job(jobs: int, tmp_path, capsys, monkeypatch):
    """One path for one run: Hydra's loader composes a run once (the plan's composition is served to
    Hydra's run loop), and a sweep once for its own config and once per job (each job's composition is
    planned, checked and served, never composed again)."""
    import uuid

    from verl_roles.hydra_adapter.loader import ConfigLoader
    from verl_roles.main import main

    calls = []
    guard = ConfigLoader.guard_composition
    monkeypatch.setattr(ConfigLoader, "guard_composition",
                        lambda self, compose: calls.append(1) or guard(self, compose))
    # A value no other test composes, so no memo of an earlier composition answers.
    fresh = f"trainer.project_name=p{uuid.uuid4().hex}"
    quiet = ["hydra/job_logging=none", "hydra/hydra_logging=none"]
    if jobs:
        values = ",".join(f"{index + 1}e-5" for index in range(jobs))
        args = ["-m", fresh, f"critic.optim.lr={values}", f"hydra.sweep.dir={tmp_path / 'sweep'}", *quiet]
    else:
        args = [fresh, f"hydra.run.dir={tmp_path / 'run'}", *quiet]
    assert main(args) == 0, capsys.readouterr().err
    assert len(calls) == (1 + jobs if jobs else 1)

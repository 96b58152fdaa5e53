"""The typed schema follows each verl release's declarations and the YAML; wrong types are caught at compose
time.

The schema is the chosen release's declared types (verl_roles/upstream/verl_releases/<release>.json, generated
from the frozen reference in tests/data/verl-<release>/) plus our table (verl_roles/upstream/own_types.py) for
keys verl does not type.
"""

from __future__ import annotations

from typing import Any

import pytest
from conftest import arrived
from omegaconf import DictConfig, OmegaConf
from verl_reference import RELEASES, declared_type, engines, leaves

import verl_roles
from verl_roles.api.composition import compose_raw
from verl_roles.base import releases
from verl_roles.base.layout import ENGINES
from verl_roles.upstream.own_types import OUR_KEYS, OWN_TYPES, READ_WHEN_ADDED
from verl_roles.validation import schema

# What Hydra/OmegaConf do decides these tests' outcome: CI runs them on both stacks.
pytestmark = pytest.mark.stack

# Every (release, engine) pair our model_engine offers under that release.
CASES = [(r, e) for r in RELEASES for e in engines(r) if e in ENGINES]
IDS = [f"{r}-{e}" for r, e in CASES]


def yaml_paths(cfg: DictConfig) -> dict[str, object]:
    """Every key path of the composed YAML (sections and leaves) -> its unresolved value."""
    out: dict[str, object] = {}

    def walk(node: object, prefix: str) -> None:
        for key, child in node.items():
            path = f"{prefix}{key}"
            out[path] = child
            if isinstance(child, dict) and child:
                walk(child, path + ".")

    walk(OmegaConf.to_container(cfg, resolve=False), "")
    return out


@pytest.fixture(scope="module", params=CASES, ids=IDS)
def engine_yaml(request: pytest.FixtureRequest) -> tuple[str, str, dict[str, object]]:
    release, engine = request.param
    return release, engine, yaml_paths(
        compose_raw("ppo_trainer", [f"model_engine={engine}", releases.choice(release)]))


def covered(path: str, declared: dict[str, schema.KeyType]) -> bool:
    """A key is typed itself, or sits below a key typed as an open mapping (``dict`` / ``Any``)."""
    if path in declared:
        return True
    parts = path.split(".")
    return any(
        (ancestor := ".".join(parts[:i])) in declared
        and declared[ancestor].text in ("Any", "dict")
        for i in range(1, len(parts))
    )


def test_every_yaml_key_has_a_type(engine_yaml):
    release, engine, paths = engine_yaml
    declared = schema.declared_types(engine, release)
    leaves_ = [p for p, v in paths.items() if not (isinstance(v, dict) and v)]
    untyped = [p for p in leaves_ if not covered(p, declared)]
    assert untyped == [], (
        "keys in the YAML with no type: verl declares none, so add each to verl_roles/upstream/own_types.py"
    )


@pytest.mark.parametrize(("release", "engine"), CASES, ids=IDS)
def test_every_yaml_default_has_its_declared_type(release, engine):
    cfg = compose_raw("ppo_trainer", [f"model_engine={engine}", releases.choice(release)])
    assert [p.render() for p in schema.type_problems(cfg)] == []
    resolved = verl_roles.compose([f"model_engine={engine}", releases.choice(release)])
    assert [p.render() for p in schema.type_problems(resolved)] == []


# Values a user can type on the command line, as Hydra parses them.
SAMPLES: tuple[object, ...] = (
    3, -1, 2.5, True, "text", "0.6_1.6", None, [1, 2], [0.9, 0.99], ["a", "b"], [], {"k": 1}, {},
)


def verl_accepts(descriptor: Any, value: object) -> bool:
    """What a value of verl's declared type is, written from the frozen descriptors on their own.

    Leniency, as OmegaConf reads a YAML scalar: an int is a number, any scalar is a string.
    """
    if isinstance(descriptor, str):
        return {
            "any": lambda: True,
            "none": lambda: value is None,
            "bool": lambda: isinstance(value, bool),
            "int": lambda: isinstance(value, int) and not isinstance(value, bool),
            "float": lambda: isinstance(value, int | float) and not isinstance(value, bool),
            "str": lambda: isinstance(value, str | int | float | bool),
            "bytes": lambda: isinstance(value, str | int | float | bool),
        }[descriptor]()
    kind = descriptor["kind"]
    if kind == "optional":
        return value is None or verl_accepts(descriptor["of"], value)
    if kind == "union":
        return any(verl_accepts(member, value) for member in descriptor["of"])
    if kind in ("list", "set"):
        return isinstance(value, list) and all(verl_accepts(descriptor["of"], v) for v in value)
    if kind == "tuple":
        if not isinstance(value, list):
            return False
        if descriptor["variadic"]:
            return all(verl_accepts(descriptor["of"][0], v) for v in value) if descriptor["of"] else True
        return len(value) == len(descriptor["of"]) and all(
            verl_accepts(d, v) for d, v in zip(descriptor["of"], value, strict=True)
        )
    if kind == "dict":
        return isinstance(value, dict) and all(verl_accepts(descriptor["value"], v) for v in value.values())
    if kind in ("literal", "enum"):
        return any(type(value) is type(v) and value == v for v in descriptor["values"])
    if kind == "dataclass":
        return isinstance(value, dict)
    return True


@pytest.mark.parametrize(("release", "engine"), CASES, ids=IDS)
def test_every_verl_typed_key_accepts_exactly_what_verl_declares(release, engine):
    declared = schema.declared_types(engine, release)
    mismatches = []
    for path, leaf in leaves(engine, release).items():
        descriptor = "str" if "target_of" in (leaf.get("declared") or {}) else declared_type(leaf, release)
        if descriptor is None or descriptor == "any":
            continue
        for value in SAMPLES:
            # verl's own defaults rely on null where its dataclass says otherwise: null is accepted there.
            expected = verl_accepts(descriptor, value) or (value is None and leaf.get("resolved", "") is None)
            if declared[path].accepts(value) != expected:
                mismatches.append((path, value, expected))
    assert mismatches == []


def _typed_by_verl(cases: list[tuple[str, str]]) -> set[str]:
    return {
        path
        for release, engine in cases
        for path, leaf in leaves(engine, release).items()
        if declared_type(leaf, release) not in (None, "any") or "target_of" in (leaf.get("declared") or {})
    }


def test_our_table_names_no_key_verl_types():
    """Our own keys are typed by no release; a verl key we type is untyped in the default release (where
    another release types it, the schema takes that release's type under it)."""
    assert sorted(set(OUR_KEYS) & _typed_by_verl(CASES)) == []
    default = [(r, e) for r, e in CASES if r == releases.DEFAULT_RELEASE]
    assert sorted(set(OWN_TYPES) & _typed_by_verl(default)) == []


def test_our_table_has_no_stale_entry():
    present: set[str] = set()
    for engine in ENGINES:
        present |= set(yaml_paths(compose_raw("ppo_trainer", [f"model_engine={engine}"])))
    stale = set(OWN_TYPES) - present - set(READ_WHEN_ADDED)
    assert sorted(stale) == [], "entries of verl_roles/upstream/own_types.py the YAML no longer has"
    assert not set(READ_WHEN_ADDED) & present, "a key read when added that the YAML now has: move it"


def test_packaged_names_are_verls_lists():
    names = releases.reference(releases.DEFAULT_RELEASE)["names"]
    assert "token-sum" in names["loss_agg_mode"]
    assert {"gdpo", "optimal_token_baseline", "tir_optimal_token_baseline"} <= set(names["adv_estimator"])


@pytest.mark.parametrize(
    "override",
    [
        "trainer.logger=console",
        "trainer.logger=[console,wandb]",
        "global_profiler.steps=[2,4]",
        "global_profiler.steps=null",
        "actor_rollout_ref.actor.optim.lr_warmup_steps=null",
        "critic.optim.lr_warmup_steps=null",
        "algorithm.rollout_correction.rollout_rs_threshold='0.6_1.6'",
        "algorithm.rollout_correction.rollout_rs_threshold=2.0",
        "algorithm.rollout_correction.rollout_is_threshold='0.5_4.0'",
        "actor_rollout_ref.actor.optim.min_lr_ratio=null",
        "custom_reward_function.name=null",
        "reward.custom_reward_function.name=null",
        "actor_rollout_ref.model.lora.exclude_modules='.*visual.*'",
        "actor_rollout_ref.model.exclude_modules='.*visual.*'",
        "actor_rollout_ref.actor.profiler.save_path=null",
        "actor_rollout_ref.actor.loss_scale_factor=512",
        "trainer.test_freq=False",
    ],
)
def test_values_verl_accepts_compose(override):
    arrived(verl_roles.compose([override]), override)


@pytest.mark.parametrize(
    ("override", "expected"),
    [
        ("trainer.nnodes=abc", "an integer"),
        ("actor_rollout_ref.actor.optim.lr=fast", "a number"),
        ("actor_rollout_ref.rollout.enforce_eager=maybe", "true or false"),
        ("data.max_prompt_length=[1,2]", "an integer"),
        ("trainer.logger=null", "a string or a list of strings"),
        ("global_profiler.steps=[first]", "a list of integers or null"),
        ("actor_rollout_ref.actor.optim.betas=[0.9]", "a list of 2 numbers"),
        ("actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=2.5", "an integer or null"),
        ("actor_rollout_ref.actor.checkpoint.save_contents=model", "a list of strings"),
        ("actor_rollout_ref.actor.checkpoint=3", "a mapping"),
    ],
)
def test_wrong_type_is_caught_at_compose_time(override, expected):
    with pytest.raises(verl_roles.ConfigError) as raised:
        verl_roles.compose([override])
    message = str(raised.value)
    key = override.partition("=")[0]
    assert f"{key}: has the wrong type" in message
    assert f"Expected {expected}" in message
    assert f"command line override `{override}`" in message


def test_literal_types_name_the_allowed_values():
    key_type = schema.parse_type('Literal["default", "always", "never"] | None')
    assert key_type.accepts("always") and key_type.accepts(None)
    assert not key_type.accepts("sometimes")
    assert key_type.describe() == 'one of "default", "always", "never" or null'


def test_accepted_conversions():
    cfg = verl_roles.compose(
        ["actor_rollout_ref.actor.optim.lr=1", "trainer.project_name=123",
         "data.train_files=[a.parquet,b.parquet]"]
    )
    assert cfg.actor_rollout_ref.actor.optim.lr == 1


def test_keys_added_with_plus_are_not_checked():
    cfg = verl_roles.compose(["+trainer.my_note=[1, {a: b}]", "+reward.reward_kwargs.max_resp_len=abc"])
    assert cfg.trainer.my_note[0] == 1

"""Hypothesis strategies and properties for fuzzing the Python API (issue 12).

Three inputs a user controls are generated: command-line overrides built from the real key set of
the composed config, role option files (``role/critic=NAME`` under a ``--config-dir``), and slime
per-role files (``megatron_config_path``). The property is the same for all three:
``verl_roles.compose`` returns a config or raises :class:`verl_roles.ConfigError`, nothing else.

``tests/test_fuzz.py`` runs a bounded number of examples in CI; ``benchmarks/fuzz_long.py`` runs
many more with the same strategies and properties.
"""

from __future__ import annotations

import contextlib
import functools
import io
import itertools
import math
import warnings
from pathlib import Path

import yaml
from hypothesis import strategies as st

import verl_roles
from verl_roles.base.layout import ENGINE_ALIASES, ENGINES
from verl_roles.base.releases import engine_choice
from verl_roles.slime.names import SLIME_KEYS

# --- the real key set -------------------------------------------------------------------------------


def _leaves(node: object, prefix: str = "") -> list[str]:
    if isinstance(node, dict) and node:
        return [leaf for key, value in node.items() for leaf in _leaves(value, f"{prefix}{key}.")]
    return [prefix.rstrip(".")]


def _sections(keys: list[str]) -> list[str]:
    return sorted({key.rsplit(".", i)[0] for key in keys for i in (1, 2) if "." in key})


@functools.cache
def real_keys() -> tuple[list[str], list[str]]:
    """(every leaf key, every section) of the composition of every engine; composed when a property
    first draws a key (not when the suite is collected: each worker collects every module)."""
    from omegaconf import OmegaConf

    keys: set[str] = set()
    for engine in ENGINES:
        cfg = verl_roles.compose([*engine_choice(engine)])
        keys.update(_leaves(OmegaConf.to_container(cfg, resolve=True)))
    ordered = sorted(keys)
    return ordered, _sections(ordered)


GROUPS = ["model_engine", "role/actor", "role/critic"]
GROUP_OPTIONS = [*ENGINES, *ENGINE_ALIASES, "default", "nope", "../model_engine/megatron", "/etc/hosts", ""]

# --- values -----------------------------------------------------------------------------------------

SPECIAL_FLOATS = st.sampled_from([math.nan, math.inf, -math.inf, 0.0, -0.0, 1e-300, 1e300, -1.0])
SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    SPECIAL_FLOATS,
    st.text(max_size=20),
    st.sampled_from(["${trainer.nnodes}", "${nope}", "${oc.env:HOME}", "${oc.decode:'[1,'}", "???",
                     "'", '"', "[", "{", ",", "=", "~", "\\", "nan", "inf", "null", "true", "1e-5"]),
)
YAML_VALUES = st.recursive(
    SCALARS,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)


def _override_value(value: object) -> str:
    """A Hydra override's value text for ``value`` (sometimes not valid Hydra syntax, on purpose)."""
    if isinstance(value, bool):
        return str(value).lower()
    if value is None:
        return "null"
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, list):
        return "[" + ",".join(_override_value(item) for item in value) + "]"
    if isinstance(value, dict):
        return "{" + ",".join(f"{k}:{_override_value(v)}" for k, v in value.items()) + "}"
    return str(value)


def _mutated(key: str, how: int) -> str:
    """A near miss of a real key: a typo, a missing or extra segment, a hyphen."""
    if how == 1 and len(key) > 3:
        return key[:-2] + key[-1]
    if how == 2:
        return key.rsplit(".", 1)[0]
    if how == 3:
        return f"{key}.extra"
    if how == 4:
        return key.replace("_", "-")
    return key


@st.composite
def overrides(draw: st.DrawFn) -> list[str]:
    """One to four override strings over the real keys, sections and groups."""
    items = []
    for _ in range(draw(st.integers(min_value=1, max_value=4))):
        kind = draw(st.sampled_from(["leaf", "leaf", "leaf", "section", "group", "raw"]))
        if kind == "raw":
            items.append(draw(st.text(max_size=30)))
            continue
        if kind == "group":
            key = draw(st.sampled_from(GROUPS))
            value = draw(st.one_of(st.sampled_from(GROUP_OPTIONS), SCALARS.map(_override_value)))
        else:
            keys, sections = real_keys()
            key = draw(st.sampled_from(keys if kind == "leaf" else sections))
            key = _mutated(key, draw(st.integers(min_value=0, max_value=8)))
            value = _override_value(draw(YAML_VALUES))
        prefix = draw(st.sampled_from(["", "", "", "+", "++", "~"]))
        items.append(f"~{key}" if prefix == "~" and draw(st.booleans()) else f"{prefix}{key}={value}")
    return items


# --- files ------------------------------------------------------------------------------------------


def critic_keys() -> list[str]:
    """The real keys of the critic, relative to its section."""
    return [key.removeprefix("critic.") for key in real_keys()[0] if key.startswith("critic.")]


HEADERS = ["# @package critic\n", "# @package critic\n", "", "# @package actor_rollout_ref.actor\n",
           "# @package _global_\n", "# @package hydra\n", "# @package critic.optim\n"]


def _nest(path: str, value: object) -> dict:
    node: object = value
    for part in reversed(path.split(".")):
        node = {part: node}
    return node  # type: ignore[return-value]


def _dump(data: object) -> str:
    try:
        return yaml.safe_dump(data, allow_unicode=True, sort_keys=False)
    except yaml.YAMLError:
        return repr(data)


@st.composite
def option_files(draw: st.DrawFn) -> bytes:
    """The bytes of a role option file: mostly a header and real critic keys with odd values, sometimes
    a defaults list, random keys, random YAML or random bytes."""
    kind = draw(st.sampled_from(["keys", "keys", "keys", "yaml", "bytes"]))
    if kind == "bytes":
        return draw(st.binary(max_size=200))
    if kind == "yaml":
        return (draw(st.sampled_from(HEADERS)) + _dump(draw(YAML_VALUES))).encode("utf-8", "surrogatepass")
    data: dict = {}
    for _ in range(draw(st.integers(min_value=0, max_value=4))):
        key = draw(st.one_of(st.sampled_from(critic_keys()), st.text(min_size=1, max_size=10)))
        data.update(_nest(_mutated(key, draw(st.integers(min_value=0, max_value=8))), draw(YAML_VALUES)))
    if draw(st.integers(min_value=0, max_value=5)) == 0:
        data = {"defaults": draw(st.lists(st.sampled_from(
            ["_self_", "nope", "/model_engine@_global_: megatron", "../../etc/x", {"x": "y"}]), max_size=3)),
            **data}
    text = draw(st.sampled_from(HEADERS)) + _dump(data)
    return text.encode("utf-8", "surrogatepass")


SLIME_NAMES = [key.name for key in SLIME_KEYS]


@st.composite
def slime_files(draw: st.DrawFn) -> bytes:
    """The bytes of a slime per-role file: mostly well-formed entries with odd values, sometimes a
    malformed structure, random YAML or random bytes."""
    kind = draw(st.sampled_from(["entries", "entries", "entries", "yaml", "bytes"]))
    if kind == "bytes":
        return draw(st.binary(max_size=200))
    if kind == "yaml":
        return _dump(draw(YAML_VALUES)).encode("utf-8", "surrogatepass")
    entries = []
    for _ in range(draw(st.integers(min_value=0, max_value=3))):
        entry: dict = {"role": draw(st.one_of(st.sampled_from(["actor", "critic", "ref"]), SCALARS))}
        block = draw(st.sampled_from(["overrides", "overrides", "args", "other"]))
        values = {draw(st.one_of(st.sampled_from(SLIME_NAMES), SCALARS.filter(_hashable))): draw(YAML_VALUES)
                  for _ in range(draw(st.integers(min_value=0, max_value=4)))}
        entry[block] = values
        if draw(st.booleans()):
            entry["name"] = draw(SCALARS)
        entries.append(entry)
    return _dump({"megatron": entries}).encode("utf-8", "surrogatepass")


def _hashable(value: object) -> bool:
    try:
        hash(value)
    except TypeError:
        return False
    return True


# --- properties -------------------------------------------------------------------------------------


def compose_or_config_error(overrides: list[str]) -> bool:
    """Compose; True when it composed, False on ConfigError; anything else propagates (the failure)."""
    with warnings.catch_warnings(), contextlib.redirect_stderr(io.StringIO()):
        warnings.simplefilter("ignore")
        try:
            verl_roles.compose(overrides)
        except verl_roles.ConfigError:
            return False
    return True


_COUNTER = itertools.count()


def check_overrides(items: list[str]) -> None:
    compose_or_config_error(items)


def check_option_file(folder: Path, content: bytes, extra: list[str]) -> None:
    """Compose with ``content`` as the option ``role/critic=fuzzN`` of a config folder.

    A new option name each time (the previous file removed), so the composition cache sees a change.
    """
    group = folder / "role" / "critic"
    group.mkdir(parents=True, exist_ok=True)
    for old in group.glob("fuzz*.yaml"):
        old.unlink()
    name = f"fuzz{next(_COUNTER)}"
    (group / f"{name}.yaml").write_bytes(content)
    compose_or_config_error([f"hydra.searchpath=[file://{folder}]", f"role/critic={name}", *extra])


def check_slime_file(folder: Path, content: bytes, extra: list[str]) -> None:
    path = folder / f"slime{next(_COUNTER)}.yaml"
    path.write_bytes(content)
    try:
        composed = compose_or_config_error(["model_engine=megatron", f"megatron_config_path={path}", *extra])
    finally:
        path.unlink()
    # Slime values are literal data: a file whose values hold `${...}` is refused, never resolved.
    assert not composed or _no_value_interpolates(content), content


def _no_value_interpolates(content: bytes) -> bool:
    try:
        data = yaml.safe_load(content)
    except yaml.YAMLError:
        return True
    entries = data.get("megatron") if isinstance(data, dict) else None
    for entry in entries if isinstance(entries, list) else []:
        for block in ("overrides", "args"):
            values = entry.get(block) if isinstance(entry, dict) else None
            if isinstance(values, dict) and any("${" in str(v) for v in values.values()):
                return False
    return True

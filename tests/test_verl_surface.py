"""Our resolved config carries each verl release's whole config surface, and nothing its conversions reject.

Reads the frozen references (tests/data/verl-<release>/, see tests/verl_reference.py); no verl needed.

- Coverage: for every supported release (``verl_version=<release>``), every leaf of verl's composed
  ``ppo_trainer``, for each of its ``model_engine`` options, is in our resolved config
  (``verl_roles.compose``, what resolved.yaml holds) with that release's resolved value, or differs on
  purpose (:data:`verl_roles.upstream.verl_differences.DIFFERENCES`, with the reason). An entry that matches a
  difference under no release fails (stale).
- Conversions: every section verl converts to a dataclass (``omega_conf_to_dataclass``, with the
  preparation verl applies to the ref first) holds only fields of that dataclass, at every level where
  verl instantiates one (a ``_target_``, or a field declared as a dataclass).
"""

from __future__ import annotations

import fnmatch
from typing import Any

import pytest
import verl_reference as vr
from omegaconf import OmegaConf

import verl_roles
from verl_roles.base import releases
from verl_roles.base.layout import ENGINES as OUR_ENGINES
from verl_roles.inputs.paths import same_value
from verl_roles.upstream.verl_differences import DIFFERENCES, ENGINES_NOT_OFFERED, for_engine

# Every (release, engine) pair: each engine verl ships under each supported release.
CASES = [(release, engine) for release in vr.RELEASES for engine in vr.engines(release)
         if engine in OUR_ENGINES]
IDS = [f"{release}-{engine}" for release, engine in CASES]


@pytest.mark.parametrize("release", vr.RELEASES)
def test_every_verl_engine_is_an_option_of_model_engine(release):
    """The surface is checked for each engine verl ships: none may be left out of this file's tests."""
    missing = set(vr.engines(release)) - set(OUR_ENGINES) - set(ENGINES_NOT_OFFERED)
    assert not missing, missing
    assert all(set(entry.engines) <= set(OUR_ENGINES) for entry in DIFFERENCES)


def _get(tree: Any, path: str) -> Any:
    node = tree
    for part in path.split("."):
        if not isinstance(node, dict) or part not in node:
            raise KeyError(path)
        node = node[part]
    return node


@pytest.fixture(scope="module")
def resolved() -> dict[tuple[str, str], dict]:
    return {
        (release, engine): OmegaConf.to_container(
            verl_roles.compose([f"model_engine={engine}", releases.choice(release)]))
        for release, engine in CASES
    }


def compare(release: str, engine: str, ours: dict) -> dict[str, list[str]]:
    """verl's leaves of ``engine`` sorted into same / different / missing, as ``path: detail`` lines."""
    found: dict[str, list[str]] = {"same": [], "different": [], "missing": []}
    for path, leaf in vr.leaves(engine, release).items():
        try:
            value = _get(ours, path)
        except KeyError:
            found["missing"].append(path)
            continue
        if "resolved" in leaf and same_value(value, leaf["resolved"]):
            found["same"].append(path)
        else:
            verl = leaf.get("resolved", f"unresolved ({leaf.get('raw')!r})")
            found["different"].append(f"{path}: verl {verl!r}, ours {value!r}")
    return found


def coverage_report(release: str, engine: str, found: dict[str, list[str]]) -> str:
    entries = for_engine(engine)
    listed = [line for kind in ("different", "missing") for line in found[kind]
              if any(fnmatch.fnmatchcase(line.split(":")[0], e.pattern) for e in entries)]
    total = sum(len(lines) for lines in found.values())
    return (
        f"verl {release}, {engine}: {total} verl leaves: {len(found['same'])} present with verl's value, "
        f"{len(found['different'])} with another value, {len(found['missing'])} missing; "
        f"{len(listed)} of the differences allow-listed"
    )


@pytest.mark.parametrize(("release", "engine"), CASES, ids=IDS)
def test_every_verl_leaf_is_present_with_verls_value_or_allow_listed(release, engine, resolved):
    found = compare(release, engine, resolved[release, engine])
    entries = for_engine(engine)
    unexplained = [
        f"{kind}: {line}"
        for kind in ("different", "missing")
        for line in found[kind]
        if not any(fnmatch.fnmatchcase(line.split(":")[0], e.pattern) for e in entries)
    ]
    assert not unexplained, coverage_report(release, engine, found) + "\n" + "\n".join(unexplained)


@pytest.mark.parametrize("engine", OUR_ENGINES)
def test_no_deliberate_difference_is_stale(engine, resolved):
    differing = [
        line.split(":")[0]
        for release, case_engine in CASES if case_engine == engine
        for kind in ("different", "missing")
        for line in compare(release, engine, resolved[release, engine])[kind]
    ]
    stale = [
        entry.pattern
        for entry in for_engine(engine)
        if not any(fnmatch.fnmatchcase(path, entry.pattern) for path in differing)
    ]
    assert not stale, f"{engine}: differences that match no release's config any more (drop them): {stale}"


# --------------------------------------------------------------------------- conversions


def _class_of_target(target: str, release: str) -> str:
    return vr.load("types.json", release)["targets"][target]


def _fields(class_name: str, release: str) -> dict[str, Any]:
    return vr.load("types.json", release)["dataclasses"][class_name]["fields"]


def _dataclass_ref(descriptor: Any) -> str | None:
    """The dataclass a field declares (through Optional), or None."""
    if isinstance(descriptor, dict):
        if descriptor.get("kind") == "dataclass":
            return descriptor["ref"]
        if descriptor.get("kind") == "optional":
            return _dataclass_ref(descriptor["of"])
    return None


def _dict_value_ref(descriptor: Any) -> str | None:
    """For a ``dict[str, <dataclass>]`` field, the dataclass of its values."""
    if isinstance(descriptor, dict) and descriptor.get("kind") == "dict":
        return _dataclass_ref(descriptor["value"])
    return None


def foreign_keys(node: dict, class_name: str | None, path: str, release: str) -> list[str]:
    """Keys under ``node`` that verl's conversion would reject: not a field of the class it builds.

    verl instantiates every mapping with a ``_target_`` (at any depth) and builds a field declared as a
    dataclass from its mapping; a mapping under a field of any other type is searched for ``_target_``.
    """
    if "_target_" in node:
        class_name = _class_of_target(node["_target_"], release)
    fields = _fields(class_name, release) if class_name is not None else None
    problems = []
    for key, child in node.items():
        declared = None
        if fields is not None:
            if key not in fields:
                problems.append(f"{path}.{key} (not a field of {class_name})")
                continue
            declared = fields[key]["type"]
        if not isinstance(child, dict):
            continue
        value_ref = _dict_value_ref(declared)
        if value_ref is not None:
            for name, entry in child.items():
                if isinstance(entry, dict):
                    problems += foreign_keys(entry, value_ref, f"{path}.{key}.{name}", release)
        else:
            problems += foreign_keys(child, _dataclass_ref(declared), f"{path}.{key}", release)
    return problems


def prepared(section: str, node: dict, ours: dict, release: str) -> dict:
    """``node`` after the preparation verl applies before converting ``section`` (the ref's)."""
    steps = vr.load("conversions.json", release)["sections"][section].get("preparation", {}).get("steps", [])
    node = dict(node)
    for step in steps:
        if "copied_from" in step:
            node[step["set"]] = _get(ours, step["copied_from"])
        elif step.get("removes_it"):
            node[step["set"]] = node.pop(step["from_ref_key"], step["default"])
        else:
            node[step["set"]] = node.get(step["from_ref_key"], step["default"])
    return node


def converted_sections(release: str, ours: dict) -> list[tuple[str, dict, str | None]]:
    """(path, node, dataclass) of every section verl converts that our config has."""
    out = []
    for section, info in vr.load("conversions.json", release)["sections"].items():
        declared = info.get("dataclass_type")
        parent, _, last = section.rpartition(".")
        if last == "*":
            nodes = {f"{parent}.{name}": child for name, child in _get(ours, parent).items()}
        else:
            try:
                nodes = {section: _get(ours, section)}
            except KeyError:
                continue
        for path, node in nodes.items():
            if isinstance(node, dict):
                out.append((path, prepared(section, node, ours, release), declared))
    return out


@pytest.mark.parametrize(("release", "engine"), CASES, ids=IDS)
def test_converted_sections_hold_only_fields_of_verls_dataclasses(release, engine, resolved):
    ours = resolved[release, engine]
    sections = converted_sections(release, ours)
    assert {"actor_rollout_ref.actor", "actor_rollout_ref.ref", "critic", "actor_rollout_ref.rollout"} <= {
        path for path, _, _ in sections
    }
    problems = sorted({p for path, node, declared in sections
                       for p in foreign_keys(node, declared, path, release)})
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize(("release", "engine"), CASES, ids=IDS)
def test_every_converted_section_carries_verls_target(release, engine, resolved):
    """verl converts these sections through their `_target_`: each must name the class verl uses."""
    wrong = []
    for section, info in vr.load("conversions.json", release)["sections"].items():
        target = info.get("target_per_engine", {}).get(engine)
        if target is None:
            continue
        try:
            ours = _get(resolved[release, engine], f"{section}._target_")
        except KeyError:
            ours = None
        if ours != target:
            wrong.append(f"{section}._target_: verl {target!r}, ours {ours!r}")
    assert not wrong, "\n".join(wrong)

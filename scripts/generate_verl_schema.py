"""Write verl_roles/verl_reference.json, the part of the frozen verl reference the package reads at run time.

The package cannot read tests/data at run time (the wheel does not ship it), so this script turns the
frozen reference of verl (tests/data/verl-<version>/, written by scripts/freeze_verl_reference.py
from an installed verl) into one small package data file:

``types``
    every leaf of verl's composed ``ppo_trainer`` (all ``model_engine`` options) whose type verl
    declares, with that type written in the schema's type language (see verl_roles/schema.py):
    ``"int | None"``, ``"list[int]"``, ``"str | float"``, ``'Literal["a", "b"]'``... A path whose
    type differs between engines maps to ``{engine: type}``. A leaf verl's own config sets to null
    also accepts null, whatever its field says: verl instantiates its sections through ``_target_``
    without checking types, and its defaults rely on it (``critic.forward_micro_batch_size``). A leaf
    below an untyped mapping field (``dict[str, Any]``) is ``Any``.
``targets``
    the ``_target_`` of every section of verl's composed config that has one (``{engine: target}``
    where engines differ): the gate accepts exactly these classes at exactly these paths.
``converted``
    every section verl builds a dataclass from on its path to training (an ``omega_conf_to_dataclass``
    call, and the sections that call instantiates through nested ``_target_`` keys), with the engines
    it does so under: a key such a dataclass has no field for makes verl refuse the config.
``names``
    verl's name lists the rules read: the registered advantage estimators, policy loss modes and
    reward managers, and the ``loss_agg_mode`` values verl checks.

Needs no verl and no verl_roles: only the frozen JSON files. Run it after refreezing verl::

    python scripts/generate_verl_schema.py          # rewrite verl_roles/verl_reference.json
    python scripts/generate_verl_schema.py --check  # exit 1 and show a diff when the file is stale
"""

from __future__ import annotations

import argparse
import difflib
import json
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
VERL_VERSION = "0.9.1"
REFERENCE = REPO / "tests" / "data" / f"verl-{VERL_VERSION}"
OUTPUT = REPO / "verl_roles" / "verl_reference.json"

# enums.json entry -> the name the package reads it under.
NAME_LISTS = {
    "adv_estimator": "adv_estimator",
    "policy_loss_mode": "policy_loss_mode",
    "reward_manager": "reward_manager",
    "loss_agg_mode": "loss_agg_mode",
    "tracking_backend": "tracking_backend",
    "resume_mode": "resume_mode",
    "warmup_style": "warmup_style",
}

_SCALARS = {"int": "int", "float": "float", "str": "str", "bool": "bool", "bytes": "str", "none": "None"}


def load(name: str, reference: Path) -> Any:
    return json.loads((reference / name).read_text(encoding="utf-8"))


def render(descriptor: Any) -> list[str]:
    """The alternatives of a frozen type descriptor, in the schema's type language."""
    if isinstance(descriptor, str):
        return ["Any"] if descriptor == "any" else [_SCALARS[descriptor]]
    kind = descriptor["kind"]
    if kind == "optional":
        return [*render(descriptor["of"]), "None"]
    if kind == "union":
        return [alt for member in descriptor["of"] for alt in render(member)]
    if kind in ("list", "set"):
        inner = join(render(descriptor["of"]))
        return ["list" if inner == "Any" else f"list[{inner}]"]
    if kind == "tuple":
        members = [join(render(m)) for m in descriptor["of"]]
        if descriptor["variadic"]:
            return ["list" if not members or members[0] == "Any" else f"list[{members[0]}]"]
        return [f"tuple[{', '.join(members)}]"]
    if kind == "dict":
        inner = join(render(descriptor["value"]))
        return ["dict" if inner == "Any" else f"dict[{inner}]"]
    if kind in ("literal", "enum"):
        return [f"Literal[{', '.join(json.dumps(v) for v in descriptor['values'])}]"]
    if kind == "dataclass":
        return ["dict"]
    return ["Any"]  # a class instance or an unresolvable hint: nothing a YAML value can be checked against


def join(alternatives: list[str]) -> str:
    """``a | b | None``: duplicates dropped, null last; ``Any`` absorbs everything."""
    if "Any" in alternatives:
        return "Any"
    unique = list(dict.fromkeys(a for a in alternatives if a != "None"))
    return " | ".join(unique + (["None"] if "None" in alternatives else []))


def declared_type(leaf: dict[str, Any], dataclasses: dict[str, Any]) -> Any | None:
    declared = leaf.get("declared")
    if not declared:
        return None
    if "target_of" in declared:
        return "str"
    if "field" not in declared:
        return None
    if "type" in declared:
        return declared["type"]
    return dataclasses[declared["class"]]["fields"][declared["field"]]["type"]


def declared_fields(leaves: dict[str, Any], dataclasses: dict[str, Any]) -> dict[str, str]:
    """What the dataclasses behind the composed sections declare beyond the composed leaves.

    A section verl builds as a dataclass takes every field of that class, also one verl's YAML leaves
    out (``FSDPEngineConfig.mixed_precision``): its type at its path. A field typed as a mapping of
    anything (``dict[str, Any]``, ``turbo_config``) is typed as a whole at its own path, even where its
    composed keys are leaves below it: its keys are free, verl passes the mapping on."""
    sections: dict[str, str] = {}
    for path, leaf in leaves.items():
        declared = leaf.get("declared") or {}
        if "class" not in declared or "field" not in declared:
            continue
        parts = path.split(".")
        if declared["field"] not in parts:
            continue
        at = len(parts) - 1 - parts[::-1].index(declared["field"])
        sections.setdefault(".".join(parts[:at]), declared["class"])
    found: dict[str, str] = {}
    for section, name in sections.items():
        for field, spec in dataclasses.get(name, {}).get("fields", {}).items():
            if field.startswith("_"):
                continue
            path = f"{section}.{field}" if section else field
            descriptor = spec["type"]
            if free_mapping(descriptor):
                found[path] = join(render(descriptor))
            elif path not in leaves and not any(key.startswith(f"{path}.") for key in leaves):
                found[path] = join(render(descriptor) + (["None"] if spec.get("default", "") is None else []))
    return found


def free_mapping(descriptor: Any) -> bool:
    """A ``dict[str, Any]`` (optional or not): a mapping verl passes on with whatever keys it has."""
    if isinstance(descriptor, dict) and descriptor.get("kind") == "optional":
        return free_mapping(descriptor["of"])
    return isinstance(descriptor, dict) and descriptor.get("kind") == "dict" and descriptor.get("value") == "any"


def leaf_type(leaf: dict[str, Any], dataclasses: dict[str, Any]) -> str | None:
    descriptor = declared_type(leaf, dataclasses)
    if descriptor is None:
        return None
    alternatives = render(descriptor)
    if leaf.get("resolved", "") is None:
        alternatives.append("None")
    return join(alternatives)


_ENGINES: list[str] = []


def build(reference: Path = REFERENCE) -> dict[str, Any]:
    meta = load("meta.json", reference)
    _ENGINES[:] = meta["engines"]
    dataclasses = load("types.json", reference)["dataclasses"]
    per_path: dict[str, dict[str, str]] = {}
    for engine in meta["engines"]:
        leaves = load(f"composition/{engine}.json", reference)["leaves"]
        for path, leaf in leaves.items():
            text = leaf_type(leaf, dataclasses)
            if text is not None:
                per_path.setdefault(path, {})[engine] = text
        for path, text in declared_fields(leaves, dataclasses).items():
            per_path.setdefault(path, {})[engine] = text
    per_section: dict[str, dict[str, str]] = {}
    for engine in meta["engines"]:
        for path, leaf in load(f"composition/{engine}.json", reference)["leaves"].items():
            for section, target in _targets_in(path, leaf.get("resolved")):
                per_section.setdefault(section, {})[engine] = target
    types = _by_engine(per_path)
    enums = load("enums.json", reference)
    converted: dict[str, dict[str, bool]] = {}
    for section, record in load("conversions.json", reference)["sections"].items():
        for engine in meta["engines"]:
            for path in [section, *record.get("nested_targets", {}).get(engine, [])]:
                converted.setdefault(path, {})[engine] = True
    return {
        "converted": {path: sorted(engines) for path, engines in sorted(converted.items())},
        "generated_by": f"scripts/generate_verl_schema.py from tests/data/verl-{meta['verl_version']}/",
        "verl_version": meta["verl_version"],
        "engines": meta["engines"],
        "names": {ours: list(enums[theirs]["values"]) for theirs, ours in sorted(NAME_LISTS.items())
                  if "values" in enums.get(theirs, {})},
        "strategies": strategies(meta["engines"], reference, enums),
        "targets": _by_engine(per_section),
        "types": types,
    }


def strategies(engines: list[str], reference: Path, enums: dict[str, Any]) -> dict[str, list[str]]:
    """engine -> the ``strategy`` values a role runs it with: what the class of the actor's engine block
    asserts (``FSDPEngineConfig``: fsdp, fsdp2, fsdp_turbo), else the composed default alone."""
    asserted = enums.get("engine_strategy", {}).get("values", {})
    found: dict[str, list[str]] = {}
    for engine in engines:
        leaves = load(f"composition/{engine}.json", reference)["leaves"]
        default = leaves.get("actor_rollout_ref.actor.strategy", {}).get("resolved")
        block_classes = {
            leaf["declared"]["class"] for path, leaf in leaves.items()
            if path.startswith("actor_rollout_ref.actor.") and path.endswith(".strategy")
            and path != "actor_rollout_ref.actor.strategy" and "class" in (leaf.get("declared") or {})
        }
        values = next((asserted[name] for name in sorted(block_classes) if name in asserted), None)
        found[engine] = list(values) if values else [default]
    return found


def _targets_in(path: str, resolved: Any) -> list[tuple[str, str]]:
    """(section, target) of a ``_target_`` leaf, or of every ``_target_`` inside a leaf whose resolved
    value is a section (a reference to another section, ``rollout.mtp: ${...model.mtp}``)."""
    if path.endswith("._target_"):
        return [(path[: -len("._target_")], resolved)] if isinstance(resolved, str) else []
    found: list[tuple[str, str]] = []
    if isinstance(resolved, dict):
        for key, value in resolved.items():
            found += _targets_in(f"{path}.{key}", value)
    return found


def _by_engine(per_path: dict[str, dict[str, str]]) -> dict[str, Any]:
    """path -> its value when every engine agrees, else {engine: value}."""
    merged: dict[str, Any] = {}
    for path in sorted(per_path):
        by_engine = per_path[path]
        texts = set(by_engine.values())
        merged[path] = texts.pop() if len(texts) == 1 and len(by_engine) == len(_ENGINES) else dict(
            sorted(by_engine.items()))
    return merged


def dump(content: dict[str, Any]) -> str:
    """Sorted keys, one entry per line (small diffs when verl changes)."""
    lines = ["{"]
    keys = sorted(content)
    for i, key in enumerate(keys):
        value = content[key]
        comma = "," if i < len(keys) - 1 else ""
        if isinstance(value, dict):
            lines.append(f" {json.dumps(key)}: {{")
            inner = sorted(value)
            for j, sub in enumerate(inner):
                sub_comma = "," if j < len(inner) - 1 else ""
                lines.append(f"  {json.dumps(sub)}: {json.dumps(value[sub], sort_keys=True)}{sub_comma}")
            lines.append(f" }}{comma}")
        else:
            lines.append(f" {json.dumps(key)}: {json.dumps(value, sort_keys=True)}{comma}")
    lines.append("}")
    return "\n".join(lines) + "\n"


def render_file(reference: Path = REFERENCE) -> str:
    return dump(build(reference))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="write nothing; exit 1 with a diff when stale")
    args = parser.parse_args(argv)
    text = render_file()
    current = OUTPUT.read_text(encoding="utf-8") if OUTPUT.is_file() else ""
    if args.check:
        if current == text:
            print(f"{OUTPUT.relative_to(REPO)} is fresh")
            return 0
        diff = difflib.unified_diff(
            current.splitlines(keepends=True),
            text.splitlines(keepends=True),
            f"{OUTPUT.relative_to(REPO)} (committed)",
            f"{OUTPUT.relative_to(REPO)} (from tests/data/verl-{VERL_VERSION})",
        )
        sys.stdout.writelines(diff)
        stale = f"{OUTPUT.relative_to(REPO)} is stale: run python scripts/generate_verl_schema.py"
        print(stale, file=sys.stderr)
        return 1
    if current != text:
        tmp = OUTPUT.with_suffix(".json.tmp")
        tmp.write_text(text, encoding="utf-8")
        tmp.replace(OUTPUT)
    print(f"wrote {OUTPUT.relative_to(REPO)}: {len(build()['types'])} typed paths")
    return 0


if __name__ == "__main__":
    sys.exit(main())

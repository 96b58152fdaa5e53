"""Generate what each supported verl release contributes to verl_roles, from its frozen reference.

A release is data, never a hand-edited copy. For every frozen reference ``tests/data/verl-<release>/``
(written by scripts/freeze_verl_reference.py from an installed verl) this script writes:

``verl_roles/upstream/verl_releases/<release>.json`` (package data; the wheel does not ship tests/data)
    ``types``: every leaf of verl's composed ``ppo_trainer`` whose type verl declares, and every field the
    dataclasses behind its sections declare, in the schema's type language (verl_roles/validation/schema.py):
    ``"int | None"``, ``"list[int]"``, ``'Literal["a", "b"]'``...; a path whose type differs between
    engines maps to ``{engine: type}``. A leaf verl's own config sets to null also accepts null. A leaf
    below an untyped mapping field (``dict[str, Any]``) is ``Any``, and such a field is typed as a whole.
    ``targets``: the ``_target_`` of every section that has one. ``converted``: every section verl
    builds a dataclass from on its path to training, with the engines it does so under.
    ``conversion_calls``: each kind of ``omega_conf_to_dataclass`` call the release makes (section,
    dataclass, where), which verl_roles/upstream/verl_prelaunch.py makes before a launch. ``names``:
    verl's name lists the rules read. ``strategies``: each engine's ``strategy`` values. ``engines``:
    the release's engines that verl_roles has. ``layer``: per engine, what composing our config tree
    for this release changes in it (:func:`layer`): the defaults this release has where ours differ,
    the keys it has that ours lacks (``set``), and the keys of ours it lacks (``delete``, with our value,
    which a config file that changed the key keeps, so the gate names it).
``conf/verl_version/<release>.yaml``
    the option of the ``verl_version`` config group.
the ``verl_version`` line of ``conf/ppo_trainer.yaml``'s defaults list
    :data:`verl_roles.base.releases.DEFAULT_RELEASE`.
``conf/model_engine/<engine>.yaml`` (and each alias)
    the options of the ``model_engine`` group, from the engine table of verl_roles/base/layout.py and the
    section files the tree holds (:mod:`verl_roles.inputs.engine_options`): not a release's data, but
    data all the same, generated beside it.

Run it in verl_roles' own environment (no verl needed) after freezing a release::

    python scripts/generate_verl_releases.py          # rewrite every generated file
    python scripts/generate_verl_releases.py --check  # exit 1 and show a diff when one is stale
"""

from __future__ import annotations

import argparse
import difflib
import json
import re
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
DATA = REPO / "tests" / "data"
sys.path.insert(0, str(REPO))  # this checkout's verl_roles, whatever is installed

from omegaconf import OmegaConf  # noqa: E402

from verl_roles.base import releases  # noqa: E402
from verl_roles.base.layout import ENGINE_KEY, ENGINES, PRIMARY_CONFIG, ROLES  # noqa: E402
from verl_roles.base.layout import engine as engine_row  # noqa: E402
from verl_roles.hydra_adapter.compose import compose_raw  # noqa: E402
from verl_roles.inputs import paths  # noqa: E402
from verl_roles.inputs.cmdline import CommandLine  # noqa: E402
from verl_roles.inputs.engine_options import engine_option_files  # noqa: E402
from verl_roles.steps import pipeline  # noqa: E402
from verl_roles.steps.flat_lora import add_flat_lora_keys  # noqa: E402
from verl_roles.steps.sequence_parallel import write_effective_sequence_parallel  # noqa: E402
from verl_roles.upstream import verl_differences  # noqa: E402

PACKAGE_DATA = releases.RELEASES_DIR
GROUP_DIR = REPO / "conf" / releases.VERSION_KEY
CONF = REPO / "conf"
PRIMARY = CONF / "ppo_trainer.yaml"

# enums.json entry -> the name the package reads it under.
NAME_LISTS = {
    "adv_estimator": "adv_estimator",
    "policy_loss_mode": "policy_loss_mode",
    "reward_manager": "reward_manager",
    "loss_agg_mode": "loss_agg_mode",
    "mcore_optimizer_dtype": "mcore_optimizer_dtype",
    "tracking_backend": "tracking_backend",
    "resume_mode": "resume_mode",
    "warmup_style": "warmup_style",
    "rollout_name": "rollout_name",
    "rollout_mode": "rollout_mode",
    # ray.init's keyword names (verl passes ray_kwargs.ray_init on to it: verl_roles/upstream/passed_on.py).
    "ray_init_parameter": "ray_init_parameter",
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
    return (isinstance(descriptor, dict) and descriptor.get("kind") == "dict"
            and descriptor.get("value") == "any")


def leaf_type(leaf: dict[str, Any], dataclasses: dict[str, Any]) -> str | None:
    descriptor = declared_type(leaf, dataclasses)
    if descriptor is None:
        return None
    alternatives = render(descriptor)
    if leaf.get("resolved", "") is None:
        alternatives.append("None")
    return join(alternatives)


_ENGINES: list[str] = []


def frozen_releases() -> list[str]:
    """Every release frozen under tests/data, oldest first."""
    found = [p.name[len("verl-"):] for p in DATA.glob("verl-*") if (p / "meta.json").is_file()]
    return sorted(found, key=lambda r: tuple(int(x) for x in r.split(".") if x.isdigit()))


def build(reference: Path, trees: dict[str, OurTree], every_release: dict[str, set[str]]) -> dict[str, Any]:
    meta = dict(load("meta.json", reference))
    verl_engines = list(meta["engines"])
    meta["engines"] = [engine for engine in meta["engines"] if engine in ENGINES]
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
    enums = load("enums.json", reference)
    converted: dict[str, dict[str, bool]] = {}
    for section, record in load("conversions.json", reference)["sections"].items():
        for engine in meta["engines"]:
            for path in [section, *record.get("nested_targets", {}).get(engine, [])]:
                converted.setdefault(path, {})[engine] = True
    layers = {
        engine: compute_layer(meta["verl_version"], engine, trees[engine],
                              load(f"composition/{engine}.json", reference)["leaves"], every_release[engine])
        for engine in meta["engines"]
    }
    # A key the layer adds that verl types nowhere (a plain mapping's key, ``data.continuous_token``) is
    # typed like the release's default for it, as our table types such keys of conf/.
    for engine, layer in layers.items():
        for path, value in layer["add"].items():
            inferred = value_type(value)
            if inferred is not None and engine not in per_path.get(path, {}) and not refs(value):
                per_path.setdefault(path, {})[engine] = inferred
    types = _by_engine(per_path)
    inert = (reference / "inert.json")
    return {
        "conversion_calls": conversion_calls(load("conversions.json", reference)["calls"]),
        "inert": load("inert.json", reference)["rows"] if inert.is_file() else {},
        "converted": {path: sorted(engines) for path, engines in sorted(converted.items())},
        "generated_by": f"scripts/generate_verl_releases.py from tests/data/verl-{meta['verl_version']}/",
        "layer": layers,
        "verl_version": meta["verl_version"],
        "engines": meta["engines"],
        "verl_engines": verl_engines,
        "leaves": sorted({path for engine in meta["engines"]
                          for path in load(f"composition/{engine}.json", reference)["leaves"]}),
        "names": {ours: list(enums[theirs]["values"]) for theirs, ours in sorted(NAME_LISTS.items())
                  if "values" in enums.get(theirs, {})},
        "strategies": strategies(meta["engines"], reference, enums),
        "targets": _by_engine(per_section),
        "types": types,
    }


def conversion_calls(calls: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Every kind of ``omega_conf_to_dataclass`` call the release makes (the section converted, the
    dataclass named, or None for the node's ``_target_``) with the places it is made: what
    verl_roles/upstream/verl_prelaunch.py converts, in verl's Python, before a launch."""
    kinds: dict[tuple[str, str], dict[str, Any]] = {}
    for call in calls:
        if call["section"] is None:
            continue  # a trainer of its own config (the SFT trainers), never a ppo_trainer section
        identity = (call["section"], call["dataclass_type"] or "")
        kind = kinds.setdefault(
            identity, {"section": call["section"], "dataclass_type": call["dataclass_type"], "sites": []})
        kind["sites"].append(f"{call['file']}:{call['line']}")
    return [{**kind, "sites": sorted(kind["sites"])} for _, kind in sorted(kinds.items())]


# --------------------------------------------------------------------------------------------- layers
#
# A release's layer is computed against the tree conf/ writes (composed with no layer): every leaf of
# verl's composed config for the release is then in ours with the release's value, or differs on purpose
# (verl_roles/upstream/verl_differences.py).

_REF = re.compile(r"\$\{(?:oc\.select:)?([A-Za-z_][\w.]*)")
_PURE_REF = re.compile(r"\$\{(?:oc\.select:)?([A-Za-z_][\w.]*)(?:,[^${}]*)?\}")


def refs(raw: Any) -> list[str]:
    """The absolute key paths an interpolation string refers to."""
    return _REF.findall(raw) if isinstance(raw, str) else []


def pure_ref(raw: Any) -> str | None:
    """The path a value that is nothing but one reference follows (``${a.b}``, ``${oc.select:a.b,x}``)."""
    if isinstance(raw, str):
        match = _PURE_REF.fullmatch(raw)
        if match:
            return match.group(1)
    return None


_ABSENT = object()


def lookup(tree: Any, path: str) -> Any:
    return paths.get(tree, path, _ABSENT)


class OurTree:
    """The tree conf/ writes for one engine: raw (interpolations kept) and resolved, and which leaves
    follow which (a leaf that is one reference follows the key it names)."""

    def __init__(self, engine: str) -> None:
        with releases.unlayered():
            cfg = compose_raw(PRIMARY_CONFIG, [f"model_engine={engine}"])
            # What the pipeline's writing steps make of it (the flat LoRA keys derived from the block,
            # sequence_parallel as verl runs it), without its checks: they judge a config against the
            # release data this script is about to write (a role, an engine or a key new in conf/ is
            # unknown to the data generated before it), and an engine may not be shipped by the
            # tree's release at all.
            produced = compose_raw(PRIMARY_CONFIG, [f"model_engine={engine}"])
            resolved = pipeline.resolve(produced, {})
            write_effective_sequence_parallel(resolved, CommandLine.of(), {})
            add_flat_lora_keys(resolved)
            self.produced = OmegaConf.to_container(resolved)
        self.raw = OmegaConf.to_container(cfg, resolve=False)
        self.resolved = OmegaConf.to_container(cfg, resolve=True)
        self.raw_leaves = paths.flat_leaves(self.raw)
        self.followers: dict[str, set[str]] = {}
        for path in self.raw_leaves:
            for source in self.chain(path)[1:]:
                self.followers.setdefault(source, set()).add(path)

    def source(self, path: str, depth: int = 0) -> str | None:
        """The raw leaf that holds ``path``'s value, through references to whole sections."""
        parts = path.split(".")
        node: Any = self.raw
        for i, part in enumerate(parts):
            ref = pure_ref(node) if i else None
            if ref is not None and depth < 20:
                return self.source(".".join([ref, *parts[i:]]), depth + 1)
            if not isinstance(node, dict) or part not in node:
                return None
            node = node[part]
        return path if path in self.raw_leaves else None

    def chain(self, path: str) -> list[str]:
        """``path``, the raw leaf holding its value, and each key that one follows in turn."""
        found = [path]
        current = self.source(path)
        while current is not None and len(found) < 20:
            if current not in found:
                found.append(current)
            ref = pure_ref(self.raw_leaves[current])
            following = self.source(ref) if ref is not None else None
            current = following if following not in found else None
        return found

    def resolved_at(self, path: str) -> Any:
        """``path``'s value in the config the pipeline produces, else in the tree."""
        found = lookup(self.produced, path)
        return found if found is not _ABSENT else lookup(self.resolved, path)


def role_blocks(engine: str, tree: OurTree) -> list[str]:
    row = engine_row(engine)
    blocks = [f"{role.section}.{row.block(role.name)}" for role in ROLES if role.engine_block]
    return [block for block in blocks if isinstance(lookup(tree.raw, block), dict)]


def compute_layer(release: str, engine: str, tree: OurTree, verl: dict[str, Any],
                  every_release: set[str]) -> dict[str, Any]:
    """What composing ``release`` for ``engine`` changes in ``tree`` (see :func:`releases.layer`)."""
    mine = verl_differences.for_engine(engine)

    def deliberate(path: str) -> bool:
        return any(entry.matches(path, engine) for entry in mine)

    verl_paths = set(verl)
    prefixes = {".".join(p.split(".")[:i]) for p in verl_paths for i in range(1, p.count(".") + 1)}

    def in_release(path: str) -> bool:
        """``path`` is a leaf or a section of the release's config, or lies inside a leaf of it."""
        parts = path.split(".")
        return path in verl_paths or path in prefixes or any(
            ".".join(parts[:i]) in verl_paths for i in range(1, len(parts)))

    # Keys conf/ has that this release lacks (another release has them).
    deleted = {p for p in tree.raw_leaves if p in every_release and not in_release(p) and not deliberate(p)}
    # Our own keys (a baseline leaf) that only deleted keys follow would do nothing: delete them too.
    changed = True
    while changed:
        changed = False
        for source, followers in tree.followers.items():
            if source in deleted or source in every_release or source not in tree.raw_leaves:
                continue
            if followers and followers <= deleted:
                deleted.add(source)
                changed = True

    # Defaults the release gives another value: set where the value lives, as far up the chain of keys
    # it follows as every key that follows there has the release's new value.
    settings: dict[str, Any] = {}
    for path, leaf in sorted(verl.items()):
        if "resolved" not in leaf or deliberate(path):
            continue
        ours = tree.resolved_at(path)
        if ours is _ABSENT or paths.same_value(ours, leaf["resolved"]):
            continue
        value = leaf["resolved"]
        target = None
        for candidate in tree.chain(path):
            if candidate not in tree.raw_leaves:
                continue
            affected = ({candidate} | tree.followers.get(candidate, set())) & verl_paths - deleted
            if all("resolved" in verl[p] and paths.same_value(verl[p]["resolved"], value) for p in affected):
                target = candidate
            else:
                break
        if target is None:
            raise SystemExit(f"error: verl {release} ({engine}) sets {path} to {value!r}, which no key of "
                             "conf/ can carry without changing another; list it in verl_differences.py")
        if target in settings and not paths.same_value(settings[target], value):
            raise SystemExit(f"error: verl {release} ({engine}): {target} would need two values")
        settings[target] = value

    # Keys the release has and conf/ lacks. A key every role's engine block gains goes to the engine's
    # baseline, which the blocks follow, as every other key of theirs.
    added: dict[str, Any] = {}
    for path, leaf in sorted(verl.items()):
        if deliberate(path) or tree.resolved_at(path) is not _ABSENT:
            continue
        parts = path.split(".")
        if any(".".join(parts[:i]) in added for i in range(1, len(parts))):
            continue
        raw = leaf.get("raw")
        if refs(raw) and not all(in_release(r) for r in refs(raw)):
            raw = leaf.get("resolved", raw)
        added[path] = raw
    blocks = role_blocks(engine, tree)
    baseline = engine_row(engine).baseline
    if blocks and isinstance(lookup(tree.raw, baseline), dict):
        per_block = [{p[len(b) + 1:]: p for p in added if p.startswith(b + ".")} for b in blocks]
        for key in sorted(set(per_block[0]).intersection(*per_block[1:])):
            values = [verl[block[key]].get("resolved", _ABSENT) for block in per_block]
            agree = all(paths.same_value(v, values[0]) for v in values)
            if _ABSENT in values or not agree or refs(values[0]):
                continue
            if lookup(tree.raw, f"{baseline}.{key}") is not _ABSENT:
                continue
            added[f"{baseline}.{key}"] = values[0]
            for block in per_block:
                added[block[key]] = "${" + f"{baseline}.{key}" + "}"

    # Nothing left may refer to a deleted key, unless oc.select gives it a default.
    for path, raw in tree.raw_leaves.items():
        if path in deleted:
            continue
        for ref in refs(raw):
            if ref in deleted and not (isinstance(raw, str) and "oc.select:" in raw and "," in raw):
                raise SystemExit(f"error: verl {release} ({engine}) lacks {ref}, which {path} follows")

    return {"add": added, "delete": compress(deleted, tree, in_release), "set": settings}


def compress(deleted: set[str], tree: OurTree, in_release: Any) -> list[str]:
    """The deleted leaves, as the largest sections all of whose leaves are deleted."""
    under: dict[str, list[str]] = {}
    for path in tree.raw_leaves:
        parts = path.split(".")
        for i in range(1, len(parts)):
            under.setdefault(".".join(parts[:i]), []).append(path)
    found = set()
    for path in deleted:
        top = path
        parts = path.split(".")
        for i in range(len(parts) - 1, 0, -1):
            section = ".".join(parts[:i])
            if in_release(section) or not all(p in deleted for p in under[section]):
                break
            top = section
        found.add(top)
    return sorted(found)


def value_type(value: Any) -> str | None:
    """The type of a default value in the schema's type language (a null default says nothing: Any)."""
    if value is None:
        return "Any"
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "int"
    if isinstance(value, float):
        return "float"
    if isinstance(value, str):
        return "str"
    if isinstance(value, list):
        return "list"
    if isinstance(value, dict):
        return "dict"
    return None  # a value JSON cannot hold does not come from a frozen reference


def strategies(engines: list[str], reference: Path, enums: dict[str, Any]) -> dict[str, list[str]]:
    """engine -> the ``strategy`` values a role runs it with: what the class of the actor's engine block
    asserts (``FSDPEngineConfig``: fsdp, fsdp2, fsdp_turbo) when the composed default is one of them,
    else the composed default alone."""
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
        # The block's strategy names are the section's only where they include its default (FSDP:
        # actor.strategy fsdp, fsdp_config.strategy fsdp; an engine whose block names itself otherwise,
        # as MindSpeed's mindspeed_megatron under actor.strategy mindspeed, keeps the default alone).
        found[engine] = list(values) if values and default in values else [default]
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
    return json.dumps(content, indent=1, sort_keys=True, ensure_ascii=False) + "\n"


def option_text(release: str) -> str:
    """``conf/verl_version/<release>.yaml``."""
    return (
        "# @package _global_\n"
        f"# The verl release this config is written for: verl {release}. Generated by\n"
        "# scripts/generate_verl_releases.py (do not edit): what the release changes in this tree, its\n"
        f"# defaults and keys, is data in verl_roles/upstream/verl_releases/{release}.json, applied when\n"
        "# the config is composed.\n"
        "\n"
        "# The verl release the trainer config is written for (verl_version=RELEASE picks another).\n"
        f"{releases.VERSION_KEY}: '{release}'\n"
    )


DEFAULT_LINE = re.compile(rf"^(  - {releases.VERSION_KEY}: ).*$", re.MULTILINE)


def primary_text(current: str) -> str:
    """conf/ppo_trainer.yaml with its ``verl_version`` default set to the seam's default release."""
    if not DEFAULT_LINE.search(current):
        raise SystemExit(f"error: {PRIMARY} has no `  - {releases.VERSION_KEY}: ...` line in its defaults")
    return DEFAULT_LINE.sub(lambda m: m.group(1) + releases.DEFAULT_RELEASE, current, count=1)


def outputs() -> dict[Path, str]:
    """Every generated file and its text."""
    files: dict[Path, str] = {}
    trees = {engine: OurTree(engine) for engine in ENGINES}
    # Every key some release has under some engine: a key of ours that verl has elsewhere but not in the
    # release and engine at hand is deleted there (an engine may be shipped by fewer releases than the
    # keys every engine shares).
    known: set[str] = set()
    for release in frozen_releases():
        for engine in ENGINES:
            leaves = DATA / f"verl-{release}" / "composition" / f"{engine}.json"
            if leaves.is_file():
                known |= set(json.loads(leaves.read_text(encoding="utf-8"))["leaves"])
    every_release: dict[str, set[str]] = {engine: known for engine in ENGINES}
    for release in frozen_releases():
        content = build(DATA / f"verl-{release}", trees, every_release)
        files[PACKAGE_DATA / f"{release}.json"] = dump(content)
        files[GROUP_DIR / f"{release}.yaml"] = option_text(release)
    files[PRIMARY] = primary_text(PRIMARY.read_text(encoding="utf-8"))
    files.update(engine_option_files(CONF))
    return files


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="write nothing; exit 1 with a diff when stale")
    args = parser.parse_args(argv)
    files = outputs()
    known = {*PACKAGE_DATA.glob("*.json"), *GROUP_DIR.glob("*.yaml"), *(CONF / ENGINE_KEY).glob("*.yaml")}
    unlisted = sorted(path for path in known if path not in files)
    stale = []
    for path, text in files.items():
        current = path.read_text(encoding="utf-8") if path.is_file() else ""
        if current == text:
            continue
        stale.append(path)
        if args.check:
            rel = path.relative_to(REPO)
            sys.stdout.writelines(difflib.unified_diff(
                current.splitlines(keepends=True), text.splitlines(keepends=True),
                f"{rel} (committed)", f"{rel} (generated)"))
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_name(f".{path.name}.tmp")
            tmp.write_text(text, encoding="utf-8")
            tmp.replace(path)
    if args.check:
        for path in unlisted:
            source = ("no row of verl_roles/base/layout.py" if path.parent.name == ENGINE_KEY
                      else f"no frozen reference tests/data/verl-{path.stem}/")
            print(f"{path.relative_to(REPO)}: {source} generates it")
        if stale or unlisted:
            print("stale: run python scripts/generate_verl_releases.py", file=sys.stderr)
            return 1
        print(f"generated release files are fresh ({', '.join(frozen_releases())})")
        return 0
    for path in unlisted:
        path.unlink()
    shown = ", ".join(str(p.relative_to(REPO)) for p in stale) or "none changed"
    print(f"releases {', '.join(frozen_releases())}: {shown}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

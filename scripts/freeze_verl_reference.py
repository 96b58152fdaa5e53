"""Freeze the config surface of an installed verl into tests/data/verl-<version>/, or compare with it.

Run it with a Python where verl is importable (it does not need verl_roles)::

    /path/to/verl-env/bin/python scripts/freeze_verl_reference.py                   # freeze that verl
    /path/to/newer/bin/python scripts/freeze_verl_reference.py --compare-installed  # what it changes

The release is the one installed: freeze mode writes tests/data/verl-<installed version>/, and
``--verl-version X`` only asserts that the installed verl is X (the script refuses otherwise; no
release is named in the script). It composes verl's own ``ppo_trainer`` config (from the installed package's
``verl/trainer/config`` tree, with Hydra's compose API in an isolated context) once per option of its
``model_engine`` group, inspects the dataclasses verl converts config sections into, scans verl's
source for every ``omega_conf_to_dataclass`` call, reads verl's name registries, and, when the
examples corpus exists (``tests/data/verl_examples/<source>/*.txt``, see
scripts/extract_verl_examples.py), records whether verl composes each example. One JSON file per
concern, sorted keys, byte-identical on re-run:

``meta.json``
    verl / Hydra / OmegaConf versions, the engines (every option of verl's ``model_engine`` group,
    whatever the device it needs), the data files, the sha256 of every verl file a fact was read from
    (the config tree's YAML files, the dataclass modules, the files with a conversion call, the registry
    modules), and ``corpus``: per examples source, the release it belongs to (its MANIFEST's
    ``release:`` line) and snapshot, and ``of_this_release``, the sources of the installed release.
``composition/<engine>.json``
    every leaf path of ``ppo_trainer`` composed with ``model_engine=<engine>``. A leaf is a scalar, a
    list (one leaf, its value the whole list: verl's lists hold only scalars) or an empty mapping.
    Each leaf has ``raw`` (interpolations kept as text) and either ``resolved`` or ``unresolved``
    (the error class and first line), plus ``declared``: the dataclass field whose type governs it
    (``class``, ``field``, ``type``) when it sits under a section verl converts, or ``not_a_field_of``
    when its key is not a field of that dataclass. ``targets`` maps each section path to its
    ``_target_``.
``types.json``
    every dataclass reachable from those ``_target_`` keys and explicit ``dataclass_type`` arguments,
    once each: its source file, dataclass bases and fields (normalized type descriptor, whether it
    has a default, and the default when it is a plain value). ``targets`` maps each ``_target_`` text
    to the class it names.
``conversions.json``
    every ``omega_conf_to_dataclass`` call in verl (file, line, argument, ``dataclass_type``) with the
    config section it converts; per section, the call sites, the class per engine, the sections
    instantiated with it through nested ``_target_`` keys, the preparation verl applies first (the
    ref), and whether verl's default composition converts.
``enums.json``
    name lists verl exposes: advantage estimators, policy loss modes, reward managers,
    ``loss_agg_mode`` values, each with where it comes from, or ``absent`` (what was not found) when
    the installed release does not have that list.
``inert.json``
    per row of verl_roles' table of keys verl does not read (verl_roles/upstream/inert_table.py, loaded by
    path), the lines of this verl where its anchors are (``verl/<file>:<line>``): ``rows`` holds the rows
    whose anchors were all found (the release's citations), ``not_found`` the others with the anchor missing,
    so a release that moved or dropped a read is noticed here.
``examples_verdicts.json``
    per example launch: whether verl's config tree composes it, or the error class and first line;
    when it composes, whether it resolves and whether verl's ``validate_config`` accepts it after the
    config steps verl's entry point applies first (``entry_point``, read from verl/trainer/main_ppo.py:
    e.g. moving legacy reward keys), or the innermost error. The script sets
    ``HF_HUB_OFFLINE=1``; a launch whose check opens the model or needs a rollout engine fails here
    for that reason (no model files, no vLLM), which ``validate_error`` shows.

Type descriptors: a builtin name (``"int"``, ``"float"``, ``"str"``, ``"bool"``, ``"any"``,
``"none"``) or an object with ``kind`` one of ``optional`` (``of``), ``union`` (``of``: list),
``list`` / ``set`` (``of``), ``tuple`` (``of``: list, ``variadic``), ``dict`` (``key``, ``value``),
``literal`` (``values``), ``enum`` (``ref``, ``values``), ``dataclass`` (``ref``: a key of
types.json's ``dataclasses``), ``class`` (``ref``), ``unresolved`` (``text``).

``--compare-installed [RELEASE]`` builds the same reference from the installed verl (any version) and
prints what it adds, removes or changes relative to the frozen tests/data/verl-<RELEASE>/ (default: the
newest release frozen there; ``--out-dir`` names another reference folder) (leaves,
defaults, types, ``_target_`` keys, enums, conversions, example verdicts); source hashes and call
line numbers are shown as notes only. Exit code 0 when the surface is identical, 1 when it differs,
2 on a usage error (verl missing, wrong version, no frozen reference).
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import dataclasses
import enum
import hashlib
import importlib
import importlib.metadata
import inspect
import io
import json
import os
import re
import sys
import textwrap
import types
import typing
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
DATA_DIR = REPO / "tests" / "data"
# A frozen reference is the folder DATA_DIR / f"{REFERENCE_PREFIX}{release}".
REFERENCE_PREFIX = "verl-"
PRIMARY_CONFIG = "ppo_trainer"
ENGINE_GROUP = "model_engine"
EXAMPLES_DIR = DATA_DIR / "verl_examples"
# verl's package folders searched for omega_conf_to_dataclass calls (experimental/ holds the agent
# loop, which converts the rollout and model sections on the trainer's default path).
SCANNED_PACKAGES = ("trainer", "workers", "utils", "experimental")
CONVERT_FUNCTION = "omega_conf_to_dataclass"

JSONValue = Any
OMEGACONF_MISSING = "???"
OFFLINE_ENVIRONMENT = ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_DATASETS_OFFLINE")


class UsageError(Exception):
    """A problem the user fixes (wrong interpreter, wrong verl version, missing reference)."""


# ----------------------------------------------------------------------------------------------
# Which config section each conversion call converts. The scan finds every call; this table says,
# per (file, argument text), which section of the trainer config reaches it. A call missing from the
# table is reported as unmapped (and shows up in --compare-installed), so a new verl cannot add a
# conversion unnoticed. Sections are paths in the composed ppo_trainer config; None means the call
# converts something that is not a ppo_trainer section (SFT trainer configs).
# One table serves every release: a row is keyed by file and argument text, never by line, and a row
# whose call a release does not have is simply unused there (verl/trainer/main_ppo_sync.py is in older
# releases only, the v1 trainer and the skip manager in newer ones only). Before adding a row for a new
# release, read the call's enclosing function: the same key must mean the same section everywhere.
# ----------------------------------------------------------------------------------------------
ARR = "actor_rollout_ref"
SECTION_OF_CALL: dict[tuple[str, str], tuple[str | None, str]] = {
    ("verl/utils/config.py", "config.actor_rollout_ref.actor"): (f"{ARR}.actor", "validate_config"),
    ("verl/utils/config.py", "config.critic"): ("critic", "validate_config, when a critic is used"),
    ("verl/utils/skip/skip_manager.py", "config.skip"): ("skip", "skip manager"),
    ("verl/workers/engine_workers.py", "self.config.model"): (
        f"{ARR}.model",
        "ActorRolloutRefWorker; self.config is actor_rollout_ref",
    ),
    ("verl/workers/engine_workers.py", "self.config.ref"): (
        f"{ARR}.ref",
        "ActorRolloutRefWorker, after the preparation recorded under the section",
    ),
    ("verl/workers/engine_workers.py", "self.config.actor"): (f"{ARR}.actor", "ActorRolloutRefWorker"),
    ("verl/workers/engine_workers.py", "self.config.rollout"): (f"{ARR}.rollout", "ActorRolloutRefWorker"),
    ("verl/workers/engine_workers.py", "self.config.rollout.checkpoint_engine"): (
        f"{ARR}.rollout.checkpoint_engine",
        "ActorRolloutRefWorker",
    ),
    ("verl/workers/engine_workers.py", "omega_profiler_config"): (
        f"{ARR}.actor.profiler",
        "the actor's profiler (the rollout's or ref's for those roles), dataclass_type=ProfilerConfig",
    ),
    ("verl/workers/engine_workers.py", "self._omega_profiler_config"): (
        f"{ARR}.actor.profiler",
        "the same role profiler, instantiated through its _target_",
    ),
    (
        "verl/workers/engine_workers.py",
        "omega_profiler_config.get('tool_config', {}).get(omega_profiler_config.get('tool'))",
    ): (f"{ARR}.actor.profiler.tool_config", "the entry of tool_config named by profiler.tool"),
    ("verl/workers/engine_workers.py", "ref_omega_profiler_config"): (f"{ARR}.ref.profiler", "ref profiler"),
    ("verl/workers/engine_workers.py", "self.distillation_config"): ("distillation", "when enabled"),
    ("verl/workers/config/distillation.py", "teacher_config"): (
        "distillation.teacher_models.*",
        "each teacher, dataclass_type=DistillationTeacherModelConfig",
    ),
    ("verl/workers/rollout/base.py", "config"): (f"{ARR}.rollout", "rollout base class"),
    ("verl/workers/rollout/base.py", "model_config"): (f"{ARR}.model", "rollout base class"),
    ("verl/workers/rollout/replica.py", "config"): (
        f"{ARR}.rollout",
        "rollout replica (also reward-model and teacher rollout configs)",
    ),
    ("verl/workers/rollout/vllm_rollout/vllm_async_server.py", "config"): (f"{ARR}.rollout", "vLLM server"),
    ("verl/workers/rollout/vllm_rollout/vllm_async_server.py", "model_config"): (
        f"{ARR}.model",
        "vLLM server, dataclass_type=HFModelConfig",
    ),
    (
        "verl/workers/rollout/vllm_rollout/vllm_async_server.py",
        "(profiler_config.tool_config or {}).get(profiler_config.tool)",
    ): (f"{ARR}.rollout.profiler.tool_config", "vLLM server profiler tool"),
    ("verl/workers/rollout/sglang_rollout/async_sglang_server.py", "config"): (
        f"{ARR}.rollout",
        "SGLang server",
    ),
    ("verl/workers/rollout/sglang_rollout/async_sglang_server.py", "model_config"): (
        f"{ARR}.model",
        "SGLang server, dataclass_type=HFModelConfig",
    ),
    (
        "verl/workers/rollout/sglang_rollout/async_sglang_server.py",
        "(profiler_config.tool_config or {}).get(profiler_config.tool)",
    ): (f"{ARR}.rollout.profiler.tool_config", "SGLang server profiler tool"),
    ("verl/workers/rollout/trtllm_rollout/trtllm_async_server.py", "config"): (
        f"{ARR}.rollout",
        "TensorRT-LLM server",
    ),
    ("verl/workers/rollout/trtllm_rollout/trtllm_async_server.py", "model_config"): (
        f"{ARR}.model",
        "TensorRT-LLM server, dataclass_type=HFModelConfig",
    ),
    (
        "verl/workers/rollout/trtllm_rollout/trtllm_async_server.py",
        "(profiler_config.tool_config or {}).get(profiler_config.tool)",
    ): (f"{ARR}.rollout.profiler.tool_config", "TensorRT-LLM server profiler tool"),
    ("verl/workers/rollout/trtllm_rollout/trtllm_async_server.py", "raw"): (
        f"{ARR}.rollout.profiler.global_tool_config.nsys",
        "TensorRT-LLM server, the nsys tool config read from the rollout profiler's global_tool_config "
        "(a ProfilerConfig field ppo_trainer's rollout profiler does not set: NsightToolConfig defaults)",
    ),
    ("verl/trainer/main_ppo_v0.py", "config.actor_rollout_ref.model"): (f"{ARR}.model", "legacy entry point"),
    ("verl/trainer/main_ppo_sync.py", "self.config.critic"): (
        "critic",
        "synchronous trainer's init_workers, when a critic is used",
    ),
    ("verl/trainer/main_ppo_sync.py", "self.config.distillation"): (
        "distillation",
        "synchronous trainer, when a teacher policy is used",
    ),
    ("verl/trainer/main_ppo_sync.py", "self.config.actor_rollout_ref.rollout.checkpoint_engine"): (
        f"{ARR}.rollout.checkpoint_engine",
        "synchronous trainer",
    ),
    ("verl/trainer/ppo/ray_trainer.py", "self.config.critic"): ("critic", "when a critic is used"),
    ("verl/trainer/ppo/ray_trainer.py", "critic_omega_profiler_config"): (
        "critic.profiler",
        "critic profiler",
    ),
    ("verl/trainer/ppo/ray_trainer.py", "self.config.distillation"): ("distillation", "when enabled"),
    ("verl/trainer/ppo/ray_trainer.py", "self.config.actor_rollout_ref.rollout.checkpoint_engine"): (
        f"{ARR}.rollout.checkpoint_engine",
        "trainer",
    ),
    ("verl/trainer/ppo/v1/trainer_base.py", "self.config.critic"): (
        "critic",
        "v1 trainer, when a critic is used",
    ),
    ("verl/trainer/ppo/v1/trainer_base.py", "critic_omega_profiler_config"): (
        "critic.profiler",
        "v1 trainer",
    ),
    ("verl/trainer/ppo/v1/trainer_base.py", "self.config.distillation"): ("distillation", "v1 trainer"),
    ("verl/trainer/ppo/v1/trainer_base.py", "self.config.actor_rollout_ref.rollout.checkpoint_engine"): (
        f"{ARR}.rollout.checkpoint_engine",
        "v1 trainer",
    ),
    ("verl/trainer/ppo/v1/trainer_base.py", "self.config.actor_rollout_ref.model"): (
        f"{ARR}.model",
        "v1 trainer",
    ),
    (
        "verl/trainer/ppo/v1/trainer_separate_async.py",
        "self.config.trainer.v1.separate_async.hybrid_rollout",
    ): (
        "trainer.v1.separate_async.hybrid_rollout",
        "v1 separate-async trainer",
    ),
    (
        "verl/trainer/ppo/v1/trainer_separate_async.py",
        "self.config.actor_rollout_ref.rollout.checkpoint_engine",
    ): (f"{ARR}.rollout.checkpoint_engine", "v1 separate-async trainer"),
    ("verl/experimental/agent_loop/agent_loop.py", "rollout_config"): (f"{ARR}.rollout", "agent loop"),
    ("verl/experimental/agent_loop/agent_loop.py", "model_config"): (f"{ARR}.model", "agent loop"),
    ("verl/experimental/fully_async_policy/fully_async_trainer.py", "self.config.distillation"): (
        "distillation",
        "fully async trainer",
    ),
    (
        "verl/experimental/fully_async_policy/fully_async_trainer.py",
        "self.config.actor_rollout_ref.rollout.checkpoint_engine",
    ): (f"{ARR}.rollout.checkpoint_engine", "fully async trainer"),
    ("verl/experimental/fully_async_policy/fully_async_trainer.py", "checkpoint_engine_cfg"): (
        f"{ARR}.rollout.checkpoint_engine",
        "fully async trainer (a copy with its backend changed)",
    ),
    ("verl/experimental/separation/ray_trainer.py", "self.config.critic"): ("critic", "separation trainer"),
    ("verl/experimental/separation/ray_trainer.py", "critic_omega_profiler_config"): (
        "critic.profiler",
        "separation trainer",
    ),
    (
        "verl/experimental/separation/ray_trainer.py",
        "self.config.actor_rollout_ref.rollout.checkpoint_engine",
    ): (f"{ARR}.rollout.checkpoint_engine", "separation trainer"),
    ("verl/experimental/teacher_loop/teacher_manager.py", "config.distillation"): (
        "distillation",
        "teacher loop",
    ),
    ("verl/experimental/teacher_loop/teacher_model.py", "config.distillation"): (
        "distillation",
        "teacher loop",
    ),
}
# Conversions of the SFT trainer's own config (not a ppo_trainer section).
SFT_TRAINER_FILES = ("verl/trainer/sft_trainer.py", "verl/trainer/sft_trainer_ray.py")

# The preparation verl's engine worker applies to the ref section before converting it is read from
# the function that converts ``self.config.ref`` in this file.
REF_PREPARATION_FILE = "verl/workers/engine_workers.py"
REF_PREPARED_EXPR = "self.config.ref"
REF_WORKER_PREFIX = {"self.config.ref": f"{ARR}.ref", "self.config.actor": f"{ARR}.actor"}


# ----------------------------------------------------------------------------------------------
# Finding verl
# ----------------------------------------------------------------------------------------------
def import_verl(asserted_version: str | None) -> tuple[Any, str]:
    """The installed verl module and its release; refuses with a clear message when verl is missing or
    is not the release ``--verl-version`` asserts."""
    try:
        import verl
    except ImportError as exc:
        raise UsageError(
            f"verl is not importable with {sys.executable} ({exc}). Run this script with the Python of "
            "an environment where the verl release to freeze is installed, e.g. "
            "/path/to/verl-env/bin/python scripts/freeze_verl_reference.py "
            f"({install_hint(asserted_version)})."
        ) from exc
    try:
        version = importlib.metadata.version("verl")
    except importlib.metadata.PackageNotFoundError:
        version = str(getattr(verl, "__version__", "unknown"))
    if asserted_version is not None and version != asserted_version:
        raise UsageError(
            f"the installed verl is {version}, but --verl-version asserts {asserted_version}. Run the script "
            f"with the Python of an environment where verl {asserted_version} is installed, or drop "
            f"--verl-version to freeze verl {version} into {reference_folder(version)}/ "
            "(--compare-installed shows what it changes)."
        )
    return verl, version


def install_hint(asserted_version: str | None) -> str:
    """``pip install verl==X`` for the asserted release, else for the newest one frozen here."""
    frozen = frozen_releases()
    if asserted_version is not None:
        return f"pip install verl=={asserted_version}"
    if not frozen:
        return "pip install verl==<release>"
    return f"pip install verl=={frozen[-1]}, the newest release frozen here; all: {', '.join(frozen)}"


def release_key(version: str) -> tuple[int, ...]:
    """Sort key of a release text (``1.10.0`` after ``1.9.1``)."""
    return tuple(int(number) for number in re.findall(r"\d+", version))


def frozen_releases(data_dir: Path = DATA_DIR) -> list[str]:
    """The releases with a frozen reference under ``data_dir``, oldest first."""
    if not data_dir.is_dir():
        return []
    found = [
        p.name[len(REFERENCE_PREFIX) :]
        for p in data_dir.iterdir()
        if p.name.startswith(REFERENCE_PREFIX) and (p / "meta.json").is_file()
    ]
    return sorted(found, key=release_key)


def reference_folder(version: str) -> Path:
    return DATA_DIR / f"{REFERENCE_PREFIX}{version}"


def verl_root(verl: Any) -> Path:
    """The folder that holds the ``verl`` package (paths in the data are relative to it)."""
    return Path(verl.__file__).resolve().parent.parent


def config_dir(verl: Any) -> Path:
    return Path(verl.__file__).resolve().parent / "trainer" / "config"


class SourceLog:
    """The verl files facts were read from, with their sha256 (for meta.json)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.hashes: dict[str, str] = {}

    def relative(self, path: Path) -> str:
        return path.resolve().relative_to(self.root).as_posix()

    def record(self, path: Path) -> str:
        rel = self.relative(path)
        if rel not in self.hashes:
            self.hashes[rel] = hashlib.sha256(path.read_bytes()).hexdigest()
        return rel

    def record_module_of(self, obj: Any) -> str | None:
        module = sys.modules.get(getattr(obj, "__module__", ""), None)
        source = getattr(module, "__file__", None)
        if not source:
            return None
        path = Path(source).resolve()
        if not path.is_relative_to(self.root):
            return None
        return self.record(path)


# ----------------------------------------------------------------------------------------------
# Composition
# ----------------------------------------------------------------------------------------------
def engine_options(conf: Path) -> list[str]:
    return sorted(p.stem for p in (conf / ENGINE_GROUP).glob("*.yaml"))


def compose(conf: Path, overrides: list[str], config_name: str = PRIMARY_CONFIG) -> Any:
    """verl's config composed from ``conf`` in a Hydra context that is torn down afterwards."""
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir

    with initialize_config_dir(config_dir=str(conf), version_base=None):
        return hydra_compose(config_name=config_name, overrides=overrides)


def first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}".rstrip()


def iter_leaves(raw: JSONValue, prefix: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], JSONValue]]:
    """(key path, raw value) of every leaf: scalars, lists and empty mappings."""
    if isinstance(raw, dict) and raw:
        for key, value in raw.items():
            yield from iter_leaves(value, (*prefix, str(key)))
    else:
        yield prefix, raw


def resolved_leaf(cfg: Any, keys: tuple[str, ...]) -> tuple[bool, JSONValue]:
    """(True, value) when the leaf resolves, else (False, "ErrorClass: first line")."""
    from omegaconf import Container, OmegaConf

    try:
        node = cfg
        for key in keys:
            node = node[key]
        if isinstance(node, Container):
            node = OmegaConf.to_container(node, resolve=True)
        return True, plain(node)
    except Exception as exc:  # noqa: BLE001 - any resolution failure is a recorded fact
        return False, first_line(exc)


def plain(value: JSONValue) -> JSONValue:
    """A JSON value: enum members become their value, other objects their class name."""
    if isinstance(value, enum.Enum):
        return plain(value.value)
    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, float):
        return value if value == value and value not in (float("inf"), float("-inf")) else repr(value)
    if isinstance(value, list | tuple | set | frozenset):
        items = [plain(v) for v in value]
        return sorted(items, key=repr) if isinstance(value, set | frozenset) else items
    if isinstance(value, Mapping):
        return {str(k): plain(v) for k, v in value.items()}
    return {"object": f"{type(value).__module__}.{type(value).__qualname__}"}


def join(keys: tuple[str, ...]) -> str:
    for key in keys:
        if "." in key:
            raise ValueError(f"verl config key {key!r} contains a dot; dotted leaf paths would be ambiguous")
    return ".".join(keys)


# ----------------------------------------------------------------------------------------------
# Types
# ----------------------------------------------------------------------------------------------
def qualname(obj: Any) -> str:
    return f"{obj.__module__}.{obj.__qualname__}"


def import_object(dotted: str) -> Any:
    """The object a ``_target_`` text names (module path, then attributes)."""
    parts = dotted.split(".")
    for cut in range(len(parts) - 1, 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for attr in parts[cut:]:
            obj = getattr(obj, attr)
        return obj
    raise ImportError(dotted)


class TypeCatalog:
    """Dataclasses met so far, each described once, and the type descriptors that refer to them."""

    def __init__(self, sources: SourceLog) -> None:
        self.sources = sources
        self.dataclasses: dict[str, dict[str, JSONValue]] = {}
        self.hints: dict[str, dict[str, Any]] = {}
        self.classes: dict[str, type] = {}

    def add(self, cls: type) -> str:
        name = qualname(cls)
        if name in self.dataclasses:
            return name
        self.dataclasses[name] = {}  # placeholder against recursion
        self.classes[name] = cls
        try:
            hints = typing.get_type_hints(cls)
        except Exception:  # noqa: BLE001 - fall back to the annotation text per field
            hints = {}
        self.hints[name] = {}
        fields: dict[str, JSONValue] = {}
        for field in dataclasses.fields(cls):
            hint = hints.get(field.name, field.type)
            self.hints[name][field.name] = hint
            fields[field.name] = self.describe_field(field, hint)
        self.dataclasses[name] = {
            "source": self.sources.record_module_of(cls),
            "bases": [qualname(b) for b in cls.__mro__[1:] if dataclasses.is_dataclass(b)],
            "fields": fields,
        }
        for base in cls.__mro__[1:]:
            if dataclasses.is_dataclass(base):
                self.add(base)
        return name

    def describe_field(self, field: dataclasses.Field, hint: Any) -> dict[str, JSONValue]:
        out: dict[str, JSONValue] = {"type": self.describe(hint)}
        if field.default is not dataclasses.MISSING:
            # OmegaConf's MISSING ("???") as a default means the value is mandatory.
            out["has_default"] = field.default != OMEGACONF_MISSING
            out["default"] = plain(field.default)
        elif field.default_factory is not dataclasses.MISSING:
            out["has_default"] = True
            factory = field.default_factory
            if factory in (list, dict, set, tuple):
                out["default"] = plain(factory())
            elif dataclasses.is_dataclass(factory):
                out["default_factory"] = {"kind": "dataclass", "ref": self.add(factory)}
            else:
                out["default_factory"] = qualname(factory)
        else:
            out["has_default"] = False
        if not field.init:
            out["init"] = False
        return out

    def describe(self, hint: Any) -> JSONValue:
        """The normalized descriptor of one type hint."""
        if isinstance(hint, str):
            return {"kind": "unresolved", "text": hint}
        if hint is Any or hint is object:
            return "any"
        if hint is None or hint is type(None):
            return "none"
        for builtin in (bool, int, float, str, bytes):
            if hint is builtin:
                return builtin.__name__
        origin = typing.get_origin(hint)
        args = typing.get_args(hint)
        if origin is typing.Union or origin is types.UnionType:
            members = [a for a in args if a is not type(None)]
            inner = (
                self.describe(members[0])
                if len(members) == 1
                else {
                    "kind": "union",
                    "of": [self.describe(a) for a in members],
                }
            )
            return {"kind": "optional", "of": inner} if len(members) < len(args) else inner
        if origin is typing.Literal:
            return {"kind": "literal", "values": [plain(a) for a in args]}
        if origin in (list, set, frozenset) or hint in (list, set, frozenset):
            kind = "list" if (origin or hint) is list else "set"
            return {"kind": kind, "of": self.describe(args[0]) if args else "any"}
        if origin is tuple or hint is tuple:
            variadic = len(args) == 2 and args[1] is Ellipsis
            described = [self.describe(a) for a in (args[:1] if variadic else args)]
            return {"kind": "tuple", "of": described, "variadic": variadic or not args}
        if origin in (dict, Mapping) or hint in (dict, Mapping) or origin is typing.Mapping:
            key, value = args if len(args) == 2 else (Any, Any)
            return {"kind": "dict", "key": self.describe(key), "value": self.describe(value)}
        if origin is typing.Annotated:
            return self.describe(args[0])
        if isinstance(hint, type) and issubclass(hint, enum.Enum):
            return {"kind": "enum", "ref": qualname(hint), "values": [plain(m.value) for m in hint]}
        if isinstance(hint, type) and dataclasses.is_dataclass(hint):
            return {"kind": "dataclass", "ref": self.add(hint)}
        if isinstance(hint, type):
            return {"kind": "class", "ref": qualname(hint)}
        return {"kind": "unresolved", "text": repr(hint)}


def strip_optional(hint: Any) -> Any:
    """``X`` for ``Optional[X]``; other hints unchanged."""
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        members = [a for a in typing.get_args(hint) if a is not type(None)]
        if len(members) == 1:
            return members[0]
    return hint


# ----------------------------------------------------------------------------------------------
# The composition of one engine, with the declared type of every leaf
# ----------------------------------------------------------------------------------------------
def declared_types(
    raw: JSONValue, catalog: TypeCatalog, explicit: dict[str, type]
) -> tuple[dict[str, JSONValue], dict[str, str]]:
    """Per leaf path, the dataclass field that types it; per section path, its ``_target_``.

    The walk carries the type hint of the node it is on and the (dataclass, field) that declares
    it. A mapping with a ``_target_`` naming a dataclass, or a section verl converts with an explicit
    ``dataclass_type``, starts a typed region; below a dataclass, a key is looked up among its
    fields; below a ``dict[K, V]`` field every value has type V; below an untyped field (``Any``,
    bare ``dict``) leaves are declared ``any`` by that field.
    """
    declared: dict[str, JSONValue] = {}
    targets: dict[str, str] = {}

    def walk(
        node: JSONValue,
        keys: tuple[str, ...],
        hint: Any,
        owner: tuple[str, str] | None,
        below_field: bool = False,
    ) -> None:
        path = ".".join(keys)
        if isinstance(node, dict):
            target_class = section_class(node, path, explicit, targets)
            if target_class is not None:
                hint = target_class
        if not (isinstance(node, dict) and node):
            if owner is not None:
                declared[path] = {"class": owner[0], "field": owner[1]}
                if below_field:
                    declared[path]["type"] = catalog.describe(hint)
            return
        container = strip_optional(hint)
        for key, value in node.items():
            child_keys = (*keys, str(key))
            if isinstance(container, type) and dataclasses.is_dataclass(container):
                cls_name = catalog.add(container)
                if key == "_target_":
                    declared[".".join(child_keys)] = {"target_of": cls_name}
                    continue
                field_hint = catalog.hints[cls_name].get(str(key), _NO_FIELD)
                if field_hint is _NO_FIELD:
                    mark_not_a_field(value, child_keys, cls_name, declared)
                    continue
                walk(value, child_keys, field_hint, (cls_name, str(key)))
            elif typing.get_origin(container) in (dict, Mapping, typing.Mapping):
                walk(value, child_keys, typing.get_args(container)[-1], owner, below_field=True)
            elif owner is not None:
                walk(value, child_keys, Any, owner, below_field=True)
            else:
                walk(value, child_keys, None, None)

    walk(raw, (), None, None)
    return declared, targets


_NO_FIELD = object()


def section_class(node: dict, path: str, explicit: dict[str, type], targets: dict[str, str]) -> type | None:
    """The dataclass a mapping becomes: its ``_target_`` (recorded in ``targets``), else the explicit
    ``dataclass_type`` verl converts that section with."""
    if isinstance(node.get("_target_"), str):
        targets[path] = node["_target_"]
        try:
            target = import_object(node["_target_"])
        except Exception:  # noqa: BLE001 - an unimportable _target_ is recorded, not fatal
            return None
        return target if isinstance(target, type) and dataclasses.is_dataclass(target) else None
    for pattern, cls in explicit.items():
        if section_matches(pattern, path):
            return cls
    return None


def section_matches(pattern: str, path: str) -> bool:
    """``a.*.c`` matches ``a.b.c``: a ``*`` stands for one key."""
    want, have = pattern.split("."), path.split(".")
    return len(want) == len(have) and all(w in ("*", h) for w, h in zip(want, have, strict=True))


def mark_not_a_field(
    value: JSONValue, keys: tuple[str, ...], cls_name: str, declared: dict[str, JSONValue]
) -> None:
    for sub_keys, _ in iter_leaves(value, keys):
        declared[".".join(sub_keys)] = {"not_a_field_of": cls_name}


def apply_ref_preparation(
    declared: dict[str, JSONValue], targets: dict[str, str], catalog: TypeCatalog, preparation: JSONValue
) -> None:
    """A ref key verl renames before converting the ref (``log_prob_*`` -> ``ppo_*``) is declared by
    the field it becomes, with ``prepared_from`` naming the key in the config."""
    ref_target = targets.get(f"{ARR}.ref")
    if not preparation or ref_target is None:
        return
    cls_name = target_class_name(ref_target, catalog)
    for step in preparation["steps"]:
        key = step.get("from_ref_key")
        if key is not None and f"{ARR}.ref.{key}" in declared:
            declared[f"{ARR}.ref.{key}"] = {"class": cls_name, "field": step["set"], "prepared_from": key}


def composition_record(
    conf: Path, engine: str, catalog: TypeCatalog, explicit: dict[str, type], preparation: JSONValue
) -> JSONValue:
    from omegaconf import OmegaConf

    overrides = [f"{ENGINE_GROUP}={engine}"]
    cfg = compose(conf, overrides)
    raw = OmegaConf.to_container(cfg, resolve=False, throw_on_missing=False)
    declared, targets = declared_types(raw, catalog, explicit)
    apply_ref_preparation(declared, targets, catalog, preparation)
    leaves: dict[str, JSONValue] = {}
    for keys, value in iter_leaves(raw):
        ok, resolved = resolved_leaf(cfg, keys)
        record: dict[str, JSONValue] = {"raw": plain(value)}
        record["resolved" if ok else "unresolved"] = resolved
        path = join(keys)
        if path in declared:
            record["declared"] = declared[path]
        leaves[path] = record
    return {
        "engine": engine,
        "config_name": PRIMARY_CONFIG,
        "overrides": overrides,
        "leaf_count": len(leaves),
        "leaves": leaves,
        "targets": targets,
    }


# ----------------------------------------------------------------------------------------------
# Conversion calls in verl's source
# ----------------------------------------------------------------------------------------------
def scan_conversion_calls(verl: Any, sources: SourceLog) -> tuple[list[dict[str, JSONValue]], int]:
    """Every ``omega_conf_to_dataclass(...)`` call under the scanned package folders."""
    package = Path(verl.__file__).resolve().parent
    calls: list[dict[str, JSONValue]] = []
    scanned = 0
    for folder in SCANNED_PACKAGES:
        for path in sorted((package / folder).rglob("*.py")):
            scanned += 1
            text = path.read_text(encoding="utf-8")
            if CONVERT_FUNCTION not in text:
                continue
            tree = ast.parse(text)
            file_calls = [node for node in ast.walk(tree) if is_conversion_call(node)]
            if not file_calls:
                continue
            rel = sources.record(path)
            for node in sorted(file_calls, key=lambda n: (n.lineno, n.col_offset)):
                calls.append(call_record(rel, node))
    return calls, scanned


def is_conversion_call(node: ast.AST) -> bool:
    if not isinstance(node, ast.Call):
        return False
    func = node.func
    name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else None
    return name == CONVERT_FUNCTION


def call_record(rel: str, node: ast.Call) -> dict[str, JSONValue]:
    argument = ast.unparse(node.args[0]) if node.args else None
    dataclass_type = None
    for keyword in node.keywords:
        if keyword.arg == "dataclass_type":
            dataclass_type = ast.unparse(keyword.value)
    if dataclass_type is None and len(node.args) > 1:
        dataclass_type = ast.unparse(node.args[1])
    record: dict[str, JSONValue] = {
        "file": rel,
        "line": node.lineno,
        "argument": argument,
        "dataclass_type": dataclass_type,
    }
    mapped = SECTION_OF_CALL.get((rel, argument or ""))
    if mapped is not None:
        record["section"], record["note"] = mapped
    elif rel in SFT_TRAINER_FILES:
        record["section"], record["note"] = None, "SFT trainer config, not a ppo_trainer section"
    else:
        record["section"], record["note"] = None, "UNMAPPED: add this call to SECTION_OF_CALL"
    return record


def resolve_dataclass_name(verl: Any, rel: str, name: str) -> type | None:
    """The class a ``dataclass_type=Name`` argument names, found through the file's imports."""
    path = verl_root(verl) / rel
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for alias in node.names:
                if (alias.asname or alias.name) == name:
                    return getattr(importlib.import_module(node.module), alias.name)
        if isinstance(node, ast.ClassDef) and node.name == name:
            module = rel[: -len(".py")].replace("/", ".")
            return getattr(importlib.import_module(module), name)
    return None


def ref_preparation(verl: Any, sources: SourceLog) -> JSONValue:
    """What verl's engine worker does to ``actor_rollout_ref.ref`` before converting it.

    Read from the function in REF_PREPARATION_FILE that converts ``self.config.ref``: each
    ``self.config.ref.<key> = ...`` assignment before that call is either a rename of a ref key
    (``self.config.ref.pop("old", default)``) or a copy of another section's key.
    """
    path = verl_root(verl) / REF_PREPARATION_FILE
    if not path.is_file():
        return None
    rel = sources.record(path)
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for function in ast.walk(tree):
        if not isinstance(function, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        convert_lines = [
            n.lineno
            for n in ast.walk(function)
            if is_conversion_call(n) and n.args and ast.unparse(n.args[0]) == REF_PREPARED_EXPR
        ]
        if not convert_lines:
            continue
        steps: list[dict[str, JSONValue]] = []
        for node in ast.walk(function):
            if not (
                isinstance(node, ast.Assign) and node.lineno < convert_lines[0] and len(node.targets) == 1
            ):
                continue
            target = ast.unparse(node.targets[0])
            if not target.startswith(REF_PREPARED_EXPR + "."):
                continue
            steps.append(preparation_step(target[len(REF_PREPARED_EXPR) + 1 :], node.value, node.lineno))
        steps.sort(key=lambda s: s["line"])
        return {"file": rel, "function": function.name, "converted_at_line": convert_lines[0], "steps": steps}
    return None


def preparation_step(key: str, value: ast.expr, line: int) -> dict[str, JSONValue]:
    step: dict[str, JSONValue] = {"set": key, "line": line}
    if (
        isinstance(value, ast.Call)
        and isinstance(value.func, ast.Attribute)
        and value.func.attr == "pop"
        and ast.unparse(value.func.value) == REF_PREPARED_EXPR
        and value.args
        and isinstance(value.args[0], ast.Constant)
    ):
        step["from_ref_key"] = value.args[0].value
        step["removes_it"] = True
        step["default"] = (
            plain(value.args[1].value)
            if len(value.args) > 1 and isinstance(value.args[1], ast.Constant)
            else None
        )
        return step
    text = ast.unparse(value)
    for prefix, section in REF_WORKER_PREFIX.items():
        if text.startswith(prefix + "."):
            step["copied_from"] = f"{section}.{text[len(prefix) + 1 :]}"
            return step
    step["expression"] = text
    return step


def scrub(text: str) -> str:
    """Drop what varies between machines (memory addresses, absolute paths) from an error line."""
    text = re.sub(r"0x[0-9a-fA-F]+", "0x?", text)
    return re.sub(r"/[^\s'\"]*/site-packages/", "<site-packages>/", text)[:300]


def explicit_sections(verl: Any, calls: list[dict[str, JSONValue]]) -> dict[str, type]:
    """Sections verl converts with an explicit ``dataclass_type``, with that class."""
    explicit: dict[str, type] = {}
    for call in calls:
        if call["section"] is not None and call["dataclass_type"]:
            cls = resolve_dataclass_name(verl, call["file"], call["dataclass_type"])
            if cls is not None:
                explicit[call["section"]] = cls
    return explicit


def conversions_record(
    verl: Any,
    calls: list[dict[str, JSONValue]],
    scanned: int,
    compositions: dict[str, JSONValue],
    preparation: JSONValue,
) -> JSONValue:
    engines = sorted(compositions)
    explicit = explicit_sections(verl, calls)
    sections: dict[str, dict[str, JSONValue]] = {}
    for call in calls:
        if call["section"] is not None:
            entry = sections.setdefault(call["section"], {"converted_at": []})
            entry["converted_at"].append(f"{call['file']}:{call['line']}")
    for section, entry in sections.items():
        entry["converted_at"] = sorted(set(entry["converted_at"]))
        entry["dataclass_type"] = qualname(explicit[section]) if section in explicit else None
        entry["target_per_engine"] = {
            engine: compositions[engine]["targets"].get(section) for engine in engines
        }
        entry["nested_targets"] = {
            engine: sorted(
                path
                for path in compositions[engine]["targets"]
                if path.startswith(section + ".") and not wildcard(section)
            )
            for engine in engines
        }
        if section == f"{ARR}.ref":
            entry["preparation"] = preparation
    return {
        "scanned": {"folders": [f"verl/{f}" for f in SCANNED_PACKAGES], "python_files": scanned},
        "calls": calls,
        "sections": sections,
    }


def wildcard(section: str) -> bool:
    return "*" in section


# ----------------------------------------------------------------------------------------------
# Registries and enums
# ----------------------------------------------------------------------------------------------
def enums_record(verl: Any, sources: SourceLog) -> JSONValue:
    """Every name list, each read on its own: a list the installed release does not have (its module or
    attribute is missing) is recorded as ``{"absent": ...}`` instead of failing the freeze."""
    readers = {
        "adv_estimator": adv_estimators,
        "adv_estimator_enum": adv_estimator_enum,
        "policy_loss_mode": policy_loss_modes,
        "reward_manager": reward_managers,
        "reward_manager_legacy_workers": legacy_reward_managers,
        "loss_agg_mode": loss_agg_modes,
        "mcore_optimizer_dtype": mcore_optimizer_dtypes,
        "tracking_backend": tracking_backends,
        "resume_mode": resume_modes,
        "warmup_style": warmup_styles,
        "engine_strategy": engine_strategies,
        "rollout_name": rollout_names,
        "rollout_mode": rollout_modes,
        "ray_init_parameter": ray_init_parameters,
    }
    out: dict[str, JSONValue] = {}
    for name, reader in readers.items():
        try:
            out[name] = reader(verl, sources)
        except (ImportError, AttributeError) as exc:
            out[name] = {"absent": scrub(first_line(exc)), "source": reader.__doc__.strip().splitlines()[0]}
    return out


def core_algos(sources: SourceLog) -> Any:
    core = importlib.import_module("verl.trainer.ppo.core_algos")
    sources.record_module_of(core.AdvantageEstimator)
    return core


def adv_estimators(verl: Any, sources: SourceLog) -> JSONValue:
    """verl.trainer.ppo.core_algos.ADV_ESTIMATOR_REGISTRY"""
    return {
        "values": sorted(core_algos(sources).ADV_ESTIMATOR_REGISTRY),
        "source": "verl.trainer.ppo.core_algos.ADV_ESTIMATOR_REGISTRY (names registered at import)",
        "open": "users register more with register_adv_est",
    }


def adv_estimator_enum(verl: Any, sources: SourceLog) -> JSONValue:
    """verl.trainer.ppo.core_algos.AdvantageEstimator"""
    return {
        "values": [m.value for m in core_algos(sources).AdvantageEstimator],
        "source": "verl.trainer.ppo.core_algos.AdvantageEstimator",
    }


def policy_loss_modes(verl: Any, sources: SourceLog) -> JSONValue:
    """verl.trainer.ppo.core_algos.POLICY_LOSS_REGISTRY"""
    return {
        "values": sorted(core_algos(sources).POLICY_LOSS_REGISTRY),
        "source": "verl.trainer.ppo.core_algos.POLICY_LOSS_REGISTRY (names registered at import)",
        "open": "users register more with register_policy_loss",
    }


def reward_managers(verl: Any, sources: SourceLog) -> JSONValue:
    """verl.experimental.reward_loop.reward_manager.registry.REWARD_MANAGER"""
    loop = importlib.import_module("verl.experimental.reward_loop.reward_manager")
    loop_registry = importlib.import_module("verl.experimental.reward_loop.reward_manager.registry")
    sources.record_module_of(loop_registry.get_reward_manager_cls)
    return {
        "values": sorted(loop_registry.REWARD_MANAGER),
        "source": (
            "verl.experimental.reward_loop.reward_manager.registry.REWARD_MANAGER, after importing "
            f"{loop.__name__}; reward.reward_manager.name when reward.reward_manager.source is 'register'"
        ),
        "open": "users register more with the registry's register decorator",
    }


def legacy_reward_managers(verl: Any, sources: SourceLog) -> JSONValue:
    """verl.workers.reward_manager.registry.REWARD_MANAGER_REGISTRY"""
    legacy = importlib.import_module("verl.workers.reward_manager")
    legacy_registry = importlib.import_module("verl.workers.reward_manager.registry")
    sources.record_module_of(legacy_registry.get_reward_manager_cls)
    return {
        "values": sorted(legacy_registry.REWARD_MANAGER_REGISTRY),
        "source": (
            f"verl.workers.reward_manager.registry.REWARD_MANAGER_REGISTRY, after importing {legacy.__name__}"
        ),
    }


def loss_agg_modes(verl: Any, sources: SourceLog) -> JSONValue:
    """valid_loss_agg_modes in verl/workers/config/actor.py

    The list ``ActorConfig`` checks ``loss_agg_mode`` against (a local list literal in its source)."""
    actor_module = importlib.import_module("verl.workers.config.actor")
    path = Path(actor_module.__file__).resolve()
    rel = sources.record(path)
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Assign)
            and len(node.targets) == 1
            and isinstance(node.targets[0], ast.Name)
            and node.targets[0].id == "valid_loss_agg_modes"
            and isinstance(node.value, ast.List | ast.Tuple)
        ):
            values = [e.value for e in node.value.elts if isinstance(e, ast.Constant)]
            return {
                "values": values,
                "source": f"{rel}:{node.lineno} (valid_loss_agg_modes checked by ActorConfig)",
            }
    return {"absent": "no valid_loss_agg_modes list in the module", "source": rel}


def mcore_optimizer_dtypes(verl: Any, sources: SourceLog) -> JSONValue:
    """allowed_dtypes in verl/workers/config/optimizer.py

    The dtypes ``McoreOptimizerConfig.__post_init__`` asserts its main_grads / exp_avg / exp_avg_sq dtypes
    against (a local set literal in its source)."""
    module = importlib.import_module("verl.workers.config.optimizer")
    path = Path(module.__file__).resolve()
    rel = sources.record(path)
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if (
            isinstance(node, ast.Assign)
            and len(node.targets) == 1
            and isinstance(node.targets[0], ast.Name)
            and node.targets[0].id == "allowed_dtypes"
            and isinstance(node.value, ast.Set | ast.List | ast.Tuple)
        ):
            values = sorted(e.value for e in node.value.elts if isinstance(e, ast.Constant))
            return {"values": values,
                    "source": f"{rel}:{node.lineno} (allowed_dtypes asserted by McoreOptimizerConfig)"}
    return {"absent": "no allowed_dtypes set in the module", "source": rel}


def tracking_backends(verl: Any, sources: SourceLog) -> JSONValue:
    """verl.utils.tracking.Tracking.supported_backend

    The logger names ``trainer.logger`` may list (Tracking asserts each is one of them)."""
    tracking = importlib.import_module("verl.utils.tracking")
    sources.record_module_of(tracking.Tracking)
    return {
        "values": list(tracking.Tracking.supported_backend),
        "source": "verl.utils.tracking.Tracking.supported_backend (asserted for each trainer.logger entry)",
    }


def _compared_strings(module: str, attribute: str, sources: SourceLog) -> tuple[list[str], str]:
    """Every string a module's source compares ``<...>.attribute`` with (``== "x"``, ``in ["x", "y"]``)."""
    loaded = importlib.import_module(module)
    path = Path(loaded.__file__).resolve()
    rel = sources.record(path)
    found: list[str] = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if not isinstance(node, ast.Compare) or not isinstance(node.left, ast.Attribute):
            continue
        if node.left.attr != attribute:
            continue
        for comparator in node.comparators:
            listed = isinstance(comparator, ast.List | ast.Tuple | ast.Set)
            items = comparator.elts if listed else [comparator]
            found += [i.value for i in items if isinstance(i, ast.Constant) and isinstance(i.value, str)]
    return list(dict.fromkeys(found)), rel


def resume_modes(verl: Any, sources: SourceLog) -> JSONValue:
    """the resume_mode values verl/trainer/ppo/ray_trainer.py compares with

    RayPPOTrainer._load_checkpoint treats any other value as ``auto`` (it resumes)."""
    values, rel = _compared_strings("verl.trainer.ppo.ray_trainer", "resume_mode", sources)
    if not values:
        return {"absent": "no comparison of resume_mode", "source": rel}
    source = f"{rel} (RayPPOTrainer._load_checkpoint compares trainer.resume_mode)"
    return {"values": values, "source": source}


def engine_strategies(verl: Any, sources: SourceLog) -> JSONValue:
    """the strategy values each engine config class of verl/workers/config/engine.py asserts

    By class (its qualified name): the ``strategy`` its ``__post_init__`` accepts."""
    module = importlib.import_module("verl.workers.config.engine")
    path = Path(module.__file__).resolve()
    rel = sources.record(path)
    by_class: dict[str, list[str]] = {}
    for cls in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if not isinstance(cls, ast.ClassDef):
            continue
        for node in ast.walk(cls):
            if (isinstance(node, ast.Compare) and isinstance(node.left, ast.Attribute)
                    and node.left.attr == "strategy"):
                for comparator in node.comparators:
                    items = comparator.elts if isinstance(comparator, ast.List | ast.Tuple | ast.Set) else []
                    values = [i.value for i in items
                              if isinstance(i, ast.Constant) and isinstance(i.value, str)]
                    if values:
                        by_class[f"{module.__name__}.{cls.name}"] = values
    if not by_class:
        return {"absent": "no engine config asserts its strategy", "source": rel}
    return {"values": by_class, "source": f"{rel} (each engine config's __post_init__ asserts its strategy)"}


def _rollout_registry(sources: SourceLog) -> Any:
    base = importlib.import_module("verl.workers.rollout.base")
    sources.record_module_of(base.get_rollout_class)
    return base._ROLLOUT_REGISTRY


def rollout_names(verl: Any, sources: SourceLog) -> JSONValue:
    """verl.workers.rollout.base._ROLLOUT_REGISTRY (the names)

    The rollout engines a worker starts with (get_rollout_class asserts the (name, mode) pair)."""
    registry = _rollout_registry(sources)
    return {"values": sorted({name for name, _ in registry}),
            "source": "verl.workers.rollout.base._ROLLOUT_REGISTRY (asserted by get_rollout_class)"}


def rollout_modes(verl: Any, sources: SourceLog) -> JSONValue:
    """verl.workers.rollout.base._ROLLOUT_REGISTRY (the modes)"""
    registry = _rollout_registry(sources)
    return {"values": sorted({mode for _, mode in registry}),
            "source": "verl.workers.rollout.base._ROLLOUT_REGISTRY (asserted by get_rollout_class)"}


def warmup_styles(verl: Any, sources: SourceLog) -> JSONValue:
    """the warmup_style values verl/workers/config/optimizer.py asserts

    FSDPOptimizerConfig.__post_init__ asserts a set warmup_style (deprecated) is one of them."""
    values, rel = _compared_strings("verl.workers.config.optimizer", "warmup_style", sources)
    if not values:
        return {"absent": "no check of warmup_style", "source": rel}
    return {"values": values, "source": f"{rel} (FSDPOptimizerConfig asserts optim.warmup_style)"}


def ray_init_parameters(verl: Any, sources: SourceLog) -> JSONValue:
    """ray.init's keyword arguments (the Ray installed with verl)

    verl's main_ppo calls ``ray.init(**ray_kwargs.ray_init)``: the names ray.init accepts are its named
    parameters and the names its source pops from its ``**kwargs`` (the hidden ``_temp_dir``,
    ``_system_config``...); any other keyword makes it raise when no Ray client address is given."""

    ray = importlib.import_module("ray")
    init = inspect.unwrap(ray.init)
    rel = sources.record_module_of(init) or "ray"
    named = [name for name, parameter in inspect.signature(init).parameters.items()
             if parameter.kind in (parameter.POSITIONAL_OR_KEYWORD, parameter.KEYWORD_ONLY)]
    varkw = [name for name, parameter in inspect.signature(init).parameters.items()
             if parameter.kind is parameter.VAR_KEYWORD]
    hidden: list[str] = []
    tree = ast.parse(textwrap.dedent(inspect.getsource(init)))
    for node in ast.walk(tree):
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "pop"
                and isinstance(node.func.value, ast.Name) and node.func.value.id in varkw and node.args
                and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)):
            hidden.append(node.args[0].value)
    return {
        "values": [*named, *dict.fromkeys(hidden)],
        "source": f"{rel} (ray.init of Ray {ray.__version__}: its parameters, then the names it pops from "
        "**kwargs)",
    }


# ----------------------------------------------------------------------------------------------
# Examples
# ----------------------------------------------------------------------------------------------
def read_example(path: Path) -> list[str]:
    """The override tokens of one corpus file: one per line, ``#`` lines are comments."""
    lines = path.read_text(encoding="utf-8").splitlines()
    return [line for line in lines if line.strip() and not line.startswith("#")]


def example_files(examples_dir: Path) -> list[tuple[str, Path]]:
    """(source, file) of every corpus file in a source folder (files directly in the folder are not
    part of a source and are skipped)."""
    found: list[tuple[str, Path]] = []
    if not examples_dir.is_dir():
        return found
    for source in sorted(p for p in examples_dir.iterdir() if p.is_dir()):
        found.extend((source.name, f) for f in sorted(source.glob("*.txt")))
    return found


def split_config_options(tokens: list[str]) -> tuple[str | None, str | None, list[str]]:
    """(``--config-path``, ``--config-name``, remaining Hydra overrides) of one launch."""
    config_path = config_name = None
    rest: list[str] = []
    i = 0
    while i < len(tokens):
        token = tokens[i]
        for flag in ("--config-path", "--config-name", "-cp", "-cn"):
            if token == flag and i + 1 < len(tokens):
                value, i = tokens[i + 1], i + 1
                break
            if token.startswith(flag + "="):
                value = token[len(flag) + 1 :]
                break
        else:
            rest.append(token)
            i += 1
            continue
        if flag in ("--config-path", "-cp"):
            config_path = value
        else:
            config_name = value
        i += 1
    return config_path, config_name, rest


def example_verdict(conf: Path, tokens: list[str], entry: JSONValue) -> dict[str, JSONValue]:
    """Whether verl's own config tree composes (and resolves) one launch's overrides."""
    from omegaconf import OmegaConf

    config_path, config_name, overrides = split_config_options(tokens)
    verdict: dict[str, JSONValue] = {}
    if config_path is not None:
        verdict["config_path"] = config_path
        if not config_path_is_verls(config_path):
            verdict["composes"] = False
            verdict["error"] = (
                "ConfigPathOutsideVerl: --config-path names a folder outside verl's config tree"
            )
            return verdict
    name = config_name or PRIMARY_CONFIG
    if name.endswith(".yaml"):
        name = name[: -len(".yaml")]
    try:
        cfg = compose(conf, overrides, config_name=name)
    except Exception as exc:  # noqa: BLE001 - the composition failure is the verdict
        verdict["composes"] = False
        verdict["error"] = scrub(first_line(exc))
        return verdict
    verdict["composes"] = True
    verdict["model_engine"] = cfg.get(ENGINE_GROUP)
    try:
        OmegaConf.resolve(OmegaConf.create(OmegaConf.to_container(cfg)))
        verdict["resolves"] = True
    except Exception as exc:  # noqa: BLE001
        verdict["resolves"] = False
        verdict["resolve_error"] = scrub(first_line(exc))
    verdict.update(validation_verdict(cfg, entry))
    return verdict


def validation_verdict(cfg: Any, entry: JSONValue) -> dict[str, JSONValue]:
    """What verl's entry point checks before training: the config steps its Hydra ``main`` applies
    first (``entry["config_steps"]``, e.g. moving legacy reward keys), then ``validate_config`` with the
    reference policy and critic its own ``need_reference_policy`` / ``need_critic`` decide. A failure is
    recorded by its innermost exception (verl wraps dataclass errors in Hydra's
    InstantiationException)."""
    from verl.trainer.ppo.utils import need_critic, need_reference_policy
    from verl.utils.config import validate_config

    try:
        with contextlib.redirect_stdout(io.StringIO()):
            for step in entry.get("config_steps", []):
                result = import_object(step["call"])(cfg)
                if step["rewrites_config"]:
                    cfg = result
            validate_config(cfg, need_reference_policy(cfg), need_critic(cfg))
        return {"validates": True}
    except Exception as exc:  # noqa: BLE001 - the failure is the recorded fact
        root: BaseException = exc
        while root.__cause__ is not None or (root.__context__ is not None and not root.__suppress_context__):
            root = root.__cause__ or root.__context__
        return {"validates": False, "validate_error": scrub(first_line(root))}


# The module every corpus launch runs (``-m verl.trainer.main_ppo``) and the check it makes before training.
ENTRY_POINT_FILE = "verl/trainer/main_ppo.py"
VALIDATE_FUNCTION = "validate_config"


def entry_point_record(verl: Any, sources: SourceLog) -> JSONValue:
    """What verl's PPO entry point does with the composed config before ``validate_config``, read from
    its source (releases differ: some validate in ``main`` before Ray starts, older ones in the
    TaskRunner, after ``main`` moved the legacy reward keys).

    ``config_steps``: the leading statements of the Hydra ``main`` that call a function imported from
    another module with the config (``f(config)`` or ``config = f(config)``), by dotted name;
    ``validated_in``: the functions of the file that call ``validate_config``."""
    path = verl_root(verl) / ENTRY_POINT_FILE
    if not path.is_file():
        return {"absent": f"{ENTRY_POINT_FILE} not in the installed verl"}
    rel = sources.record(path)
    tree = ast.parse(path.read_text(encoding="utf-8"))
    main = next(
        (
            node
            for node in tree.body
            if isinstance(node, ast.FunctionDef)
            and any(ast.unparse(d).startswith("hydra.main") for d in node.decorator_list)
        ),
        None,
    )
    if main is None or not main.args.args:
        return {"file": rel, "absent": "no function decorated with hydra.main taking the config"}
    imported = imported_names(tree)
    parameter = main.args.args[0].arg
    steps: list[dict[str, JSONValue]] = []
    for statement in main.body:
        if isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Constant):
            continue
        step = config_step(statement, parameter, imported)
        if step is None:
            break
        steps.append(step)
    return {
        "file": rel,
        "function": main.name,
        "config_steps": steps,
        "validated_in": sorted(functions_calling(tree, VALIDATE_FUNCTION)),
    }


def config_step(statement: ast.stmt, parameter: str, imported: dict[str, str]) -> dict[str, JSONValue] | None:
    """``f(config)`` or ``config = f(config)`` with ``f`` imported (not ``validate_config``), else None."""
    rewrites = (
        isinstance(statement, ast.Assign)
        and len(statement.targets) == 1
        and isinstance(statement.targets[0], ast.Name)
        and statement.targets[0].id == parameter
    )
    if not (rewrites or isinstance(statement, ast.Expr)):
        return None
    call = statement.value
    if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Name) and call.args):
        return None
    name = call.func.id
    first = call.args[0]
    if name == VALIDATE_FUNCTION or name not in imported:
        return None
    if not (isinstance(first, ast.Name) and first.id == parameter):
        return None
    return {"call": imported[name], "rewrites_config": rewrites, "line": statement.lineno}


def imported_names(tree: ast.Module) -> dict[str, str]:
    """Local name -> dotted origin of every module-level ``from X import Y [as Z]``."""
    names: dict[str, str] = {}
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for alias in node.names:
                names[alias.asname or alias.name] = f"{node.module}.{alias.name}"
    return names


def functions_calling(tree: ast.Module, function: str) -> set[str]:
    """Qualified names (``Class.method``) of the functions whose body calls ``function``."""
    found: set[str] = set()

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
                name = f"{prefix}{child.name}"
                if not isinstance(child, ast.ClassDef) and any(
                    isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == function
                    for n in ast.walk(child)
                ):
                    found.add(name)
                visit(child, name + ".")

    visit(tree, "")
    return found


def config_path_is_verls(config_path: str) -> bool:
    """A ``--config-path`` that names verl's own trainer config folder: Hydra reads a relative one from
    the folder of verl's entry point (verl/trainer), so ``config`` and ``./config`` are that folder."""
    cleaned = config_path.rstrip("/").removeprefix("./")
    return cleaned in ("config", "verl/trainer/config") or cleaned.endswith("/verl/trainer/config")


# The line of a source's MANIFEST (written by scripts/extract_verl_examples.py) naming the verl release
# the source belongs to, and the one naming its snapshot commit.
MANIFEST_RELEASE = re.compile(r"^release: (\S+)", re.MULTILINE)
MANIFEST_SNAPSHOT = re.compile(r"^snapshot: ([0-9a-f]{40})", re.MULTILINE)


def corpus_record(examples_dir: Path, version: str) -> JSONValue | None:
    """Which corpus source belongs to which release (from each source's MANIFEST), and the sources of the
    installed release (``of_this_release``): what tests read instead of naming a source."""
    folders = sorted(p for p in examples_dir.iterdir() if p.is_dir()) if examples_dir.is_dir() else []
    if not folders:
        return None
    sources: dict[str, JSONValue] = {}
    for folder in folders:
        manifest = folder / "MANIFEST"
        text = manifest.read_text(encoding="utf-8") if manifest.is_file() else ""
        release, snapshot = MANIFEST_RELEASE.search(text), MANIFEST_SNAPSHOT.search(text)
        sources[folder.name] = {
            "release": release.group(1) if release else None,
            "snapshot": snapshot.group(1) if snapshot else None,
            "examples": len(list(folder.glob("*.txt"))),
        }
    return {
        "dir": corpus_dir_text(examples_dir),
        "sources": sources,
        "of_this_release": [name for name, facts in sources.items() if facts["release"] == version],
    }


def corpus_dir_text(examples_dir: Path) -> str:
    """The corpus folder as written in the data: relative to the repository when it is inside it."""
    resolved = examples_dir.resolve()
    return resolved.relative_to(REPO).as_posix() if resolved.is_relative_to(REPO) else str(resolved)


def examples_record(conf: Path, examples_dir: Path, entry: JSONValue) -> JSONValue | None:
    files = example_files(examples_dir)
    if not files:
        return None
    verdicts: dict[str, dict[str, JSONValue]] = {}
    for source, path in files:
        verdicts.setdefault(source, {})[path.stem] = example_verdict(conf, read_example(path), entry)
    summary = {
        source: {
            "examples": len(items),
            "composed_by_verl": sum(1 for v in items.values() if v["composes"]),
            "resolved_by_verl": sum(1 for v in items.values() if v.get("resolves")),
            "validated_by_verl": sum(1 for v in items.values() if v.get("validates")),
        }
        for source, items in verdicts.items()
    }
    return {
        "corpus": "tests/data/verl_examples/<source>/<slug>.txt",
        "entry_point": entry,
        "summary": summary,
        "verdicts": verdicts,
    }


# ----------------------------------------------------------------------------------------------
# The whole reference
# ----------------------------------------------------------------------------------------------
def build_reference(verl: Any, version: str, examples_dir: Path) -> dict[str, JSONValue]:
    """Every file of the reference, by its path relative to the reference folder."""
    import hydra
    import omegaconf

    sources = SourceLog(verl_root(verl))
    conf = config_dir(verl)
    for yaml_file in sorted(conf.rglob("*.yaml")):
        sources.record(yaml_file)
    engines = engine_options(conf)
    catalog = TypeCatalog(sources)

    calls, scanned = scan_conversion_calls(verl, sources)
    explicit = explicit_sections(verl, calls)
    for cls in explicit.values():
        catalog.add(cls)
    preparation = ref_preparation(verl, sources)
    compositions = {
        engine: composition_record(conf, engine, catalog, explicit, preparation) for engine in engines
    }
    conversions = conversions_record(verl, calls, scanned, compositions, preparation)
    enums = enums_record(verl, sources)
    examples = examples_record(conf, examples_dir, entry_point_record(verl, sources))

    files: dict[str, JSONValue] = {f"composition/{engine}.json": compositions[engine] for engine in engines}
    targets = sorted({t for c in compositions.values() for t in c["targets"].values()})
    files["types.json"] = {
        "targets": {t: target_class_name(t, catalog) for t in targets},
        "dataclasses": catalog.dataclasses,
    }
    files["conversions.json"] = conversions
    files["enums.json"] = enums
    files["inert.json"] = inert_record(verl, sources)
    if examples is not None:
        files["examples_verdicts.json"] = examples
    corpus = corpus_record(examples_dir, version)
    files["meta.json"] = {
        "verl_version": version,
        "hydra_version": hydra.__version__,
        "omegaconf_version": omegaconf.__version__,
        "python": f"{sys.version_info.major}.{sys.version_info.minor}",
        "config_tree": sources.relative(conf),
        "primary_config": PRIMARY_CONFIG,
        "engine_group": ENGINE_GROUP,
        "engines": engines,
        "generated_by": "scripts/freeze_verl_reference.py",
        "files": sorted([*files, "meta.json"]),
        "sources_sha256": dict(sorted(sources.hashes.items())),
    }
    if corpus is not None:
        files["meta.json"]["corpus"] = corpus
    return files


def inert_table() -> Any:
    """verl_roles/upstream/inert_table.py, loaded by its path (plain data: this Python need not have
    verl_roles)."""
    import importlib.util

    path = REPO / "verl_roles" / "upstream" / "inert_table.py"
    spec = importlib.util.spec_from_file_location("verl_roles_inert_table", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the class is built
    spec.loader.exec_module(module)
    return module


def anchor_line(root: Path, anchor: Any) -> int | None:
    """The line of the ``nth`` occurrence of the anchor's text in its file, or None."""
    path = root / "verl" / anchor.file
    if not path.is_file():
        return None
    seen = 0
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if anchor.text in line:
            seen += 1
            if seen == anchor.nth:
                return number
    return None


def inert_record(verl: Any, sources: SourceLog) -> JSONValue:
    """Where each row of the inert table is in this verl: its anchors' lines, or the first one missing."""
    root = verl_root(verl)
    rows: dict[str, list[str]] = {}
    not_found: dict[str, str] = {}
    for row in inert_table().ROWS:
        lines = []
        for anchor in row.anchors:
            number = anchor_line(root, anchor)
            if number is None:
                if anchor.optional:
                    continue
                not_found[row.id] = f"verl/{anchor.file}: {anchor.text!r} (occurrence {anchor.nth})"
                break
            sources.record(root / "verl" / anchor.file)
            lines.append(f"verl/{anchor.file}:{number}")
        else:
            rows[row.id] = lines
    return {"rows": rows, "not_found": not_found}


# The files ``--only`` can freeze on their own (each needs nothing but verl's source).
PARTIAL = {
    "inert.json": lambda verl, sources: inert_record(verl, sources),
    "enums.json": lambda verl, sources: enums_record(verl, sources),
}


def refreeze(verl: Any, version: str, out_dir: Path, names: list[str]) -> int:
    """``--only``: the named files written again from the installed verl, the rest of the frozen reference
    kept (meta.json records the hashes of the files they were read from beside the others)."""
    meta_path = out_dir / "meta.json"
    if not meta_path.is_file():
        raise UsageError(f"no frozen reference at {out_dir}: freeze the whole release first")
    meta = json.loads(meta_path.read_text(encoding="utf-8"))
    if meta.get("verl_version") != version:
        raise UsageError(f"{out_dir} is verl {meta.get('verl_version')}'s reference, not {version}'s")
    sources = SourceLog(verl_root(verl))
    files = {name: PARTIAL[name](verl, sources) for name in names}
    meta["sources_sha256"] = dict(sorted({**meta["sources_sha256"], **sources.hashes}.items()))
    meta["files"] = sorted({*meta["files"], *names})
    files["meta.json"] = meta
    for name, content in files.items():
        (out_dir / name).write_text(dump(content, inline_depth_of(name)), encoding="utf-8")
    print(f"wrote {', '.join(names)} of {out_dir} for verl {version}")
    return 0


def target_class_name(target: str, catalog: TypeCatalog) -> str | None:
    try:
        obj = import_object(target)
    except Exception:  # noqa: BLE001 - an unimportable target is recorded as null
        return None
    if isinstance(obj, type) and dataclasses.is_dataclass(obj):
        return catalog.add(obj)
    return qualname(obj) if hasattr(obj, "__qualname__") else None


# How deep each file is indented before a value goes on one line: one line per leaf, per dataclass
# field, per conversion call, which keeps the files small and their diffs readable.
INLINE_DEPTH = {"composition": 2, "types.json": 4, "conversions.json": 3, "examples_verdicts.json": 3}


def dump(value: JSONValue, inline_depth: int = 99) -> str:
    """The one JSON formatting of every reference file: sorted keys, one-space indent down to
    ``inline_depth``, deeper values on one line."""

    def render(node: JSONValue, depth: int) -> str:
        if depth >= inline_depth or not isinstance(node, dict | list) or not node:
            return json.dumps(node, sort_keys=True, ensure_ascii=False, allow_nan=False)
        pad, inner = " " * depth, " " * (depth + 1)
        if isinstance(node, list):
            items = [f"{inner}{render(v, depth + 1)}" for v in node]
            return "[\n" + ",\n".join(items) + f"\n{pad}]"
        items = [
            f"{inner}{json.dumps(str(k), ensure_ascii=False)}: {render(node[k], depth + 1)}"
            for k in sorted(node)
        ]
        return "{\n" + ",\n".join(items) + f"\n{pad}}}"

    return render(value, 0) + "\n"


def inline_depth_of(name: str) -> int:
    return INLINE_DEPTH.get(name, INLINE_DEPTH.get(name.split("/")[0], 99))


def write_reference(files: dict[str, JSONValue], out_dir: Path) -> None:
    """Write every file (text prepared first, so a failure writes nothing) and drop stale ones."""
    texts = {name: dump(content, inline_depth_of(name)) for name, content in files.items()}
    out_dir.mkdir(parents=True, exist_ok=True)
    for stale in sorted(out_dir.rglob("*.json")):
        if stale.relative_to(out_dir).as_posix() not in texts:
            stale.unlink()
    for name, text in sorted(texts.items()):
        target = out_dir / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")


# ----------------------------------------------------------------------------------------------
# --compare-installed
# ----------------------------------------------------------------------------------------------
# Keys whose changes are shown as notes and do not make the surface differ.
INFORMATIONAL_KEYS = {
    "line",
    "converted_at",
    "converted_at_line",
    "sources_sha256",
    "source",
    "python",
    "scanned",
}
INFORMATIONAL_FILES_KEYS = {
    "meta.json": {"verl_version", "hydra_version", "omegaconf_version", "files", "corpus"},
}


def load_frozen(out_dir: Path) -> dict[str, JSONValue]:
    if not (out_dir / "meta.json").is_file():
        frozen = ", ".join(frozen_releases()) or "none"
        raise UsageError(
            f"no frozen reference at {out_dir} (meta.json missing); freeze one first "
            f"(releases frozen in {DATA_DIR}: {frozen})"
        )
    return {
        p.relative_to(out_dir).as_posix(): json.loads(p.read_text(encoding="utf-8"))
        for p in out_dir.rglob("*.json")
    }


def diff_values(
    old: JSONValue, new: JSONValue, path: tuple[str, ...]
) -> Iterator[tuple[str, tuple[str, ...], Any, Any]]:
    """("added" | "removed" | "changed", key path, old, new) for every difference."""
    if isinstance(old, dict) and isinstance(new, dict):
        for key in sorted(set(old) | set(new)):
            if key not in new:
                yield "removed", (*path, key), old[key], None
            elif key not in old:
                yield "added", (*path, key), None, new[key]
            else:
                yield from diff_values(old[key], new[key], (*path, key))
    elif is_name_list(old) and is_name_list(new) and old != new:
        for item in sorted(set(new) - set(old), key=str):
            yield "added", (*path, str(item)), None, item
        for item in sorted(set(old) - set(new), key=str):
            yield "removed", (*path, str(item)), item, None
        if set(old) == set(new):
            yield "changed", path, old, new
    elif old != new:
        yield "changed", path, old, new


def is_name_list(value: JSONValue) -> bool:
    """A list of distinct scalars (a registry, an engine list), diffed item by item."""
    return (
        isinstance(value, list)
        and all(isinstance(v, str | int | float | bool) for v in value)
        and len(set(value)) == len(value)
    )


def is_informational(file: str, path: tuple[str, ...]) -> bool:
    return bool(set(path) & INFORMATIONAL_KEYS) or (
        bool(path) and path[0] in INFORMATIONAL_FILES_KEYS.get(file, set())
    )


def calls_by_identity(content: JSONValue) -> JSONValue:
    """conversions.json with calls keyed by file, argument and dataclass_type (and the occurrence
    number among equal ones), so a call that only moved shows as a changed line, a note."""
    if not isinstance(content, dict) or "calls" not in content:
        return content
    keyed: dict[str, JSONValue] = {}
    for call in sorted(content["calls"], key=lambda c: (c["file"], str(c["argument"]), c["line"])):
        identity = f"{call['file']} :: {call['argument']} :: dataclass_type={call['dataclass_type']}"
        occurrence = sum(1 for key in keyed if key.startswith(identity + " #"))
        keyed[f"{identity} #{occurrence + 1}"] = call
    return {**content, "calls": keyed}


def compare(frozen: dict[str, JSONValue], installed: dict[str, JSONValue]) -> tuple[list[str], list[str]]:
    """(surface differences, notes), each one printable line."""
    differences: list[str] = []
    notes: list[str] = []
    for file in sorted(set(frozen) | set(installed)):
        if file not in installed:
            differences.append(f"{file}: only in the frozen reference (removed)")
            continue
        if file not in frozen:
            differences.append(f"{file}: new in the installed verl (added)")
            continue
        old, new = frozen[file], installed[file]
        if file == "conversions.json":
            old, new = calls_by_identity(old), calls_by_identity(new)
        for kind, path, before, after in diff_values(old, new, ()):
            line = f"{file}: {kind} {' / '.join(path)}"
            line += describe_change(kind, before, after)
            (notes if is_informational(file, path) else differences).append(line)
    return differences, notes


def describe_change(kind: str, before: Any, after: Any) -> str:
    def short(value: Any) -> str:
        text = json.dumps(value, sort_keys=True, ensure_ascii=False)
        return text if len(text) <= 200 else text[:197] + "..."

    if kind == "added":
        return f" = {short(after)}"
    if kind == "removed":
        return f" (was {short(before)})"
    return f": {short(before)} -> {short(after)}"


def summary(frozen: dict[str, JSONValue], installed: dict[str, JSONValue]) -> list[str]:
    """Counts of what the installed verl changes: leaves and ``_target_`` keys per engine, dataclasses,
    name lists, conversion calls, and example verdicts per corpus source."""
    lines: list[str] = []
    engines = sorted(
        {
            name.split("/", 1)[1][: -len(".json")]
            for name in (*frozen, *installed)
            if name.startswith("composition/")
        }
    )
    for engine in engines:
        name = f"composition/{engine}.json"
        if name not in frozen or name not in installed:
            side = "installed" if name in installed else "frozen"
            count = (installed if name in installed else frozen)[name]["leaf_count"]
            lines.append(f"engine {engine}: only in the {side} verl ({count} leaves)")
            continue
        old, new = frozen[name]["leaves"], installed[name]["leaves"]
        shared = set(old) & set(new)
        value_changed = sum(1 for k in shared if value_of(old[k]) != value_of(new[k]))
        declared_changed = sum(1 for k in shared if old[k].get("declared") != new[k].get("declared"))
        added, removed, changed = counted(frozen[name]["targets"], installed[name]["targets"])
        lines.append(
            f"engine {engine}: {len(old)} -> {len(new)} leaves; {len(set(new) - set(old))} added, "
            f"{len(set(old) - set(new))} removed, {value_changed} with another value (raw or resolved), "
            f"{declared_changed} with another declared type; _target_ keys: {added} added, "
            f"{removed} removed, {changed} naming another class"
        )
    changed_targets = sorted(
        {
            (path, old_target, installed[name]["targets"][path])
            for name in frozen
            if name.startswith("composition/") and name in installed
            for path, old_target in frozen[name]["targets"].items()
            if installed[name]["targets"].get(path, old_target) != old_target
        }
    )
    for path, old_target, new_target in changed_targets:
        lines.append(f"_target_ of {path}: {old_target} -> {new_target}")
    if "types.json" in frozen and "types.json" in installed:
        old, new = frozen["types.json"]["dataclasses"], installed["types.json"]["dataclasses"]
        added, removed, changed = counted(
            {k: v["fields"] for k, v in old.items()}, {k: v["fields"] for k, v in new.items()}
        )
        lines.append(f"dataclasses: {added} added, {removed} removed, {changed} with other fields")
    for list_name in sorted(set(frozen.get("enums.json", {})) | set(installed.get("enums.json", {}))):
        old = set(frozen.get("enums.json", {}).get(list_name, {}).get("values") or [])
        new = set(installed.get("enums.json", {}).get(list_name, {}).get("values") or [])
        if old != new:
            lines.append(
                f"enum {list_name}: added {sorted(new - old) or 'none'}, "
                f"removed {sorted(old - new) or 'none'}"
            )
    if "conversions.json" in frozen and "conversions.json" in installed:
        old = {k.rsplit(" #", 1)[0] for k in calls_by_identity(frozen["conversions.json"])["calls"]}
        new = {k.rsplit(" #", 1)[0] for k in calls_by_identity(installed["conversions.json"])["calls"]}
        unmapped = sum(
            1 for c in installed["conversions.json"]["calls"] if str(c.get("note", "")).startswith("UNMAPPED")
        )
        lines.append(
            f"conversion calls: {len(new - old)} added, {len(old - new)} removed (by file and argument); "
            f"{unmapped} unmapped in the installed verl"
        )
    old_summary = frozen.get("examples_verdicts.json", {}).get("summary", {})
    new_summary = installed.get("examples_verdicts.json", {}).get("summary", {})
    for source in sorted(set(old_summary) | set(new_summary)):
        before, after = old_summary.get(source, {}), new_summary.get(source, {})
        composed = f"{before.get('composed_by_verl', '-')} -> {after.get('composed_by_verl', '-')}"
        validated = f"{before.get('validated_by_verl', '-')} -> {after.get('validated_by_verl', '-')}"
        examples = after.get("examples", before.get("examples", "-"))
        lines.append(f"corpus {source}: composed {composed}, validated {validated} of {examples}")
    return lines


def value_of(leaf: dict[str, JSONValue]) -> tuple[JSONValue, JSONValue]:
    return leaf.get("raw"), leaf.get("resolved", leaf.get("unresolved"))


def counted(old: dict[str, JSONValue], new: dict[str, JSONValue]) -> tuple[int, int, int]:
    """(added, removed, changed) keys between two mappings."""
    shared = set(old) & set(new)
    return len(set(new) - set(old)), len(set(old) - set(new)), sum(1 for k in shared if old[k] != new[k])


# ----------------------------------------------------------------------------------------------
# Command line
# ----------------------------------------------------------------------------------------------
# --compare-installed without a release: compare with the newest frozen reference.
NEWEST_FROZEN = ""


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description="Freeze verl's config surface into tests/data/verl-<version>/, "
        "or compare an installed verl with it.",
    )
    parser.add_argument(
        "--verl-version",
        default=None,
        metavar="RELEASE",
        help="assert that the installed verl is this release (the script refuses otherwise); "
        "the release frozen is always the installed one",
    )
    parser.add_argument(
        "--out-dir",
        type=Path,
        default=None,
        help="reference folder: where freeze mode writes (default tests/data/verl-<installed release>/) "
        "and what --compare-installed reads (default tests/data/verl-<RELEASE>/)",
    )
    parser.add_argument(
        "--examples-dir",
        type=Path,
        default=EXAMPLES_DIR,
        help="examples corpus whose verdicts are recorded (default tests/data/verl_examples/)",
    )
    parser.add_argument(
        "--only",
        choices=sorted(PARTIAL),
        action="append",
        help="freeze only this file of the installed release's reference (repeatable), keeping the rest "
        "(meta.json gains the hashes of the files it was read from)",
    )
    parser.add_argument(
        "--compare-installed",
        nargs="?",
        const=NEWEST_FROZEN,
        default=None,
        metavar="RELEASE",
        help="write nothing; print what the installed verl adds, removes or changes relative to the frozen "
        "reference of RELEASE (default: the newest release frozen in tests/data); exit 0 when identical, "
        "1 when different",
    )
    return parser.parse_args(argv)


def compared_release(requested: str) -> str:
    """The frozen release --compare-installed reads: the one asked for, else the newest frozen."""
    if requested != NEWEST_FROZEN:
        return requested
    frozen = frozen_releases()
    if not frozen:
        raise UsageError(f"no frozen reference in {DATA_DIR} to compare with; freeze one first")
    return frozen[-1]


def main(argv: list[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    # verl's checks may look a model up on a hub: nothing here may use the network.
    for variable in OFFLINE_ENVIRONMENT:
        os.environ[variable] = "1"
    comparing = args.compare_installed is not None
    try:
        verl, version = import_verl(args.verl_version)
        out_dir = args.out_dir or reference_folder(
            compared_release(args.compare_installed) if comparing else version
        )
        frozen = load_frozen(out_dir) if comparing else None
        if args.only and not comparing:
            return refreeze(verl, version, out_dir, args.only)
        files = build_reference(verl, version, args.examples_dir)
    except UsageError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if frozen is None:
        write_reference(files, out_dir)
        engines = files["meta.json"]["engines"]
        counts = ", ".join(f"{e} {files[f'composition/{e}.json']['leaf_count']} leaves" for e in engines)
        print(
            f"wrote {out_dir} for verl {version}: {counts}; "
            f"{len(files['types.json']['dataclasses'])} dataclasses"
        )
        return 0
    differences, notes = compare(frozen, files)
    print(f"installed verl {version} vs frozen reference {out_dir}")
    for line in notes:
        print(f"  note: {line}")
    for line in differences:
        print(f"  {line}")
    print(f"summary: installed verl {version} vs frozen verl {frozen['meta.json'].get('verl_version')}")
    for line in summary(frozen, files):
        print(f"  {line}")
    print(f"{len(differences)} surface difference(s), {len(notes)} note(s)")
    return 1 if differences else 0


if __name__ == "__main__":
    sys.exit(main())

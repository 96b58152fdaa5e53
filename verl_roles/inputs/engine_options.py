"""The options of the ``model_engine`` group (``conf/model_engine/<engine>.yaml``), written from the
layout table (:mod:`verl_roles.base.layout`) and the section files the config tree holds, never by hand
(``scripts/generate_verl_releases.py`` writes them and its ``--check`` fails when one is stale).

An engine's option mounts, in this order (later wins when two set one key):

1. its common baseline, ``engine/<baseline>.yaml``, at the top-level section ``<baseline>``;
2. each role's engine block, ``engine/<baseline>_role.yaml``, inside the role's section (every field
   following the baseline unless the role sets it);
3. the optimizer of each role that has one (the trained roles, and the row's ``extra_optimizer_roles``);
4. the one LoRA block of each trained model, with the engine's module names;
5. the engine's own fields of a section, ``<group>/<engine>.yaml``, wherever the tree has such a file: the
   models' group at each model's section, a role's group at the role's section.

Adding an engine is its layout row plus the section files that are truly new; adding a role is its row
(and its section files): the mounts follow.
"""

from __future__ import annotations

from pathlib import Path

from verl_roles.base.layout import (
    ENGINE_KEY,
    ENGINE_TABLE,
    HF_MODULE_NAMES,
    LORA_BLOCK,
    MEGATRON_MODULE_NAMES,
    OPTIM_BLOCK,
    ROLES,
    Engine,
)

# The order roles are mounted in: by the path of their section (mounts of distinct sections do not
# overlap, so the order only keeps the files stable).
_MOUNT_ORDER = tuple(sorted(ROLES, key=lambda role: role.section))
# The module names each LoRA block file uses, and how a comment says them.
_LORA_NAMES = {HF_MODULE_NAMES: "Hugging Face module names", MEGATRON_MODULE_NAMES: "Megatron module names"}
# The config group holding the fields of the models' sections.
MODEL_GROUP = "model"


def _mounts_of_section_files(engine: Engine, conf_dir: Path) -> list[str]:
    """``/<group>/<engine>@<section>`` for every section file of the engine that the tree holds."""
    mounts = []
    if (conf_dir / MODEL_GROUP / f"{engine.name}.yaml").is_file():
        mounts += [f"/{MODEL_GROUP}/{engine.name}@{role.model}" for role in ROLES if role.model]
    for role in _MOUNT_ORDER:
        if (conf_dir / role.name / f"{engine.name}.yaml").is_file():
            mounts.append(f"/{role.name}/{engine.name}@{role.section}")
    return mounts


def option_text(engine: Engine, conf_dir: Path) -> str:
    """The text of ``conf/model_engine/<engine>.yaml``."""
    title = engine.title or engine.name
    optimizer_roles = [role for role in _MOUNT_ORDER
                       if role.trained or role.name in engine.extra_optimizer_roles]
    lora_family = engine.lora_module_names or HF_MODULE_NAMES
    lines = [
        "# @package _global_",
        f"# {engine.description}",
        "# Generated from verl_roles/base/layout.py by scripts/generate_verl_releases.py (do not edit).",
        "defaults:",
        "",
        f"  # The common {title} baseline, set once for every role.",
        f"  - /engine/{engine.baseline}@{engine.baseline}",
        "",
        f"  # Each role's {title} block; every field follows the baseline unless the role sets it.",
        *(f"  - /engine/{engine.baseline}_role@{role.section}.{engine.block(role.name)}"
          for role in _MOUNT_ORDER if role.engine_block),
        "",
        "  # The optimizer of each role that has one under this engine.",
        *(f"  - /{Path(engine.optimizer_file).with_suffix('').as_posix()}@{role.section}.{OPTIM_BLOCK}"
          for role in optimizer_roles),
        "",
        f"  # The one LoRA block of each trained model, with {_LORA_NAMES[lora_family]}.",
        *((f"  # verl's {title} engine reads no LoRA setting: validation refuses a non-zero rank under it.",)
          if engine.lora_module_names is None else ()),
        *(f"  - /lora/{lora_family}@{role.model}.{LORA_BLOCK}" for role in ROLES if role.model),
    ]
    section_mounts = _mounts_of_section_files(engine, conf_dir)
    if section_mounts:
        lines += ["", f"  # {title}-only fields of each section.", *(f"  - {m}" for m in section_mounts)]
    lines += [
        "  - _self_",
        "",
        "# Records the engine this config was composed for.",
        f"{ENGINE_KEY}: {engine.name}",
        "",
    ]
    return "\n".join(lines)


def alias_text(alias: str, engine: Engine) -> str:
    """The text of ``conf/model_engine/<alias>.yaml``: the engine's option under another name."""
    return "\n".join([
        "# @package _global_",
        f"# Alias of `{ENGINE_KEY}={engine.name}`, so both spellings compose to the same config.",
        "# Generated from verl_roles/base/layout.py by scripts/generate_verl_releases.py (do not edit).",
        "defaults:",
        f"  - {engine.name}",
        "",
    ])


def engine_option_files(conf_dir: Path) -> dict[Path, str]:
    """Every option file of the ``model_engine`` group and its text."""
    files = {}
    for engine in ENGINE_TABLE:
        files[conf_dir / ENGINE_KEY / f"{engine.name}.yaml"] = option_text(engine, conf_dir)
        for alias in engine.aliases:
            files[conf_dir / ENGINE_KEY / f"{alias}.yaml"] = alias_text(alias, engine)
    return files

"""Read the frozen verl reference (tests/data/verl-<version>/) without verl installed.

The files are written by scripts/freeze_verl_reference.py (its docstring describes every file). This
module only loads them and answers the questions tests ask: the leaves of an engine's composition,
the declared type of a leaf, the dataclass a section becomes.
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

from verl_roles.base import releases

DATA = Path(__file__).resolve().parent / "data"
VERL_VERSION = releases.DEFAULT_RELEASE
# Every release verl_roles supports has a frozen reference (tests/test_releases.py checks it).
RELEASES = releases.supported()


def reference_dir(version: str = VERL_VERSION) -> Path:
    return DATA / f"verl-{version}"


@cache
def load(name: str, version: str = VERL_VERSION) -> Any:
    """One reference file, e.g. ``load("meta.json")`` or ``load("composition/dp.json")``."""
    return json.loads((reference_dir(version) / name).read_text(encoding="utf-8"))


def engines(version: str = VERL_VERSION) -> list[str]:
    return list(load("meta.json", version)["engines"])


def leaves(engine: str, version: str = VERL_VERSION) -> dict[str, dict[str, Any]]:
    """Leaf path -> ``{"raw", "resolved" | "unresolved", "declared"?}`` for one engine."""
    return load(f"composition/{engine}.json", version)["leaves"]


def default(leaf: dict[str, Any]) -> Any:
    """A leaf's resolved value; raises KeyError for a leaf that does not resolve (e.g. ``???``)."""
    return leaf["resolved"]


def field(class_name: str, field_name: str, version: str = VERL_VERSION) -> dict[str, Any]:
    """A dataclass field's record: ``type`` descriptor, ``has_default``, ``default`` when plain."""
    return load("types.json", version)["dataclasses"][class_name]["fields"][field_name]


def declared_type(leaf: dict[str, Any], version: str = VERL_VERSION) -> Any | None:
    """The type descriptor verl declares for a leaf, or None where verl declares none.

    A leaf that is a dataclass field refers to types.json; a leaf below a field (a ``dict[str, V]``
    entry, or inside an untyped mapping) carries its own ``type``.
    """
    declared = leaf.get("declared")
    if not declared or "field" not in declared:
        return None
    if "type" in declared:
        return declared["type"]
    return field(declared["class"], declared["field"], version)["type"]

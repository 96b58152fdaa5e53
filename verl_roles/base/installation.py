"""Which copy of verl_roles is running, and saying so when it is not the one a user expects.

``python -m verl_roles.main`` puts the working directory first on Python's path, so inside a source
checkout it runs the checkout (its code and its ``conf/``) even when another copy of verl_roles is
installed. That is Python's rule and the right copy to run there (code and config tree stay together),
but a user who installed a wheel expects the wheel: the command-line entry points print one notice
naming both copies. A copy installed from this very checkout (editable or not) is the same source and
gets no notice.
"""

from __future__ import annotations

import json
import sys
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import unquote, urlparse

if TYPE_CHECKING:
    from importlib import metadata

# The package folder (verl_roles/), this file being verl_roles/base/installation.py.
PACKAGE_DIR = Path(__file__).resolve().parent.parent
DISTRIBUTION = "verl_roles"
# This copy's version, as pyproject.toml names it (tests/test_shell.py holds the two together).
VERSION = "0.1.0"


def checkout_root() -> Path | None:
    """The source checkout this package runs from, or None for an installed copy."""
    root = PACKAGE_DIR.parent
    if (root / "pyproject.toml").is_file() and (root / "conf" / "ppo_trainer.yaml").is_file():
        return root
    return None


def _installed_source(dist: metadata.Distribution) -> tuple[Path | None, bool]:
    """Where an installed distribution came from (a local folder, if pip recorded one) and whether it
    is an editable install of that folder (PEP 610 ``direct_url.json``)."""
    text = dist.read_text("direct_url.json")
    if not text:
        return None, False
    try:
        record = json.loads(text)
    except ValueError:
        return None, False
    url = urlparse(str(record.get("url", "")))
    folder = Path(unquote(url.path)).resolve() if url.scheme == "file" else None
    return folder, bool(record.get("dir_info", {}).get("editable"))


def _installed_distribution(root: Path) -> metadata.Distribution | None:
    """The first installed verl_roles on Python's path that is not the checkout's own build metadata
    (``pip install -e`` leaves a ``verl_roles.egg-info`` in the checkout, which Python finds first when
    the working directory is the checkout; it is no other copy)."""
    from importlib import metadata  # imported when asked: a run from an installed copy never needs it

    for dist in metadata.distributions(name=DISTRIBUTION):
        if Path(str(dist.locate_file(""))).resolve() != root.resolve():
            return dist
    return None


@cache
def shadowing_notice() -> str | None:
    """A one-line notice when a source checkout runs although another copy is installed, else None."""
    root = checkout_root()
    if root is None:
        return None
    dist = _installed_distribution(root)
    if dist is None:
        return None
    folder, editable = _installed_source(dist)
    if folder == root.resolve():
        # Installed from this very folder (`pip install .` or `pip install -e .` in a clone): the checkout
        # that runs is the source the user installed, so there is nothing to tell apart.
        return None
    where = Path(str(dist.locate_file(""))).resolve()
    kind = f"editable install of {folder}" if editable else f"verl_roles {dist.version}"
    return (
        f"running the source checkout {root} (Python puts the working directory first), not the installed "
        f"{kind} in {where}: the checkout's code and conf/ are used. To run the installed copy, run from "
        "another folder or use the console scripts (verl-roles, verl-roles-main)."
    )


def extra_requirements(extra: str) -> list[str] | None:
    """What this copy of verl_roles' optional extra ``extra`` installs, as pip requirements: read from
    the checkout's pyproject.toml when a checkout runs, else from the metadata installed beside this
    package. None when neither says (then the caller names the one requirement it knows).

    verl_roles is not published on a package index, so ``pip install "verl_roles[EXTRA]"`` cannot work
    on a fresh machine; the requirements themselves can be installed anywhere."""
    root = checkout_root()
    if root is not None:
        import tomllib

        try:
            project = tomllib.loads((root / "pyproject.toml").read_text(encoding="utf-8"))["project"]
        except (OSError, ValueError, KeyError):
            return None
        listed = project.get("optional-dependencies", {}).get(extra)
        return [str(item) for item in listed] if isinstance(listed, list) else None
    return _installed_extra(extra)


def _installed_extra(extra: str) -> list[str] | None:
    from importlib import metadata

    from packaging.requirements import InvalidRequirement, Requirement

    for dist in metadata.distributions(name=DISTRIBUTION, path=[str(PACKAGE_DIR.parent)]):
        found = []
        for line in dist.requires or ():
            try:
                requirement = Requirement(line)
            except InvalidRequirement:
                continue
            if requirement.marker is not None and requirement.marker.evaluate({"extra": extra}):
                requirement.marker = None
                found.append(str(requirement))
        return found or None
    return None


def print_shadowing_notice() -> None:
    """Print :func:`shadowing_notice` on stderr, worded as every verl_roles warning, when there is one."""
    notice = shadowing_notice()
    if notice is not None:
        print(f"verl_roles warning: {notice}", file=sys.stderr)

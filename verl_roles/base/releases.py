"""The verl release seam: which verl releases verl_roles writes configs for, and what each contributes.

This is the one module that names a release. A user picks one with the ``verl_version`` config group
(``verl_version=0.8.0``; :data:`DEFAULT_RELEASE` otherwise); every other module asks here: the schema
(types, ``_target_`` classes, the sections verl builds dataclasses from), the rules (name lists,
strategies), the legacy translation, the snapshots, ``launch``, CI and the tests.

What a release contributes is data generated from the installed release, never typed here:
``scripts/freeze_verl_reference.py`` freezes an installed verl into ``tests/data/verl-<release>/``, and
``scripts/generate_verl_releases.py`` turns each frozen reference into ``verl_roles/upstream/verl_releases/
<release>.json`` (read by :func:`reference`) and the group option ``conf/verl_version/<release>.yaml``.
The releases verl_roles supports are exactly the generated files; adding one is: install it, freeze it,
generate, review the diff, add its corpus, name its extra in pyproject.toml.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from functools import cache
from pathlib import Path
from typing import Any

from verl_roles.base.installation import extra_requirements

# The release a config is written for unless ``verl_version=`` says otherwise: the one line to change
# when verl_roles moves to a newer verl (then regenerate: scripts/generate_verl_releases.py).
DEFAULT_RELEASE = "0.9.1"

# The config group that picks the release, and the top-level key recording the choice.
VERSION_KEY = "verl_version"

# What each release contributes, generated (scripts/generate_verl_releases.py): facts about verl.
RELEASES_DIR = Path(__file__).resolve().parent.parent / "upstream" / "verl_releases"


def _order(release: str) -> tuple[int, ...]:
    return tuple(int(part) for part in release.split(".") if part.isdigit())


@cache
def supported() -> tuple[str, ...]:
    """Every release verl_roles writes configs for, oldest first (one generated file each)."""
    return tuple(sorted((p.stem for p in RELEASES_DIR.glob("*.json")), key=_order))


def is_supported(release: object) -> bool:
    return isinstance(release, str) and release in supported()


@cache
def reference(release: str = DEFAULT_RELEASE) -> dict[str, Any]:
    """The generated facts of ``release``: ``types`` (path -> type, or {engine: type}), ``targets``,
    ``converted``, ``names``, ``strategies``, ``engines`` and its ``layer`` over our config tree."""
    if not is_supported(release):
        raise KeyError(f"verl {release} is not a release verl_roles supports ({', '.join(supported())})")
    return json.loads((RELEASES_DIR / f"{release}.json").read_text(encoding="utf-8"))


def inert_sources(release: str) -> dict[str, list[str]]:
    """Per row of :mod:`verl_roles.upstream.inert_table` that applies to ``release``, the lines of verl that
    show it (``verl/trainer/ppo/ray_trainer.py:364``), as the freeze found them in that release."""
    return reference(release).get("inert", {})


@cache
def surface(release: str) -> frozenset[str]:
    """Every key path of ``release``'s composed config under any engine: its leaves and the sections
    holding them."""
    leaves = reference(release).get("leaves", ())
    sections = {".".join(p.split(".")[:i]) for p in leaves for i in range(1, p.count(".") + 1)}
    return frozenset(leaves) | sections


def ships(release: str, engine: str) -> bool:
    """Whether ``release`` ships the engine ``engine`` of our ``model_engine`` group."""
    return is_supported(release) and engine in reference(release).get("engines", ())


def release_for(engine: str) -> str:
    """The release a config for ``engine`` is written for when none is chosen in a tool or a test: the
    default one, unless it does not ship ``engine`` (then the newest supported release that does)."""
    shipping = [r for r in supported() if ships(r, engine)]
    return DEFAULT_RELEASE if DEFAULT_RELEASE in shipping or not shipping else shipping[-1]


def engine_choice(engine: str) -> tuple[str, ...]:
    """The overrides that compose ``engine`` under :func:`release_for` it (no release override for the
    default release)."""
    release = release_for(engine)
    return (f"model_engine={engine}", *(() if release == DEFAULT_RELEASE else (choice(release),)))


def with_engine(engine: str) -> tuple[str, ...]:
    """The supported releases that ship the verl engine ``engine`` (an option of verl's model_engine)."""
    return tuple(r for r in supported() if engine in reference(r).get("verl_engines", ()))


def has_key(release: str, path: str) -> bool:
    """Whether ``path`` is a key (a leaf or a section) of ``release``'s composed config."""
    return path in surface(release)


def releases_with(path: str) -> tuple[str, ...]:
    """The supported releases whose config has the key ``path``, oldest first."""
    return tuple(r for r in supported() if has_key(r, path))


def only_elsewhere(path: str, release: str) -> tuple[str, ...]:
    """The other supported releases whose config has ``path`` when ``release``'s has not (else ())."""
    if has_key(release, path):
        return ()
    return tuple(r for r in releases_with(path) if r != release)


def elsewhere_problem_text(path: str, release: str, chosen: bool) -> tuple[str, str] | None:
    """(message, fix) for a key ``release`` lacks and another release has, else None. ``chosen``: the
    command line picked ``release`` (rather than the default)."""
    others = only_elsewhere(path, release)
    if not others:
        return None
    named = " and ".join(f"verl {r}" for r in others)
    message = f"is a key of {named} only; the config is written for verl {release}, which has no such key"
    pick = f"`{choice(others[-1])}`"
    fix = (f"switch {choice(release)} to {pick}" if chosen else f"add {pick} to the command line") + (
        f" to write the config for verl {others[-1]}, or remove {path}")
    return message, fix


def release_of(cfg: Any) -> str:
    """The release a composed config is written for (its ``verl_version``), the default when it names
    none verl_roles supports (the schema then reports the value)."""
    try:
        value = cfg.get(VERSION_KEY) if hasattr(cfg, "get") else None
    except Exception:  # noqa: BLE001 - an unresolvable value is reported by the schema
        value = None
    return str(value) if is_supported(str(value) if value is not None else None) else DEFAULT_RELEASE


def chosen_on(group_choices: Any) -> str:
    """The release ``(group, option)`` pairs pick: the last ``verl_version`` choice, else the default."""
    found = DEFAULT_RELEASE
    for group, option in group_choices:
        if group == VERSION_KEY and is_supported(option):
            found = option
    return found


def choice(release: str) -> str:
    """The command-line override that picks ``release``."""
    return f"{VERSION_KEY}={release}"


def extra(release: str) -> str:
    """The optional extra of verl_roles that installs ``release`` (pip normalises the name)."""
    return "verl-" + release.replace(".", "-")


def install_hint(release: str = DEFAULT_RELEASE, python: str | None = None) -> str:
    """How to get ``release`` of verl into the environment of the interpreter ``python`` (the current
    environment when None): the pip command installs what our extra for the release lists (read from
    this copy of verl_roles, :func:`verl_roles.base.installation.extra_requirements`), into that interpreter.
    verl_roles itself is not on a package index, so the command never names it."""
    into = f" into {python}" if python else ""
    command = install_command(release, python)
    return (
        f"install verl {release}{into} with `{command}` (verl=={release} and what its trainer imports, as "
        f"verl_roles' extra {extra(release)} lists them; about 5 minutes and 6.4 GB; CPU-only is enough to "
        f"check a config), or point `--verl-python` at the Python of an environment that has verl {release}"
    )


def install_command(release: str = DEFAULT_RELEASE, python: str | None = None) -> str:
    """The pip command that installs ``release`` of verl (what our extra for it lists) into ``python``."""
    import shlex

    pip = f"{shlex.quote(python)} -m pip" if python else "pip"
    requirements = extra_requirements(extra(release)) or [f"verl=={release}"]
    return f"{pip} install {' '.join(shlex.quote(item) for item in requirements)}"


def previous(release: str) -> str | None:
    """The supported release before ``release``, or None."""
    older = [r for r in supported() if _order(r) < _order(release)]
    return older[-1] if older else None


# Set while the generator composes the tree as conf/ writes it, to compute each release's layer over it.
_LAYERS_OFF = [False]


@contextmanager
def unlayered() -> Iterator[None]:
    """Compose the config tree as conf/ writes it, no release's layer applied (for
    scripts/generate_verl_releases.py, which computes the layers against that tree)."""
    _LAYERS_OFF[0] = True
    try:
        yield
    finally:
        _LAYERS_OFF[0] = False


def layers_on() -> bool:
    return not _LAYERS_OFF[0]


EMPTY_LAYER: dict[str, Any] = {"add": {}, "delete": [], "set": {}}


def layer(release: str, engine: str) -> dict[str, Any]:
    """What choosing ``release`` changes in the tree conf/ writes for ``engine``: ``set`` (path -> the
    release's default, at the key the value lives in, so keys that follow it follow), ``add`` (path ->
    value of a key the release has and conf/ lacks), ``delete`` (paths of keys and sections conf/ has
    and the release lacks). Applied to the shipped files only: a key a user's own file or the command
    line sets stays, and the schema names it."""
    if not layers_on() or not is_supported(release):
        return EMPTY_LAYER
    return reference(release).get("layer", {}).get(engine, EMPTY_LAYER)

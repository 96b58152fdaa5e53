"""Snapshots of resolved configs in ``_generated/``, for reviewing config changes as diffs.

:data:`VARIANTS` is the one list of what is pinned; ``scripts/generate_trainer_config.sh`` (a thin
wrapper over ``python -m verl_roles.commands.snapshots``), the golden tests and CI all read it. Each snapshot
is a short header followed by exactly the ``resolved.yaml`` the main job writes for that variant.

All snapshots are composed in one process. ``--check`` writes nothing: it compares in memory, prints
a unified diff for every stale or missing snapshot and names the files that are no longer in the list.
"""

from __future__ import annotations

import difflib
import os
import stat
import sys
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from omegaconf import DictConfig

from verl_roles.api.composition import compose
from verl_roles.base import releases
from verl_roles.base.errors import ConfigError, Problem, counted
from verl_roles.base.layout import DEFAULT_ENGINE, ENGINE_KEY, ENGINE_TABLE, PRIMARY_CONFIG
from verl_roles.base.notices import ConfigDeprecationWarning, ConfigTranslationWarning
from verl_roles.inputs.config_tree import CONF_DIR
from verl_roles.inputs.flags import REQUIRED, FlagSpec
from verl_roles.legacy import LEGACY_CONFIG_NAMES
from verl_roles.runs.run_files import to_yaml
from verl_roles.runs.write_protocol import signals_raise, unwritable, write_atomic
from verl_roles.shell.command import Command, Invocation, Words

SCRIPT = "scripts/generate_trainer_config.sh"
GENERATED_DIR = "_generated"
# Every file in _generated/ with this prefix is owned by the generator.
PREFIX = "_generated_"


@dataclass(frozen=True)
class Composition:
    """One way to compose a config: a primary config name and Hydra overrides."""

    overrides: tuple[str, ...] = ()
    config_name: str = PRIMARY_CONFIG

    def command(self) -> str:
        """The main-job command line that composes this config."""
        parts = ["python -m verl_roles.main"]
        if self.config_name != PRIMARY_CONFIG:
            parts.append(f"--config-name {self.config_name}")
        parts.extend(self.overrides)
        return " ".join(parts)


@dataclass(frozen=True)
class Variant:
    """A pinned snapshot: its file name, what it shows, and how it is composed.

    ``same_as`` lists other compositions that must give exactly the same resolved config (e.g. a
    deprecated config name); generating or checking fails when one of them differs.
    """

    filename: str
    about: str
    composition: Composition
    same_as: tuple[Composition, ...] = field(default=())


VARIANTS: tuple[Variant, ...] = (
    Variant(
        filename="_generated_ppo_trainer.yaml",
        about="the default config (model_engine=dp, FSDP for every role)",
        composition=Composition(),
    ),
    # Every other engine of the layout table, for every role (under the release that ships it); a
    # deprecated config name that means the engine must compose to the same config.
    *(
        Variant(
            filename=f"_generated_ppo_{row.name}_trainer.yaml",
            about=f"the {row.title} engine for every role",
            composition=Composition(releases.engine_choice(row.name)),
            same_as=tuple(Composition(config_name=name) for name, overrides in LEGACY_CONFIG_NAMES.items()
                          if overrides == [f"{ENGINE_KEY}={row.name}"]),
        )
        for row in ENGINE_TABLE if row.name != DEFAULT_ENGINE
    ),
    Variant(
        filename="_generated_ppo_megatron_tp2_role_overrides.yaml",
        about="Megatron with TP=2/PP=2 set once on the common baseline, plus per-role overrides",
        composition=Composition(
            (
                "model_engine=megatron",
                "megatron.tensor_model_parallel_size=2",
                "megatron.pipeline_model_parallel_size=2",
                "critic.megatron.param_offload=true",
                "actor_rollout_ref.actor.optim.lr=1e-6",
                "critic.optim.lr=2e-5",
            )
        ),
    ),
    Variant(
        filename="_generated_ppo_trainer_role_overrides.yaml",
        about="FSDP baseline without offload, a KL loss and its reference model offloaded, per-role "
        "learning rates",
        composition=Composition(
            (
                "fsdp.param_offload=false",
                "actor_rollout_ref.actor.use_kl_loss=true",
                "actor_rollout_ref.ref.fsdp_config.param_offload=true",
                "actor_rollout_ref.actor.optim.lr=1e-6",
                "critic.optim.lr=2e-5",
            )
        ),
    ),
    # The default engines (FSDP, and Megatron's legacy trainer) for every other supported verl release.
    *(
        Variant(
            filename=f"_generated_ppo{engine_part}_trainer_verl_{release}.yaml",
            about=f"{about}, written for verl {release}",
            composition=Composition((*engine_override, releases.choice(release))),
        )
        for release in releases.supported() if release != releases.DEFAULT_RELEASE
        for engine_part, about, engine_override in (
            ("", "the default config (model_engine=dp, FSDP for every role)", ()),
            ("_megatron", "the Megatron engine for every role", ("model_engine=megatron",)),
        )
    ),
)


def compose_quietly(composition: Composition) -> DictConfig:
    """Compose ``composition`` without the deprecation warning a pinned legacy name would print."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConfigDeprecationWarning)
        warnings.simplefilter("ignore", ConfigTranslationWarning)
        return compose(composition.overrides, composition.config_name)


def resolved_text(composition: Composition) -> str:
    """Exactly the ``resolved.yaml`` the main job writes for ``composition`` (the role files are not
    rendered)."""
    return to_yaml(compose_quietly(composition))


def header(variant: Variant, cfg_text: str) -> str:
    """The comment block above a snapshot: generated, how to regenerate, how it was composed."""
    def top_level(key: str) -> str:
        prefix = f"{key}:"
        lines = [line[len(prefix):].strip() for line in cfg_text.splitlines() if line.startswith(prefix)]
        found = lines[0] if lines else "?"
        return found.strip("'\"")

    engine, release = top_level("model_engine"), top_level(releases.VERSION_KEY)
    lines = [
        f"# Generated by {SCRIPT}; do not edit by hand.",
        f"# Regenerate after changing conf/: {SCRIPT}   (verify: {SCRIPT} --check)",
        f"# Variant: {variant.about}.",
        f"# Composed as: {variant.composition.command()}",
    ]
    for other in variant.same_as:
        note = " (deprecated name)" if other.config_name in LEGACY_CONFIG_NAMES else ""
        lines.append(f"# Same config as: {other.command()}{note}")
    lines += [
        f"# model_engine: {engine}",
        f"# Target trainer: verl {release} (verl_version; the release whose trainer config resolved.yaml "
        "is).",
        "# Below: resolved.yaml exactly as the main job writes it.",
    ]
    return "\n".join(lines) + "\n"


def render_checked(variant: Variant) -> str:
    """The full text of ``variant``'s snapshot (header + resolved config), after checking that every
    ``same_as`` composition gives the same config."""
    body = resolved_text(variant.composition)
    problems = []
    for other in variant.same_as:
        other_body = resolved_text(other)
        if other_body != body:
            diff = unified_diff(body, other_body, variant.composition.command(), other.command())
            problems.append(
                Problem(
                    key=variant.filename,
                    message=f"`{other.command()}` must compose to the same config as "
                    f"`{variant.composition.command()}` but differs:\n{diff}",
                    fix="make both compose to the same values in conf/",
                )
            )
    if problems:
        raise ConfigError(problems)
    return header(variant, body) + body


def render_all(variants: Sequence[Variant] = VARIANTS) -> dict[str, str]:
    """File name -> snapshot text for every variant, composed in this one process."""
    return {variant.filename: render_checked(variant) for variant in variants}


def docs_table(variants: Sequence[Variant] = VARIANTS) -> str:
    """The table of docs/snapshots.md: one row per variant, from :data:`VARIANTS` (a test holds the page
    to it, so the page lists what the script writes)."""
    rows = ["| snapshot | what it shows | composed as |", "| --- | --- | --- |"]
    for variant in variants:
        overrides = " ".join(variant.composition.overrides)
        composed = f"`{overrides}`" if overrides else "`python -m verl_roles.main` (no override)"
        also = "".join(f"; the same as `{c.command()}`" for c in variant.same_as)
        rows.append(f"| `{variant.filename}` | {variant.about} | {composed}{also} |")
    return "\n".join(rows)


def unified_diff(old: str, new: str, old_name: str, new_name: str) -> str:
    """A unified diff of two texts, or '' when they are equal."""
    lines = difflib.unified_diff(
        old.splitlines(keepends=True), new.splitlines(keepends=True), fromfile=old_name, tofile=new_name
    )
    return "".join(line if line.endswith("\n") else line + "\n" for line in lines)


def snapshot_diff(variant: Variant, rendered: str, generated_dir: Path) -> str:
    """The diff from the committed snapshot of ``variant`` to ``rendered``; '' when it is fresh."""
    path = generated_dir / variant.filename
    committed = _committed_text(path)
    shown = f"{GENERATED_DIR}/{variant.filename}"
    old_name = f"{shown} (committed)" if path.is_file() else f"{shown} (missing)"
    return unified_diff(committed, rendered, old_name, f"{shown} (composed from conf/)")


def _committed_text(path: Path) -> str:
    """A committed snapshot's text ('' when there is none). Bytes that are not UTF-8 (a damaged file)
    show as U+FFFD: the snapshot is then stale, and generating rewrites it."""
    return _read(path).decode("utf-8", errors="replace") if path.is_file() else ""


def extra_files(generated_dir: Path, variants: Sequence[Variant] = VARIANTS) -> list[Path]:
    """Generator-owned files in ``generated_dir`` whose variant is no longer in the list."""
    known = {variant.filename for variant in variants}
    if not generated_dir.is_dir():
        return []
    return sorted(p for p in generated_dir.glob(f"{PREFIX}*.yaml") if p.name not in known)


def check(
    generated_dir: Path, variants: Sequence[Variant] = VARIANTS, rendered: Mapping[str, str] | None = None
) -> int:
    """Compare every snapshot with a fresh composition (or ``rendered``, file name -> text); print
    a diff of each stale one; return 0 when all are fresh, 1 otherwise. Writes nothing."""
    if rendered is None:
        rendered = render_all(variants)
    stale = 0
    for variant in variants:
        diff = snapshot_diff(variant, rendered[variant.filename], generated_dir)
        if diff:
            stale += 1
            print(f"stale: {GENERATED_DIR}/{variant.filename} ({variant.about})")
            print(diff)
    extras = extra_files(generated_dir, variants)
    for path in extras:
        print(f"stale: {GENERATED_DIR}/{path.name} is not in VARIANTS (verl_roles/commands/snapshots.py)")
    if stale or extras:
        print(
            f"{counted(stale + len(extras), 'snapshot file')} in {GENERATED_DIR}/ "
            f"{'is' if stale + len(extras) == 1 else 'are'} stale. "
            f"Fix: run {SCRIPT}, review `git diff {GENERATED_DIR}/` and commit it."
        )
        return 1
    print(f"{len(variants)} snapshots in {GENERATED_DIR}/ are fresh.")
    return 0


def _read(path: Path) -> bytes:
    """A snapshot's bytes; one that cannot be read is one paragraph, not a traceback."""
    try:
        return path.read_bytes()
    except OSError as error:
        raise unwritable(error, path) from None


def generate(
    generated_dir: Path, variants: Sequence[Variant] = VARIANTS, rendered: Mapping[str, str] | None = None
) -> int:
    """Write every snapshot (atomically; ``rendered`` if given, else composed now) whose text changed,
    and remove generator-owned files no longer listed. Returns 0."""
    if rendered is None:
        rendered = render_all(variants)
    try:
        generated_dir.mkdir(exist_ok=True)  # a checkout without it gets it back
    except OSError as error:
        raise unwritable(error, generated_dir) from None
    changed = []
    for name, text in rendered.items():
        path = generated_dir / name
        if not path.is_file() or _read(path) != text.encode("utf-8"):
            # A new file renamed over the name: whatever was there (checked below) is replaced, never
            # written through.
            with signals_raise():
                write_atomic(path, text)
            changed.append(name)
    for path in extra_files(generated_dir, variants):
        path.unlink()
        changed.append(f"{path.name} (removed: not in the variant list)")
    summary = ", ".join(changed) if changed else "none changed"
    print(f"{len(rendered)} snapshots in {GENERATED_DIR}/: {summary}")
    return 0


def entry_problems(generated_dir: Path) -> list[Problem]:
    """``_generated/`` must be a folder of its own and hold only files the generator writes: regular files
    with no other name. A symbolic link (to a file outside the checkout: a cloned repository can carry
    one), a hard link, a folder, a FIFO or a device there is refused, named, before anything is read or
    written, so the generator never writes through a link."""
    try:
        info = os.lstat(generated_dir)
    except FileNotFoundError:
        return []
    except OSError as error:
        raise unwritable(error, generated_dir) from None

    def fix(path: object) -> str:
        return (f"remove {path} and run {SCRIPT} again; {GENERATED_DIR}/ holds only the files the script "
                "writes")

    if not stat.S_ISDIR(info.st_mode):
        what = "a symbolic link" if stat.S_ISLNK(info.st_mode) else "not a folder"
        return [Problem(key=str(generated_dir), message=f"is {what}; the snapshots go into a folder of this "
                        "checkout's own", fix=fix(generated_dir))]
    problems = []
    try:
        entries = sorted(os.scandir(generated_dir), key=lambda entry: entry.name)
    except OSError as error:
        raise unwritable(error, generated_dir) from None
    for entry in entries:
        info = entry.stat(follow_symlinks=False)
        if stat.S_ISLNK(info.st_mode):
            what = f"a symbolic link (to {os.readlink(entry.path)})"
        elif not stat.S_ISREG(info.st_mode):
            what = "a folder" if stat.S_ISDIR(info.st_mode) else "not a regular file"
        elif info.st_nlink > 1:
            what = f"a file with {info.st_nlink - 1} other hard link{'s' if info.st_nlink > 2 else ''}"
        else:
            continue
        problems.append(Problem(key=entry.path, message=f"is {what}, which the generator would read or write "
                                "through", fix=fix(entry.path)))
    return problems


def _check_checkout(root: Path) -> None:
    """Refuse to write one checkout's snapshots from another checkout's config tree."""
    if Path(CONF_DIR).resolve() != (root / "conf").resolve():
        raise ConfigError(
            [
                Problem(
                    key="conf/",
                    message=f"this Python composes from {CONF_DIR}, not from {root / 'conf'}",
                    fix=f"run {SCRIPT} of that checkout (it puts the checkout first on PYTHONPATH)",
                )
            ]
        )


CHECK = FlagSpec(
    ("--check",), help="write nothing; print a diff of every stale snapshot; exit 1 when any is stale"
)
ROOT = FlagSpec(("--root",), REQUIRED, value_name="a checkout folder", metavar="DIR",
                help="the checkout whose conf/ and _generated/ are used (default: the current folder)")


def _snapshots(invocation: Invocation) -> int:
    root = Path(invocation.value(ROOT) or Path.cwd()).resolve()
    _check_checkout(root)
    generated_dir = root / GENERATED_DIR
    problems = entry_problems(generated_dir)
    if problems:
        raise ConfigError(problems)
    return check(generated_dir) if invocation.given(CHECK) else generate(generated_dir)


COMMAND = Command(
    name="snapshots",
    summary=f"regenerate the resolved-config snapshots in {GENERATED_DIR}/ from conf/",
    action=_snapshots,
    flags=(CHECK, ROOT),
    words=Words.NONE,
    arguments="",
    program=SCRIPT,
    about=f"""\
Regenerate the resolved-config snapshots in {GENERATED_DIR}/ from conf/ (the variants are listed in
verl_roles/commands/snapshots.py), composed in one process, written atomically, only those that changed;
files of the generator no longer listed are removed. With --check nothing is written.""",
    examples=(SCRIPT, f"{SCRIPT} --check"),
    completes_overrides=False,
)


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m verl_roles.commands.snapshots [--check] [--root DIR]``, run by the generator script."""
    return COMMAND.run(list(sys.argv[1:] if argv is None else argv))


if __name__ == "__main__":
    sys.exit(main())

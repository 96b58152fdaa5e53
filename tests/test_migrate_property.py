"""The property of ``verl-roles migrate`` (issue 30): every line it prints composes in the main job, or it
refuses with one paragraph and exit 2. Checked on lines nobody listed: drawn from verl's frozen launch
corpora (tests/data/verl_examples/: the Jan-2026 volcengine tree, verl's legacy launch form with
``--config-path`` and ``ppo_megatron_trainer``, and the launches of verl's releases), respelled with the
legacy table's old keys, written for one release and moved to another (``--from``/``--to``, up and down),
then migrated as a user types it and the printed line composed through
``verl_roles.api.composition.compose``."""

from __future__ import annotations

import random
import shlex
import warnings
from dataclasses import dataclass
from pathlib import Path

import pytest
from conftest import DATA, run_in_process, sampled

from verl_roles.api.composition import compose
from verl_roles.base import releases
from verl_roles.base.errors import ConfigError
from verl_roles.inputs.cmdline import CommandLine
from verl_roles.inputs.flags import CONFIG_PATH
from verl_roles.legacy import LEGACY_KEYS, find

SIZE = 160
# The draws in chunks that the suite's workers share; the fast tier runs the first.
CHUNKS = 8
LAUNCHES = sorted((DATA / "verl_examples").rglob("*.txt"))


def read_launch(path: Path) -> list[str]:
    """A corpus launch's arguments as its script typed them (one a line, ``#`` comments)."""
    lines = path.read_text(encoding="utf-8").splitlines()
    return [line.strip() for line in lines if line.strip() and not line.strip().startswith("#")]


def old_spelling(token: str, rng: random.Random) -> str:
    """``token`` with its key written the legacy way, when the table has an old spelling for it."""
    key, sep, value = token.partition("=")
    if not sep or key.startswith(("+", "~", "-")):
        return token
    spellings = [entry.old + key[len(entry.new):] for entry in LEGACY_KEYS
                 if key == entry.new or (entry.section and key.startswith(entry.new + "."))]
    return f"{rng.choice(spellings)}={value}" if spellings else token


@dataclass(frozen=True)
class Draw:
    name: str
    args: tuple[str, ...]
    moves: bool  # --from or --to given

    def line(self) -> str:
        return f"verl-roles migrate {shlex.join(self.args)}  # {self.name}"


def draw(index: int) -> Draw:
    """Draw ``index``: the same line on every machine."""
    rng = random.Random(index)
    path = rng.choice(LAUNCHES)
    tokens = read_launch(path)
    if rng.random() < 0.5:
        tokens = [old_spelling(token, rng) for token in tokens]
    if rng.random() < 0.3 and "model_engine=megatron" in tokens:
        tokens = [t for t in tokens if t != "model_engine=megatron"] + ["--config-name=ppo_megatron_trainer"]
    supported = list(releases.supported())
    if rng.random() < 0.3:
        tokens.append(releases.choice(rng.choice(supported)))
    flags: list[str] = []
    if rng.random() < 0.5:
        flags += ["--to", rng.choice(supported)]
    if rng.random() < 0.2:
        flags += ["--from", rng.choice(supported)]
    name = f"#{index} {path.parent.name}/{path.stem}"
    return Draw(name, (*flags, *tokens), bool(flags))


def compose_line(tokens: list[str]) -> None:
    command = CommandLine.parse(tokens)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        compose(command.texts(), command.config_name, command.config_dir)


def composes_as_typed(tokens: list[str]) -> bool:
    """Whether the main job composes the line as typed (a --config-path aside: that is migrate's to say)."""
    command = CommandLine.parse(tokens)
    kept = [t for item in command.items if getattr(item, "spec", None) != CONFIG_PATH
            for t in (item.tokens if hasattr(item, "tokens") else (item.text,))]
    try:
        compose_line(kept)
    except ConfigError:
        return False
    return True


@pytest.mark.parametrize("chunk", sampled(range(CHUNKS), every=CHUNKS))
def test_every_line_migrate_prints_composes_or_it_refuses_in_one_paragraph(chunk: int, tmp_path: Path):
    printed = refused = 0
    failures = []
    indices = range(chunk * SIZE // CHUNKS, (chunk + 1) * SIZE // CHUNKS)
    for index in indices:
        case = draw(index)
        result = run_in_process(["migrate", *case.args], tmp_path, module="verl_roles.cli")
        output = result.stdout + result.stderr
        if "Traceback" in output or result.returncode not in (0, 2):
            failures.append(f"{case.line()}: exit {result.returncode}\n{output}")
            continue
        if result.returncode == 2:
            refused += 1
            errors = [line for line in result.stderr.splitlines() if line.startswith("verl_roles error:")]
            if result.stdout or len(errors) != 1:
                failures.append(f"{case.line()}: refused, but not in one paragraph\n{output}")
            elif not case.moves and composes_as_typed(list(case.args)):
                failures.append(f"{case.line()}: the main job composes it, migrate refused\n{output}")
            continue
        printed += 1
        tokens = shlex.split(result.stdout)
        command = CommandLine.parse(tokens)
        if command.flag(CONFIG_PATH) is not None:
            failures.append(f"{case.line()}: printed a --config-path\n{output}")
        legacy = [o.key for o in command.key_overrides()
                  if (hit := find(o.key, command.release())) is not None and not hit[0].alias]
        if legacy:
            failures.append(f"{case.line()}: printed legacy keys {legacy}\n{output}")
        try:
            compose_line(tokens)
        except ConfigError as error:
            failures.append(f"{case.line()}: printed a line the main job refuses: {error}\n{output}")
    assert not failures, f"{len(failures)} of {len(indices)} draws:\n\n" + "\n\n".join(failures[:5])
    # The property is checked on lines that print (each composed), not only on refusals.
    assert printed >= 1, (printed, refused)

"""Acceptance against the real verl: what verl_roles writes, verl runs (issues 10 and 19).

The suite runs against the verl release installed in ``VERL_PYTHON`` (CI runs it once per supported
release, each in its venv): every case is composed with ``verl_version=<that release>``, and the
launches of every corpus that release's own tree composes are cases.

Each case is a command line as a user types it. It is composed with ``python -m verl_roles.main``
(in-process, the same code path), writing a run directory; then one ``tests/verl_driver.py`` process,
in the Python named by ``VERL_PYTHON`` (default: this interpreter, if it can import verl), takes every
run directory through what verl does before it starts Ray: ``validate_config``, every
``omega_conf_to_dataclass`` of its trainer and workers, and its own Hydra entry point. The same overrides
also go through verl's own config tree (the control), so a failure reads against what verl itself does.
Without verl the module is skipped, with the reason. Nothing is downloaded: the driver builds a tiny
local model and runs with HF_HUB_OFFLINE=1.

Known failures are listed, with their reason, in one table: ``tests/verl_known_failures.py``.
"""

from __future__ import annotations

import fnmatch
import functools
import json
import os
import random
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import installed_verl_release, verl_python
from test_readme import readme_examples
from verl_judge import (
    Case,
    Composed,
    DriverFailed,
    compose_and_check,
    control_verdict,
    failed_steps,
    one_line,
)
from verl_known_failures import (
    DELIBERATE_REFUSALS,
    KNOWN_FAILURES,
    KnownFailure,
    deliberate_refusal,
    explaining_row,
)
from verl_population import (
    MODEL,
    corpus_launches,
    launch_name,
    population,
    read_launch,
    verdicts,
    without_verl_config_path,
)

from verl_roles.base import releases
from verl_roles.base.layout import ROLE_SECTIONS
from verl_roles.commands.snapshots import VARIANTS
from verl_roles.inputs.cmdline import CommandLine

# One worker runs the driver once for the whole module.
pytestmark = [pytest.mark.verl, pytest.mark.xdist_group("verl")]

# Cases whose control (verl's own tree, same overrides) always runs: they prove the harness sound.
# Every other case runs its control only when a step failed that no known-failure row explains, to tell
# whether verl's own config fails there too.
HARNESS_CONTROLS = ("variant:_generated_ppo_trainer", "variant:_generated_ppo_megatron_trainer")


# What only the user can know: the model (the critic's follows it). The engines' defaults launch with it
# alone (issue 27: launchable defaults); a case adds what it is about.
MODEL_PATH = f"actor_rollout_ref.model.path={MODEL}"
ESSENTIALS = (MODEL_PATH,)
# With LoRA and the vllm rollout, validate_config asks the installed vllm for its largest LoRA rank;
# the CPU-only verl install has no vllm, so the LoRA cases roll out with sglang (which it does not ask).
LORA_ESSENTIALS = (MODEL_PATH, "actor_rollout_ref.rollout.name=sglang")
# What verl's own tree needs beside the model to pass its pre-Ray checks (its defaults leave the rollout
# engine and the micro batch sizes unset): the controls of the harness cases add it.
VERL_ESSENTIALS = (
    f"critic.model.path={MODEL}",
    "actor_rollout_ref.rollout.name=vllm",
    "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=2",
    "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=2",
    "actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu=2",
    "critic.ppo_micro_batch_size_per_gpu=2",
)


def example_case(path: Path) -> Case:
    """A verl launch: verl_roles gets its arguments without a ``--config-path`` naming verl's own
    folder (ours is its counterpart); the control gets them as verl's launch script wrote them."""
    tokens = read_launch(path)
    return Case(launch_name(path), tuple(without_verl_config_path(tokens)), control_args=tuple(tokens))


# The release the suite checks: the one installed where verl runs (the default when none is, and the
# suite is then skipped). Every case is written for it.
RELEASE = installed_verl_release() or releases.DEFAULT_RELEASE


SLIME_FILE = """\
megatron:
  - name: actor
    role: actor
    overrides:
      lr: 2.0e-6
      use_distributed_optimizer: "false"
      adam_beta2: 0.98
      adam_eps: 1.0e-6
      lr_warmup_iters: 8
      use_dynamic_batch_size: true
  - name: critic
    role: critic
    args:
      lr: 3.0e-5
"""

SPECIAL_CASES: tuple[Case, ...] = (
    Case(
        "grpo",
        (
            "algorithm.adv_estimator=grpo",
            "actor_rollout_ref.actor.use_kl_loss=true",
            "actor_rollout_ref.rollout.n=4",
            *ESSENTIALS,
        ),
    ),
    Case(
        "lora-dp-structured",
        ("actor_rollout_ref.model.lora.rank=8", "actor_rollout_ref.model.lora.alpha=16", *LORA_ESSENTIALS),
    ),
    Case(
        "lora-dp-flat",
        ("actor_rollout_ref.model.lora_rank=8", "actor_rollout_ref.model.lora_alpha=16", *LORA_ESSENTIALS),
    ),
    Case(
        "lora-megatron-structured",
        (
            "model_engine=megatron",
            "actor_rollout_ref.model.lora.rank=8",
            "actor_rollout_ref.model.lora.alpha=32",
            *LORA_ESSENTIALS,
        ),
    ),
    Case(
        "lora-megatron-flat",
        (
            "model_engine=megatron",
            "actor_rollout_ref.model.lora_rank=8",
            "actor_rollout_ref.model.lora_alpha=32",
            *LORA_ESSENTIALS,
        ),
    ),
    Case(
        "megatron-freeze-moe-router",
        (
            "model_engine=megatron",
            "actor_rollout_ref.model.override_config.moe_config.freeze_moe_router=true",
            *ESSENTIALS,
        ),
    ),
    Case(
        "slime-file",
        ("model_engine=megatron", "megatron_config_path={slime.yaml}", *ESSENTIALS),
        files={"slime.yaml": SLIME_FILE},
    ),
)


def for_release(case: Case) -> Case:
    """``case`` written for :data:`RELEASE` (verl_version first, so nothing a case says is overridden)."""
    return Case(case.name, (releases.choice(RELEASE), *case.args), case.files,
                case.control_args if case.control_args is not None else case.args)


def all_cases() -> list[Case]:
    """The pinned variants that name no release or this one, every launch the release's own tree
    composes, and the special cases; each written for the release."""
    variants = [
        Case(f"variant:{Path(variant.filename).stem}", (*_config_name_args(variant.composition), *ESSENTIALS),
             control_args=(*_config_name_args(variant.composition), *ESSENTIALS, *VERL_ESSENTIALS))
        for variant in VARIANTS
        if named_release(variant.composition.overrides) in (None, RELEASE)
    ]
    launches = corpus_launches(RELEASE)
    examples = [example_case(path) for path in (sampled_launches(launches) if SAMPLE else launches)]
    listed = [for_release(case) for case in variants + examples + list(SPECIAL_CASES) + guide_cases()]
    return listed + witness_cases() + drawn_cases()


WITNESS = "deliberate:"


def witness_cases() -> list[Case]:
    """Each deliberate refusal's witness that applies to the release: verl_roles must refuse it with the
    row's words, and verl's own tree must take it through every pre-Ray step (the control; the witness
    comes after the harness's essentials there, so a value it sets, null included, is the one verl reads)."""
    return [
        for_release(Case(f"{WITNESS}{index}", (*row.witness, *ESSENTIALS),
                         control_args=(*VERL_ESSENTIALS, *row.witness, *ESSENTIALS)))
        for index, row in enumerate(DELIBERATE_REFUSALS)
        if row.witness and row.applies(RELEASE)
    ]


# How much a run checks (docs/testing.md): "full", every launch of the corpora and ORACLE_DRAWS draws, or
# "sample" (.ci/run on the releases other than the default): every variant, special case, guide line and
# deliberate row's witness, every launch whose verdict in verl's own trees differs between the supported
# releases, one launch in SAMPLE_EVERY of the others in each stratum (corpus x engine), seeded, and fewer
# draws. `VERL_ROLES_ACCEPTANCE=full` is the full run, one command away for any release.
ACCEPTANCE = os.environ.get("VERL_ROLES_ACCEPTANCE", "full")
if ACCEPTANCE not in ("full", "sample"):
    raise pytest.UsageError(f"VERL_ROLES_ACCEPTANCE={ACCEPTANCE!r}: expected full or sample")
SAMPLE = ACCEPTANCE == "sample"
SAMPLE_EVERY = 4
# The population the oracle properties run on, per release: ORACLE_DRAWS draws (tests/verl_population.py,
# seeded by ORACLE_SEED). The defaults keep .ci/run's time; scripts/verl_oracle.py runs a larger sample.
ORACLE_DRAWS = int(os.environ.get("VERL_ROLES_ORACLE_DRAWS", "20" if SAMPLE else "60"))
ORACLE_SEED = int(os.environ.get("VERL_ROLES_ORACLE_SEED", "0"))
DRAW = "draw:"


def release_verdict(path: Path, release: str) -> tuple[object, ...]:
    """What verl ``release``'s own tree does with a corpus launch: composes, resolves, validates (frozen
    by scripts/freeze_verl_reference.py)."""
    verdict = verdicts(release).get(path.parent.name, {}).get(path.stem, {})
    return tuple(verdict.get(step) for step in ("composes", "resolves", "validates"))


def sampled_launches(launches: list[Path]) -> list[Path]:
    """The launches a sample run checks: each one whose verdict differs between the supported releases,
    and one in SAMPLE_EVERY of the others per stratum (corpus, engine), by a shuffle seeded with the
    release, ORACLE_SEED and the stratum; in the corpus's order."""
    strata: dict[tuple[str, str], list[Path]] = {}
    kept: set[Path] = set()
    for path in launches:
        if len({release_verdict(path, release) for release in releases.supported()}) > 1:
            kept.add(path)
            continue
        engine = verdicts(RELEASE).get(path.parent.name, {}).get(path.stem, {}).get("model_engine", "")
        strata.setdefault((path.parent.name, str(engine)), []).append(path)
    for stratum, paths in sorted(strata.items()):
        rng = random.Random(f"{RELEASE}:{ORACLE_SEED}:{stratum}")
        kept.update(rng.sample(paths, max(1, len(paths) // SAMPLE_EVERY)))
    return [path for path in launches if path in kept]


def drawn_cases() -> list[Case]:
    """The population of the release: each draw written for the release (the control gets the line as
    verl's launch would type it)."""
    return [
        Case(f"{DRAW}{draw.name}", (releases.choice(RELEASE), *draw.ours()), control_args=draw.tokens)
        for draw in population(RELEASE, ORACLE_DRAWS, ORACLE_SEED)
    ]


def guide_cases() -> list[Case]:
    """Every main-job and ``verl-roles launch`` line of the README and docs/*.md that documents success and
    needs no file of its own, with the model path on the tiny model: what a user copies must launch."""
    cases = []
    for example in readme_examples():
        args = list(example.args)
        if example.program == "cli":
            if args[:1] != ["launch"]:
                continue
            args = args[1:]
        if example.exit_code != 0 or any(_needs_more(arg) for arg in args):
            continue
        if not any(arg.startswith("actor_rollout_ref.model.path=") for arg in args):
            args.append(f"actor_rollout_ref.model.path={MODEL}")
        cases.append(Case(f"guide:{example.file}:{example.line}", tuple(args)))
    return cases


def _needs_more(arg: str) -> bool:
    """An argument a guide line can only run with beside it: a flag, a file, a sweep, a run folder."""
    return (arg.startswith(("-", "hydra.", "hydra/", "role/", "megatron_config_path="))
            or ("," in arg.partition("=")[2] and not arg.partition("=")[2].startswith("[")))


def named_release(overrides: tuple[str, ...]) -> str | None:
    """The release a command line picks explicitly, None when it leaves it to the default."""
    command = CommandLine.parse(list(overrides))
    return command.release() if command.chose(releases.VERSION_KEY) else None


def _config_name_args(composition: Any) -> list[str]:
    from verl_roles.base.layout import PRIMARY_CONFIG

    head = [] if composition.config_name == PRIMARY_CONFIG else ["--config-name", composition.config_name]
    return [*head, *composition.overrides]


# The cases, built only where verl runs (building the population composes ~60 draws): elsewhere one
# parameter stands for them and skips with the reason.
VERL, NO_VERL = verl_python()
CASES = all_cases() if VERL is not None else []
# Composed and checked a second time, into other folders: the results must be byte-identical.
TWINS = {f"{name} (again)": name for name in ("variant:_generated_ppo_megatron_trainer", "grpo")}
CASES_BY_NAME = {case.name: case for case in CASES}
CASE_NAMES = list(CASES_BY_NAME)
CASE_PARAMS = [pytest.param(name, id=name) for name in CASE_NAMES] or [
    pytest.param("no verl", id="no verl", marks=pytest.mark.skip(reason=NO_VERL))]
CHECKED = CASES + [
    Case(twin, CASES_BY_NAME[name].args, CASES_BY_NAME[name].files, CASES_BY_NAME[name].control_args)
    for twin, name in TWINS.items() if name in CASES_BY_NAME
]


# --------------------------------------------------------------------------------------------------
# Composing and checking.


@dataclass
class Acceptance:
    work: Path
    composed: dict[str, Composed]
    results: dict[str, Any]
    seconds: dict[str, float]


def control_policy(case: Case, composed: Composed) -> str:
    """When the driver runs the control (verl's own tree on the same overrides) for a case: always for
    the harness cases and the witnesses of deliberate refusals, and otherwise only where a failure is
    not explained by the known-failures table: the driver decides that for verl's steps; a refusal by
    verl_roles is decided here."""
    policy = "always" if TWINS.get(case.name, case.name) in HARNESS_CONTROLS else "on unknown failure"
    if case.name.startswith(WITNESS):
        return "always"  # a deliberate refusal holds only while verl's own tree takes the witness
    if case.name.startswith(DRAW) and composed.exit_code == 0:
        return "never"  # property (a) judges what we wrote; verl's own tree does not excuse it
    if composed.exit_code != 0 and policy != "always":
        error = one_line(composed.stderr)
        explained = (explaining_row(case.name, "compose", error)
                     or deliberate_refusal(case.name, error, RELEASE))
        policy = "never" if explained else "always"
    return policy


@pytest.fixture(scope="module")
def acceptance(tmp_path_factory: pytest.TempPathFactory) -> Acceptance:
    python, why = verl_python()
    if python is None:
        pytest.skip(why)
    import time

    work = tmp_path_factory.mktemp("verl_acceptance")
    started = time.perf_counter()
    known = [[row.cases, row.steps, row.error] for row in KNOWN_FAILURES]
    try:
        composed, results = compose_and_check(python, work, CHECKED, work / "model", control_policy, known)
    except DriverFailed as error:
        pytest.fail(str(error))
    seconds = {"compose and check": time.perf_counter() - started}
    return Acceptance(work=work, composed=composed, results=results, seconds=seconds)


# --------------------------------------------------------------------------------------------------
# Judging a case.


@dataclass(frozen=True)
class Failure:
    step: str
    error: str


def failures_of(name: str, acceptance: Acceptance) -> list[Failure]:
    composed = acceptance.composed[name]
    if composed.exit_code != 0:
        return [Failure("compose", one_line(composed.stderr))]
    result = acceptance.results["cases"][name]
    if "driver_error" in result:
        pytest.fail(f"the verl driver crashed on {name}:\n{result['driver_error']}")
    return [Failure(step["step"], step["error"]) for step in result["steps"] if step["status"] == "failed"]


def known_row(case: str, failure: Failure) -> KnownFailure | None:
    return explaining_row(case, failure.step, failure.error)


def describe(name: str, acceptance: Acceptance, failures: list[Failure]) -> str:
    case = CASES_BY_NAME[name]
    verdict, control_failed = control_verdict(acceptance.results["cases"][name])
    lines = [f"case {name}: python -m verl_roles.main {' '.join(case.args)}"]
    lines += [f"  {failure.step}: {failure.error}" for failure in failures]
    lines.append(f"  verl's own config tree with the same overrides: {verdict}")
    lines += [f"    (there too) {step}: {error}" for step, error in control_failed.items()]
    return "\n".join(lines)


@pytest.mark.parametrize("name", CASE_PARAMS)
def test_verl_agrees_with_verl_roles(name: str, acceptance: Acceptance) -> None:
    """The two properties, on every case (the listed ones and the drawn population):

    (a) a config verl_roles writes passes every pre-Ray step of the release, whatever verl's own tree
        does with the same overrides (a failure is excused only by a row of KNOWN_FAILURES: the machine,
        not the config);
    (b) a command line verl_roles refuses is refused by verl's own tree too, or is a deliberate
        difference (DELIBERATE_REFUSALS, with the verl code that would fail on it later)."""
    failures = failures_of(name, acceptance)
    line = CASES_BY_NAME[name].line()
    if failures and failures[0].step == "compose":
        if deliberate_refusal(name, failures[0].error, RELEASE):
            return  # refused on purpose: verl would fail on it after Ray starts (the row says why)
        verdict, control_failed = control_verdict(acceptance.results["cases"][name])
        assert control_failed or verdict != "runs", (
            f"verl_roles refuses a command line verl {RELEASE}'s own tree takes through every pre-Ray step, "
            f"and no row of tests/verl_known_failures.py DELIBERATE_REFUSALS says why:\n  {line}\n"
            f"  verl_roles: {failures[0].error[:1500]}"
        )
        return
    unknown = [failure for failure in failures if known_row(name, failure) is None]
    assert not unknown, (
        f"verl {RELEASE} refuses what verl_roles wrote (no row in tests/verl_known_failures.py):\n  {line}\n"
        + describe(name, acceptance, failures)
    )
    if failures:
        reasons = sorted({known_row(name, failure).reason for failure in failures})  # type: ignore[union-attr]
        pytest.xfail("; ".join(reasons))


# --------------------------------------------------------------------------------------------------
# Read-back: what verl's objects hold is what resolved.yaml and roles/*.yaml show.

MODEL_SECTION = "actor_rollout_ref.model"
ABSENT = "<absent>"
NO_SUCH_FIELD = "<verl has no such field>"


def lookup(tree: Any, dotted: str) -> Any:
    for part in dotted.split("."):
        if not isinstance(tree, dict) or part not in tree:
            return ABSENT
        tree = tree[part]
    return tree


@functools.cache
def load_yaml(path: Path) -> Any:
    """A run file, read once per test session (the read-back and the stale-row check both read it)."""
    return yaml.load(path.read_text(encoding="utf-8"), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))


def readback_mismatches(name: str, acceptance: Acceptance) -> list[str]:
    run_dir = acceptance.composed[name].run_dir
    resolved = load_yaml(run_dir / "resolved.yaml")
    mismatches = []
    for row in acceptance.results["cases"][name].get("readback", []):
        role, key, seen_by_verl = row["role"], row["key"], row["verl"]
        section = MODEL_SECTION if role == "model" else ROLE_SECTIONS[role]
        shown = {"resolved.yaml": lookup(resolved, f"{section}.{key}")}
        if role in ROLE_SECTIONS:
            role_file = load_yaml(run_dir / "roles" / f"{role}.yaml")
            shown[f"roles/{role}.yaml"] = lookup(role_file, key)
        for where, value in shown.items():
            both_absent = value == ABSENT and seen_by_verl == NO_SUCH_FIELD
            if value != seen_by_verl and not both_absent:
                mismatches.append(f"{role} {key}: verl uses {seen_by_verl!r}, {where} shows {value!r}")
    return mismatches


def readback_failures(name: str, acceptance: Acceptance) -> list[Failure]:
    return [
        Failure(f"readback {line.split(':', 1)[0].replace(' ', '.')}", line)
        for line in readback_mismatches(name, acceptance)
    ]


@pytest.mark.parametrize("name", CASE_PARAMS)
def test_what_verl_uses_is_what_we_show(name: str, acceptance: Acceptance) -> None:
    if acceptance.composed[name].exit_code != 0:
        pytest.skip("verl_roles refused the overrides (see test_verl_runs_what_verl_roles_writes)")
    result = acceptance.results["cases"][name]
    converted = {step["step"] for step in result["steps"] if step["status"] == "ok"}
    if not result.get("readback"):
        pytest.xfail(f"no role converted, nothing to read back (converted: {sorted(converted) or 'none'})")
    failures = readback_failures(name, acceptance)
    unknown = [failure.error for failure in failures if known_row(name, failure) is None]
    assert not unknown, "values verl uses differ from what verl_roles shows:\n" + "\n".join(unknown)
    if failures:
        pytest.xfail("; ".join(sorted({known_row(name, failure).reason for failure in failures})))  # type: ignore[union-attr]


# --------------------------------------------------------------------------------------------------
# The harness itself.


def test_the_driver_ran_a_supported_release_and_every_case_was_written_for_it(acceptance: Acceptance) -> None:
    assert acceptance.results["verl_version"] == RELEASE and releases.is_supported(RELEASE)
    written = {load_yaml(c.run_dir / "resolved.yaml").get(releases.VERSION_KEY)
               for c in acceptance.composed.values() if c.exit_code == 0}
    assert written == {RELEASE}


def test_every_conversion_call_site_of_verl_is_frozen_and_made_or_excused(acceptance: Acceptance) -> None:
    audit = acceptance.results["call_sites"]
    assert audit["unlisted"] == [] and audit["stale"] == [] and audit["uncovered"] == [], (
        "the installed verl's omega_conf_to_dataclass calls differ from its frozen reference (freeze it "
        "again), or a frozen call is no kind of tests/verl_driver.py's CONVERSIONS/ELSEWHERE: "
        f"{audit}"
    )


def test_verls_own_tree_with_the_launch_essentials_passes_every_step(acceptance: Acceptance) -> None:
    """The harness is sound: the model and VERL_ESSENTIALS (rollout engine, micro batches) are enough
    for verl's own config tree to pass every step, on both engines."""
    for name in HARNESS_CONTROLS:
        steps = acceptance.results["cases"][name]["control"]["steps"]
        failed = [step for step in steps if step["status"] == "failed"]
        assert not failed, f"{name}: {failed}"
        assert any(step["step"] == "entry_point" and step["status"] == "ok" for step in steps)


def test_results_are_byte_identical_for_the_same_command_line(acceptance: Acceptance) -> None:
    for twin, name in TWINS.items():
        first, again = (json.dumps(acceptance.results["cases"][key], sort_keys=True) for key in (name, twin))
        differing = list(differences(acceptance.results["cases"][name], acceptance.results["cases"][twin]))
        assert again == first, (
            f"{name}: composed and checked twice, different results:\n" + "\n".join(differing))


def differences(first: Any, again: Any, path: str = "") -> Any:
    """``path: first | again`` for every leaf where two results differ."""
    if isinstance(first, dict) and isinstance(again, dict):
        for key in sorted(set(first) | set(again)):
            yield from differences(first.get(key), again.get(key), f"{path}.{key}")
    elif isinstance(first, list) and isinstance(again, list) and len(first) == len(again):
        for index, (a, b) in enumerate(zip(first, again, strict=True)):
            yield from differences(a, b, f"{path}[{index}]")
    elif first != again:
        yield f"{path}: {json.dumps(first)[:300]} | {json.dumps(again)[:300]}"


def test_every_known_failure_row_still_matches_a_failure(acceptance: Acceptance) -> None:
    used: set[object] = set()
    for name in CASES_BY_NAME:
        failures = failures_of(name, acceptance)
        if acceptance.composed[name].exit_code == 0 and acceptance.results["cases"][name].get("readback"):
            failures += readback_failures(name, acceptance)
        used.update(row for failure in failures if (row := known_row(name, failure)) is not None)
    refused = {
        row
        for name, composed in acceptance.composed.items()
        if composed.exit_code != 0
        and (row := deliberate_refusal(name, one_line(composed.stderr), RELEASE)) is not None
    }
    # A refusal row is checked where this release's run holds a case it names (a release's own tree
    # composes only some corpora's launches).
    in_scope = [
        row for row in DELIBERATE_REFUSALS
        if row.applies(RELEASE) and any(fnmatch.fnmatchcase(name, row.cases) for name in CASES_BY_NAME)
    ]
    known = [row for row in KNOWN_FAILURES if row.applies(RELEASE)]
    stale = [row for row in (*known, *in_scope) if row not in used | refused]
    assert not stale, "rows of tests/verl_known_failures.py that no longer fail (delete them):\n" + "\n".join(
        map(repr, stale)
    )


def test_every_deliberate_refusal_is_a_difference_from_verl(acceptance: Acceptance) -> None:
    """A row's witness is refused by verl_roles with the row's words, and verl's own tree takes the same
    overrides through every pre-Ray step it can run here (a step that fails for want of a package, e.g.
    the NPU engine's, says nothing of the config). Where verl's tree refuses it too, the two agree and the
    row is not needed."""
    for case in witness_cases():
        row = DELIBERATE_REFUSALS[int(case.name.removeprefix(WITNESS))]
        composed = acceptance.composed[case.name]
        assert composed.exit_code != 0 and row.error in one_line(composed.stderr), (
            f"{case.line()}\n  should be refused with {row.error!r}; verl_roles said: "
            f"{one_line(composed.stderr)[:800] or 'nothing (exit 0)'}")
        refused_there = {
            step: error for step, error in failed_steps(acceptance.results["cases"][case.name]
                                                        .get("control", {}).get("steps", [])).items()
            if "No module named" not in error
        }
        assert not refused_there, (
            f"verl {RELEASE}'s own tree refuses the witness of a deliberate refusal too (delete the row, the "
            f"two agree):\n  {case.line()}\n  row: {row.error!r}\n  verl: {refused_there}")

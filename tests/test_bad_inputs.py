"""The catalogue of bad inputs (tests/bad_inputs.py): every entry ends in one paragraph naming the key
or file and a fix, exit code 2, no traceback, and no file written; through the Python API, a
ConfigError and nothing else."""

from __future__ import annotations

from pathlib import Path

import pytest
from bad_inputs import (
    API_CASES,
    CASES,
    ENVIRONMENTS,
    KNOWN_FAILURES,
    SUBPROCESS_SAMPLE,
    Case,
    codes_under,
    environment_kept,
    fault_supported,
    run_api_case,
    run_case,
    unreadable_works,
    unshare_works,
    verdict,
)
from conftest import sampled

# What Hydra/OmegaConf do decides these tests' outcome: CI runs them on both stacks.
pytestmark = pytest.mark.stack

NEEDS_UNSHARE = ("full-disk",)


def _params(cases: tuple[Case, ...], prefix: str = "", every: int = 4) -> list:
    """The cases as parameters: each one in the full suite; in the fast tier, the first case of each kind
    and one in ``every`` of the rest, but none that needs a process of its own (a fault)."""
    params = []
    for case in cases:
        test_id = f"{prefix}{case.id}"
        marks = []
        if test_id in KNOWN_FAILURES:
            marks.append(pytest.mark.xfail(reason=KNOWN_FAILURES[test_id], strict=True))
        if case.fault or case.runner == "subprocess":
            marks.append(pytest.mark.slow)
        params.append(pytest.param(case, id=test_id, marks=marks))
    return sampled(params, every, group=lambda case: case.kind)


def _skip_without_fault_support(case: Case) -> None:
    needs_unshare = case.fault in NEEDS_UNSHARE or (case.fault == "read-only" and _is_root())
    if needs_unshare and not unshare_works():
        pytest.skip("needs `unshare -rm` (a private mount namespace) to simulate this fault")
    if case.fault == "unreadable" and not unreadable_works():
        pytest.skip("root without `setpriv` reads every file")


def _is_root() -> bool:
    import os

    return os.geteuid() == 0


@pytest.mark.parametrize("case", _params(CASES))
def test_bad_input_is_refused_cleanly(case: Case, tmp_path: Path):
    _skip_without_fault_support(case)
    outcome = run_case(case, tmp_path)
    assert verdict(case, outcome) == "clean", (outcome.escaped, outcome.code, outcome.files, outcome.output)


@pytest.mark.parametrize("case", _params(API_CASES, prefix="api:", every=6))
def test_api_raises_only_config_error(case: Case, tmp_path: Path):
    outcome = run_api_case(case, tmp_path)
    assert verdict(case, outcome, api=True) == "clean", (outcome.escaped, outcome.code, outcome.output)


SAMPLE = tuple(case for case in CASES if case.id in SUBPROCESS_SAMPLE)


@pytest.mark.slow
@pytest.mark.parametrize("case", _params(SAMPLE, prefix="subprocess:"))
def test_bad_input_in_a_real_process(case: Case, tmp_path: Path):
    from dataclasses import replace

    outcome = run_case(replace(case, runner="subprocess"), tmp_path)
    assert verdict(case, outcome) == "clean", (outcome.code, outcome.files, outcome.output)


def test_the_catalogue_is_big_and_its_ids_unique():
    ids = [case.id for case in CASES]
    assert len(ids) == len(set(ids))
    assert len(CASES) >= 100
    assert set(SUBPROCESS_SAMPLE) <= set(ids)
    fuzz = {"fuzz:overrides", "fuzz:option-files", "fuzz:slime-files"}
    known = {*ids, *(f"api:{c.id}" for c in API_CASES), *(f"subprocess:{c.id}" for c in SAMPLE), *fuzz}
    assert set(KNOWN_FAILURES) <= known, set(KNOWN_FAILURES) - known


@pytest.mark.parametrize("case", _params(CASES, prefix="HYDRA_FULL_ERROR=1:", every=10))
def test_hydra_full_error_never_changes_a_verdict(case: Case, tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch):
    """verl's scripts export HYDRA_FULL_ERROR=1, read when an error happens (the traceback it asks for is
    then printed with the paragraph): every case of the catalogue keeps its exit code, writes nothing and
    lets nothing escape."""
    _skip_without_fault_support(case)
    monkeypatch.setenv("HYDRA_FULL_ERROR", "1")
    with environment_kept():
        outcome = run_case(case, tmp_path)
    assert (outcome.code, outcome.escaped, outcome.files) == (case.code, "", []), outcome.output


@pytest.mark.slow
@pytest.mark.parametrize("environment", sorted(ENVIRONMENTS))
def test_the_environment_a_process_starts_with_never_changes_an_exit_code(environment: str, tmp_path: Path):
    """A server may run with LC_ALL=C (Python then starts with ASCII streams and file names): every case of
    the catalogue, in one process started so, keeps its exit code, writes nothing and lets nothing
    escape."""
    outcomes = codes_under(environment, tmp_path)
    expected = {case.id: (case.code, "", []) for case in CASES if fault_supported(case)}
    assert outcomes == expected

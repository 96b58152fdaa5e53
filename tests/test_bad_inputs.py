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
    fault_supported,
    run_api_case,
    run_case,
    unreadable_works,
    unshare_works,
    verdict,
)

NEEDS_UNSHARE = ("full-disk",)


def _params(cases: tuple[Case, ...], prefix: str = "") -> list:
    params = []
    for case in cases:
        test_id = f"{prefix}{case.id}"
        marks = []
        if test_id in KNOWN_FAILURES:
            marks.append(pytest.mark.xfail(reason=KNOWN_FAILURES[test_id], strict=True))
        params.append(pytest.param(case, id=test_id, marks=marks))
    return params


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


@pytest.mark.parametrize("case", _params(API_CASES, prefix="api:"))
def test_api_raises_only_config_error(case: Case, tmp_path: Path):
    outcome = run_api_case(case, tmp_path)
    assert verdict(case, outcome, api=True) == "clean", (outcome.escaped, outcome.code, outcome.output)


SAMPLE = tuple(case for case in CASES if case.id in SUBPROCESS_SAMPLE)


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


KINDS = sorted({case.kind for case in CASES})


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("environment", sorted(ENVIRONMENTS))
def test_the_environment_never_changes_an_exit_code(environment: str, kind: str, tmp_path: Path):
    """verl's scripts export HYDRA_FULL_ERROR=1 (which may add a traceback), a server may run with
    LC_ALL=C: every case of the catalogue keeps its exit code, writes nothing and lets nothing escape."""
    outcomes = codes_under(environment, kind, tmp_path)
    expected = {case.id: (case.code, "", []) for case in CASES if case.kind == kind and fault_supported(case)}
    assert outcomes == expected

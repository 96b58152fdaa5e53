"""Run the catalogue of bad inputs (tests/bad_inputs.py) and print its figures.

    python benchmarks/bad_inputs.py [--only KIND] [--show-failures]

Prints total / clean / by kind / by failure for the CLI runs, the same for the Python API
(``verl_roles.compose``), and, with ``--show-failures``, each entry that is not clean and why. Cases
that need a private mount namespace (``unshare -rm``) are skipped where it is not available.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from collections import Counter, defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from bad_inputs import (  # noqa: E402
    API_CASES,
    CASES,
    SUBPROCESS_SAMPLE,
    Case,
    Outcome,
    run_api_case,
    run_case,
    unreadable_works,
    unshare_works,
    verdict,
)


def _figures(title: str, results: list[tuple[Case, str]]) -> None:
    total = len(results)
    clean = sum(1 for _, v in results if v == "clean")
    print(f"{title}: {total} cases, {clean} clean ({100 * clean / max(total, 1):.1f}%)")
    by_kind: dict[str, Counter[str]] = defaultdict(Counter)
    for case, result in results:
        by_kind[case.kind][result] += 1
    for kind, counts in by_kind.items():
        print(f"  {kind:12} {sum(counts.values()):4} cases, {counts['clean']:4} clean")
    failures = Counter(
        "traceback" if v.startswith("not a ConfigError") else v for _, v in results if v != "clean"
    )
    # The failure kinds are always printed, a zero included; any other kind after them.
    for result in ("traceback", "files written", "accepted"):
        print(f"  not clean: {failures.pop(result, 0):4} {FAILURE_NAMES[result]}")
    for result, count in failures.most_common():
        print(f"  not clean: {count:4} {result}")


# What each kind of verdict means in the figures.
FAILURE_NAMES = {
    "traceback": "traceback (or, through the API, an exception other than ConfigError)",
    "files written": "partial output (a failed run's file, a temporary file, a file outside the run folder)",
    "accepted": "exit 0 on a bad input",
}


def _detail(case_id: str, result: str, outcome: Outcome) -> str:
    said = outcome.escaped or " ".join(outcome.output.split())[:300]
    files = f" files: {', '.join(outcome.files[:3])}" if outcome.files else ""
    return f"{case_id}: {result}: {said}{files}"


def _reason(result: str, outcome: Outcome) -> str:
    if outcome.escaped:
        return f"{result}: {outcome.escaped.splitlines()[0][:80]}"
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", help="run only the cases of this kind")
    parser.add_argument("--show-failures", action="store_true", help="print every case that is not clean")
    parser.add_argument("--known-failures", action="store_true",
                        help="print the KNOWN_FAILURES entries of tests/bad_inputs.py for what is not clean")
    args = parser.parse_args()
    can_unshare = unshare_works()
    can_deny = unreadable_works()
    results: list[tuple[Case, str]] = []
    api_results: list[tuple[Case, str]] = []
    details: list[str] = []
    known: dict[str, str] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for index, case in enumerate(CASES):
            if args.only and case.kind != args.only:
                continue
            if case.fault in ("read-only", "full-disk") and not can_unshare:
                continue
            if case.fault == "unreadable" and not can_deny:
                continue
            outcome = run_case(case, Path(tmp) / f"cli{index}")
            result = verdict(case, outcome)
            results.append((case, result))
            if result != "clean":
                details.append(_detail(case.id, result, outcome))
                known[case.id] = _reason(result, outcome)
                if case.id in SUBPROCESS_SAMPLE:
                    known[f"subprocess:{case.id}"] = known[case.id]
        for index, case in enumerate(API_CASES):
            if args.only and case.kind != args.only:
                continue
            outcome = run_api_case(case, Path(tmp) / f"api{index}")
            result = verdict(case, outcome, api=True)
            api_results.append((case, result))
            if result != "clean":
                details.append(_detail(f"api:{case.id}", result, outcome))
                known[f"api:{case.id}"] = _reason(result, outcome)
    _figures("CLI (python -m verl_roles.main, verl-roles, the snapshot script)", results)
    _figures("Python API (verl_roles.compose)", api_results)
    if args.show_failures:
        print("\n".join(details))
    if args.known_failures:
        print("".join(f"    {key!r}: {reason!r},\n" for key, reason in known.items()), end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())

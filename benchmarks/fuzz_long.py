"""The property tests of tests/test_fuzz.py, run long: many examples per property, failures shrunk.

    python benchmarks/fuzz_long.py [--examples N] [--only overrides|option-files|slime-files] [--seed S]

For each property, prints how many examples ran and either "no failure" or the smallest failing input
hypothesis found and the exception it raised. Exit code 1 when any property failed. Nothing is kept on
disk (no example database); ``--seed`` makes a run repeatable.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from fuzz import (  # noqa: E402
    check_option_file,
    check_overrides,
    check_slime_file,
    option_files,
    overrides,
    slime_files,
)
from hypothesis import HealthCheck, given, seed, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402


def _properties(folder: Path) -> dict[str, tuple[Callable[..., None], dict[str, st.SearchStrategy]]]:
    engines = st.sampled_from([[], ["model_engine=megatron"]])
    return {
        "overrides": (check_overrides, {"items": overrides()}),
        "option-files": (lambda content, extra: check_option_file(folder / "options", content, extra),
                         {"content": option_files(), "extra": engines}),
        "slime-files": (lambda content: check_slime_file(folder / "slime", content, []),
                        {"content": slime_files()}),
    }


def _run(
    name: str, check: Callable[..., None], strategies: dict, examples: int, run_seed: int | None
) -> bool:
    count = 0

    def counted(**kwargs: object) -> None:
        nonlocal count
        count += 1
        check(**kwargs)

    test = settings(max_examples=examples, deadline=None, database=None,
                    suppress_health_check=list(HealthCheck))(given(**strategies)(counted))
    if run_seed is not None:
        test = seed(run_seed)(test)
    started = time.perf_counter()
    try:
        test()
    except Exception as error:  # noqa: BLE001 - a failure is what this run looks for
        lines = traceback.format_exception_only(type(error), error)
        print(f"{name}: FAILED after {count} examples ({time.perf_counter() - started:.0f} s)")
        print("".join(lines).strip())
        return False
    print(f"{name}: {count} examples, no failure ({time.perf_counter() - started:.0f} s)")
    return True


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--examples", type=int, default=1000, help="examples per property (default 1000)")
    parser.add_argument("--only", choices=["overrides", "option-files", "slime-files"])
    parser.add_argument("--seed", type=int, help="a seed for a repeatable run")
    args = parser.parse_args()
    ok = True
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        (folder / "options").mkdir()
        (folder / "slime").mkdir()
        for name, (check, strategies) in _properties(folder).items():
            if args.only and name != args.only:
                continue
            ok = _run(name, check, strategies, args.examples, args.seed) and ok
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

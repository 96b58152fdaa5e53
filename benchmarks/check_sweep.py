"""How fast ``verl-roles check-sweep`` checks a sweep, against one in-process compose in the same run.

    python benchmarks/check_sweep.py              # a 1,000-point grid
    python benchmarks/check_sweep.py --points 64  # a smaller grid (64, 128, 256, 500 or 1000)

The grid sweeps the engine (2 options), the critic's learning rate and the actor's mini batch, with a
tenth of the points invalid (a negative learning rate), so both the passing and the failing path are
timed. Prints points per second, the time per point, and its ratio to one in-process
``verl_roles.compose`` of a point of the same grid (median over 20 points spread over the grid, timed
before and after the check, after a warm-up), with the machine's load. Nothing here is asserted by the
tests.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import platform
import statistics
import sys
import time
import warnings
from collections.abc import Sequence
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

# points -> (learning rates, mini batch sizes); times 2 engines.
GRIDS: dict[int, tuple[int, int]] = {64: (4, 8), 128: (8, 8), 256: (8, 16), 500: (10, 25), 1000: (10, 50)}


def grid(points: int) -> list[str]:
    rates, batches = GRIDS[points]
    lrs = ["-1"] + [f"{k}e-6" for k in range(1, rates)]
    sizes = [str(16 * k) for k in range(1, batches + 1)]
    return [
        "model_engine=dp,megatron",
        f"critic.optim.lr={','.join(lrs)}",
        f"actor_rollout_ref.actor.ppo_mini_batch_size={','.join(sizes)}",
    ]


def compose_point(overrides: Sequence[str]) -> None:
    import verl_roles

    with contextlib.suppress(verl_roles.ConfigError):  # a failing point costs its composition too
        verl_roles.compose(overrides)


def timed_compose(overrides: Sequence[str]) -> float:
    start = time.perf_counter()
    compose_point(overrides)
    return time.perf_counter() - start


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--points", type=int, choices=sorted(GRIDS), default=1000)
    args = parser.parse_args(argv)
    warnings.simplefilter("ignore")

    from verl_roles.commands.check_sweep import check_sweep
    from verl_roles.inputs.cmdline import CommandLine
    from verl_roles.inputs.sweep_grid import sweep_points

    overrides = grid(args.points)
    points = sweep_points(CommandLine.parse(overrides))
    sample = points[:: max(1, len(points) // 20)]
    for point in sample[:4]:  # warm-up: files read, both engines' defaults lists memoized
        compose_point(point.overrides)
    before = [timed_compose(point.overrides) for point in sample]

    start = time.perf_counter()
    check = check_sweep(CommandLine.parse(overrides))
    elapsed = time.perf_counter() - start

    after = [timed_compose(point.overrides) for point in sample]
    median_s = statistics.median(before + after)
    mean_s = statistics.fmean(before + after)
    per_point = elapsed / check.points
    print(f"machine: {platform.processor() or platform.machine()}, Python {platform.python_version()}, "
          f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    print(f"grid: {' '.join(overrides)[:120]}...")
    print(f"check-sweep: {check.points} points in {elapsed:.2f} s ({len(check.failures)} failing): "
          f"{check.points / elapsed:.1f} points/s, {per_point * 1000:.1f} ms per point")
    print(f"one in-process verl_roles.compose of a point of the grid ({len(sample)} points spread over it, "
          f"timed before and after): median {median_s * 1000:.1f} ms, mean {mean_s * 1000:.1f} ms")
    print(f"per point / one compose: {per_point / median_s:.2f} (median), {per_point / mean_s:.2f} (mean)")
    return 0


if __name__ == "__main__":
    sys.exit(main())

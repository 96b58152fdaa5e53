"""How fast ``verl-roles check-sweep`` checks a sweep, against one in-process compose in the same run.

    python benchmarks/check_sweep.py              # a 1,000-point grid
    python benchmarks/check_sweep.py --points 64  # a smaller grid (64, 128, 256, 500 or 1000)

The grid sweeps the engine (2 options), the critic's learning rate and the actor's mini batch, with a
tenth of the points invalid (a negative learning rate), so both the passing and the failing path are
timed. Prints points per second, the time per point, and its ratio to one in-process
``verl_roles.compose`` of a point of the grid (median of repeated calls, after a warm-up). Nothing here
is asserted by the tests.
"""

from __future__ import annotations

import argparse
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


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--points", type=int, choices=sorted(GRIDS), default=1000)
    args = parser.parse_args(argv)
    warnings.simplefilter("ignore")

    import verl_roles
    from verl_roles.cmdline import CommandLine
    from verl_roles.commands.check_sweep import check_sweep

    overrides = grid(args.points)
    batch = "actor_rollout_ref.actor.ppo_mini_batch_size"
    one_point = ["model_engine=megatron", "critic.optim.lr=2e-6", f"{batch}=64"]
    for _ in range(3):  # warm-up: files read, both engines' defaults lists memoized
        verl_roles.compose(one_point)
        verl_roles.compose(["model_engine=dp", *one_point[1:]])
    samples = []
    for k in range(20):
        start = time.perf_counter()
        verl_roles.compose([*one_point[:2], f"{batch}={16 * (k + 1)}"])
        samples.append(time.perf_counter() - start)
    compose_s = statistics.median(samples)

    start = time.perf_counter()
    check = check_sweep(CommandLine.parse(overrides))
    elapsed = time.perf_counter() - start

    per_point = elapsed / check.points
    print(f"machine: {platform.processor() or platform.machine()}, Python {platform.python_version()}")
    print(f"grid: {' '.join(overrides)[:120]}...")
    print(f"check-sweep: {check.points} points in {elapsed:.2f} s ({len(check.failures)} failing): "
          f"{check.points / elapsed:.1f} points/s, {per_point * 1000:.1f} ms per point")
    print(f"one in-process compose: {compose_s * 1000:.1f} ms (median of 20); "
          f"per point / one compose = {per_point / compose_s:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

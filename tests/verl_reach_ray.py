"""verl's PPO entry point up to the moment it would start Ray, and not one step further.

``python -m verl.trainer.main_ppo ARGS`` loads its config with Hydra, validates it and hands it to
``run_ppo``, which starts Ray. This module runs that same ``main`` with ``run_ppo`` alone replaced by
a recorder, so a config can be checked without a cluster or a GPU:

    python tests/verl_reach_ray.py --config-path RUN_DIR --config-name resolved

prints ``reached run_ppo (TaskRunner...)`` and exits 0 when the entry point got there, and exits 1 with
verl's own error otherwise. ``tests/verl_driver.py`` calls :func:`run_until_ray` in-process for many
configs (the launch tests go further: they run verl's trainer on Ray, tests/verl_ray.py). It needs
verl, never verl_roles.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from typing import Any


@dataclass
class Reached:
    """What ``run_ppo`` was called with: the config verl's entry point built, and the runner class."""

    config: Any
    task_runner: str


def run_until_ray(argv: list[str]) -> Reached:
    """Run ``verl.trainer.main_ppo.main`` on ``argv`` (Hydra arguments); return what reached ``run_ppo``.

    Raises whatever verl raises on the way (Hydra's full error, not its one-line report); raises
    RuntimeError if ``main`` returned without calling ``run_ppo``.
    """
    os.environ["HYDRA_FULL_ERROR"] = "1"
    # Under `python -m`, main's module is __main__, and Hydra then resolves a relative --config-path
    # (verl's scripts write `--config-path=./config`) against main_ppo.py's folder; imported, the module
    # is verl.trainer.main_ppo and Hydra would look for a package `verl.trainer...config`. Hydra's
    # HYDRA_MAIN_MODULE names the module it should assume: the one `python -m` gives it.
    os.environ["HYDRA_MAIN_MODULE"] = "__main__"
    import verl.trainer.main_ppo as main_ppo

    calls: list[Reached] = []

    def record(config: Any, task_runner_class: Any = None) -> None:
        # verl 0.8.0's main calls run_ppo(config) and run_ppo then uses its TaskRunner; later ones pass it.
        runner = "TaskRunner" if task_runner_class is None else _class_name(task_runner_class)
        calls.append(Reached(config=config, task_runner=runner))

    original, saved_argv = main_ppo.run_ppo, sys.argv
    main_ppo.run_ppo = record
    sys.argv = ["verl.trainer.main_ppo", *argv]
    try:
        main_ppo.main()
    finally:
        main_ppo.run_ppo, sys.argv = original, saved_argv
    if not calls:
        raise RuntimeError("verl.trainer.main_ppo.main returned without calling run_ppo")
    return calls[0]


def _class_name(cls: Any) -> str:
    # A Ray remote class hides the user class behind an ActorClass wrapper with the same name.
    return getattr(cls, "__name__", None) or type(cls).__name__


if __name__ == "__main__":
    reached = run_until_ray(sys.argv[1:])
    print(f"reached run_ppo ({reached.task_runner})")

"""A served run: what the main job composed before Hydra started, handed to Hydra's run loop.

The main job composes and validates a run (every job of a sweep) before Hydra does anything, so that a
refused run creates nothing (:mod:`verl_roles.api.planning`). Hydra then runs its own loop (its probe of the
run mode, logging, the launcher and sweeper, each job's folder) on what was composed: the loader
serves it (:meth:`verl_roles.hydra_adapter.loader.ConfigLoader.serve`) instead of composing again.

What Hydra is served is the ``hydra`` node of each composition with its folders pinned (the run's or
the sweep's staging folder, each job's sub-folder, resolved once) and its own saving of ``.hydra/``
turned off (the main job writes those files itself, into the same folder), next to a one-key task
config naming the job: the trainer config itself never passes through Hydra's copies, its launchers'
pickles or its sweeper's checks again.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from hydra.types import RunMode
from omegaconf import DictConfig, OmegaConf, open_dict, read_write

from verl_roles.hydra_adapter.sources import freeze, thaw

# The one key of the task config Hydra is served: the job it stands for ("run" or a job number).
JOB_KEY = "_verl_roles_job_"


@dataclass
class Served:
    """The compositions of one app run.

    ``hydra``: the run's (or the sweep's master) config holding only its ``hydra`` node, pinned,
    frozen; ``mode``: RUN or MULTIRUN; ``jobs``: for a sweep, each job's number and pinned ``hydra``
    node, by the job's overrides (as the sweeper hands them to the launcher).
    """

    hydra: bytes | DictConfig
    mode: RunMode
    jobs: Mapping[tuple[str, ...], tuple[int, bytes | DictConfig]] = field(default_factory=dict)

    def config(self, run_mode: RunMode) -> DictConfig:
        """What Hydra gets for every composition of the run (its probe of the mode, the run, a sweep's
        master config)."""
        return _served(thaw(self.hydra), self.mode, "run" if self.mode == RunMode.RUN else "sweep")

    def job_config(self, master: DictConfig, overrides: Sequence[str]) -> DictConfig:
        """What a launcher gets for one job of the sweep (and the sweeper for its check of each job)."""
        entry = self.jobs.get(tuple(overrides))
        if entry is None:
            raise KeyError(f"verl_roles: no planned sweep job has the overrides {list(overrides)}")
        number, hydra = entry
        cfg = _served(thaw(hydra), RunMode.MULTIRUN, str(number))
        OmegaConf.copy_cache(from_config=master, to_config=cfg)
        return cfg

    def for_worker(self) -> Served:
        """This, for a launcher's worker process (nothing here is large; kept for symmetry)."""
        return replace(self)


def _served(root: DictConfig, mode: RunMode, job: str) -> DictConfig:
    with open_dict(root):
        root[JOB_KEY] = job
        root.hydra.mode = mode
    return root


def hydra_only(composed: DictConfig) -> DictConfig:
    """A copy of the full composition ``composed`` holding only its ``hydra`` node (Hydra's typing and the
    resolver cache kept: ``${now:...}`` gives the values the composition gave)."""
    root = OmegaConf.masked_copy(composed, ["hydra"])
    OmegaConf.copy_cache(from_config=composed, to_config=root)
    return root


def pin(root: DictConfig, updates: Mapping[str, Any]) -> bytes | DictConfig:
    """``root`` (from :func:`hydra_only`) with each ``hydra.*`` key of ``updates`` set, frozen for serving."""
    pinned = copy.deepcopy(root)
    with read_write(pinned), open_dict(pinned):
        for key, value in updates.items():
            OmegaConf.update(pinned, key, value, merge=False, force_add=True)
    return freeze(pinned)


def served_job(cfg: DictConfig) -> str | None:
    """The job a served task config stands for ("run", or a sweep job's number), else None."""
    if len(cfg) == 1 and JOB_KEY in cfg:
        return str(cfg[JOB_KEY])
    return None

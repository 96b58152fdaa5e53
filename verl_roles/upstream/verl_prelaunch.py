"""What verl does with a run directory before it starts Ray, run in the Python that has verl.

This file is executed by path in verl's own environment, where verl_roles need not be installed; it
imports only the standard library, omegaconf, torch and verl (never verl_roles)::

    PYTHON verl_prelaunch.py RUN_DIR --release-data RELEASE.json

``RELEASE.json`` is the package's ``verl_roles/upstream/verl_releases/<release>.json``: its
``conversion_calls`` say which ``omega_conf_to_dataclass`` calls the installed release makes (frozen from its
source by scripts/freeze_verl_reference.py). The run's ``resolved.yaml`` is loaded as verl's Hydra entry point
hands it over, and each step runs verl's own code; the answer is one JSON line on stdout,
``{"verl_version": ..., "steps": [{"step", "status": "ok"|"failed"|"n/a", "error"|"reason"}]}`` (a failed
step also names the verl frame that refused, ``at`` and ``code``), or ``{"error": ...}`` when the checks
cannot run at all. verl's own prints go to stderr. The steps, in verl's order:

1. ``validate_config``: ``verl.utils.config.validate_config(cfg, need_reference_policy(cfg),
   need_critic(cfg))``, as ``main_ppo.main`` calls it (verl 0.8.0 calls it in its TaskRunner).
2. ``convert <section>[ as <class>]``: each kind of :data:`CONVERSIONS` the release makes for this
   config, after the preparation verl applies (the reference policy's config rebuilt from the actor's).
3. ``worker init_model``: verl's ``ActorRolloutRefWorker(...).init_model()`` on CPU, with the role verl's
   trainer gives it, over a torch "fake" process group of the run's world size (verl then opens no NCCL
   group of its own). Its inner TrainingWorker constructs the FSDP engine but not the model; the step
   ends where verl looks the rollout class up (its own ``(name, mode)`` assert refuses; the rollout
   backend's module, vllm or sglang, need not be importable). This evaluates verl's asserts on dynamic
   batching, token budgets and per-GPU micro batches, the rollout's TP*DP*PP against the world size,
   the rollout registry, and the reference policy's FSDP engine constructor.
4. ``critic worker``: when verl trains a critic, its TrainingWorker (``value_model``) built as verl's
   trainer builds it, over the fake group: the FSDP engine constructor's checks.

Only FSDP engines (:data:`ENGINES_BUILT`) are constructed: another engine's constructor (Megatron needs
megatron-core and a GPU) is replaced by an empty inner worker and the step's reason says so. A worker
step runs in a forked child, so verl's patched classes and the fake process group never reach another
step. A step after a failed one is ``n/a``: verl would not get there.

The acceptance suite runs the same functions on every case (tests/verl_driver.py loads this file by
path); ``verl-roles launch`` runs the file before it starts verl's trainer.
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import json
import linecache
import os
import re
import select as io_select
import signal
import sys
import time
import traceback
import warnings
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

# How much of verl's error text a step keeps.
ERROR_CHARS = 600
# How long one forked worker step may take before it is stopped and reported (seconds).
WORKER_STEP_SECONDS = 300


# --------------------------------------------------------------------------------------------------
# Recording the steps.
# --------------------------------------------------------------------------------------------------


@dataclass
class Normaliser:
    """Makes error text reproducible: given paths replaced by names, addresses and long tails cut."""

    replacements: dict[str, str] = field(default_factory=dict)

    def text(self, text: str) -> str:
        for path, name in sorted(self.replacements.items(), key=lambda item: -len(item[0])):
            text = text.replace(path, name)
        text = re.sub(r" at 0x[0-9a-fA-F]+", "", text)
        text = text.split(" Got config: ", 1)[0]
        text = " ".join(text.split())
        return text if len(text) <= ERROR_CHARS else text[: ERROR_CHARS - 3] + "..."

    def __call__(self, error: BaseException) -> str:
        return self.text(f"{type(error).__name__}: {error}")

    def described(self, error: BaseException) -> dict[str, str]:
        """``error`` (verl's text; a bare ``assert`` gets its own line), and the innermost frame of verl
        it passed through: ``at`` (verl/FILE:LINE) and ``code`` (that line)."""
        frames = _verl_frames(error)
        if not frames:
            return {"error": self(error)}
        frame = frames[-1]
        code = self.text((frame.line or linecache.getline(frame.filename, frame.lineno or 0)).strip())
        text = self(error) if str(error) else f"{type(error).__name__}: {code}"
        return {"error": text, "at": f"{_verl_file(frame.filename)}:{frame.lineno}", "code": code}


def _verl_frames(error: BaseException) -> list[traceback.FrameSummary]:
    """The frames of verl that raised ``error``, from the deepest error of its chain that verl raised
    (hydra's ``instantiate`` wraps what a dataclass of verl asserts)."""
    found: list[traceback.FrameSummary] = []
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        frames = traceback.extract_tb(current.__traceback__)
        found = [frame for frame in frames if _verl_file(frame.filename)] or found
        current = current.__cause__ or current.__context__
    return found


def _verl_file(path: str) -> str | None:
    """``verl/...`` for a file of the installed verl package, else None."""
    import verl

    root = Path(verl.__file__).resolve().parent
    try:
        return f"verl/{Path(path).resolve().relative_to(root).as_posix()}"
    except ValueError:
        return None


@dataclass
class Steps:
    """The steps of one run, in order, and the objects its conversions built (the read-back uses them)."""

    steps: list[dict[str, Any]] = field(default_factory=list)
    objects: dict[str, Any] = field(default_factory=dict)

    def record(self, step: str, status: str, detail: str | None = None, **extra: str) -> None:
        entry: dict[str, Any] = {"step": step, "status": status, **extra}
        if detail is not None:
            entry["error" if status == "failed" else "reason"] = detail
        self.steps.append(entry)

    def failed(self, step: str, error: BaseException, normalise: Normaliser) -> None:
        described = normalise.described(error)
        self.record(step, "failed", described.pop("error"), **described)

    def first_failure(self) -> dict[str, Any] | None:
        return next((step for step in self.steps if step["status"] == "failed"), None)


def quietly(action: Callable[[], Any]) -> Any:
    """Run ``action`` with verl's prints and warnings kept out of the results (stdout goes to stderr)."""
    with contextlib.redirect_stdout(sys.stderr), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return action()


def load_like_hydra(resolved_yaml: Path) -> Any:
    """resolved.yaml as verl's Hydra entry point hands it to ``main``: a struct-mode DictConfig."""
    from omegaconf import OmegaConf

    cfg = OmegaConf.load(resolved_yaml)
    OmegaConf.set_struct(cfg, True)
    return cfg


def select(cfg: Any, path: str) -> Any:
    node = cfg
    for part in path.split("."):
        node = node[part]
    return node


def verl_version() -> str:
    import verl

    return str(verl.__version__)


# --------------------------------------------------------------------------------------------------
# 1. validate_config
# --------------------------------------------------------------------------------------------------


def run_validate(cfg: Any, steps: Steps, normalise: Normaliser) -> None:
    from verl.trainer.ppo.utils import need_critic, need_reference_policy
    from verl.utils.config import validate_config

    def validate() -> None:
        validate_config(copy.deepcopy(cfg), need_reference_policy(cfg), need_critic(cfg))

    try:
        quietly(validate)
    except Exception as error:  # noqa: BLE001 - every verl error is a result, reported per step
        steps.failed("validate_config", error, normalise)
        return
    steps.record("validate_config", "ok")


# --------------------------------------------------------------------------------------------------
# 2. The conversions verl makes on main_ppo's path. Which ones a release makes is data (its frozen
# calls, shipped in verl_roles/upstream/verl_releases/<release>.json); this table says how to make each kind
# the way verl does.
# --------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Conversion:
    """One kind of ``omega_conf_to_dataclass`` call: the config node, the dataclass named (None: the
    node's ``_target_``), and when verl makes it. ``frozen`` is the kind as the frozen calls name it
    (``<tool>`` is the entry of ``tool_config`` the profiler's ``tool`` names)."""

    section: str
    dataclass: str | None = None
    when: str = "always"
    prepared: bool = False

    @property
    def step(self) -> str:
        suffix = f" as {self.dataclass.rsplit('.', 1)[1]}" if self.dataclass else ""
        return f"convert {self.section}{suffix}"

    @property
    def frozen(self) -> tuple[str, str | None]:
        short = self.dataclass.rsplit(".", 1)[1] if self.dataclass else None
        return self.section.removesuffix(".<tool>"), short


CONVERSIONS: tuple[Conversion, ...] = (
    Conversion("actor_rollout_ref.actor"),
    Conversion("actor_rollout_ref.actor.profiler", dataclass="verl.utils.profiler.ProfilerConfig"),
    Conversion("actor_rollout_ref.actor.profiler", when="profiler set"),
    Conversion("actor_rollout_ref.actor.profiler.tool_config.<tool>",
               when="profiler tool with a tool_config"),
    Conversion("actor_rollout_ref.ref", when="reference policy in its own model", prepared=True),
    Conversion("actor_rollout_ref.ref.profiler", when="reference policy in its own model, profiler set",
               prepared=True),
    Conversion("actor_rollout_ref.rollout"),
    Conversion("actor_rollout_ref.rollout.checkpoint_engine"),
    Conversion("actor_rollout_ref.model"),
    Conversion("actor_rollout_ref.model", dataclass="verl.workers.config.HFModelConfig"),
    Conversion("critic", when="critic"),
    Conversion("critic.profiler", when="critic, profiler set"),
    Conversion("distillation", when="distillation"),
    Conversion("skip", dataclass="verl.utils.skip.config.SkipManagerConfig"),
    Conversion("trainer.v1.separate_async.hybrid_rollout", when="v1 separate_async trainer"),
)

# Sections of frozen calls that main_ppo's path does not reach as a conversion of its own, with the reason.
ELSEWHERE: dict[str | None, str] = {
    None: "a trainer of its own config (the SFT trainers), not a ppo_trainer section",
    "distillation.teacher_models.*": (
        "inside DistillationConfig.__post_init__: part of the distillation conversion"),
    "actor_rollout_ref.rollout.profiler.tool_config": (
        "the rollout's profiler tool config, already a dataclass after the rollout conversion"),
    "actor_rollout_ref.rollout.profiler.global_tool_config.nsys": (
        "the rollout's nsys tool config, already a dataclass after the rollout conversion"),
}

# The profiler tools whose tool_config entry verl converts (verl/workers/engine_workers.py, the
# ActorRolloutRefWorker constructor).
PROFILER_TOOLS_WITH_CONFIG = ("npu", "nsys", "torch", "torch_memory", "precision_debugger")

Made = frozenset[tuple[str, "str | None"]]


def made_by(conversion_calls: Iterable[dict[str, Any]]) -> Made:
    """(section, dataclass) of every kind of conversion in a release's ``conversion_calls``."""
    return frozenset((call["section"], call["dataclass_type"]) for call in conversion_calls)


def prepare_ref(cfg: Any) -> Any:
    """The reference policy's config as ``ActorRolloutRefWorker.init_model`` rebuilds it before converting
    it (verl/workers/engine_workers.py, init_model, "1. build reference model"): the actor's mini batch,
    the log-prob batch keys renamed."""
    from omegaconf import open_dict

    actor, ref = cfg.actor_rollout_ref.actor, copy.deepcopy(cfg.actor_rollout_ref.ref)
    with open_dict(ref):
        ref.ppo_mini_batch_size = actor.ppo_mini_batch_size
        ref.ppo_micro_batch_size = ref.pop("log_prob_micro_batch_size", None)
        ref.ppo_micro_batch_size_per_gpu = ref.pop("log_prob_micro_batch_size_per_gpu", None)
        ref.use_dynamic_bsz = ref.pop("log_prob_use_dynamic_bsz", False)
        ref.ppo_max_token_len_per_gpu = ref.pop("log_prob_max_token_len_per_gpu", None)
    return ref


def lora_rank(cfg: Any) -> int:
    """The LoRA rank verl's trainer decides worker roles with (verl/trainer/main_ppo_v0.py and
    verl/trainer/ppo/v1/trainer_base.py in 0.9.x, verl/trainer/main_ppo.py in 0.8.0)."""
    model = cfg.actor_rollout_ref.model
    rank = model.get("lora", {}).get("rank", 0)
    return rank if rank > 0 else model.get("lora_rank", 0)


def ref_in_actor(cfg: Any) -> bool:
    """The reference policy is the actor's base model (LoRA): no reference worker of its own."""
    return lora_rank(cfg) > 0 or cfg.actor_rollout_ref.model.get("lora_adapter_path") is not None


def applies(conversion: Conversion, cfg: Any, made: Made) -> str | None:
    """None when verl makes this conversion for ``cfg``; otherwise why it does not."""
    from verl.trainer.distillation import is_distillation_enabled
    from verl.trainer.ppo.utils import need_critic, need_reference_policy

    if conversion.frozen not in made:
        return f"verl {verl_version()} makes no such conversion"
    when = conversion.when
    if when.startswith("reference policy"):
        if not need_reference_policy(cfg):
            return "no reference policy (neither use_kl_loss nor use_kl_in_reward)"
        if ref_in_actor(cfg):
            return "the reference policy is the actor's base model (LoRA)"
    if when.startswith("critic") and not need_critic(cfg):
        return "no critic for this algorithm"
    if when == "distillation" and not is_distillation_enabled(cfg.get("distillation")):
        return "distillation disabled"
    if when == "v1 separate_async trainer" and not separate_async(cfg):
        return "not the v1 separate_async trainer"
    if when.endswith("profiler set") and not node_of(cfg, conversion):
        return "profiler section empty"
    if when == "profiler tool with a tool_config":
        tool = cfg.actor_rollout_ref.actor.get("profiler", {}).get("tool", None)
        if tool not in PROFILER_TOOLS_WITH_CONFIG:
            return f"profiler tool {tool!r} has no tool_config"
    return None


def separate_async(cfg: Any) -> bool:
    """verl 0.9.x's v1 trainer in its separate_async mode (verl/trainer/ppo/v1/trainer_base.py,
    get_trainer_cls); 0.8.0 has no ``trainer.use_v1``."""
    return bool(cfg.trainer.get("use_v1", False)) and cfg.trainer.v1.trainer_mode == "separate_async"


def node_of(cfg: Any, conversion: Conversion) -> Any:
    if conversion.prepared:
        rest = conversion.section.removeprefix("actor_rollout_ref.ref").lstrip(".")
        return select(prepare_ref(cfg), rest) if rest else prepare_ref(cfg)
    if conversion.section.endswith(".<tool>"):
        profiler = cfg.actor_rollout_ref.actor.profiler
        return profiler.get("tool_config", {}).get(profiler.tool)
    return select(cfg, conversion.section)


def run_conversions(cfg: Any, steps: Steps, normalise: Normaliser, made: Made) -> None:
    from verl.utils.config import omega_conf_to_dataclass
    from verl.utils.import_utils import load_class_from_fqn

    for conversion in CONVERSIONS:
        try:
            skip = quietly(lambda conversion=conversion: applies(conversion, cfg, made))
            if skip is not None:
                steps.record(conversion.step, "n/a", skip)
                continue
            node = node_of(cfg, conversion)
            target = load_class_from_fqn(conversion.dataclass) if conversion.dataclass else None
            obj = quietly(
                lambda node=node, target=target: omega_conf_to_dataclass(node, dataclass_type=target)
            )
        except Exception as error:  # noqa: BLE001
            steps.failed(conversion.step, error, normalise)
            continue
        steps.objects.setdefault(conversion.step, obj)
        steps.record(conversion.step, "ok")


# --------------------------------------------------------------------------------------------------
# 3-4. The worker steps: verl's own workers on CPU, over a fake process group of the run's world size.
# --------------------------------------------------------------------------------------------------

WORKER_STEPS = ("worker init_model", "critic worker")
# The engines whose constructor runs here: verl's FSDP engines construct over a fake process group
# without a GPU (their device mesh needs no communication). Megatron's needs megatron-core and a GPU.
ENGINES_BUILT = ("fsdp", "fsdp2")


class RolloutClassFound(Exception):
    """Raised where verl's worker looks its rollout class up, once verl's own assert passed: the step
    ends there (building the rollout needs the rollout backend and a GPU)."""


def world_size(cfg: Any) -> int:
    """The size of verl's global worker pool (verl/trainer/ppo/ray_trainer.py, ResourcePoolManager):
    every GPU of every node."""
    return int(cfg.trainer.n_gpus_per_node) * int(cfg.trainer.nnodes)


@contextlib.contextmanager
def fake_world(size: int) -> Iterator[None]:
    """torch's "fake" process group of ``size`` ranks, this process rank 0, and the variables verl's
    Worker reads; verl's ``initialize_global_process_group_ray`` then finds a group and opens none.
    Only ever entered in a forked child (nothing is restored)."""
    import torch.distributed as dist
    import verl.utils.device as device
    from torch.testing._internal.distributed.fake_pg import FakeStore

    os.environ.update(WORLD_SIZE=str(size), RANK="0", LOCAL_RANK="0", MASTER_ADDR="127.0.0.1",
                      MASTER_PORT="29500")
    if device.get_device_name() == "cpu":
        # verl 0.8.0 names the device after torch.cuda.is_available(); its engines register under "cuda".
        device.is_cuda_available = True
    dist.init_process_group("fake", store=FakeStore(), rank=0, world_size=size)
    yield


def worker_roles(cfg: Any) -> tuple[str, ...]:
    """The roles verl gives its ActorRolloutRefWorkers: ``actor_rollout_ref`` when it needs a reference
    policy of its own (no LoRA), else ``actor_rollout`` (verl/trainer/main_ppo_v0.py and
    verl/trainer/ppo/v1/trainer_base.py; verl/trainer/main_ppo.py in 0.8.0). verl 0.9.1's
    separate_async trainer without hybrid replicas (``actor_rollout_ref.hybrid_engine=false``) builds an
    ``actor`` worker and a ``ref`` worker instead (verl/trainer/ppo/v1/trainer_separate_async.py)."""
    from verl.trainer.ppo.utils import need_reference_policy

    with_ref = need_reference_policy(cfg) and not ref_in_actor(cfg)
    if separate_async(cfg) and not cfg.actor_rollout_ref.get("hybrid_engine", True) and _hybrid_switch(cfg):
        return ("actor", "ref") if with_ref else ("actor",)
    return ("actor_rollout_ref",) if with_ref else ("actor_rollout",)


def _hybrid_switch(cfg: Any) -> bool:
    """Whether the installed trainer of the run's v1 mode reads ``hybrid_engine`` (verl 0.9.1's
    separate_async trainer does), as verl's main_ppo picks the trainer (get_trainer_cls)."""
    try:
        import verl.trainer.ppo.v1  # noqa: F401 - registers the trainers
        from verl.trainer.ppo.v1.trainer_base import get_trainer_cls

        return hasattr(get_trainer_cls(cfg.trainer.v1.trainer_mode), "_enable_hybrid_replicas")
    except (ImportError, ValueError):
        return False


def engine_only_worker(not_built: list[str]) -> type:
    """verl's TrainingWorker whose ``reset`` builds nothing: its FSDP engine is constructed (the
    constructor's checks run), the model is not. Another engine is not constructed at all (an empty
    inner worker); its strategy is added to ``not_built``."""
    from verl.single_controller.base import Worker
    from verl.workers.engine_workers import TrainingWorker

    class EngineOnly(TrainingWorker):
        def __init__(self, config: Any) -> None:
            strategy = getattr(config.engine_config, "strategy", None)
            if strategy in ENGINES_BUILT:
                super().__init__(config=config)
                return
            Worker.__init__(self)
            not_built.append(str(strategy))

        def reset(self) -> None:
            pass

    return EngineOnly


def stopping_at_rollout_class(lookup: Callable[..., Any]) -> Callable[..., Any]:
    """verl's ``get_rollout_class`` whose ``(name, mode)`` assert still refuses; past it the step ends,
    also when the backend's module (vllm, sglang) cannot be imported on this machine."""

    def stop(name: str, mode: str = "async") -> Any:
        try:
            found = lookup(name, mode)
        except AssertionError:
            raise
        except Exception as error:  # noqa: BLE001 - the backend's import, not the config
            raise RolloutClassFound(f"rollout {name!r} ({mode}) is registered; its module does not import "
                                    f"here ({type(error).__name__})") from None
        raise RolloutClassFound(f"rollout {name!r} ({mode}) is registered: {found.__name__}")

    return stop


def init_model(cfg: Any) -> str:
    """``ActorRolloutRefWorker.init_model`` for each role verl builds; returns what was not evaluated."""
    import verl.workers.engine_workers as engine_workers

    not_built: list[str] = []
    inner = engine_only_worker(not_built)

    class Worker(engine_workers.ActorRolloutRefWorker):
        actor_worker_cls = inner
        ref_worker_cls = inner

    if not hasattr(engine_workers.ActorRolloutRefWorker, "actor_worker_cls"):
        engine_workers.TrainingWorker = inner  # verl 0.8.0 names TrainingWorker in init_model
    engine_workers.get_rollout_class = stopping_at_rollout_class(engine_workers.get_rollout_class)
    notes = []
    for role in worker_roles(cfg):
        worker = Worker(config=cfg.actor_rollout_ref, role=role, distillation_config=cfg.get("distillation"))
        try:
            worker.init_model()
        except RolloutClassFound as found:
            notes.append(f"role {role}: stopped where the rollout is built ({found})")
            continue
        notes.append(f"role {role}")
    return "; ".join(notes) + _not_built_note(not_built)


def _not_built_note(not_built: list[str]) -> str:
    if not not_built:
        return ""
    engines = " and ".join(sorted(set(not_built)))
    return (f"; not evaluated: verl's {engines} engine constructor (not built here: it needs its library "
            "and the GPUs), with its checks of the role's parallel sizes against the world size and its own "
            "asserts")


def critic_worker(cfg: Any, made: Made) -> str:
    """verl's critic TrainingWorker as verl's trainer builds it (verl/trainer/ppo/v1/trainer_base.py,
    _setup, "2. define critic class", under ``trainer.use_v1``; verl/trainer/ppo/ray_trainer.py,
    init_workers, "create critic", otherwise): the config converted, its engine's token budgets set,
    then the worker constructed (the engine, not the model)."""
    from verl.utils.config import omega_conf_to_dataclass
    from verl.workers.engine_workers import TrainingWorker, TrainingWorkerConfig

    critic = omega_conf_to_dataclass(cfg.critic)
    engine = critic.engine
    engine.infer_max_token_len_per_gpu = critic.ppo_infer_max_token_len_per_gpu
    v1 = bool(cfg.trainer.get("use_v1", False))
    engine.max_token_len_per_gpu = (
        critic.ppo_infer_max_token_len_per_gpu if v1 else critic.ppo_max_token_len_per_gpu)
    options: dict[str, Any] = {}
    if ("critic.profiler", None) in made:  # the releases whose trainer passes the critic its profiler
        profiler = cfg.critic.get("profiler", {})
        options["profiler_config"] = omega_conf_to_dataclass(profiler) if profiler else None
    if engine.strategy not in ENGINES_BUILT:
        return _not_built_note([engine.strategy]).removeprefix("; ")
    worker = TrainingWorker(config=TrainingWorkerConfig(
        model_type="value_model", model_config=critic.model, engine_config=engine,
        optimizer_config=critic.optim, checkpoint_config=critic.checkpoint, **options))
    return f"{type(worker.engine).__name__} constructed"


def in_child(action: Callable[[], str], normalise: Normaliser) -> dict[str, str]:
    """``action`` in a forked child (verl's patched classes and the fake process group end with it):
    ``{"reason": ...}`` when it returned, ``{"error": ..., "at": ..., "code": ...}`` when it raised."""
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: never returns
        os.close(read_end)
        try:
            outcome = {"reason": quietly(action)}
        except BaseException as error:  # noqa: BLE001 - reported to the parent
            outcome = normalise.described(error)
        with os.fdopen(write_end, "w", encoding="utf-8") as out:
            out.write(json.dumps(outcome))
        os._exit(0)
    os.close(write_end)
    return _wait_for(pid, read_end)


def _wait_for(pid: int, read_end: int) -> dict[str, str]:
    """The child's answer; a child that does not answer within :data:`WORKER_STEP_SECONDS` is killed."""
    chunks: list[bytes] = []
    deadline = time.monotonic() + WORKER_STEP_SECONDS
    with os.fdopen(read_end, "rb") as answer:
        while (remaining := deadline - time.monotonic()) > 0:
            if answer.fileno() in io_select.select([answer.fileno()], [], [], remaining)[0]:
                chunk = os.read(answer.fileno(), 1 << 16)
                if not chunk:
                    break
                chunks.append(chunk)
        else:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
    _, status = os.waitpid(pid, 0)
    if time.monotonic() >= deadline:
        return {"error": f"TimeoutError: the step did not end within {WORKER_STEP_SECONDS} seconds"}
    if not chunks:
        return {"error": f"the step's process ended without a result (wait status {status})"}
    return json.loads(b"".join(chunks).decode("utf-8"))


def run_worker_steps(cfg: Any, steps: Steps, normalise: Normaliser, made: Made) -> None:
    """The worker steps, each in a forked child; ``n/a`` after a failed step (verl stops there)."""
    from omegaconf import OmegaConf
    from verl.trainer.ppo.utils import need_critic

    earlier = steps.first_failure()
    resolved = copy.deepcopy(cfg)
    OmegaConf.resolve(resolved)  # as verl's TaskRunner does before it builds workers
    actions: dict[str, Callable[[], str] | str] = {
        "worker init_model": lambda: _in_fake_world(resolved, lambda: init_model(resolved)),
        "critic worker": (lambda: _in_fake_world(resolved, lambda: critic_worker(resolved, made)))
        if need_critic(resolved) else "no critic for this algorithm",
    }
    for step, action in actions.items():
        if earlier is not None:
            steps.record(step, "n/a", f"verl stops before it: {earlier['step']} failed")
            continue
        if isinstance(action, str):
            steps.record(step, "n/a", action)
            continue
        outcome = in_child(action, normalise)
        if "error" in outcome:
            steps.record(step, "failed", outcome.pop("error"), **outcome)
            earlier = steps.steps[-1]
        else:
            steps.record(step, "ok", outcome["reason"])


def _in_fake_world(cfg: Any, action: Callable[[], str]) -> str:
    with fake_world(world_size(cfg)):
        return action()


# --------------------------------------------------------------------------------------------------
# A run directory, and the command line.
# --------------------------------------------------------------------------------------------------


def check_run_dir(
    run_dir: Path, made: Made, normalise: Normaliser, workers: bool = True
) -> tuple[Steps, Any]:
    """Every step on ``run_dir``: the steps, and resolved.yaml as loaded (None if it does not load)."""
    steps = Steps()
    try:
        cfg = load_like_hydra(run_dir / "resolved.yaml")
    except Exception as error:  # noqa: BLE001
        steps.failed("load resolved.yaml", error, normalise)
        return steps, None
    check_config(cfg, steps, normalise, made, workers=workers)
    return steps, cfg


def check_config(cfg: Any, steps: Steps, normalise: Normaliser, made: Made, workers: bool = True) -> None:
    """validate_config, the conversions, then (``workers``) the worker steps, on a loaded config."""
    run_validate(cfg, steps, normalise)
    run_conversions(cfg, steps, normalise, made)
    if workers:
        run_worker_steps(cfg, steps, normalise, made)


def release_conversions(release_data: Path) -> Made:
    return made_by(json.loads(release_data.read_text(encoding="utf-8"))["conversion_calls"])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("run_dir", type=Path, help="a run directory holding resolved.yaml")
    parser.add_argument("--release-data", type=Path, required=True,
                        help="verl_roles/upstream/verl_releases/<release>.json of the installed release")
    args = parser.parse_args(argv)
    answer_to = os.fdopen(os.dup(sys.stdout.fileno()), "w", encoding="utf-8")
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())  # whatever verl prints goes to stderr
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")  # the worker steps fork
    normalise = Normaliser({str(args.run_dir.resolve()): "<run dir>"})
    try:
        made = release_conversions(args.release_data)
        answer: dict[str, Any] = {"verl_version": quietly(verl_version)}
        quietly(import_checks)
    except Exception as error:  # noqa: BLE001 - the checks cannot run: said as such, not as verl's refusal
        answer = normalise.described(error)
    else:
        steps, _ = check_run_dir(args.run_dir, made, normalise)
        answer["steps"] = steps.steps
    answer_to.write(json.dumps(answer, sort_keys=True) + "\n")
    answer_to.flush()
    return 0


def import_checks(warm: bool = False) -> None:
    """Everything the steps import from verl: a verl that lacks any of it cannot be checked (and its
    trainer would stop on the same import). ``warm``: also what a step imports on its first engine, once,
    before many steps fork (the acceptance suite's driver): verl's engines, and torch's compiler stack,
    which verl's FSDP engine constructor reaches through ``torch.compile`` (8 seconds on a small
    machine; a single run imports it in its step only when it builds an FSDP engine)."""
    import torch.distributed  # noqa: F401
    import verl.workers.engine_workers  # noqa: F401
    from torch.testing._internal.distributed.fake_pg import FakeStore  # noqa: F401
    from verl.trainer.ppo.utils import need_critic, need_reference_policy  # noqa: F401
    from verl.utils.config import omega_conf_to_dataclass, validate_config  # noqa: F401

    if warm:
        import torch._dynamo  # noqa: F401
        import torch._inductor.compile_fx  # noqa: F401
        import verl.workers.engine  # noqa: F401 - registers the engines (FSDP's imports peft)


if __name__ == "__main__":
    sys.exit(main())

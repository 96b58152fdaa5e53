"""The one table of acceptance-suite failures we know about, each with its reason (issue 10).

``tests/test_verl_acceptance.py`` marks a case as an expected failure only when every one of its failing
steps matches a row of :data:`KNOWN_FAILURES`: the case name and step match the row's globs and the
error contains the row's text. A failure no row matches fails the suite, and so does a row that
matches no failure in a run (the bug it describes is gone: delete the row). The goal is an empty table.

:data:`DELIBERATE_REFUSALS` is different: launches verl_roles refuses on purpose although verl's own
config tree takes them up to Ray, because verl would fail on them later. Such a case passes; a row
that no longer matches a refusal fails the suite too.

Globs are ``fnmatch`` patterns. Case names: ``variant:<snapshot file stem>``,
``example:<source>/<file stem>`` and the special cases of the test module (``grpo``, ``lora-*``,
``slime-file``, ...). Steps: ``compose`` (verl_roles refused the overrides), ``validate_config``,
``convert <section>[ as <class>]``, ``entry_point`` and ``readback <role>.<key>`` (the error is then
``<role> <key>: verl uses X, <file> shows Y``).
"""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass

from verl_roles.base import releases


@dataclass(frozen=True)
class KnownFailure:
    """``releases``: the releases whose acceptance run must still show the failure (empty: every one);
    a row for launches only some releases' trees compose names those."""

    cases: str
    steps: str
    error: str
    reason: str
    releases: tuple[str, ...] = ()

    def applies(self, release: str) -> bool:
        return not self.releases or release in self.releases


KNOWN_FAILURES: tuple[KnownFailure, ...] = (
    KnownFailure(
        "*", "*", "vllm version None not supported and SGLang also not Found",
        "the machine, not the config: with LoRA and the vllm rollout, validate_config (run alone, and again "
        "by the entry point) asks the installed vLLM for its largest LoRA rank (verl/utils/config.py, the "
        "last check), and the CPU-only verl of the acceptance venvs has no vLLM; every check before it "
        "passed",
    ),
    KnownFailure(
        "*", "worker init_model", "No module named 'nvtx'",
        "the machine, not the config: the Nsight Systems profiler (global_profiler.tool=nsys, verl's *_nsys "
        "launches) imports NVIDIA's nvtx package when the worker builds its profiler; the acceptance venvs "
        "install verl's CPU-only core; only the 0.8.0 and 0.9.0 trees compose those launches",
        ("0.8.0", "0.9.0"),
    ),
    KnownFailure(
        "*", "worker init_model", "No module named 'torch_npu'",
        "the machine, not the config: an Ascend NPU profiler (global_profiler.tool=npu, verl's NPU profiling "
        "examples) imports torch_npu when the worker builds its profiler; the acceptance venvs are CPU-only",
    ),
)


@dataclass(frozen=True)
class DeliberateRefusal:
    """``releases``: the verl releases whose acceptance run the row is for (empty: every one).
    ``witness``: overrides (besides the model path) that verl_roles refuses with ``error``: the acceptance
    suite runs them in every release's population, so the row is checked whatever the draws hold, and
    verl's own tree must take them through every pre-Ray step (else the row is no difference at all)."""

    cases: str
    error: str
    reason: str
    releases: tuple[str, ...] = ()
    witness: tuple[str, ...] = ()

    def applies(self, release: str) -> bool:
        return not self.releases or release in self.releases


DELIBERATE_REFUSALS: tuple[DeliberateRefusal, ...] = (
    DeliberateRefusal(
        "*",
        "is not one verl_roles offers",
        "model_engine=mindspeed: the Ascend NPU engine of the releases that ship it; verl_roles offers the "
        "GPU engines (verl_roles/upstream/verl_differences.py, ENGINES_NOT_OFFERED)",
        releases.with_engine("mindspeed"),
        witness=("model_engine=mindspeed", "algorithm.adv_estimator=grpo"),
    ),
    DeliberateRefusal(
        "example:volcengine/*router_replay*",
        "actor_rollout_ref.model.path: is required but empty",
        "the launch takes the model from a shell variable its script sets (router_replay examples: "
        "`actor_rollout_ref.model.path=$MODEL_PATH`, empty here); verl takes the config up to Ray and fails "
        "when a worker loads the model from ''",
    ),
    DeliberateRefusal(
        "example:verl-0.9.0/*sapo*",
        "actor_rollout_ref.actor.policy_loss.tau_pos: is not a key of",
        "a verl 0.9.0 launch written for verl 0.8.0: 0.8.0 reads tau_pos at actor_rollout_ref.actor.tau_pos "
        "(its PolicyLossConfig has no tau_pos), so the launch's +policy_loss.tau_pos would do nothing there",
        ("0.8.0",),
    ),
    DeliberateRefusal(
        "*",
        "samples each data-parallel rank trains per mini batch",
        "ppo_micro_batch_size_per_gpu does not divide a rank's share of the mini batch (the "
        "rollout_correction examples: 8 per GPU, 32*1/8 = 4 samples per rank on verl's default 8 GPUs); "
        "verl takes the config up to Ray and fails at the first update: "
        "TrainingWorker.train_mini_batch (workers/engine_workers.py) gives each rank mini_batch_size // dp "
        "samples, and prepare_micro_batches (workers/engine/utils.py) asserts that count is a multiple of "
        "micro_batch_size_per_gpu (nothing clamps the micro batch)",
        witness=(
            "actor_rollout_ref.actor.ppo_mini_batch_size=32",
            "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=8",
        ),
    ),
    DeliberateRefusal(
        "*",
        "does not split evenly over the",
        "ppo_mini_batch_size * rollout.n does not split over the data-parallel ranks; verl takes the config "
        "up to Ray and asserts it at the first update (TrainingWorker.train_mini_batch, "
        "workers/engine_workers.py), after a whole rollout",
        witness=("actor_rollout_ref.actor.ppo_mini_batch_size=12",),
    ),
    DeliberateRefusal(
        "*",
        "parallel state is set once",
        "a Megatron role in the actor's worker process (the reference; the critic, which verl colocates in "
        "the global resource pool) with other parallel sizes than the actor: verl takes the config up to "
        "Ray, but Megatron-Core's parallel state belongs to the process and verl sets it from the first "
        "engine built only (workers/engine/megatron/transformer_impl.py, `if mpu.is_initialized(): return`), "
        "so the other role builds its model against process groups of another layout",
        witness=(
            "model_engine=megatron",
            "actor_rollout_ref.actor.use_kl_loss=true",
            "actor_rollout_ref.ref.megatron.tensor_model_parallel_size=2",
        ),
    ),
    DeliberateRefusal(
        "*",
        "TP*PP*CP = ",
        "a Megatron layout whose TP*PP*CP does not divide the GPUs: verl's validate_config checks only the "
        "actor's, and only with static batches (verl/utils/config.py); otherwise verl takes the config up "
        "to Ray and Megatron-Core's initialize_model_parallel refuses the world size when the worker builds "
        "its engine (the engine build is the part of init_model a CPU cannot run)",
        witness=(
            "model_engine=megatron",
            "algorithm.adv_estimator=grpo",
            "actor_rollout_ref.actor.megatron.tensor_model_parallel_size=3",
            "actor_rollout_ref.actor.use_dynamic_bsz=true",
            "actor_rollout_ref.rollout.log_prob_use_dynamic_bsz=true",
        ),
    ),
    DeliberateRefusal(
        "*",
        "whatever resolved.yaml shows",
        "two Ulysses sizes typed for one role (the role-level key and its FSDP block's): verl runs the "
        "role-level one silently (FSDPActorConfig.__post_init__, workers/config/actor.py), so resolved.yaml "
        "would show a size the run does not use; one spelling is asked for",
        witness=(
            "actor_rollout_ref.actor.ulysses_sequence_parallel_size=2",
            "actor_rollout_ref.actor.fsdp_config.ulysses_sequence_parallel_size=4",
        ),
    ),
    DeliberateRefusal(
        "*",
        "reference engine would get no micro batch",
        "the reference's deprecated global log-prob micro batch alone: verl's worker hands its engine only "
        "the per-GPU size (workers/engine_workers.py, init_model), None here, so the first reference "
        "log-prob pass fails after the rollout",
        witness=(
            "actor_rollout_ref.actor.use_kl_loss=true",
            "actor_rollout_ref.ref.log_prob_micro_batch_size=64",
            "actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu=null",
        ),
    ),
)


def explaining_row(case: str, step: str, error: str) -> KnownFailure | None:
    """The first row that explains ``step`` of ``case`` failing with ``error``, if any."""
    for row in KNOWN_FAILURES:
        matches = fnmatch.fnmatchcase(case, row.cases) and fnmatch.fnmatchcase(step, row.steps)
        if matches and row.error in error:
            return row
    return None


def deliberate_refusal(case: str, error: str, release: str) -> DeliberateRefusal | None:
    """The row saying verl_roles refuses ``case`` on purpose with ``error`` under ``release``, if any."""
    for row in DELIBERATE_REFUSALS:
        if row.applies(release) and fnmatch.fnmatchcase(case, row.cases) and row.error in error:
            return row
    return None

"""When verl does not read a key: the one table (issue 27).

A row names keys (``fnmatch`` globs of full dotted keys) that verl never reads while every clause of its
condition holds, why, the fix, and the lines of verl that show it: its *anchors*, each a file of the
verl package and a text on the line that guards (or is) the only read, with the occurrence when the text
appears more than once. ``scripts/freeze_verl_reference.py`` finds every anchor in an installed verl and
writes the lines (``tests/data/verl-<release>/inert.json``); ``scripts/generate_verl_releases.py`` copies
them into the release's package data, and a row applies to a release only where all its anchors were
found. So the citations follow verl, and a release that moves a read is noticed when it is frozen.

This module is plain data and imports only the standard library: the freeze script loads it by path in a
Python that has verl and not verl_roles. :mod:`verl_roles.validation.inert` evaluates the conditions.

Clauses (all must hold):

- ``Off(key)`` / ``On(key)``: the resolved value is not ``True`` / is ``True``;
- ``Set(key)``: the value is not null;
- ``Known(key, names, readers)``: the value is one of the release's ``names`` list (a registry verl's users
  can extend: a name we do not know is never judged) and not one of ``readers``;
- ``Fact(name)``: a fact about the run that several rows share (:data:`FACTS`).

A key glob may hold ``{other}`` for one key segment; the row's ``selector`` key names the one that is read
(``rollout.engine_kwargs.{other}.*`` with the selector ``rollout.name``): keys under any other segment are
inert. ``{s}`` in keys and clauses stands for each of the row's ``scopes`` in turn (every optimizer
section, every profiler section).
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Off:
    key: str


@dataclass(frozen=True)
class On:
    key: str


@dataclass(frozen=True)
class Set:
    key: str


@dataclass(frozen=True)
class Known:
    key: str
    names: str
    readers: tuple[str, ...]


@dataclass(frozen=True)
class Fact:
    name: str


Clause = Off | On | Set | Known | Fact


@dataclass(frozen=True)
class Anchor:
    """A line of verl: ``file`` relative to the verl package, a ``text`` on it, its ``nth`` occurrence.
    An ``optional`` anchor is cited where the release has it (verl 0.9's v1 trainer, absent from 0.8.0)
    and does not decide whether the row applies."""

    file: str
    text: str
    nth: int = 1
    optional: bool = False


@dataclass(frozen=True)
class Row:
    id: str
    keys: tuple[str, ...]
    when: tuple[Clause, ...]
    reason: str
    fix: str
    anchors: tuple[Anchor, ...]
    scopes: tuple[str, ...] = ()
    selector: str | None = None
    spare: tuple[str, ...] = field(default=())  # keys the globs match that stay read


ACTOR = "actor_rollout_ref.actor"
REF = "actor_rollout_ref.ref"
ROLLOUT = "actor_rollout_ref.rollout"
OPTIMIZERS = (f"{ACTOR}.optim", "critic.optim")
PROFILERS = (f"{ACTOR}.profiler", f"{REF}.profiler", f"{ROLLOUT}.profiler", "critic.profiler")

# The facts rows share (evaluated by verl_roles.validation.inert; each says which setting makes it true).
FACTS = (
    "no reference policy",  # neither KL term: verl builds no reference policy
    "reference in the actor",  # a KL term, but LoRA on the policy: the actor computes the reference
    "no critic",  # the algorithm trains no critic (critic.enable, else the estimator)
    "critic trained",
    "v1 trainer",  # verl 0.9's default trainer (trainer.use_v1), not the legacy RayPPOTrainer
    "megatron",  # the chosen engine is Megatron-Core based
    "fsdp",  # the chosen engine is verl's FSDP engine
    "no validation",  # neither trainer.val_before_train nor trainer.test_freq > 0
    "reference static",  # the reference engine batches by sample count (ref.log_prob_use_dynamic_bsz off)
)

V1 = "trainer/ppo/v1/trainer_base.py"
LEGACY = "trainer/ppo/ray_trainer.py"
WORKERS = "workers/engine_workers.py"
ENGINE_UTILS = "workers/engine/utils.py"
CORE = "trainer/ppo/core_algos.py"
MCORE_OPTIM = "utils/megatron/optimizer.py"
KL_IN_REWARD = "if self.config.algorithm.use_kl_in_reward:"
DYNAMIC_SPLIT = Anchor(ENGINE_UTILS, "if use_dynamic_bsz:")

ROWS: tuple[Row, ...] = (
    # --- the KL terms ------------------------------------------------------------------------------
    Row("kl_ctrl", ("algorithm.kl_ctrl.*",), (Off("algorithm.use_kl_in_reward"),),
        "verl builds the KL controller of the reward only with the KL term in the reward",
        "set algorithm.use_kl_in_reward=true to put the KL term into the reward, or remove them",
        (Anchor(V1, KL_IN_REWARD, optional=True), Anchor(LEGACY, KL_IN_REWARD))),
    Row("kl_penalty", ("algorithm.kl_penalty",), (Off("algorithm.use_kl_in_reward"),),
        "verl computes the reward's KL penalty only with the KL term in the reward (the actor's KL loss "
        "reads actor.kl_loss_type)",
        "set algorithm.use_kl_in_reward=true, or remove it (for the KL loss set actor.kl_loss_type)",
        (Anchor(V1, KL_IN_REWARD, 2, optional=True), Anchor(LEGACY, KL_IN_REWARD, 2))),
    Row("kl_ctrl_fixed", ("algorithm.kl_ctrl.horizon", "algorithm.kl_ctrl.target_kl"),
        (On("algorithm.use_kl_in_reward"), Known("algorithm.kl_ctrl.type", "", ("adaptive",))),
        "a fixed KL controller reads only kl_coef; horizon and target_kl steer the adaptive one",
        "set algorithm.kl_ctrl.type=adaptive to use them, or remove them",
        (Anchor(CORE, 'if kl_ctrl.type == "fixed":'),)),
    Row("kl_loss", (f"{ACTOR}.kl_loss_coef", f"{ACTOR}.kl_loss_type"), (Off(f"{ACTOR}.use_kl_loss"),),
        "verl adds the KL term to the actor's loss, and reads its coefficient and estimator, only with "
        "use_kl_loss",
        f"set {ACTOR}.use_kl_loss=true to use them, or remove them",
        (Anchor("workers/utils/losses.py", "if config.use_kl_loss:"),)),
    # --- the reference policy ----------------------------------------------------------------------
    Row("ref_no_kl", (f"{REF}.*",), (Fact("no reference policy"),),
        "verl builds a reference policy only for a KL term (in the reward or in the actor's loss)",
        f"turn a KL term on ({ACTOR}.use_kl_loss=true or algorithm.use_kl_in_reward=true), or remove them",
        (Anchor(V1, "role = Role.ActorRolloutRef if need_reference_policy(config) and not ref_in_actor",
                optional=True),
         Anchor("trainer/main_ppo.py", "if need_reference_policy(config) and not ref_in_actor:",
                optional=True),
         Anchor(WORKERS, 'if "ref" in self.role:'), Anchor("utils/config.py", "if use_reference_policy:"))),
    Row("ref_lora", (f"{REF}.*",), (Fact("reference in the actor"),),
        "with a LoRA adapter on the policy verl builds no reference engine: the actor computes the "
        "reference log-probs with the adapter switched off (verl still checks that one reference micro "
        "batch size is set)",
        "remove them; the reference runs on the actor's engine and batching",
        (Anchor(V1, "self.ref_in_actor = lora_rank > 0 or", optional=True),
         Anchor(LEGACY, "self.ref_in_actor = lora_rank > 0 or")),
        spare=(f"{REF}.log_prob_micro_batch_size", f"{REF}.log_prob_micro_batch_size_per_gpu")),
    # --- batching ------------------------------------------------------------------------------------
    Row("actor_micro_dynamic", (f"{ACTOR}.ppo_micro_batch_size_per_gpu", f"{ACTOR}.ppo_micro_batch_size"),
        (On(f"{ACTOR}.use_dynamic_bsz"),),
        "with dynamic batches verl's engine cuts micro batches by token budget (ppo_max_token_len_per_gpu)",
        f"remove it, or batch by sample count with {ACTOR}.use_dynamic_bsz=false",
        (DYNAMIC_SPLIT,)),
    Row("actor_tokens_static", (f"{ACTOR}.ppo_max_token_len_per_gpu",),
        (Off(f"{ACTOR}.use_dynamic_bsz"), Fact("reference static")),
        "with static batches verl's engine cuts micro batches by sample count (ppo_micro_batch_size_per_gpu)",
        f"remove it, or batch by tokens with {ACTOR}.use_dynamic_bsz=true",
        (DYNAMIC_SPLIT,)),
    Row("log_prob_micro_dynamic",
        (f"{ROLLOUT}.log_prob_micro_batch_size_per_gpu", f"{ROLLOUT}.log_prob_micro_batch_size"),
        (On(f"{ACTOR}.use_dynamic_bsz"),),
        "the actor's engine computes the old log-probs with the actor's dynamic batches, cut by "
        "rollout.log_prob_max_token_len_per_gpu",
        f"remove it, or batch by sample count with {ACTOR}.use_dynamic_bsz=false",
        (DYNAMIC_SPLIT, Anchor(WORKERS, "assert self.config.actor.use_dynamic_bsz == "
                                        "self.config.rollout.log_prob_use_dynamic_bsz"))),
    Row("log_prob_tokens_static", (f"{ROLLOUT}.log_prob_max_token_len_per_gpu",),
        (Off(f"{ACTOR}.use_dynamic_bsz"),),
        "the actor's engine computes the old log-probs with the actor's static batches, cut by "
        "rollout.log_prob_micro_batch_size_per_gpu",
        f"remove it, or batch by tokens with {ACTOR}.use_dynamic_bsz=true",
        (DYNAMIC_SPLIT,)),
    Row("ref_micro_dynamic", (f"{REF}.log_prob_micro_batch_size_per_gpu", f"{REF}.log_prob_micro_batch_size"),
        (On(f"{REF}.log_prob_use_dynamic_bsz"),),
        "the reference engine batches by token budget (ref.log_prob_max_token_len_per_gpu)",
        f"remove it, or batch by sample count with {REF}.log_prob_use_dynamic_bsz=false",
        (DYNAMIC_SPLIT, Anchor(WORKERS, "ref_training_config.engine_config.use_dynamic_bsz = "
                                        "self.config.ref.use_dynamic_bsz"))),
    Row("ref_tokens_static", (f"{REF}.log_prob_max_token_len_per_gpu",), (Fact("reference static"),),
        "the reference engine batches by sample count (ref.log_prob_micro_batch_size_per_gpu)",
        f"remove it, or batch by tokens with {REF}.log_prob_use_dynamic_bsz=true",
        (DYNAMIC_SPLIT,)),
    # --- the critic ----------------------------------------------------------------------------------
    Row("critic_off", ("critic.*",), (Fact("no critic"),),
        "verl then builds no critic and reads no critic setting",
        "remove them, or train a critic with algorithm.adv_estimator=gae (or critic.enable=true)",
        (Anchor(V1, "if self.use_critic:", optional=True), Anchor(LEGACY, "if self.use_critic:"),
         Anchor("trainer/ppo/utils.py", "if config.critic.enable is not None:")),
        spare=("critic.enable",)),
    Row("critic_batching",
        ("critic.ppo_micro_batch_size_per_gpu", "critic.ppo_micro_batch_size", "critic.use_dynamic_bsz",
         "critic.forward_micro_batch_size", "critic.forward_micro_batch_size_per_gpu"),
        (Fact("critic trained"),),
        "verl's critic engine always cuts micro batches by token budget (its engine config keeps the "
        "engine's default use_dynamic_bsz=true; the trainer hands it only token budgets); these values are "
        "only checked",
        "remove them; the critic's token budget sets its micro batches",
        (Anchor("workers/config/engine.py", "use_dynamic_bsz: bool = True"),)),
    Row("critic_forward_tokens", ("critic.forward_max_token_len_per_gpu",), (Fact("critic trained"),),
        "verl's trainers set the critic engine's forward token budget from "
        "critic.ppo_infer_max_token_len_per_gpu (32768 unless added); nothing reads this key",
        "set +critic.ppo_infer_max_token_len_per_gpu=N instead",
        (Anchor(LEGACY, "engine_config.infer_max_token_len_per_gpu = "
                        "critic_cfg.ppo_infer_max_token_len_per_gpu"),)),
    Row("critic_tokens_v1", ("critic.ppo_max_token_len_per_gpu",),
        (Fact("critic trained"), Fact("v1 trainer")),
        "verl's v1 trainer sets both of the critic engine's token budgets from "
        "critic.ppo_infer_max_token_len_per_gpu (32768 unless added)",
        "set +critic.ppo_infer_max_token_len_per_gpu=N instead",
        (Anchor(V1, "critic_cfg.engine.max_token_len_per_gpu = "
                    "critic_cfg.ppo_infer_max_token_len_per_gpu"),)),
    # --- the rollout ---------------------------------------------------------------------------------
    Row("engine_kwargs", (f"{ROLLOUT}.engine_kwargs.{{other}}.*",), (),
        "verl hands each rollout server only the engine_kwargs of its own backend (rollout.name)",
        "remove them, or set them under the backend rollout.name chooses",
        (Anchor("workers/rollout/sglang_rollout/async_sglang_server.py",
                'engine_kwargs = self.config.get("engine_kwargs", {}).get("sglang", {})'),
         Anchor("workers/rollout/replica.py", "return RolloutReplicaRegistry.get(rollout)")),
        selector=f"{ROLLOUT}.name"),
    Row("multi_turn_enable", (f"{ROLLOUT}.multi_turn.enable",), (),
        "nothing on main_ppo's path reads it: the tool loop is chosen by the agent loop "
        "(rollout.agent.default_agent_loop or the data's agent_name) and reads multi_turn.* whatever it says",
        f"remove it; choose the loop with {ROLLOUT}.agent.default_agent_loop",
        (Anchor(LEGACY, 'batch.meta_info["multi_turn"] = rollout_config.multi_turn.enable'),)),
    Row("val_do_sample", (f"{ROLLOUT}.val_kwargs.do_sample",), (),
        "validation generates with val_kwargs.temperature, top_p and top_k whatever do_sample says; verl "
        "only checks that rollout.temperature > 0 when it is true",
        f"remove it; greedy validation is {ROLLOUT}.val_kwargs.temperature=0",
        (Anchor("experimental/agent_loop/agent_loop.py",
                'sampling_params["temperature"] = config.val_kwargs.temperature'),)),
    Row("validation_off",
        (f"{ROLLOUT}.val_kwargs.*", "trainer.log_val_generations", "trainer.validation_data_dir",
         "trainer.val_only"),
        (Fact("no validation"),),
        "verl validates only before training (trainer.val_before_train) or every trainer.test_freq steps",
        "set trainer.test_freq > 0 or trainer.val_before_train=true to validate, or remove them",
        (Anchor(V1, 'if self.config.trainer.get("val_before_train", True):', optional=True),
         Anchor(LEGACY, 'if self.config.trainer.get("val_before_train", True):'),
         Anchor(LEGACY, "if self.config.trainer.test_freq > 0 and (")),
        spare=(f"{ROLLOUT}.val_kwargs.do_sample",)),
    # --- the policy loss -----------------------------------------------------------------------------
    Row("clip_ratio", (f"{ACTOR}.clip_ratio",),
        (Set(f"{ACTOR}.clip_ratio_low"), Set(f"{ACTOR}.clip_ratio_high")),
        "verl's losses read clip_ratio only in place of a null clip_ratio_low or clip_ratio_high",
        f"set {ACTOR}.clip_ratio_low and {ACTOR}.clip_ratio_high instead",
        (Anchor(CORE, "clip_ratio_low = config.clip_ratio_low if config.clip_ratio_low is not None else "
                      "clip_ratio"),)),
    Row("clip_unread", (f"{ACTOR}.clip_ratio", f"{ACTOR}.clip_ratio_low", f"{ACTOR}.clip_ratio_high"),
        (Known(f"{ACTOR}.policy_loss.loss_mode", "policy_loss_mode",
               ("vanilla", "gspo", "geo_mean", "cispo", "clip_cov", "dppo_tv", "dppo_kl", "bypass_mode")),),
        "the chosen policy loss reads no clip ratio",
        "remove them, or choose a clipped loss (policy_loss.loss_mode=vanilla)",
        (Anchor("workers/utils/losses.py", 'loss_mode = config.policy_loss.get("loss_mode", "vanilla")'),)),
    Row("clip_ratio_c", (f"{ACTOR}.clip_ratio_c",),
        (Known(f"{ACTOR}.policy_loss.loss_mode", "policy_loss_mode",
               ("vanilla", "dppo_tv", "dppo_kl", "bypass_mode")),),
        "only the dual-clip losses (vanilla, dppo_tv, dppo_kl, bypass_mode) read the dual-clip bound",
        "remove it, or choose policy_loss.loss_mode=vanilla",
        (Anchor(CORE, "clip_ratio_c = config.get("),)),
    Row("sapo_tau", (f"{ACTOR}.tau_pos", f"{ACTOR}.tau_neg", f"{ACTOR}.policy_loss.tau_pos",
                     f"{ACTOR}.policy_loss.tau_neg"),
        (Known(f"{ACTOR}.policy_loss.loss_mode", "policy_loss_mode", ("sapo",)),),
        "only the sapo policy loss reads its temperatures",
        "remove them, or choose policy_loss.loss_mode=sapo",
        (Anchor(CORE, '@register_policy_loss("sapo")'),)),
    Row("clip_cov",
        tuple(f"{ACTOR}.policy_loss.{k}" for k in ("clip_cov_ratio", "clip_cov_lb", "clip_cov_ub")),
        (Known(f"{ACTOR}.policy_loss.loss_mode", "policy_loss_mode", ("clip_cov",)),),
        "only the clip_cov policy loss reads them",
        "remove them, or choose policy_loss.loss_mode=clip_cov",
        (Anchor(CORE, '@register_policy_loss("clip_cov")'),)),
    Row("kl_cov", (f"{ACTOR}.policy_loss.kl_cov_ratio", f"{ACTOR}.policy_loss.ppo_kl_coef"),
        (Known(f"{ACTOR}.policy_loss.loss_mode", "policy_loss_mode", ("kl_cov",)),),
        "only the kl_cov policy loss reads them",
        "remove them, or choose policy_loss.loss_mode=kl_cov",
        (Anchor(CORE, '@register_policy_loss("kl_cov")'),)),
    Row("dro", (f"{ACTOR}.policy_loss.dro_beta",),
        (Known(f"{ACTOR}.policy_loss.loss_mode", "policy_loss_mode", ("dro",)),),
        "only the dro policy loss reads it",
        "remove it, or choose policy_loss.loss_mode=dro",
        (Anchor(CORE, '@register_policy_loss("dro")'),)),
    # --- the advantage estimator ---------------------------------------------------------------------
    Row("gae_lam", ("algorithm.lam",), (Known("algorithm.adv_estimator", "adv_estimator", ("gae",)),),
        "only the GAE estimator reads lam",
        "remove it, or use algorithm.adv_estimator=gae",
        (Anchor(LEGACY, "if adv_estimator == AdvantageEstimator.GAE:"),)),
    Row("gamma", ("algorithm.gamma",),
        (Known("algorithm.adv_estimator", "adv_estimator", ("gae", "reinforce_plus_plus")),),
        "only the GAE and REINFORCE++ estimators read gamma",
        "remove it, or use algorithm.adv_estimator=gae or reinforce_plus_plus",
        (Anchor(LEGACY, "if adv_estimator == AdvantageEstimator.GAE:"),
         Anchor(CORE, "gamma = config.gamma"))),
    Row("grpo_std", ("algorithm.norm_adv_by_std_in_grpo",),
        (Known("algorithm.adv_estimator", "adv_estimator", ("grpo", "grpo_passk")),),
        "only the grpo and grpo_passk estimators read it",
        "remove it, or use algorithm.adv_estimator=grpo",
        (Anchor(LEGACY, "elif adv_estimator == AdvantageEstimator.GRPO:"),)),
    Row("pf_ppo", ("algorithm.use_pf_ppo", "algorithm.pf_ppo.*"),
        (Known("algorithm.adv_estimator", "adv_estimator", ("gae",)),),
        "verl reweights samples with PF-PPO only inside the GAE estimator",
        "remove them, or use algorithm.adv_estimator=gae",
        (Anchor(LEGACY, 'if config.get("use_pf_ppo", False):'),)),
    # --- the engine blocks -----------------------------------------------------------------------------
    Row("megatron_engine_padding",
        ("megatron.use_remove_padding", f"{ACTOR}.megatron.use_remove_padding",
         f"{REF}.megatron.use_remove_padding", "critic.megatron.use_remove_padding"),
        (Fact("megatron"),),
        "verl's engine worker sets the engine's use_remove_padding from the model section's before the "
        "engine reads it, for every role",
        "set actor_rollout_ref.model.use_remove_padding (and critic.model.use_remove_padding) instead",
        (Anchor(WORKERS, "self.engine_config.use_remove_padding = self.model_config.get("),
         Anchor(WORKERS, 'ref_training_config.engine_config.use_remove_padding = model_config.get('),
         Anchor(WORKERS, 'actor_training_config.engine_config.use_remove_padding = model_config.get('))),
    # --- optimizers ----------------------------------------------------------------------------------
    Row("megatron_betas", ("{s}.betas",), (Fact("megatron"),),
        "verl's Megatron optimizer setup never hands betas to Megatron-Core (Adam runs with its 0.9/0.999)",
        "set {s}.override_optimizer_config.adam_beta1 / adam_beta2 instead",
        (Anchor(MCORE_OPTIM, "def init_megatron_optim_config("),), scopes=OPTIMIZERS),
    Row("megatron_precision_dtypes", ("{s}.main_grads_dtype", "{s}.exp_avg_dtype", "{s}.exp_avg_sq_dtype"),
        (Fact("megatron"), Off("{s}.use_precision_aware_optimizer")),
        "verl hands these dtypes to Megatron-Core only with the precision-aware optimizer",
        "set {s}.use_precision_aware_optimizer=true to use them, or remove them",
        (Anchor(MCORE_OPTIM, 'if optim_config.get("use_precision_aware_optimizer", False):'),),
        scopes=OPTIMIZERS),
    Row("fsdp_cosine", ("{s}.min_lr_ratio", "{s}.num_cycles", "{s}.zero_indexed_step"),
        (Fact("fsdp"), Known("{s}.lr_scheduler_type", "", ("cosine",))),
        "only the cosine schedule reads them",
        "set {s}.lr_scheduler_type=cosine to use them, or remove them",
        (Anchor("workers/engine/fsdp/transformer_impl.py", 'elif lr_scheduler_type == "cosine":'),),
        scopes=OPTIMIZERS),
    Row("total_training_steps", ("{s}.total_training_steps",), (),
        "the trainer overwrites it with the run's step count (from the data and "
        "trainer.total_training_steps)",
        "remove it; set trainer.total_training_steps or trainer.total_epochs",
        (Anchor(LEGACY, "self.config.actor_rollout_ref.actor.optim.total_training_steps = "
                        "total_training_steps"),), scopes=OPTIMIZERS),
    # --- role-level copies the engines do not read ---------------------------------------------------
    Row("role_level_copies",
        (f"{ACTOR}.use_torch_compile", f"{REF}.use_torch_compile", f"{ACTOR}.grad_clip", "critic.grad_clip",
         f"{ACTOR}.use_remove_padding"),
        (Fact("fsdp"),),
        "verl's FSDP engine reads fsdp_config.use_torch_compile, optim.clip_grad and "
        "model.use_remove_padding, not these role-level copies",
        "set the engine's key instead (fsdp.use_torch_compile, optim.clip_grad, model.use_remove_padding)",
        (Anchor(WORKERS, "self.engine_config.use_remove_padding = "
                         'self.model_config.get("use_remove_padding", False)'),)),
    # --- profiler ------------------------------------------------------------------------------------
    Row("profiler_tool_config", ("{s}.tool_config.{other}.*",), (),
        "verl hands the profiler only the tool_config of the tool it runs ({s}.tool)",
        "remove them, or set them under the tool {s}.tool chooses",
        (Anchor(WORKERS, 'omega_profiler_config.get("tool_config", {})'
                         '.get(omega_profiler_config.get("tool"))'),),
        scopes=PROFILERS, selector="{s}.tool"),
)

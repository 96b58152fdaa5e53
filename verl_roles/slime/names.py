"""The one table of slime's per-role names: each slime/Megatron argparse attribute name a slime role
file may hold that has a verl_roles equivalent, and the role-relative config path(s) it sets.

Reading a file (:mod:`verl_roles.slime.read`), ``verl-roles export-slime`` (:mod:`verl_roles.slime.export`)
and the table of docs/slime.md (:mod:`verl_roles.slime.doc`) all derive from :data:`SLIME_KEYS`; nothing
else lists a slime name. :data:`UNMAPPED` names the slime/Megatron arguments a role file may hold in slime
that have no per-role place in verl, with the reason (the error message says it).

The file-format constants (the top-level key, the entry fields, the resource keys slime ignores) are
here too, so that every module of the package reads them from one place.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache
from typing import Any

from omegaconf import DictConfig, ListConfig, OmegaConf

from verl_roles.base.layout import OPTIM_BLOCK, ROLE_SECTIONS, SLIME_ENGINE, SLIME_ROLES
from verl_roles.inputs import paths
from verl_roles.inputs.config_tree import CONF_DIR
from verl_roles.omegaconf_adapter.yaml_dialect import load_plain

# Top-level key naming a slime per-role YAML file (slime's `--megatron-config-path`).
SLIME_PATH_KEY = "megatron_config_path"

# The top-level list of a slime file (slime's format).
FILE_KEY = "megatron"

# The fields of an entry slime reads (`name` is a label only); `args` is slime's alias of `overrides`.
ENTRY_FIELDS: tuple[str, ...] = ("name", "role", "overrides", "args")
READ_FIELDS: tuple[str, ...] = ("role", "overrides", "args")

# Resource keys slime ignores in a role: placement follows the trainer, not the role.
RESOURCE_KEYS: tuple[str, ...] = ("num_nodes", "num_gpus_per_node")

# Config file holding the default of each block of role-relative paths (the first path component):
# the engine block follows the engine's baseline, the optimizer its defaults file.
BLOCK_FILES: dict[str, str] = {
    OPTIM_BLOCK: SLIME_ENGINE.optimizer_file,
    SLIME_ENGINE.role_block: SLIME_ENGINE.baseline_file,
}

# Config file holding each slime role's own defaults (the keys of its section outside the blocks).
ROLE_FILES: dict[str, str] = {"actor": "actor/actor.yaml", "critic": "critic/critic.yaml"}

# Whose argparse defines a name (the documentation says where to look it up).
MEGATRON_LM = "Megatron-LM"
SLIME = "slime"


@dataclass(frozen=True)
class SlimeKey:
    """One row of the table: a slime/Megatron argparse attribute name and where it lands in a role.

    ``path`` (and ``also``, further paths set to the same value) is relative to the role's section. A
    name that ``counts_optimizer_steps`` (slime's schedule lengths) is converted to verl's trainer steps
    on the way in and back on the way out (:mod:`verl_roles.slime.schedule`). A
    path inside a block (``megatron.*``, ``optim.*``) follows that block's baseline; any other path is a
    key of the role's own section (``ppo_micro_batch_size_per_gpu``). The value's type is the type of
    the default in the block's defaults file; ``kind`` and ``nullable`` give it where the default does
    not say (a null default, or a key of the role's own section, whose default differs by role).
    """

    name: str
    path: str
    also: tuple[str, ...] = ()
    kind: type | None = None
    nullable: bool | None = None
    owner: str = MEGATRON_LM
    counts_optimizer_steps: bool = False

    @property
    def targets(self) -> tuple[str, ...]:
        return (self.path, *self.also)

    @property
    def in_block(self) -> bool:
        return block_of(self.path) is not None


# The role's mapping of extra Megatron-Core OptimizerConfig fields, which verl passes on unchanged
# (init_megatron_optim_config in verl/utils/megatron/optimizer.py); a key the table sets there is added.
OPTIM_OVERRIDES = f"{OPTIM_BLOCK}.override_optimizer_config"

# slime/Megatron argparse name -> role-relative config path(s). docs/slime.md prints this table.
SLIME_KEYS: tuple[SlimeKey, ...] = (
    # Optimizer and learning-rate schedule.
    SlimeKey("lr", "optim.lr"),
    SlimeKey("min_lr", "optim.min_lr"),
    SlimeKey("lr_decay_style", "optim.lr_decay_style"),
    SlimeKey("lr_decay_iters", "optim.lr_decay_steps", kind=int, counts_optimizer_steps=True),
    SlimeKey("lr_warmup_iters", "optim.lr_warmup_steps", counts_optimizer_steps=True),
    SlimeKey("lr_warmup_fraction", "optim.lr_warmup_steps_ratio"),
    SlimeKey("lr_warmup_init", "optim.lr_warmup_init"),
    SlimeKey("lr_wsd_decay_style", "optim.lr_wsd_decay_style"),
    SlimeKey("lr_wsd_decay_iters", "optim.lr_wsd_decay_steps", kind=int, counts_optimizer_steps=True),
    SlimeKey("weight_decay", "optim.weight_decay"),
    SlimeKey("weight_decay_incr_style", "optim.weight_decay_incr_style"),
    SlimeKey("clip_grad", "optim.clip_grad"),
    # Adam's coefficients: verl's Megatron optimizer setup passes optim.betas nowhere, and hands every key
    # of optim.override_optimizer_config to Megatron-Core's OptimizerConfig, whose fields these are.
    SlimeKey("adam_beta1", f"{OPTIM_OVERRIDES}.adam_beta1", kind=float, nullable=False),
    SlimeKey("adam_beta2", f"{OPTIM_OVERRIDES}.adam_beta2", kind=float, nullable=False),
    SlimeKey("adam_eps", f"{OPTIM_OVERRIDES}.adam_eps", kind=float, nullable=False),
    SlimeKey("sgd_momentum", f"{OPTIM_OVERRIDES}.sgd_momentum", kind=float, nullable=False),
    SlimeKey("optimizer", "optim.optimizer"),
    SlimeKey("use_checkpoint_opt_param_scheduler", "optim.use_checkpoint_opt_param_scheduler"),
    # Precision-aware optimizer (Transformer Engine): optimizer state and main-gradient dtypes.
    SlimeKey("use_precision_aware_optimizer", "optim.use_precision_aware_optimizer"),
    SlimeKey("exp_avg_dtype", "optim.exp_avg_dtype"),
    SlimeKey("exp_avg_sq_dtype", "optim.exp_avg_sq_dtype"),
    SlimeKey("main_grads_dtype", "optim.main_grads_dtype"),
    # Parallel layout.
    SlimeKey("tensor_model_parallel_size", "megatron.tensor_model_parallel_size"),
    SlimeKey("pipeline_model_parallel_size", "megatron.pipeline_model_parallel_size"),
    SlimeKey(
        "virtual_pipeline_model_parallel_size", "megatron.virtual_pipeline_model_parallel_size", kind=int
    ),
    SlimeKey("context_parallel_size", "megatron.context_parallel_size"),
    SlimeKey("expert_model_parallel_size", "megatron.expert_model_parallel_size"),
    SlimeKey("expert_tensor_parallel_size", "megatron.expert_tensor_parallel_size", kind=int),
    SlimeKey("sequence_parallel", "megatron.sequence_parallel"),
    SlimeKey("use_distributed_optimizer", "megatron.use_distributed_optimizer"),
    SlimeKey("seed", "megatron.seed"),
    # Offloading between phases: slime's switch covers the weights and the optimizer states.
    SlimeKey("offload_train", "megatron.param_offload", also=("megatron.optimizer_offload",), owner=SLIME),
    # Checkpoint loading (verl reads it when megatron.use_dist_checkpointing is true).
    SlimeKey("load", "megatron.dist_checkpointing_path", kind=str),
    # Activation recomputation and attention kernel (Megatron TransformerConfig fields).
    SlimeKey("recompute_granularity", "megatron.override_transformer_config.recompute_granularity", kind=str),
    SlimeKey("recompute_method", "megatron.override_transformer_config.recompute_method", kind=str),
    SlimeKey("recompute_num_layers", "megatron.override_transformer_config.recompute_num_layers", kind=int),
    SlimeKey("recompute_modules", "megatron.override_transformer_config.recompute_modules"),
    SlimeKey("attention_backend", "megatron.override_transformer_config.attention_backend"),
    # Batching of one training step (keys of the role's own section).
    SlimeKey("micro_batch_size", "ppo_micro_batch_size_per_gpu", kind=int, nullable=True),
    SlimeKey("use_dynamic_batch_size", "use_dynamic_bsz", kind=bool, nullable=False, owner=SLIME),
    SlimeKey("max_tokens_per_gpu", "ppo_max_token_len_per_gpu", kind=int, nullable=False, owner=SLIME),
)

KEYS_BY_NAME: dict[str, SlimeKey] = {key.name: key for key in SLIME_KEYS}

# Role-relative path -> the slime name whose only target it is (a name with several targets is
# written only when all of them carry one value; see verl_roles.slime.export).
NAME_OF_PATH: dict[str, str] = {key.path: key.name for key in SLIME_KEYS if not key.also}

@dataclass(frozen=True)
class Unmapped:
    """A slime/Megatron argument a role file may hold that verl-roles refuses: what slime does with it,
    why no verl key has that effect for the role, and what to do instead."""

    slime: str
    verl: str
    fix: str


# slime/Megatron arguments a slime role file may set that no verl key of the role can carry: slime reads
# each (the refusal says how), and here it would silently do nothing. docs/slime.md prints this table.
UNMAPPED: dict[str, Unmapped] = {
    "save": Unmapped(
        "slime saves the role's checkpoints into this folder",
        "verl has no per-role save folder: each role's checkpoint goes to "
        "trainer.default_local_dir/global_step_<n>/<role>",
        "remove the key and set trainer.default_local_dir=... on the command line"),
    "save_interval": Unmapped(
        "slime saves the role's checkpoint every N rollouts",
        "verl saves every role at once, every trainer.save_freq trainer steps",
        "remove the key and set trainer.save_freq=N on the command line"),
    "global_batch_size": Unmapped(
        "slime takes one optimizer step per this many samples",
        "verl sets a role's samples per optimizer step as ppo_mini_batch_size, counted in prompts before "
        "the rollout.n expansion, a key the file does not map",
        "remove the key and set actor_rollout_ref.actor.ppo_mini_batch_size=... / "
        "critic.ppo_mini_batch_size=... on the command line"),
    "log_probs_max_tokens_per_gpu": Unmapped(
        "slime caps the tokens per GPU of a log-prob computation",
        "verl's token budgets for log-probs are keys outside the actor's and the critic's sections",
        "remove the key and set actor_rollout_ref.rollout.log_prob_max_token_len_per_gpu=... (the actor's) "
        "or +critic.ppo_infer_max_token_len_per_gpu=... (the critic's) on the command line"),
    "main_params_dtype": Unmapped(
        "slime (Megatron) keeps the optimizer's main parameters in this dtype",
        "verl's Megatron optimizer block has no main-parameter dtype, and Megatron-Core's OptimizerConfig "
        "takes a torch dtype there, which a config cannot hold (fp32 applies)",
        "remove the key"),
    "kl_coef": Unmapped(
        "slime weighs the KL penalty by it (and forces the critic's to 0)",
        "verl's KL settings are algorithm keys, not per-role ones",
        "remove the key and set algorithm.kl_ctrl.kl_coef=... or actor_rollout_ref.actor.kl_loss_coef=... "
        "on the command line"),
    "start_weight_decay": Unmapped(
        "slime (Megatron) starts the weight decay at this value and moves it to end_weight_decay over the "
        "run, following weight_decay_incr_style",
        "verl's Megatron scheduler takes both ends from optim.weight_decay (get_megatron_optimizer_param_"
        "scheduler, verl/utils/megatron/optimizer.py), so no verl key sets a ramp",
        "remove the key; `weight_decay` sets verl's constant weight decay"),
    "end_weight_decay": Unmapped(
        "slime (Megatron) ends the weight decay at this value, moving it from start_weight_decay over the "
        "run, following weight_decay_incr_style",
        "verl's Megatron scheduler takes both ends from optim.weight_decay (get_megatron_optimizer_param_"
        "scheduler, verl/utils/megatron/optimizer.py), so no verl key sets a ramp",
        "remove the key; `weight_decay` sets verl's constant weight decay"),
    "no_load_optim": Unmapped(
        "slime then restores no optimizer state from `load`",
        "verl never restores optimizer state from the folder `load` sets (load_mcore_dist_weights, "
        "verl/utils/model.py, loads the model weights only): verl always behaves so, and no key switches it",
        "remove the key"),
    "no_load_rng": Unmapped(
        "slime then restores no random-number state from `load`",
        "verl restores no random-number state from the folder `load` sets (it loads the model weights only)",
        "remove the key"),
    "finetune": Unmapped(
        "slime then loads only the model from `load`, starting the iteration count and optimizer anew",
        "verl always does so with the folder `load` sets, and no key switches it",
        "remove the key"),
    "ckpt_step": Unmapped(
        "slime loads this iteration of the `load` root instead of the one its "
        "latest_checkpointed_iteration.txt names",
        "verl loads one folder, not a root and an iteration",
        "remove the key and write that iteration folder as `load` (`<root>/iter_0000100` for 100)"),
    "ref_load": Unmapped(
        "slime loads the reference model from this checkpoint",
        "verl's reference policy is a role of its own (actor_rollout_ref.ref), which slime's role file does "
        "not name",
        "remove the key and set actor_rollout_ref.ref.megatron.dist_checkpointing_path=<iteration folder> "
        "and actor_rollout_ref.ref.megatron.use_dist_checkpointing=true on the command line"),
    "override_opt_param_scheduler": Unmapped(
        "slime (Megatron) then takes the scheduler's settings from the arguments, not from the checkpoint",
        "verl passes the opposite of optim.use_checkpoint_opt_param_scheduler there "
        "(get_megatron_optimizer_param_scheduler, verl/utils/megatron/optimizer.py)",
        "remove the key; `use_checkpoint_opt_param_scheduler: false` is verl's way to say it"),
}


def block_of(path: str) -> str | None:
    """The block (``megatron``, ``optim``) a role-relative path is inside, or None for a key of the
    role's own section."""
    head = path.split(".", 1)[0]
    return head if head in BLOCK_FILES and "." in path else None


# The keys of a role's own section the table maps (outside its blocks).
SECTION_PATHS: tuple[str, ...] = tuple(
    target for key in SLIME_KEYS if not key.in_block for target in key.targets
)


@cache
def _load(relative: str) -> Any:
    path = CONF_DIR / relative
    return load_plain(path.read_text(encoding="utf-8"), str(path))


def block_defaults(block: str) -> Any:
    """The defaults file of a block (``megatron``: the engine baseline; ``optim``: the optimizer's)."""
    return _load(BLOCK_FILES[block])


def role_defaults(role: str) -> Any:
    """The defaults file of a slime role's own section."""
    return _load(ROLE_FILES[role])


def default_value(key: SlimeKey) -> Any:
    """The default of ``key``'s target in its block's defaults file (None for a key of a role's own
    section: its default differs by role, see :func:`section_default`; None too for a key the table adds
    to a mapping verl passes on, such as ``optim.override_optimizer_config``)."""
    block = block_of(key.path)
    if block is None:
        return None
    return paths.get(block_defaults(block), key.path.split(".", 1)[1], default=None)


def target_type(key: SlimeKey) -> type:
    """The type a value of ``key`` is converted to: ``kind``, else the type of its default."""
    if key.kind is not None:
        return key.kind
    default = default_value(key)
    if default is None:
        raise AssertionError(f"slime key {key.name}: default is null and no kind is declared")
    return type(default)


def is_nullable(key: SlimeKey) -> bool:
    """Whether ``null`` is a value of ``key``: ``nullable``, else whether its default is null."""
    return key.nullable if key.nullable is not None else default_value(key) is None


_PURE_INTERPOLATION = re.compile(r"^\$\{([A-Za-z0-9_.]+)\}$")


def followed_role_key(raw: Any) -> tuple[str, str] | None:
    """(role, role-relative path) of another slime role's key that a raw value ``${a.b}`` follows (the
    critic's ``use_dynamic_bsz: ${actor_rollout_ref.actor.use_dynamic_bsz}``), else None."""
    match = _PURE_INTERPOLATION.match(raw) if isinstance(raw, str) else None
    if match is None:
        return None
    for role in SLIME_ROLES:
        prefix = ROLE_SECTIONS[role] + "."
        if match.group(1).startswith(prefix):
            return role, match.group(1).removeprefix(prefix)
    return None


def section_default(cfg: DictConfig, role: str, path: str) -> Any:
    """What ``role`` gets for a key of its own section when no per-role setting (the slime file, a per-role
    command-line key, a role option) sets it: its defaults file's value. A ``${...}`` there that follows
    another role's key is that key's default in turn: in slime a value one role's entry sets never
    reaches the other (the critic's ``use_dynamic_bsz`` is the actor's default, not the actor's value);
    any other ``${a.b}`` is read from ``cfg``."""
    raw = paths.get(role_defaults(role), path, default=None)
    followed = followed_role_key(raw)
    if followed is not None:
        return section_default(cfg, *followed)
    match = _PURE_INTERPOLATION.match(raw) if isinstance(raw, str) else None
    if match is None:
        return raw
    value = OmegaConf.select(cfg, match.group(1), default=None)
    if isinstance(value, (DictConfig, ListConfig)):
        return OmegaConf.to_container(value, resolve=True)
    return value


def role_paths(name: str) -> tuple[str, ...]:
    """The role-relative config paths a file key sets: the table's for a slime name, the key itself for
    a verl path (``megatron.param_offload``)."""
    return (name,) if "." in name else KEYS_BY_NAME[name].targets

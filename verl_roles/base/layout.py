"""Where things are in the composed config: the one table of engines, roles, sections, groups and blocks.

Every module that composes, checks, explains, summarises or writes a config reads these names here
instead of spelling them again. An engine of the ``model_engine`` group is one :class:`Engine` row
(adding one to ``conf/model_engine/`` means adding its row; ``tests/test_layout.py`` checks that the
table and the config tree agree); a role is one :class:`Role` row.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from verl_roles.base.releases import VERSION_KEY

# The one primary config (conf/ppo_trainer.yaml); a command line without --config-name composes it.
PRIMARY_CONFIG = "ppo_trainer"

# Our top-level switch: with a shared placement, actor and critic use one parallel topology.
TOPOLOGY_SETTING = "actor_critic_same_topology"

# The top-level config group that picks the training engine for every role (also the key that records
# the choice in the composed config).
ENGINE_KEY = "model_engine"

# Block names inside a model's and a role's section.
LORA_BLOCK = "lora"
OPTIM_BLOCK = "optim"

# LoRA target-module naming families: Hugging Face (PEFT) names, or Megatron-Core layer names.
HF_MODULE_NAMES = "hf"
MEGATRON_MODULE_NAMES = "megatron"


@dataclass(frozen=True)
class Engine:
    """One option of the ``model_engine`` group and where its settings live.

    ``baseline``: the top-level section every role's block follows (``megatron.*``); ``role_block``:
    each role's block inside its section, ``blocks`` the roles whose block has another name (the FSDP
    critic's ``critic.fsdp``). ``summary``: (label, key in the block) printed for each role.
    ``model_parallel``: (label, key relative to the role's section, ``{block}`` standing for the role's
    engine block) whose product is the ranks one model replica spans; with ``divides_gpus`` that product
    must divide the GPU count, and the train batch is split over data-parallel ranks times the micro
    batch (verl's rules for Megatron).
    ``topology``: keys actor and critic must share under a shared placement, ``unset_follows`` the key
    an unset one of them means. ``lora_module_names``: the naming family of LoRA target modules, None
    for an engine that reads no LoRA setting.
    ``baseline_file`` / ``optimizer_file``: the config files holding the engine's and its optimizer's
    defaults (what slime's per-role values are compared with). ``title``: how prose names the engine
    (snapshot headers). ``mcore``: the role blocks are verl's ``McoreEngineConfig`` (or a subclass):
    Megatron-Core settings, and ``sequence_parallel`` off at tensor parallel size 1.
    """

    name: str
    baseline: str
    role_block: str
    title: str = ""
    blocks: Mapping[str, str] = field(default_factory=dict)
    aliases: tuple[str, ...] = ()
    summary: tuple[tuple[str, str], ...] = ()
    model_parallel: tuple[tuple[str, str], ...] = ()
    divides_gpus: bool = False
    topology: tuple[str, ...] = ()
    # Keys that set state of the whole worker process (Megatron-Core's parallel state): every role built
    # in one process runs with the first engine's values.
    process_state: tuple[str, ...] = ()
    unset_follows: Mapping[str, str] = field(default_factory=dict)
    lora_module_names: str | None = HF_MODULE_NAMES
    baseline_file: str = ""
    optimizer_file: str = ""
    mcore: bool = False
    # What the engine is, the first comment of its option file (conf/model_engine/<name>.yaml, generated
    # from this row by scripts/generate_verl_releases.py).
    description: str = ""
    # Roles that carry an optimizer under this engine besides the trained ones.
    extra_optimizer_roles: tuple[str, ...] = ()

    def block(self, role: str) -> str:
        """The name of ``role``'s engine block inside the role's section."""
        return self.blocks.get(role, self.role_block)

    def effective_value(self, block: Mapping[str, Any], key: str) -> Any:
        """The value of ``key`` in a role's engine ``block`` as the engine uses it: an unset key that
        follows another (:attr:`unset_follows`) has that key's value."""
        value = block.get(key)
        follows = self.unset_follows.get(key)
        return block.get(follows) if value is None and follows is not None else value

    def model_parallel_keys(self, role: str) -> tuple[tuple[str, str], ...]:
        """:attr:`model_parallel` for ``role`` (a role name): (label, key relative to its section)."""
        return tuple((label, key.format(block=self.block(role))) for label, key in self.model_parallel)


DP = Engine(
    name="dp",
    baseline="fsdp",
    role_block="fsdp_config",
    title="FSDP",
    blocks={"critic": "fsdp"},
    aliases=("fsdp",),
    summary=(
        ("fsdp_size", "fsdp_size"),
        ("ulysses_sp", "ulysses_sequence_parallel_size"),
        ("param_offload", "param_offload"),
    ),
    # The engine reads the size in the role's FSDP block (verl copies a role-level value above 1 there).
    model_parallel=(("ulysses_sequence_parallel_size", "{block}.ulysses_sequence_parallel_size"),),
    baseline_file="engine/fsdp.yaml",
    optimizer_file="optim/fsdp.yaml",
    description='FSDP training engine (verl\'s "dp" strategy), the default.',
)

MEGATRON = Engine(
    name="megatron",
    baseline="megatron",
    role_block="megatron",
    title="Megatron",
    summary=(
        ("TP", "tensor_model_parallel_size"),
        ("PP", "pipeline_model_parallel_size"),
        ("VPP", "virtual_pipeline_model_parallel_size"),
        ("CP", "context_parallel_size"),
        ("EP", "expert_model_parallel_size"),
        ("ETP", "expert_tensor_parallel_size"),
        ("SP", "sequence_parallel"),
    ),
    model_parallel=(
        ("TP", "megatron.tensor_model_parallel_size"),
        ("PP", "megatron.pipeline_model_parallel_size"),
        ("CP", "megatron.context_parallel_size"),
    ),
    divides_gpus=True,
    topology=(
        "tensor_model_parallel_size",
        "pipeline_model_parallel_size",
        "context_parallel_size",
        "expert_model_parallel_size",
        "expert_tensor_parallel_size",
        "sequence_parallel",
    ),
    process_state=(
        "tensor_model_parallel_size",
        "pipeline_model_parallel_size",
        "virtual_pipeline_model_parallel_size",
        "context_parallel_size",
        "expert_model_parallel_size",
        "expert_tensor_parallel_size",
    ),
    # Megatron uses the tensor parallel size inside experts when this is unset.
    unset_follows={"expert_tensor_parallel_size": "tensor_model_parallel_size"},
    lora_module_names=MEGATRON_MODULE_NAMES,
    mcore=True,
    baseline_file="engine/megatron.yaml",
    optimizer_file="optim/megatron.yaml",
    description="Megatron-LM training engine. Carries every setting of the legacy megatron trainer config.",
)

TORCHTITAN = Engine(
    name="torchtitan",
    baseline="torchtitan",
    role_block="torchtitan",
    title="TorchTitan",
    summary=(
        ("TP", "tensor_parallel_size"),
        ("PP", "pipeline_parallel_size"),
        ("CP", "context_parallel_size"),
        ("EP", "expert_parallel_size"),
        ("dp_shard", "data_parallel_shard_size"),
        ("param_offload", "param_offload"),
    ),
    # A replica spans TP*PP*CP ranks; the rest of the GPUs are its data-parallel ranks. verl checks the
    # batch against the GPU count as for dp (its validate_config special-cases Megatron only).
    model_parallel=(
        ("TP", "torchtitan.tensor_parallel_size"),
        ("PP", "torchtitan.pipeline_parallel_size"),
        ("CP", "torchtitan.context_parallel_size"),
    ),
    # No shared topology: each TorchTitan engine builds its own device mesh, as each FSDP role does.
    # verl's TorchTitan engine reads no LoRA setting.
    lora_module_names=None,
    baseline_file="engine/torchtitan.yaml",
    optimizer_file="optim/torchtitan.yaml",
    description="TorchTitan training engine (PyTorch's TorchTitan: FSDP2 with tensor, pipeline, context and "
                "expert parallelism).",
    # verl's TorchTitan reference carries an optimizer block (its engine config is built with one).
    extra_optimizer_roles=("ref",),
)

VEOMNI = Engine(
    name="veomni",
    baseline="veomni",
    role_block="veomni",
    title="VeOmni",
    summary=(
        ("fsdp_size", "fsdp_size"),
        ("ulysses_sp", "ulysses_parallel_size"),
        ("EP", "expert_parallel_size"),
        ("param_offload", "param_offload"),
    ),
    model_parallel=(("ulysses_parallel_size", "veomni.ulysses_parallel_size"),),
    # VeOmni keeps one parallel state per process, set by the first engine built there; verl places the
    # actor and the critic in the same processes, so the critic cannot have a layout of its own.
    topology=("fsdp_size", "ulysses_parallel_size", "expert_parallel_size"),
    baseline_file="engine/veomni.yaml",
    optimizer_file="optim/veomni.yaml",
    description="VeOmni training engine (ByteDance's VeOmni on FSDP2, with Ulysses sequence and expert "
                "parallelism).",
)

# Every engine of the model_engine group, the default first.
ENGINE_TABLE: tuple[Engine, ...] = (DP, MEGATRON, TORCHTITAN, VEOMNI)
DEFAULT_ENGINE = ENGINE_TABLE[0].name
ENGINES: tuple[str, ...] = tuple(engine.name for engine in ENGINE_TABLE)
ENGINE_ALIASES: dict[str, str] = {alias: e.name for e in ENGINE_TABLE for alias in e.aliases}

# The engine of slime's per-role files (their keys are Megatron's argparse names).
SLIME_ENGINE = MEGATRON


def engine(name: object) -> Engine:
    """The row of the engine ``name`` (an alias gives its engine); the default engine for an unknown
    name (validation reports that one)."""
    text = ENGINE_ALIASES.get(str(name), str(name))
    return next((e for e in ENGINE_TABLE if e.name == text), ENGINE_TABLE[0])


@dataclass(frozen=True)
class Role:
    """A role: its section, its config group of per-role options, the model it trains, whether it has
    an engine block (the rollout engine has its own settings instead), whether it is trained (PPO
    updates: an optimizer, mini and micro batches), and whether slime's per-role files may name it
    (slime has per-role Megatron settings for the roles it trains with Megatron: actor and critic).
    ``summary``: (label, key in the section) printed for a role without an engine block (a role with
    one prints its engine's summary fields)."""

    name: str
    section: str
    group: str | None = None
    model: str | None = None
    engine_block: bool = True
    trained: bool = False
    slime: bool = False
    summary: tuple[tuple[str, str], ...] = ()


# Every role, in the order the per-role files of a run are written.
ROLES: tuple[Role, ...] = (
    Role("actor", "actor_rollout_ref.actor", group="role/actor", model="actor_rollout_ref.model",
         trained=True, slime=True),
    Role("critic", "critic", group="role/critic", model="critic.model", trained=True, slime=True),
    Role("ref", "actor_rollout_ref.ref"),
    Role("rollout", "actor_rollout_ref.rollout", engine_block=False,
         summary=(("name", "name"), ("TP", "tensor_model_parallel_size"), ("n", "n"),
                  ("gpu_memory_utilization", "gpu_memory_utilization"))),
)
ROLES_BY_NAME: dict[str, Role] = {role.name: role for role in ROLES}

# Role name -> key path of its section.
ROLE_SECTIONS: dict[str, str] = {role.name: role.section for role in ROLES}
# Role name -> its config group of per-role options (the roles that have one).
ROLE_GROUPS: dict[str, str] = {role.name: role.group for role in ROLES if role.group is not None}
# Key paths of the models the roles train (each holds one LoRA block).
MODEL_SECTIONS: tuple[str, ...] = tuple(role.model for role in ROLES if role.model is not None)
LORA_SECTIONS: tuple[str, ...] = tuple(f"{model}.{LORA_BLOCK}" for model in MODEL_SECTIONS)
# The roles slime's per-role files may name, in the order their entries are written on export.
SLIME_ROLES: tuple[str, ...] = tuple(role.name for role in ROLES if role.slime)
# Key paths of the sections of the trained roles (each has an optimizer and PPO batch sizes).
TRAINED_SECTIONS: tuple[str, ...] = tuple(role.section for role in ROLES if role.trained)

ACTOR = ROLE_SECTIONS["actor"]
CRITIC = ROLE_SECTIONS["critic"]
REF = ROLE_SECTIONS["ref"]
ROLLOUT = ROLE_SECTIONS["rollout"]

# The config groups a command line picks options of: the engine and each role's options. Every other
# directory of conf/ is an internal group that these mount (actor, engine, optim, lora, ...), never
# chosen on the command line; help, completion and error wording offer only these.
SELECTABLE_GROUPS: tuple[str, ...] = (ENGINE_KEY, VERSION_KEY, *ROLE_GROUPS.values())

"""Where things are in the composed config: the engine switch and each role's section.

The one table of these names; the modules that compose, check, explain or write a config read them
here instead of spelling the paths again.
"""

from __future__ import annotations

# The one primary config (conf/ppo_trainer.yaml); a command line without --config-name composes it.
PRIMARY_CONFIG = "ppo_trainer"

# The top-level config group that picks the training engine for every role, its options, the
# option of the primary config's defaults list, and the option names that are aliases of another.
ENGINE_KEY = "model_engine"
ENGINES: tuple[str, ...] = ("dp", "megatron")
DEFAULT_ENGINE = "dp"
ENGINE_ALIASES: dict[str, str] = {"fsdp": "dp"}

# Role name -> key path of its section (also the order of the per-role files a run writes).
ROLE_SECTIONS: dict[str, str] = {
    "actor": "actor_rollout_ref.actor",
    "critic": "critic",
    "ref": "actor_rollout_ref.ref",
    "rollout": "actor_rollout_ref.rollout",
}

ACTOR = ROLE_SECTIONS["actor"]
CRITIC = ROLE_SECTIONS["critic"]
REF = ROLE_SECTIONS["ref"]
ROLLOUT = ROLE_SECTIONS["rollout"]

"""The topology rules: with a shared placement, one parallel layout for actor and critic; and one
Megatron-Core parallel state for every role verl builds in the actor's worker process."""

from __future__ import annotations

from collections.abc import Iterable

from omegaconf import DictConfig, OmegaConf

from verl_roles.base.errors import Problem
from verl_roles.base.layout import ENGINE_KEY, ROLE_SECTIONS, TOPOLOGY_SETTING, engine
from verl_roles.base.releases import release_of
from verl_roles.validation.rules.values import critic_in_use, ref_engine_built

# Where verl's Megatron engine sets the process's parallel state only once (the first engine built in a
# process; the next ones skip it and still build their model with their own sizes).
PARALLEL_STATE = "verl/workers/engine/megatron/transformer_impl.py, `if mpu.is_initialized(): return`"


def actor_and_critic_share_topology(cfg: DictConfig) -> Iterable[Problem]:
    """PPO with a shared placement (``actor_critic_same_topology: true``, the default): the actor and the
    critic must use the same parallel topology (the engine's ``topology`` keys: Megatron's). Under dp
    the setting has no effect, because each FSDP role builds its own device mesh (Ulysses sizes may
    differ)."""
    setting = cfg.get(TOPOLOGY_SETTING, True)
    chosen = engine(cfg.get(ENGINE_KEY))
    # A value that is not a boolean is reported by the schema check.
    if setting is not True or not chosen.topology or not critic_in_use(cfg):
        return
    actor_block = f"{ROLE_SECTIONS['actor']}.{chosen.block('actor')}"
    critic_block = f"{ROLE_SECTIONS['critic']}.{chosen.block('critic')}"
    actor, critic = OmegaConf.select(cfg, actor_block), OmegaConf.select(cfg, critic_block)
    for key in chosen.topology:
        if key in chosen.unset_follows and actor.get(key) is None and critic.get(key) is None:
            # Unset on both sides: it follows another key, which is compared on its own.
            continue
        a, c = chosen.effective_value(actor, key), chosen.effective_value(critic, key)
        if a == c:
            continue
        yield Problem(
            key=f"{critic_block}.{key}",
            message=(
                f"actor and critic differ: {actor_block}.{key}={a}, {critic_block}.{key}={c}; PPO with a "
                f"shared placement needs one parallel topology for both ({TOPOLOGY_SETTING}=true)"
            ),
            fix=(
                f"give both roles the same value, e.g. {chosen.baseline}.{key}={a} once for every role and "
                f"no per-role value, or {critic_block}.{key}={a}"
                + (" (verl builds the critic in the actor's worker process, so no setting lets them differ)"
                   if key in chosen.process_state else
                   f"; or set {TOPOLOGY_SETTING}=false if your trainer places the critic on its own GPUs")
            ),
        )


def roles_in_one_process_share_the_parallel_state(cfg: DictConfig) -> Iterable[Problem]:
    """verl builds the actor, the reference and the critic in one worker process (the global resource
    pool); Megatron-Core's parallel state belongs to the process, and verl sets it from the first engine
    built (the critic's, when a critic is trained) and skips it for the others, which still build their
    model with their own sizes. So every such role needs the actor's sizes (reported for the critic here
    only when ``actor_critic_same_topology`` is off: otherwise the topology rule above reports it)."""
    chosen = engine(cfg.get(ENGINE_KEY))
    if not chosen.process_state:
        return
    roles = ["ref"] if ref_engine_built(cfg) else []
    if critic_in_use(cfg) and cfg.get(TOPOLOGY_SETTING, True) is not True:
        roles.append("critic")
    actor_block = f"{ROLE_SECTIONS['actor']}.{chosen.block('actor')}"
    actor = OmegaConf.select(cfg, actor_block)
    for role in roles:
        block = f"{ROLE_SECTIONS[role]}.{chosen.block(role)}"
        other = OmegaConf.select(cfg, block)
        if actor is None or other is None:
            continue
        for key in chosen.process_state:
            if key in chosen.unset_follows and actor.get(key) is None and other.get(key) is None:
                continue  # unset on both sides: it follows another key, compared on its own
            a, o = chosen.effective_value(actor, key), chosen.effective_value(other, key)
            if a == o:
                continue
            yield Problem(
                key=f"{block}.{key}",
                message=(
                    f"is {o}, but {actor_block}.{key} is {a}: verl {release_of(cfg)} builds the {role} in "
                    "the actor's worker process, where Megatron-Core's parallel state is set once, by the "
                    f"first engine built ({PARALLEL_STATE}); the two layouts cannot both take effect"
                    + (f" ({TOPOLOGY_SETTING}=false does not give the critic processes of its own)"
                       if role == "critic" else "")
                ),
                fix=f"give the {role} the actor's value ({block}.{key}={a}), or set it once for every role "
                f"with {chosen.baseline}.{key}",
            )

"""The actor/critic topology rule: with a shared placement, one parallel layout for both roles."""

from __future__ import annotations

from collections.abc import Iterable

from omegaconf import DictConfig, OmegaConf

from verl_roles.errors import Problem
from verl_roles.layout import ENGINE_KEY, ROLE_SECTIONS, TOPOLOGY_SETTING, engine
from verl_roles.rules.values import critic_in_use


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
                f"no per-role value, or {critic_block}.{key}={a}; or set {TOPOLOGY_SETTING}=false if your "
                "trainer places the critic on its own GPUs"
            ),
        )

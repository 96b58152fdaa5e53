"""What rules read: resolved values by key, and the facts about a config that several rules ask for
(which engine, which roles train, how many GPUs, how many ranks a model replica spans)."""

from __future__ import annotations

from collections.abc import Callable

from omegaconf import DictConfig, OmegaConf

from verl_roles.base.layout import (
    ACTOR,
    CRITIC,
    DP,
    ENGINE_KEY,
    ROLE_SECTIONS,
    ROLES,
    Engine,
    Role,
    engine,
)
from verl_roles.omegaconf_adapter.nodes import ASK_OMEGACONF, select_quickly

UNSET = object()


def get(cfg: DictConfig, key: str) -> object:
    """The resolved value at ``key``, or ``UNSET`` when the key is absent or cannot be resolved."""
    value = select_quickly(cfg, key)
    if value is not ASK_OMEGACONF:
        return value
    try:
        return OmegaConf.select(cfg, key, default=UNSET, throw_on_missing=False)
    except Exception:  # noqa: BLE001 - a broken interpolation is reported where it is resolved
        return UNSET


def is_int(value: object) -> bool:
    """An integer, and not a boolean (``True`` is an ``int`` to Python)."""
    return isinstance(value, int) and not isinstance(value, bool)


def is_number(value: object) -> bool:
    """An integer or a float, and not a boolean."""
    return isinstance(value, int | float) and not isinstance(value, bool)


def get_int(cfg: DictConfig, key: str) -> int | None:
    value = get(cfg, key)
    return value if is_int(value) else None


def count(cfg: DictConfig, key: str) -> int | None:
    """The integer at ``key`` when it is a usable count or size (>= 1); anything else is None here
    (the range table reports it), so the arithmetic rules never divide by zero or a negative size."""
    value = get_int(cfg, key)
    return value if value is not None and value >= 1 else None


def number(cfg: DictConfig, key: str) -> float | None:
    value = get(cfg, key)
    return value if is_number(value) else None


def engine_of(cfg: DictConfig) -> Engine:
    return engine(get(cfg, ENGINE_KEY))


def critic_in_use(cfg: DictConfig) -> bool:
    """verl's rule: ``critic.enable`` decides when set; otherwise only the GAE estimator trains a critic."""
    enable = get(cfg, f"{CRITIC}.enable")
    if isinstance(enable, bool):
        return enable
    return get(cfg, "algorithm.adv_estimator") == "gae"


def critic_off_reason(cfg: DictConfig) -> str:
    """Why no critic is trained (for a config where :func:`critic_in_use` is false)."""
    enable = get(cfg, f"{CRITIC}.enable")
    if enable is not None and enable is not UNSET:
        return f"critic.enable={enable}"
    return f"algorithm.adv_estimator={get(cfg, 'algorithm.adv_estimator')} trains no critic; only gae does"


def ref_off_reason(cfg: DictConfig) -> str:
    """Why no reference policy runs (for a config where :func:`ref_in_use` is false)."""
    return f"no KL term: algorithm.use_kl_in_reward and {ACTOR}.use_kl_loss are false"


# The roles verl builds only under a condition, with the reason it does not: role name -> (runs(cfg),
# why_not(cfg)). Every other role of the layout table runs in every config.
CONDITIONAL_ROLES: dict[str, tuple[Callable[[DictConfig], bool], Callable[[DictConfig], str]]] = {
    "critic": (lambda cfg: critic_in_use(cfg), critic_off_reason),
    "ref": (lambda cfg: ref_in_use(cfg), ref_off_reason),
}


def role_runs(cfg: DictConfig, name: str) -> bool:
    """verl builds the role ``name`` for ``cfg`` (see :data:`CONDITIONAL_ROLES`)."""
    condition = CONDITIONAL_ROLES.get(name)
    return condition is None or condition[0](cfg)


def why_not(cfg: DictConfig, name: str) -> str:
    """Why the role ``name`` does not run for ``cfg`` (for a config where :func:`role_runs` is false)."""
    return CONDITIONAL_ROLES[name][1](cfg)


def trained_role_rows(cfg: DictConfig) -> list[Role]:
    """The layout rows of the roles this config trains (a trained role runs only when its condition
    holds: the critic only when the algorithm trains one)."""
    return [role for role in ROLES if role.trained and role_runs(cfg, role.name)]


def shown_roles(cfg: DictConfig) -> list[Role]:
    """The roles the roles table of ``cfg`` compares: every role but a trained one this config does not
    train (its settings do nothing)."""
    return [role for role in ROLES if not role.trained or role_runs(cfg, role.name)]


def built_roles(cfg: DictConfig) -> list[Role]:
    """The roles verl builds a worker for with ``cfg`` (not the critic when the algorithm trains none, nor
    the reference policy without a KL term): the summary's lines."""
    return [role for role in ROLES if role_runs(cfg, role.name)]


def trained_roles(cfg: DictConfig) -> list[str]:
    """The sections of the roles this config trains (the critic only when the algorithm trains one)."""
    return [role.section for role in trained_role_rows(cfg)]


def gpu_count(cfg: DictConfig) -> int | None:
    per_node, nodes = count(cfg, "trainer.n_gpus_per_node"), count(cfg, "trainer.nnodes")
    return per_node * nodes if per_node and nodes else None


def role_name(section: str) -> str:
    """The name of the role whose section is ``section``."""
    return next(name for name, path in ROLE_SECTIONS.items() if path == section)


def model_parallel(cfg: DictConfig, role: str) -> tuple[int, str]:
    """Ranks one model replica spans for ``role`` and how that product is spelled
    (``TP*PP*CP = 2*1*1``), from the engine's model-parallel keys."""
    names = engine_of(cfg).model_parallel_keys(role_name(role))
    sizes = [count(cfg, f"{role}.{key}") or 1 for _, key in names]
    product = 1
    for size in sizes:
        product *= size
    spelled = f"{'*'.join(label for label, _ in names)} = {'*'.join(map(str, sizes))}"
    return product, spelled


def kl_in_reward(cfg: DictConfig) -> bool:
    return get(cfg, "algorithm.use_kl_in_reward") is True


def kl_loss(cfg: DictConfig) -> bool:
    return get(cfg, f"{ACTOR}.use_kl_loss") is True


def ref_in_use(cfg: DictConfig) -> bool:
    """verl's rule: a reference policy runs for a KL term, in the reward or in the actor's loss."""
    return kl_in_reward(cfg) or kl_loss(cfg)


def lora_on_policy(cfg: DictConfig) -> str | None:
    """The setting that puts a LoRA adapter on the policy (``model.lora.rank=8``, an adapter path), or
    None. verl then computes the reference log-probs with the actor's engine, the adapter switched off,
    and builds no reference engine (trainer_base.py / main_ppo_v0.py: ``ref_in_actor``)."""
    rank = get(cfg, "actor_rollout_ref.model.lora.rank")
    if is_int(rank) and rank > 0:
        return f"actor_rollout_ref.model.lora.rank={rank}"
    adapter = get(cfg, "actor_rollout_ref.model.lora.adapter_path")
    if adapter not in (None, UNSET):
        return f"actor_rollout_ref.model.lora.adapter_path={adapter}"
    return None


def ref_engine_built(cfg: DictConfig) -> bool:
    """verl builds an engine of the reference policy: a KL term needs one, and no LoRA adapter lets the
    actor stand in for it."""
    return ref_in_use(cfg) and lora_on_policy(cfg) is None




def fsdp_roles_in_use(cfg: DictConfig) -> list[tuple[str, str]]:
    """(role name, section) of each role verl builds an FSDP engine for with this config."""
    if engine_of(cfg) is not DP:
        return []
    return [(role.name, role.section) for role in ROLES if role.engine_block and role_runs(cfg, role.name)]

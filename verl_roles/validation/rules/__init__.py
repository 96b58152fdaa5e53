"""Every validation rule the main job runs, in one package: the runner (:mod:`.runner`), what rules read
(:mod:`.values`), the declarative tables (:mod:`.tables`), the rules on single values
(:mod:`.schema_rules`), across keys (:mod:`.cross_key`), on the LoRA blocks (:mod:`.lora`) and on the
actor/critic topology (:mod:`.topology`), and what stops the steps before they start
(:mod:`.sections`).

The rules refuse what verl refuses, no more. Names verl looks up in a registry users extend (advantage
estimators, policy loss modes, reward managers) are never refused: an unknown one is a notice naming
verl's built-in list.
"""

from __future__ import annotations

from verl_roles.validation.rules import batching, cross_key, lora, schema_rules, tables, topology
from verl_roles.validation.rules.runner import Notice, Rule, validate

# Every rule, in the order they report.
RULES: tuple[Rule, ...] = (
    schema_rules.values_have_their_declared_type,
    schema_rules.mandatory_values_are_set,
    cross_key.strategies_match_the_engine,
    cross_key.parallel_sizes_fit_the_gpus,
    cross_key.batch_sizes_are_consistent,
    batching.micro_batches_are_set_as_verl_reads_them,
    batching.rollout_replicas_fit_the_gpus,
    batching.rollout_expert_parallel_fits_the_replica,
    tables.values_come_from_their_known_set,
    tables.values_are_in_range,
    schema_rules.every_value_is_usable,
    cross_key.ulysses_size_is_set_one_way,
    cross_key.sequence_parallel_needs_remove_padding,
    cross_key.sampled_validation_needs_a_temperature,
    cross_key.custom_reward_function_is_named,
    tables.required_paths_are_set,
    lora.lora_blocks_are_valid,
    topology.actor_and_critic_share_topology,
    topology.roles_in_one_process_share_the_parallel_state,
)

# Every notice, in the order they warn.
NOTICES: tuple[Notice, ...] = (tables.registry_names_are_known,)

__all__ = ["NOTICES", "RULES", "Notice", "Rule", "validate"]

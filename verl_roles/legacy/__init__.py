"""Legacy key paths: the one table of old key -> current key, and where it is applied.

verl's config moved keys over time (flat LoRA keys became the ``lora`` block, the FSDP critic's
``critic.model.fsdp_config`` became ``critic.fsdp``, the top-level ``reward_model`` /
``custom_reward_function`` / ``sandbox_fusion`` sections became the ``reward`` section). Old launch
scripts and old config files must keep working without a silent change, so every legacy key is
translated to its current key and each use is warned about, naming the old key, the new key and the
value; an old key with no current equivalent (:data:`REMOVED_KEYS`) is an error naming what replaced
it, or, for a value that is what verl does anyway, dropped with a warning:

- command-line overrides are translated *before* Hydra composes (otherwise Hydra rejects the old
  key as "not in struct"): :func:`read_command_line` rewrites the overrides of the one
  :class:`~verl_roles.inputs.cmdline.CommandLine` (never a flag's value), for ``verl_roles.compose``,
  ``python -m verl_roles.main`` (which hands the rewritten arguments to the Hydra app, so multirun
  sweeps such as ``...lora_rank=8,16`` translate too) and ``verl-roles explain``;
- config files (a ``--config-dir`` primary config, a role option) are composed as they are, then
  :func:`normalize_config` moves any legacy key found in the composed config (pipeline step
  "normalise legacy", before validation).

Setting the old and the new key to different values is an error naming both.
``verl-roles migrate`` (:mod:`verl_roles.migrate`) prints the modern command line once and for all.
"""

from verl_roles.legacy.command_line import (  # noqa: F401 - the package's names
    ConfigPathMove,
    Removal,
    TranslatedCommand,
    Translation,
    config_path_move,
    deprecated_config_warning,
    migrate_overrides,
    read_command_line,
    translate_command,
    translate_override,
)
from verl_roles.legacy.config_files import (  # noqa: F401 - the package's names
    LegacyMove,
    LegacyReport,
    normalize_config,
)
from verl_roles.legacy.tables import (  # noqa: F401 - the package's names
    _REWARD_REASON,
    _RM_WORKER,
    LEGACY_CONFIG_NAMES,
    LEGACY_KEYS,
    MIGRATE_HINT,
    REMOVED_KEYS,
    LegacyKey,
    RemovedKey,
    find,
    find_removed,
    old_key_label,
    removed_problem,
    removed_warning,
    renamed_between,
)

"""The mappings verl passes on, as they are, to another library: what reads their keys is that library.

verl hands some sections of its config unchanged to a call of another library, as keyword arguments
(``ray.init(**ray_kwargs.ray_init)``) or as one mapping (a Hugging Face config's overrides). A key of
such a section is not verl's to know: it is right when the receiving call takes it. So the gate judges
a key added there by what that call accepts, not by verl's config:

- a key our schema types (``ray_kwargs.ray_init.num_cpus``) keeps its type check;
- where the call's parameter names are knowable mechanically, they are frozen from the Ray (or other
  library) installed with each verl release by scripts/freeze_verl_reference.py (a name list of the
  release data, :attr:`PassedOn.parameters`): another name is refused (the call would raise at launch),
  with the nearest real name as did-you-mean;
- otherwise the section is a free mapping: any key is accepted silently.

One row per section; ``*`` stands for any one key. Each row says which library receives the mapping,
through which call, and where verl makes that call (file, then the call as verl writes it; the line
differs between releases, the file and call do not). tests/test_passed_on.py proves every row names a
section some release has, and that the gate gives one verdict through every channel.
"""

from __future__ import annotations

from dataclasses import dataclass
from fnmatch import fnmatchcase
from functools import lru_cache

from verl_roles.base.layout import ENGINE_TABLE, MODEL_SECTIONS, ROLES, TRAINED_SECTIONS


@dataclass(frozen=True)
class PassedOn:
    """A section verl passes on to ``library`` through ``call`` (made at ``verl_source``). ``parameters``:
    the release name list holding the keyword names the call accepts, or empty when they are not known
    (then any key is accepted)."""

    section: str
    library: str
    call: str
    verl_source: str
    parameters: str = ""

    def section_of(self, path: str) -> str:
        """The section of this row that holds ``path`` (the pattern with its ``*`` filled in)."""
        return ".".join(path.split(".")[: self.section.count(".") + 1])

    def matches(self, section: str) -> bool:
        return fnmatchcase(section, self.section) and section.count(".") == self.section.count(".")


_MODELS = MODEL_SECTIONS
# The Megatron-Core blocks of the roles (every engine whose role blocks are verl's McoreEngineConfig).
_MEGATRON_BLOCKS = tuple(dict.fromkeys(
    f"{role.section}.{row.block(role.name)}" for row in ENGINE_TABLE if row.mcore for role in ROLES
    if role.engine_block))
_ROLLOUT = "verl/workers/rollout"

PASSED_ON: tuple[PassedOn, ...] = (
    PassedOn("ray_kwargs.ray_init", "Ray", "ray.init(**ray_kwargs.ray_init)",
             "verl/trainer/main_ppo.py: ray.init(**OmegaConf.to_container(ray_init_kwargs))",
             parameters="ray_init_parameter"),
    # Merged over verl's own runtime env; Ray hands a field it does not know to a runtime-env plugin.
    PassedOn("ray_kwargs.ray_init.runtime_env", "Ray", "ray.init(runtime_env=...)",
             "verl/trainer/main_ppo.py: OmegaConf.merge(default_runtime_env, runtime_env_kwargs)"),
    PassedOn("actor_rollout_ref.rollout.engine_kwargs.vllm", "vLLM",
             "vLLM's engine arguments (**engine_kwargs)",
             f"{_ROLLOUT}/vllm_rollout/vllm_async_server.py: **engine_kwargs"),
    PassedOn("actor_rollout_ref.rollout.engine_kwargs.sglang", "SGLang",
             "SGLang's ServerArgs (**engine_kwargs)",
             f"{_ROLLOUT}/sglang_rollout/async_sglang_server.py: **engine_kwargs"),
    PassedOn("actor_rollout_ref.rollout.engine_kwargs.trtllm", "TensorRT-LLM",
             "TensorRT-LLM's LLM arguments (**engine_kwargs)",
             f"{_ROLLOUT}/trtllm_rollout/trtllm_async_server.py: **engine_kwargs"),
    *(PassedOn(f"{model}.override_config", "Hugging Face transformers",
               "attributes set on the model's config (update_model_config)",
               "verl/workers/config/model.py: update_model_config(self.hf_config, "
               "override_config_kwargs=override_config_kwargs)")
      for model in _MODELS),
    *(PassedOn(f"{block}.override_transformer_config", "Megatron-Core", "TransformerConfig(**...)",
               "verl/models/mcore/config_converter.py: "
               "base_config.update(override_transformer_config_kwargs)")
      for block in _MEGATRON_BLOCKS),
    *(PassedOn(f"{block}.override_ddp_config", "Megatron-Core", "DistributedDataParallelConfig(**...)",
               "verl/workers/engine/megatron/transformer_impl.py: engine_config.override_ddp_config")
      for block in _MEGATRON_BLOCKS),
    *(PassedOn(f"{section}.optim.override_optimizer_config", "Megatron-Core", "OptimizerConfig(**...)",
               "verl/utils/megatron/optimizer.py: optim_config.get(\"override_optimizer_config\", {})")
      for section in TRAINED_SECTIONS),
    PassedOn("data.apply_chat_template_kwargs", "Hugging Face transformers",
             "tokenizer.apply_chat_template(**apply_chat_template_kwargs)",
             "verl/utils/dataset/rl_dataset.py: dict(**self.apply_chat_template_kwargs)"),
    PassedOn("data.mm_processor_kwargs", "Hugging Face transformers",
             "the multimodal processor's keyword arguments",
             "verl/utils/dataset/rl_dataset.py: mm_processor_kwargs=self.mm_processor_kwargs"),
    PassedOn("global_profiler.global_tool_config.nsys.controller_nsight_options", "Ray",
             "runtime_env={\"nsight\": ...} of the task runner",
             "verl/trainer/main_ppo.py: task_runner_class.options(runtime_env={\"nsight\": nsight_options})"),
    PassedOn("global_profiler.global_tool_config.nsys.worker_nsight_options", "Ray",
             "runtime_env={\"nsight\": ...} of the worker groups",
             "verl/trainer/ppo/ray_trainer.py: wg_kwargs[\"worker_nsight_options\"]"),
)


@lru_cache(maxsize=4096)
def passed_on(section: str) -> PassedOn | None:
    """The row of the section ``section`` when verl passes it on, else None (asked for every section of
    every composition: remembered)."""
    for row in PASSED_ON:
        if row.matches(section):
            return row
    return None


def inside(path: str) -> PassedOn | None:
    """The row of the nearest section holding ``path`` (or being it) that verl passes on."""
    parts = path.split(".")
    for end in range(len(parts), 0, -1):
        row = passed_on(".".join(parts[:end]))
        if row is not None:
            return row
    return None

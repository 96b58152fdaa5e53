"""The verl side of the acceptance suite: what the installed verl does with a config before it starts Ray.

Run by ``tests/test_verl_acceptance.py`` in a Python where verl is importable (``VERL_PYTHON``),
once for every case, because importing verl takes seconds:

    VERL_PYTHON tests/verl_driver.py MANIFEST.json RESULTS.json   (cases in the manifest or on stdin)
    VERL_PYTHON tests/verl_driver.py --build-model DIR      (only the tiny model)
    VERL_PYTHON tests/verl_driver.py --build-data FILE      (only the tiny parquet data set)

It imports verl and never verl_roles. The manifest names a folder for the tiny Hugging Face model this
driver builds (nothing is downloaded: the caller sets HF_HUB_OFFLINE=1), a scratch folder, and the
cases: a run directory written by ``python -m verl_roles.main`` and, for the control, the same
overrides to compose with verl's own config tree. For each case, in order, each step recorded as
``ok``, ``failed`` (with verl's error, normalised) or ``n/a`` (verl would not run it for this config):

1. verl's own pre-Ray checks, as ``verl-roles launch`` runs them: ``verl_roles/upstream/verl_prelaunch.py``,
   loaded by file path (its docstring lists them): ``validate_config``; ``convert <section>``, every
   ``omega_conf_to_dataclass`` call the installed release makes on the path of ``python -m
   verl.trainer.main_ppo`` (the kinds the package's release data lists, generated from the calls frozen
   in tests/data/verl-<release>/); ``worker init_model`` and ``critic worker``, verl's workers built on
   CPU over a fake process group. :func:`call_site_audit` checks the frozen calls against the installed
   verl's source (a verl that moves a call is noticed) and against the kinds the checks know.
2. ``entry_point``: ``verl.trainer.main_ppo.main`` with ``--config-path RUN_DIR --config-name resolved``,
   only ``run_ppo`` replaced (``verl_reach_ray.py``): it must reach the point where Ray would start.

The control runs verl's own entry point on the case's overrides with its own config tree, then the
same checks on the config it built, so every result can be read against what verl itself does.
The read-back (:data:`READBACK`) takes, from the dataclass objects the conversions built, the per-role
values that decide how a run behaves; the test compares them with resolved.yaml and roles/*.yaml.
Results are plain JSON, byte-identical for identical inputs (scratch paths and addresses normalised).
"""

from __future__ import annotations

import contextlib
import fnmatch
import functools
import importlib.util
import json
import math
import os
import sys
import traceback
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

ERROR_CHARS = 600


# --------------------------------------------------------------------------------------------------
# The tiny model: a config.json transformers accepts and a word-level tokenizer; no weights (verl's
# config conversions read the config, the tokenizer and the generation config, never the weights).
# --------------------------------------------------------------------------------------------------

SPECIAL_TOKENS = {
    "pad_token": "<|pad|>",
    "bos_token": "<|bos|>",
    "eos_token": "<|eos|>",
    "unk_token": "<|unk|>",
}


def build_tiny_model(model_dir: Path) -> None:
    """Write a two-layer Qwen2-style causal LM's config.json and a tokenizer into ``model_dir``."""
    from tokenizers import Tokenizer, models, pre_tokenizers

    model_dir.mkdir(parents=True, exist_ok=True)
    words = [chr(code) for code in range(ord("a"), ord("z") + 1)] + [str(digit) for digit in range(10)]
    vocab = {token: index for index, token in enumerate([*SPECIAL_TOKENS.values(), *words])}
    tokenizer = Tokenizer(models.WordLevel(vocab=vocab, unk_token=SPECIAL_TOKENS["unk_token"]))
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
    tokenizer.save(str(model_dir / "tokenizer.json"))
    tokenizer_config = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "model_max_length": 4096,
        "chat_template": "{% for message in messages %}{{ message['content'] }}\n{% endfor %}",
        **SPECIAL_TOKENS,
    }
    model_config = {
        "architectures": ["Qwen2ForCausalLM"],
        "model_type": "qwen2",
        "vocab_size": 64,
        "hidden_size": 16,
        "intermediate_size": 32,
        "num_hidden_layers": 2,
        "num_attention_heads": 2,
        "num_key_value_heads": 1,
        "max_position_embeddings": 4096,
        "tie_word_embeddings": True,
        "pad_token_id": vocab[SPECIAL_TOKENS["pad_token"]],
        "bos_token_id": vocab[SPECIAL_TOKENS["bos_token"]],
        "eos_token_id": vocab[SPECIAL_TOKENS["eos_token"]],
        "torch_dtype": "bfloat16",
    }
    for name, content in (("tokenizer_config.json", tokenizer_config), ("config.json", model_config)):
        (model_dir / name).write_text(json.dumps(content, indent=2, sort_keys=True) + "\n", encoding="utf-8")


def build_tiny_data(parquet: Path, rows: int = 8) -> None:
    """A parquet file of ``rows`` prompts in the columns verl's RLHFDataset and its default reward read
    (a chat ``prompt``, ``data_source``, ``reward_model.ground_truth``), in the tiny tokenizer's words."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    parquet.parent.mkdir(parents=True, exist_ok=True)
    table = [
        {
            "data_source": "openai/gsm8k",
            "prompt": [{"role": "user", "content": f"what is {index} plus {index}"}],
            "ability": "math",
            "reward_model": {"style": "rule", "ground_truth": str(2 * index)},
            "extra_info": {"index": index, "split": "train"},
        }
        for index in range(rows)
    ]
    pq.write_table(pa.Table.from_pylist(table), parquet)


# -------------------------------------------------------------------------------------------------- verl's
# own pre-Ray checks live in the package (verl_roles/upstream/verl_prelaunch.py, which `verl-roles launch`
# runs too); this driver loads that file by path (verl_roles need not be importable here) and adds what only
# the tests do: the control through verl's own tree, the entry point, the read-back and the audit.
# --------------------------------------------------------------------------------------------------

REPO = Path(__file__).resolve().parent.parent
DATA = REPO / "tests" / "data"
PRELAUNCH = REPO / "verl_roles" / "upstream" / "verl_prelaunch.py"
RELEASES = REPO / "verl_roles" / "upstream" / "verl_releases"


def load_prelaunch() -> Any:
    """verl_roles/upstream/verl_prelaunch.py as a module of its own (registered, as dataclasses need)."""
    spec = importlib.util.spec_from_file_location("verl_prelaunch", PRELAUNCH)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


prelaunch = load_prelaunch()


def frozen_calls(version: str) -> list[dict[str, Any]] | None:
    """The conversion calls frozen for verl ``version`` (None: no frozen reference of it)."""
    path = DATA / f"verl-{version}" / "conversions.json"
    return json.loads(path.read_text(encoding="utf-8"))["calls"] if path.is_file() else None


@functools.cache
def made_by(version: str) -> frozenset[tuple[str, str | None]]:
    """(section, dataclass) of every conversion verl ``version`` makes: the data the package ships for
    it, as `verl-roles launch` hands it to the checks (none for a release it does not ship)."""
    path = RELEASES / f"{version}.json"
    return prelaunch.release_conversions(path) if path.is_file() else frozenset()


def call_site_audit(verl_root: Path, version: str) -> dict[str, list[str]]:
    """The installed verl's ``omega_conf_to_dataclass(`` calls must be the frozen ones of its release
    (else the reference is stale: freeze it again), and each frozen call must be a kind of the checks'
    CONVERSIONS or in their ELSEWHERE. Returns the discrepancies."""
    found: set[str] = set()
    for path in sorted(verl_root.rglob("*.py")):
        relative = f"verl/{path.relative_to(verl_root).as_posix()}"
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
            if "omega_conf_to_dataclass(" in line and not line.lstrip().startswith("def "):
                found.add(f"{relative}:{number}")
    calls = frozen_calls(version)
    if calls is None:
        return {"unlisted": sorted(found), "stale": [f"no frozen reference tests/data/verl-{version}/"],
                "uncovered": [], "count": [str(len(found))]}
    frozen = {f"{call['file']}:{call['line']}" for call in calls}
    kinds = {conversion.frozen for conversion in prelaunch.CONVERSIONS}
    excused = prelaunch.ELSEWHERE
    uncovered = sorted(
        f"{call['file']}:{call['line']} ({call['section']}, {call['dataclass_type']})" for call in calls
        if (call["section"], call["dataclass_type"]) not in kinds and call["section"] not in excused
    )
    return {"unlisted": sorted(found - frozen), "stale": sorted(frozen - found), "uncovered": uncovered,
            "count": [str(len(found))]}


# --------------------------------------------------------------------------------------------------
# Read-back: values verl's objects carry, named by the key that sets them in the role's section.
# Rows: (role, engines the row applies to, key in the role's section, attribute path on the object).
# --------------------------------------------------------------------------------------------------

MEGATRON_ENGINE_KEYS = (
    "tensor_model_parallel_size",
    "pipeline_model_parallel_size",
    "virtual_pipeline_model_parallel_size",
    "context_parallel_size",
    "expert_model_parallel_size",
    "expert_tensor_parallel_size",
    "sequence_parallel",
    "param_offload",
    "optimizer_offload",
    "grad_offload",
)
FSDP_ENGINE_KEYS = ("ulysses_sequence_parallel_size", "param_offload", "optimizer_offload", "offload_policy")


def _engine_rows(role: str, block: str) -> list[tuple[str, str, str, str]]:
    megatron = [(role, "megatron", f"megatron.{key}", f"engine.{key}") for key in MEGATRON_ENGINE_KEYS]
    fsdp = [(role, "fsdp", f"{block}.{key}", f"engine.{key}") for key in FSDP_ENGINE_KEYS]
    return megatron + fsdp


READBACK: tuple[tuple[str, str, str, str], ...] = (
    *_engine_rows("actor", "fsdp_config"),
    ("actor", "any", "optim.lr", "optim.lr"),
    ("actor", "any", "ppo_mini_batch_size", "ppo_mini_batch_size"),
    ("actor", "any", "ppo_micro_batch_size_per_gpu", "ppo_micro_batch_size_per_gpu"),
    *_engine_rows("ref", "fsdp_config"),
    # The engine worker renames the reference policy's log-prob batch keys before converting.
    ("ref", "any", "log_prob_micro_batch_size_per_gpu", "ppo_micro_batch_size_per_gpu"),
    *_engine_rows("critic", "fsdp"),
    ("critic", "any", "optim.lr", "optim.lr"),
    ("critic", "any", "ppo_micro_batch_size_per_gpu", "ppo_micro_batch_size_per_gpu"),
    ("critic", "any", "model.use_remove_padding", "model.use_remove_padding"),
    ("rollout", "any", "tensor_model_parallel_size", "tensor_model_parallel_size"),
    ("rollout", "any", "log_prob_micro_batch_size_per_gpu", "log_prob_micro_batch_size_per_gpu"),
    ("rollout", "megatron", "layer_name_map", "layer_name_map"),
    ("model", "any", "use_remove_padding", "use_remove_padding"),
    # LoRA as each engine reads it: FSDP from the flat keys, Megatron from the structured block.
    ("model", "fsdp", "lora.rank", "lora_rank"),
    ("model", "fsdp", "lora.alpha", "lora_alpha"),
    ("model", "fsdp", "lora.target_modules", "target_modules"),
    ("model", "megatron", "lora.rank", "lora.rank"),
    ("model", "megatron", "lora.alpha", "lora.alpha"),
    ("model", "megatron", "lora.target_modules", "lora.target_modules"),
    (
        "model",
        "megatron",
        "override_config.moe_config.freeze_moe_router",
        "override_config.moe_config.freeze_moe_router",
    ),
)

# The conversions whose objects a role's values are read from, first available wins.
ROLE_CONVERSIONS = {
    "actor": ("convert actor_rollout_ref.actor",),
    "ref": ("convert actor_rollout_ref.ref",),
    "critic": ("convert critic",),
    "rollout": ("convert actor_rollout_ref.rollout",),
    "model": ("convert actor_rollout_ref.model", "convert actor_rollout_ref.model as HFModelConfig"),
}

NO_SUCH_FIELD = "<verl has no such field>"


def read_attribute(obj: Any, path: str) -> Any:
    """Follow a dotted path through dataclass attributes and dict keys."""
    for part in path.split("."):
        if isinstance(obj, dict):
            if part not in obj:
                return NO_SUCH_FIELD
            obj = obj[part]
        elif hasattr(obj, part):
            obj = getattr(obj, part)
        else:
            return NO_SUCH_FIELD
    return plain(obj)


def plain(value: Any) -> Any:
    """A JSON value for a leaf verl holds (OmegaConf containers and tuples become lists and dicts)."""
    from omegaconf import DictConfig, ListConfig, OmegaConf

    if isinstance(value, DictConfig | ListConfig):
        value = OmegaConf.to_container(value, resolve=True)
    if isinstance(value, tuple | list):
        return [plain(item) for item in value]
    if isinstance(value, dict):
        return {str(key): plain(item) for key, item in value.items()}
    if isinstance(value, float) and not math.isfinite(value):
        return repr(value)
    if value is None or isinstance(value, bool | int | float | str):
        return value
    return f"<{type(value).__name__}>"


def engine_family(strategy: Any) -> str:
    return (
        "megatron"
        if strategy == "megatron"
        else "fsdp"
        if str(strategy).startswith("fsdp")
        else str(strategy)
    )


def read_back(objects: dict[str, Any], cfg: Any) -> list[dict[str, Any]]:
    """The :data:`READBACK` rows for the roles that converted; the engine is the one the config names."""
    families = {
        "critic": engine_family(cfg.critic.get("strategy", None)),
        "other": engine_family(cfg.actor_rollout_ref.actor.get("strategy", None)),
    }
    rows = []
    for role, engines, key, attribute in READBACK:
        source = next((objects[step] for step in ROLE_CONVERSIONS[role] if step in objects), None)
        if source is None or engines not in ("any", families["critic" if role == "critic" else "other"]):
            continue
        rows.append({"role": role, "key": key, "verl": read_attribute(source, attribute)})
    return rows


# --------------------------------------------------------------------------------------------------
# Running the steps.
# --------------------------------------------------------------------------------------------------

Normaliser = prelaunch.Normaliser
CaseRun = prelaunch.Steps
quietly = prelaunch.quietly


@functools.cache
def verl_version() -> str:
    import verl

    return verl.__version__


def run_entry_point(argv: list[str], run: CaseRun, normalise: Normaliser) -> Any:
    """verl's Hydra entry point up to ``run_ppo``; returns the config it built, or None."""
    from verl_reach_ray import run_until_ray

    try:
        reached = quietly(lambda: run_until_ray(argv))
    except BaseException as error:  # noqa: BLE001 - Hydra may exit; that is a result too
        if isinstance(error, KeyboardInterrupt):
            raise
        run.record("entry_point", "failed", normalise(error))  # Hydra's own frames: no verl frame to name
        return None
    run.record("entry_point", "ok", None)
    run.steps[-1]["task_runner"] = reached.task_runner
    return reached.config


def check_case(case: dict[str, Any], normalise: Normaliser, known: list[list[str]]) -> dict[str, Any]:
    """Our run directory's steps (none when verl_roles refused the overrides), then the control."""
    run, readback = CaseRun(), []
    if case.get("run_dir") is not None:
        run_dir = Path(case["run_dir"])
        normalise = Normaliser({**normalise.replacements, str(run_dir): "<run dir>"})
        cfg = check_run_dir(run_dir, run, normalise)
        readback = [] if cfg is None else read_back(run.objects, cfg)
    result: dict[str, Any] = {"steps": run.steps, "readback": readback}
    unknown = any(
        step["status"] == "failed" and not is_known(case["name"], step, known) for step in run.steps
    )
    if case.get("control") == "always" or (case.get("control") == "on unknown failure" and unknown):
        result["control"] = check_control(case["control_overrides"], normalise)
    return result


def is_known(case: str, step: dict[str, Any], known: list[list[str]]) -> bool:
    """Whether a known-failure row of the caller (case glob, step glob, error text) explains a failed step."""
    return any(
        fnmatch.fnmatchcase(case, cases)
        and fnmatch.fnmatchcase(step["step"], steps)
        and error in step["error"]
        for cases, steps, error in known
    )


def check_run_dir(run_dir: Path, run: CaseRun, normalise: Normaliser) -> Any:
    """verl's checks (verl_roles/upstream/verl_prelaunch.py), then the entry point, on a run directory;
    returns resolved.yaml as loaded (None if it does not load)."""
    try:
        cfg = prelaunch.load_like_hydra(run_dir / "resolved.yaml")
    except Exception as error:  # noqa: BLE001
        run.failed("load resolved.yaml", error, normalise)
        return None
    prelaunch.check_config(cfg, run, normalise, made_by(verl_version()))
    run_entry_point(["--config-path", str(run_dir), "--config-name", "resolved"], run, normalise)
    return cfg


def check_control(overrides: list[str], normalise: Normaliser) -> dict[str, Any]:
    """The same overrides through verl's own config tree and entry point, then its conversions."""
    run = CaseRun()
    cfg = run_entry_point(list(overrides), run, normalise)
    if cfg is not None:
        from omegaconf import OmegaConf

        # What every release validates on the way (verl 0.8.0 in its TaskRunner, after run_ppo starts
        # Ray; later ones in main, before it), so the control fails where the environment does.
        prelaunch.run_validate(cfg, run, normalise)
        # As both task runners do before building workers (main_ppo_v0.py:166, main_ppo.py:145).
        OmegaConf.resolve(cfg)
        made = made_by(verl_version())
        prelaunch.run_conversions(cfg, run, normalise, made)
        prelaunch.run_worker_steps(cfg, run, normalise, made)
    return {"steps": run.steps}


@contextlib.contextmanager
def working_directory(path: Path) -> Iterator[None]:
    """Hydra writes its outputs/ folder into the working directory: keep it in the scratch folder."""
    path.mkdir(parents=True, exist_ok=True)
    saved = Path.cwd()
    os.chdir(path)
    try:
        yield
    finally:
        os.chdir(saved)


def main(manifest_path: str, results_path: str) -> int:
    """Check every case of the manifest; with no ``cases`` there, read them from stdin, one JSON object
    a line, as the caller composes them (verl is imported and the first cases checked meanwhile)."""
    manifest = json.loads(Path(manifest_path).read_text(encoding="utf-8"))
    model_dir, work_dir = Path(manifest["model_dir"]), Path(manifest["work_dir"])
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import verl

    quietly(lambda: prelaunch.import_checks(warm=True))  # before the pool forks: every step starts warm
    build_tiny_model(model_dir)
    verl_root = Path(verl.__file__).resolve().parent
    normalise = Normaliser({str(model_dir): "<model>", str(work_dir): "<work>", str(verl_root): "<verl>"})
    results: dict[str, Any] = {
        "verl_version": verl.__version__, "call_sites": call_site_audit(verl_root, verl.__version__)}
    check = functools.partial(
        check_case_safely, normalise=normalise, known=manifest.get("known_failures", [])
    )
    cases = (
        manifest["cases"] if "cases" in manifest else (json.loads(line) for line in sys.stdin if line.strip())
    )
    names: list[str] = []

    def named(items: Iterable[dict[str, Any]]) -> Iterator[dict[str, Any]]:
        for case in items:
            names.append(case["name"])
            yield case

    with working_directory(work_dir / "hydra_cwd"):
        if int(manifest.get("jobs", 1)) > 1:
            # Forked after verl is imported, so each worker starts warm; imap keeps the input order.
            import multiprocessing

            with multiprocessing.get_context("fork").Pool(int(manifest["jobs"])) as pool:
                outcomes = list(pool.imap(check, named(cases), chunksize=1))
        else:
            outcomes = [check(case) for case in named(cases)]
    results["cases"] = dict(zip(names, outcomes, strict=True))
    Path(results_path).write_text(json.dumps(results, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    return 0


def check_case_safely(case: dict[str, Any], normalise: Normaliser, known: list[list[str]]) -> dict[str, Any]:
    try:
        return check_case(case, normalise, known)
    except Exception:  # noqa: BLE001 - a driver bug must not hide the other cases
        return {"driver_error": traceback.format_exc()}


if __name__ == "__main__":
    # For tests that run verl themselves (tests/test_launch.py): the tiny model, the tiny data set.
    if sys.argv[1:2] == ["--build-model"]:
        build_tiny_model(Path(sys.argv[2]))
        sys.exit(0)
    if sys.argv[1:2] == ["--build-data"]:
        build_tiny_data(Path(sys.argv[2]))
        sys.exit(0)
    sys.exit(main(*sys.argv[1:3]))

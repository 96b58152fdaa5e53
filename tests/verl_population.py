"""A population of command lines drawn from verl's own launches, for the oracle property (issue 27).

verl judges what "accepted" means, per release, on configs nobody listed: each draw is a launch of the
frozen corpus (tests/data/verl_examples/, the launches the release's own config tree composes) or a bare
engine default, with a few mutations of the kinds a user makes to a launch (batch and micro batch sizes,
GPUs and nodes, parallel sizes, KL and dynamic-batch switches, estimators, engines, per-role values,
rollout backend and group size, LoRA, a dropped override). Draws are seeded: the same release, seed and
index give the same command line on every machine.

A draw has one token list, as verl's launch script would type it; :meth:`Draw.ours` is the same line for
verl_roles (a ``--config-path`` naming verl's own config folder dropped: our tree is its counterpart).
The model path is the placeholder :data:`MODEL`, replaced by the tiny local model when a draw runs.

Used by tests/test_verl_acceptance.py (the properties) and scripts/verl_oracle.py (the long run with a
report of every disagreement, by class).
"""

from __future__ import annotations

import json
import random
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path

DATA = Path(__file__).resolve().parent / "data"
EXAMPLES = DATA / "verl_examples"
MODEL = "{model}"  # replaced by the tiny model's folder when a case is composed

# Keys that name a Hugging Face model or tokenizer: an example's hub id is replaced by the tiny model.
MODEL_PATH_KEY = re.compile(r"(^|\.)(model\.(path|hf_config_path|tokenizer_path)|model_path|tokenizer_path)$")
CONFIG_OPTION = re.compile(r"(--config-path|-cp|--config-name|-cn)(?:=(.*))?")
# A --config-path naming verl's own config folder (relative paths are relative to verl's main_ppo.py).
VERL_CONFIG_FOLDERS = ("config", "./config")

ACTOR = "actor_rollout_ref.actor"
REF = "actor_rollout_ref.ref"
ROLLOUT = "actor_rollout_ref.rollout"
CRITIC = "critic"


# --------------------------------------------------------------------------------------------------
# Launches of the corpus.


def read_launch(path: Path) -> list[str]:
    """A launch's arguments (one a line, ``#`` comments), every model path on the tiny model."""
    tokens = []
    for line in path.read_text(encoding="utf-8").splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        key, sep, value = line.partition("=")
        names_a_model = sep and MODEL_PATH_KEY.search(key.lstrip("+~"))
        if names_a_model and value.strip().lower() not in ("null", "none", ""):
            line = f"{key}={MODEL}"
        tokens.append(line)
    if not any(token.partition("=")[0].lstrip("+~") == "actor_rollout_ref.model.path" for token in tokens):
        tokens.append(f"actor_rollout_ref.model.path={MODEL}")
    return tokens


def without_verl_config_path(tokens: list[str]) -> list[str]:
    """``tokens`` without a ``--config-path`` that names verl's own config folder."""
    out, index = [], 0
    while index < len(tokens):
        option = CONFIG_OPTION.fullmatch(tokens[index])
        if option is not None and option.group(1) in ("--config-path", "-cp"):
            inline = option.group(2) is not None
            value = option.group(2) if inline else (tokens[index + 1] if index + 1 < len(tokens) else "")
            if value in VERL_CONFIG_FOLDERS:
                index += 1 if inline else 2
                continue
        out.append(tokens[index])
        index += 1
    return out


def launch_name(path: Path) -> str:
    return f"example:{path.stem}" if path.parent == EXAMPLES else f"example:{path.parent.name}/{path.stem}"


@cache
def verdicts(release: str) -> dict[str, dict[str, dict]]:
    """What the release's own tree does with each corpus launch (scripts/freeze_verl_reference.py)."""
    path = DATA / f"verl-{release}" / "examples_verdicts.json"
    return json.loads(path.read_text(encoding="utf-8"))["verdicts"] if path.exists() else {}


def verl_composes(path: Path, release: str) -> bool:
    """Whether the release's own tree composes this launch (launches outside the frozen corpora are kept)."""
    verdict = verdicts(release).get(path.parent.name, {}).get(path.stem)
    return verdict is None or bool(verdict.get("composes"))


def corpus_launches(release: str) -> list[Path]:
    """Every corpus launch the release's own config tree composes, in a stable order."""
    return [path for path in sorted(EXAMPLES.rglob("*.txt")) if verl_composes(path, release)]


@cache
def verl_keys(release: str) -> frozenset[str]:
    """Every leaf of the release's own composed trainer config, under any of its engines."""
    keys: set[str] = set()
    for path in (DATA / f"verl-{release}" / "composition").glob("*.json"):
        keys.update(json.loads(path.read_text(encoding="utf-8"))["leaves"])
    return frozenset(keys)


# --------------------------------------------------------------------------------------------------
# Draws.


@dataclass(frozen=True)
class Draw:
    """One command line of the population: ``tokens`` as verl's own launch would type them."""

    name: str
    tokens: tuple[str, ...]
    seed: str
    mutations: tuple[str, ...]

    def ours(self) -> tuple[str, ...]:
        return tuple(without_verl_config_path(list(self.tokens)))

    def line(self) -> str:
        """The draw as a user would paste it (the failing draw of a property is printed so)."""
        return " ".join(_quoted(token) for token in self.ours())


def _quoted(token: str) -> str:
    return token if re.fullmatch(r"[\w.+~=:/@{}\-,]*", token) else "'" + token.replace("'", "'\\''") + "'"


def _key(token: str) -> str | None:
    """The key an override token sets (None for a flag such as ``--config-name``)."""
    if token.startswith("-"):
        return None
    return token.partition("=")[0].lstrip("+~")


class Line:
    """A launch being mutated: its tokens, set by key (an existing override is replaced in place)."""

    def __init__(self, tokens: list[str], release: str) -> None:
        self.tokens = list(tokens)
        self.release = release

    def set_keys(self) -> list[str]:
        return [key for token in self.tokens if (key := _key(token)) is not None]

    def value(self, key: str) -> str | None:
        for token in self.tokens:
            if _key(token) == key and not token.startswith("~"):
                return token.partition("=")[2]
        return None

    def set(self, key: str, value: object) -> str:
        text = _override_value(value)
        for index, token in enumerate(self.tokens):
            if _key(token) == key:
                prefix = "+" if token.startswith("+") and not token.startswith("++") else ""
                prefix = "++" if token.startswith("++") else prefix
                self.tokens[index] = f"{prefix}{key}={text}"
                return self.tokens[index]
        exists = key in verl_keys(self.release) or key == "model_engine"
        token = f"{'' if exists else '+'}{key}={text}"
        self.tokens.append(token)
        return token

    def drop(self, key: str) -> None:
        self.tokens = [token for token in self.tokens if _key(token) != key]

    def chose_config_name(self) -> bool:
        return any(CONFIG_OPTION.fullmatch(token) for token in self.tokens)

    def engine(self) -> str:
        if self.chose_config_name() and any("megatron" in token for token in self.tokens if
                                            token.startswith(("--config-name", "-cn"))):
            return "megatron"
        return self.value("model_engine") or "dp"


def _override_value(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


Mutation = Callable[[Line, random.Random], str | None]


def _one_of(key_choices: list[str], values: list[object]) -> Mutation:
    def mutate(line: Line, rng: random.Random) -> str | None:
        return line.set(rng.choice(key_choices), rng.choice(values))

    return mutate


def _toggle(keys: list[str]) -> Mutation:
    def mutate(line: Line, rng: random.Random) -> str | None:
        key = rng.choice(keys)
        current = (line.value(key) or "").lower()
        return line.set(key, current not in ("true", "1"))

    return mutate


def _drop(line: Line, rng: random.Random) -> str | None:
    keys = [key for key in line.set_keys() if key != "actor_rollout_ref.model.path"]
    if not keys:
        return None
    key = rng.choice(keys)
    line.drop(key)
    return f"drop {key}"


def _engine(line: Line, rng: random.Random) -> str | None:
    if line.chose_config_name():
        return None
    other = "megatron" if line.engine() == "dp" else "dp"
    return line.set("model_engine", other)


def _megatron_sizes(line: Line, rng: random.Random) -> str | None:
    if line.engine() != "megatron":
        return None
    role = rng.choice([ACTOR, CRITIC, REF])
    key = rng.choice(["tensor_model_parallel_size", "pipeline_model_parallel_size", "context_parallel_size"])
    return line.set(f"{role}.megatron.{key}", rng.choice([1, 2, 4]))


def _lora(line: Line, rng: random.Random) -> str | None:
    return line.set("actor_rollout_ref.model.lora_rank", rng.choice([0, 8, 32]))


def _rollout_name(line: Line, rng: random.Random) -> str | None:
    return line.set(f"{ROLLOUT}.name", rng.choice(["vllm", "sglang"]))


LORA_RANKS = ("actor_rollout_ref.model.lora_rank", "actor_rollout_ref.model.lora.rank")


def _no_vllm_with_lora(line: Line) -> None:
    """validate_config asks an installed vLLM for its largest LoRA rank; the CPU-only verl has none, so a
    draw with LoRA rolls out with sglang (a fact of the machine, not of the config)."""
    ranks = [line.value(key) for key in LORA_RANKS]
    lora = any(rank not in (None, "0", "null") for rank in ranks)
    if lora and line.value(f"{ROLLOUT}.name") in (None, "vllm"):
        line.set(f"{ROLLOUT}.name", "sglang")


MUTATIONS: dict[str, Mutation] = {
    "train batch": _one_of(["data.train_batch_size"], [8, 16, 32, 60, 64, 128, 256, 512, 1024]),
    "mini batch": _one_of([f"{ACTOR}.ppo_mini_batch_size", f"{CRITIC}.ppo_mini_batch_size"],
                          [4, 8, 16, 32, 64, 128, 256]),
    "micro batch": _one_of(
        [f"{ACTOR}.ppo_micro_batch_size_per_gpu", f"{CRITIC}.ppo_micro_batch_size_per_gpu"],
        [1, 2, 3, 4, 8, 16, 32, None]),
    "log-prob micro batch": _one_of(
        [f"{ROLLOUT}.log_prob_micro_batch_size_per_gpu", f"{REF}.log_prob_micro_batch_size_per_gpu"],
        [1, 2, 4, 8, 16, 32, None]),
    "deprecated micro batch": _one_of(
        [f"{ACTOR}.ppo_micro_batch_size", f"{CRITIC}.ppo_micro_batch_size",
         f"{ROLLOUT}.log_prob_micro_batch_size", f"{REF}.log_prob_micro_batch_size"], [8, 16, 64, 256, None]),
    "gpus": _one_of(["trainer.n_gpus_per_node"], [1, 2, 4, 8]),
    "nodes": _one_of(["trainer.nnodes"], [1, 2]),
    "rollout tp": _one_of([f"{ROLLOUT}.tensor_model_parallel_size"], [1, 2, 4, 8]),
    "megatron sizes": _megatron_sizes,
    "ulysses": _one_of([f"{ACTOR}.ulysses_sequence_parallel_size"], [1, 2]),
    "kl switch": _toggle([f"{ACTOR}.use_kl_loss", "algorithm.use_kl_in_reward"]),
    "kl value": _one_of([f"{ACTOR}.kl_loss_coef", "algorithm.kl_ctrl.kl_coef"], [0.0, 0.001, 0.01]),
    "kl type": _one_of([f"{ACTOR}.kl_loss_type", "algorithm.kl_penalty"], ["kl", "low_var_kl", "mse"]),
    "dynamic switch": _toggle([f"{ACTOR}.use_dynamic_bsz", f"{ROLLOUT}.log_prob_use_dynamic_bsz",
                               f"{REF}.log_prob_use_dynamic_bsz", f"{CRITIC}.use_dynamic_bsz"]),
    "token budget": _one_of([f"{ACTOR}.ppo_max_token_len_per_gpu", f"{CRITIC}.ppo_max_token_len_per_gpu",
                             f"{ROLLOUT}.log_prob_max_token_len_per_gpu"], [4096, 16384, 32768]),
    "estimator": _one_of(["algorithm.adv_estimator"],
                         ["gae", "grpo", "rloo", "reinforce_plus_plus", "remax", "grpo_passk", "opo", "gpg"]),
    "engine": _engine,
    "group size": _one_of([f"{ROLLOUT}.n"], [1, 2, 4, 5, 8, 16]),
    "rollout backend": _rollout_name,
    "learning rate": _one_of([f"{ACTOR}.optim.lr", f"{CRITIC}.optim.lr"], [1e-6, 5e-6, 1e-5, 3e-5]),
    "clip": _one_of([f"{ACTOR}.clip_ratio", f"{ACTOR}.clip_ratio_low", f"{ACTOR}.clip_ratio_high"],
                    [0.2, 0.28, 0.3]),
    "lora": _lora,
    "critic switch": _one_of([f"{CRITIC}.enable"], [True, False, None]),
    "drop": _drop,
}


def bare_seeds() -> list[tuple[str, list[str]]]:
    """The engines' defaults with only the model named: what a user gets from the quick start."""
    model = f"actor_rollout_ref.model.path={MODEL}"
    return [("bare:dp", [model]), ("bare:megatron", ["model_engine=megatron", model])]


def seeds(release: str) -> list[tuple[str, list[str]]]:
    """Every seed a draw starts from: the bare engine defaults, then the corpus launches."""
    return bare_seeds() + [(launch_name(path), read_launch(path)) for path in corpus_launches(release)]


# How often a draw starts from an engine's bare defaults rather than a corpus launch.
BARE_SHARE = 0.15


def draw(release: str, index: int, base_seed: int = 0) -> Draw:
    """Draw ``index`` of the population of ``release``: a seed (an engine's bare defaults or a corpus
    launch) and 0-4 mutations."""
    rng = random.Random(f"{release}/{base_seed}/{index}")
    pool = bare_seeds() if rng.random() < BARE_SHARE else seeds(release)[len(bare_seeds()):]
    seed_name, tokens = rng.choice(pool)
    line = Line(tokens, release)
    applied: list[str] = []
    count = rng.choice([0, 1, 1, 2, 2, 3, 4])
    names = sorted(MUTATIONS)
    for _ in range(count):
        name = rng.choice(names)
        done = MUTATIONS[name](line, rng)
        if done is not None:
            applied.append(done)
    _no_vllm_with_lora(line)
    return Draw(name=f"draw{index}", tokens=tuple(line.tokens), seed=seed_name, mutations=tuple(applied))


def population(release: str, size: int, base_seed: int = 0, start: int = 0) -> Iterator[Draw]:
    """``size`` draws, numbered from ``start``."""
    for index in range(start, start + size):
        yield draw(release, index, base_seed)

"""The catalogue of bad inputs (issue 12): what a careless or hostile user may type or hand us, and
the one rule every entry must meet.

Each :class:`Case` is run as the user runs it: ``python -m verl_roles.main ARGS`` (in this process
through ``verl_roles.main.main``, the same code path, or in a subprocess), ``verl-roles ARGS`` or
``scripts/generate_trainer_config.sh ARGS``, in a fresh folder of its own (``{d}`` in ``args`` and
``files``), which is also the working directory. A run is *clean* when

- it exits with the case's code (2: a user mistake) and prints no Python traceback;
- its message names the key or file (every phrase of ``named``) and a fix (``Fix:`` or "did you mean");
- it wrote nothing: no ``resolved.yaml`` or role file of a failed run, no temporary file, nothing
  outside the run directory (``{d}/run``, or ``{d}/sweep`` for a sweep) changed or created.

Every case that composes a config through plain overrides is also run through the Python API,
``verl_roles.compose``, which must raise :class:`verl_roles.ConfigError` (and nothing else) with a
message naming the same key and a fix.

:data:`KNOWN_FAILURES` is the one list of entries that are not clean yet, each with the reason; the
tests mark them as expected failures (strict: an entry that becomes clean must leave the list).
``python benchmarks/bad_inputs.py`` prints the figures (total / clean / by kind / by failure).
"""

from __future__ import annotations

import contextlib
import csv
import hashlib
import io
import os
import resource
import shutil
import signal
import stat
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
CONF = REPO / "conf"

# The folders a run may write into; everything else in the case's folder must stay as it was.
RUN_DIR = "run"
SWEEP_DIR = "sweep"
ROLE_FILES = ("actor", "critic", "ref", "rollout")

MEGATRON = "model_engine=megatron"


@dataclass(frozen=True)
class Case:
    """One bad input and how it is run.

    ``program``: ``main`` (``python -m verl_roles.main``), ``verl-roles`` or ``snapshot-script``.
    ``runner``: ``in-process`` or ``subprocess``. ``fault``: a condition set up around the run
    (``read-only``, ``full-disk``, ``file-size-limit``, ``unreadable``: the paths of ``unreadable``
    lose every permission, and a root process also its power to ignore them). ``files``: relative
    path -> text (``str``), raw bytes, or :data:`FOLDER`, written into the case's folder first.
    ``setup`` names a change to the checkout copy the snapshot script runs on.
    """

    id: str
    kind: str
    args: tuple[str, ...]
    named: tuple[str, ...]
    files: tuple[tuple[str, str | bytes | None], ...] = ()
    program: str = "main"
    runner: str = "in-process"
    fault: str = ""
    code: int = 2
    setup: str = ""
    unreadable: tuple[str, ...] = ()

    def api_overrides(self) -> tuple[str, list[str], str | None] | None:
        """(config name, overrides, config dir) when the Python API can compose this case, else None."""
        if self.program != "main" or self.fault or self.kind == "sweep":
            return None
        config_name, overrides, config_dir = "ppo_trainer", [], None
        items = list(self.args)
        while items:
            item = items.pop(0)
            if item in ("--config-name", "-cn"):
                config_name = items.pop(0)
            elif item in ("--config-dir", "-cd"):
                config_dir = items.pop(0)
            elif item.startswith("-") or item.startswith("hydra"):
                return None
            else:
                overrides.append(item)
        return config_name, overrides, config_dir


def _case(kind: str, id: str, *args: str, named: str | tuple[str, ...] = (), **extra) -> Case:
    """A case; without ``named``, the message must name the key of the last ``KEY=VALUE`` argument."""
    names = (named,) if isinstance(named, str) else named
    if not names:
        last = [arg for arg in args if "=" in arg or arg.startswith("~")][-1]
        names = (last.split("=", 1)[0].lstrip("~+"),)
    files = tuple(extra.pop("files", {}).items())
    return Case(id=f"{kind}/{id}", kind=kind, args=args, named=names, files=files, **extra)


def override(id: str, *args: str, named: str | tuple[str, ...] = (), **extra) -> Case:
    """A bad command line of the main job."""
    return _case("override", id, *args, named=named, **extra)


def option_file(id: str, text: str | bytes, *args: str, named: str | tuple[str, ...] = "bad.yaml",
                group: str = "role/critic", **extra) -> Case:
    """A bad option file of a config group under ``--config-dir``, picked on the command line."""
    files = {f"conf/{group}/bad.yaml": text, **extra.pop("files", {})}
    return _case("option-file", id, "--config-dir", "{d}/conf", f"{group}=bad", *args,
                 named=named, files=files, **extra)


def slime(id: str, text: str | bytes, *args: str, named: str | tuple[str, ...] = "slime.yaml",
          **extra) -> Case:
    """A bad slime per-role file, read with ``megatron_config_path``."""
    files = {"slime.yaml": text, **extra.pop("files", {})}
    return _case("slime", id, MEGATRON, "megatron_config_path={d}/slime.yaml", *args,
                 named=named, files=files, **extra)


def command(id: str, *args: str, named: str | tuple[str, ...] = (), **extra) -> Case:
    """A bad ``verl-roles`` command line."""
    return _case("command", id, *args, named=named, program="verl-roles", **extra)


def sweep(id: str, *args: str, named: str | tuple[str, ...] = (), **extra) -> Case:
    """A bad sweep (``-m``) of the main job."""
    return _case("sweep", id, "-m", *args, named=named, **extra)


def snapshot(id: str, *args: str, named: str | tuple[str, ...], **extra) -> Case:
    """A bad input of ``scripts/generate_trainer_config.sh``, run on a copy of the checkout's snapshots
    (in this process: what the script runs, ``verl_roles.commands.snapshots.main(["--root", COPY,
    ...])``; in a subprocess: the script of a full copy of the checkout)."""
    return _case("snapshot", id, *args, named=named, program="snapshot-script", **extra)


def output(id: str, *args: str, named: str | tuple[str, ...], **extra) -> Case:
    """An output directory the run cannot (or must not) write; a ``fault`` runs in a subprocess."""
    return _case("output", id, *args, named=named, **extra)


def unreadable(id: str, *args: str, paths: tuple[str, ...], named: str | tuple[str, ...], files: dict,
               program: str = "main") -> Case:
    """An input this user may not read (a --config-dir, one of its group folders, an option or slime
    file): ``paths`` lose every permission for the run."""
    return _case("unreadable", id, *args, named=named, files=files, program=program, fault="unreadable",
                 unreadable=paths)


# A file's content that makes it a folder instead.
FOLDER = None
# Contents that make the file a FIFO, or a symlink to an endless device.
FIFO = b"<fifo>"
ENDLESS = b"<symlink to /dev/zero>"
ALIAS_BOMB = "".join(
    f"{name}: &{name} [{', '.join([f'*{prev}' if prev else 'x'] * 9)}]\n"
    for prev, name in zip(["", *"abcdefg"], "abcdefgh", strict=True)
)
NON_UTF8 = b"optim:\n  lr: 1.0e-05  # caf\xe9\n"
DEEP_FLOW = "optim: " + "[" * 1500 + "]" * 1500 + "\n"
DEEP_BLOCK = "".join(f"{'  ' * i}k{i}:\n" for i in range(3000)) + f"{'  ' * 3000}leaf: 1\n"
BIG_SCALAR = "optim:\n  lr: 1.0e-05\nblob: " + "x" * 3_000_000 + "\n"
MANY_KEYS = "".join(f"key_{i}: {i}\n" for i in range(200_000))
SLIME_HEAD = "megatron:\n  - role: actor\n    overrides:\n"
LAST_SNAPSHOT = "_generated_ppo_veomni_trainer.yaml"
USER_CRITIC_OPTION = "# @package critic\noptim:\n  lr: 2.0e-05\n"


def _slime_values(**values: str) -> str:
    return SLIME_HEAD + "".join(f"      {key}: {value}\n" for key, value in values.items())


CASES: tuple[Case, ...] = (
    # --- the main job's command line -------------------------------------------------------------
    override("section-set-to-int", "critic=0"),
    override("nested-section-set-to-int", "actor_rollout_ref.actor=3"),
    override("top-section-set-to-string", "trainer=abc"),
    override("empty-key", "=0", named="=0"),
    override("group-choice-is-a-list", "model_engine=[dp,megatron]"),
    override("group-choice-is-a-dict", "model_engine={a:1}"),
    override("group-choice-empty", "model_engine="),
    override("group-choice-null", "model_engine=null"),
    override("unknown-engine", "model_engine=deepspeed"),
    override("unknown-role-option", "role/critic=nope"),
    override("role-option-parent-path", "role/critic=../../model_engine/megatron"),
    override("role-option-absolute-path", "role/critic=/etc/hosts"),
    override("unknown-config-name", "--config-name", "nope", named="nope"),
    # A key with a letter of another script drawn like a Latin one, or a character nobody sees.
    override("key-with-cyrillic-o", "trainer.nn\u043edes=2", named=("U+043E", "trainer.nnodes=2")),
    override("key-with-zero-width-space", "trainer.nn\u200bodes=2", named=("U+200B", "trainer.nnodes=2")),
    sweep("key-with-cyrillic-o", "trainer.nn\u043edes=1,2", named=("U+043E", "trainer.nnodes=1,2")),
    command("show-key-with-cyrillic-o", "show", "trainer.nn\u043edes=2", named=("U+043E",)),
    override("config-dir-flag-underscore", "--config_dir", "{d}", named=("--config_dir", "--config-dir")),
    override("overwrite-flag-upper-case", "--Overwrite", named=("--Overwrite", "--overwrite")),
    override("cfg-flag-value-not-a-view", "--cfg", "trainer.nnodes=2", named=("--cfg", "job, hydra, all")),
    override("config-name-escapes", "--config-name", "../conf/ppo_trainer", named="ppo_trainer"),
    override("delete-required-key", "~trainer.nnodes"),
    override("delete-whole-section", "~actor_rollout_ref"),
    override("delete-missing-key", "~trainer.nope"),
    override("unknown-key", "trainer.nope=1"),
    override("unknown-key-typo", "trainer.nnodse=1"),
    override("add-existing-key", "+trainer.nnodes=2"),
    override("megatron-key-under-dp", "megatron.tensor_model_parallel_size=2"),
    override("parse-error-space", "trainer.nnodes=1 2"),
    override("parse-error-bracket", "trainer.logger=[console"),
    override("int-key-is-text", "trainer.nnodes=abc"),
    override("int-key-is-float", "trainer.nnodes=1.5"),
    override("int-key-is-list", "trainer.nnodes=[1,2]"),
    override("int-key-is-dict", "trainer.nnodes={a:1}"),
    override("int-key-is-empty", "trainer.nnodes="),
    override("nnodes-zero", "trainer.nnodes=0"),
    override("nnodes-negative", "trainer.nnodes=-1"),
    override("gpus-per-node-zero", "trainer.n_gpus_per_node=0"),
    override("lr-nan", "actor_rollout_ref.actor.optim.lr=nan"),
    override("lr-inf", "actor_rollout_ref.actor.optim.lr=inf"),
    override("lr-overflow", "actor_rollout_ref.actor.optim.lr=1e999"),
    override("lr-negative", "actor_rollout_ref.actor.optim.lr=-1e-5"),
    # What torch's Adam refuses when the workers build it, long after Ray started.
    override("adam-beta-above-one", "actor_rollout_ref.actor.optim.betas=[0.9,1.5]",
             named="actor_rollout_ref.actor.optim.betas.1"),
    override("weight-decay-negative", "critic.optim.weight_decay=-0.1"),
    override("torchtitan-eps-negative", "model_engine=torchtitan", "critic.optim.eps=-1e-8"),
    override("megatron-adam-beta-negative", MEGATRON,
             "+critic.optim.override_optimizer_config.adam_beta1=-0.1"),
    override("critic-lr-nan", "critic.optim.lr=nan"),
    override("megatron-lr-nan", MEGATRON, "actor_rollout_ref.actor.optim.lr=nan"),
    override("gpu-memory-nan", "actor_rollout_ref.rollout.gpu_memory_utilization=nan"),
    override("gpu-memory-above-one", "actor_rollout_ref.rollout.gpu_memory_utilization=1.5"),
    override("gpu-memory-zero", "actor_rollout_ref.rollout.gpu_memory_utilization=0"),
    override("temperature-nan", "actor_rollout_ref.rollout.temperature=nan"),
    override("clip-ratio-inf", "actor_rollout_ref.actor.clip_ratio=inf"),
    override("clip-ratio-c-one", "actor_rollout_ref.actor.clip_ratio_c=1"),
    override("train-files-empty-list", "data.train_files=[]"),
    override("train-files-null", "data.train_files=null"),
    override("model-path-empty", "actor_rollout_ref.model.path=''"),
    override("train-batch-zero", "data.train_batch_size=0"),
    override("mini-batch-zero", "actor_rollout_ref.actor.ppo_mini_batch_size=0"),
    override("mini-batch-above-train-batch", "actor_rollout_ref.actor.ppo_mini_batch_size=4096"),
    override("micro-batch-per-gpu-zero", "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=0"),
    override("micro-batch-per-gpu-negative", "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=-2"),
    override("critic-micro-batch-zero", "critic.ppo_micro_batch_size_per_gpu=0"),
    override("critic-mini-batch-zero", "critic.ppo_mini_batch_size=0"),
    override("ref-log-prob-micro-zero", "actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu=0"),
    override("rollout-log-prob-micro-negative",
             "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=-1"),
    override("max-token-len-zero", "actor_rollout_ref.actor.ppo_max_token_len_per_gpu=0"),
    override("rollout-n-zero", "actor_rollout_ref.rollout.n=0"),
    override("ppo-epochs-zero", "actor_rollout_ref.actor.ppo_epochs=0"),
    override("rollout-tp-zero", "actor_rollout_ref.rollout.tensor_model_parallel_size=0"),
    override("rollout-dp-zero", "actor_rollout_ref.rollout.data_parallel_size=0"),
    override("ulysses-zero", "actor_rollout_ref.actor.ulysses_sequence_parallel_size=0"),
    override("critic-ulysses-negative", "critic.ulysses_sequence_parallel_size=-1"),
    override("megatron-tp-zero", MEGATRON, "megatron.tensor_model_parallel_size=0"),
    override("megatron-pp-negative", MEGATRON, "megatron.pipeline_model_parallel_size=-1"),
    override("megatron-cp-zero", MEGATRON, "megatron.context_parallel_size=0"),
    override("megatron-ep-zero", MEGATRON, "megatron.expert_model_parallel_size=0"),
    override("critic-megatron-tp-zero", MEGATRON, "critic.megatron.tensor_model_parallel_size=0"),
    override("megatron-tp-not-dividing", MEGATRON, "megatron.tensor_model_parallel_size=3",
             named="tensor_model_parallel_size"),
    override("unknown-rollout-engine", "actor_rollout_ref.rollout.name=vlm"),
    override("unknown-loss-agg-mode", "actor_rollout_ref.actor.loss_agg_mode=token-meen"),
    override("interpolation-to-missing-key", "trainer.nnodes=${trainer.nope}", named="trainer.nope"),
    override("interpolation-self-reference", "trainer.nnodes=${trainer.nnodes}"),
    override("interpolation-cycle", "trainer.nnodes=${trainer.n_gpus_per_node}",
             "trainer.n_gpus_per_node=${trainer.nnodes}", named="trainer.n"),
    override("env-resolver-unset", "trainer.project_name=${oc.env:VERL_ROLES_SURELY_UNSET}"),
    override("unknown-resolver", "trainer.project_name=${nope:1}"),
    override("decode-resolver-bad", "trainer.nnodes=${oc.decode:'[1,'}"),
    override("slime-path-missing", MEGATRON, "megatron_config_path={d}/nope.yaml", named="nope.yaml"),
    override("slime-path-is-a-list", MEGATRON, "megatron_config_path=[a,b]"),
    override("slime-path-is-a-dir", MEGATRON, "megatron_config_path={d}"),
    override("hydra-callback-added", "+hydra.callbacks.evil._target_=shutil.rmtree",
             "+hydra.callbacks.evil.path={d}/keep", named="hydra.callbacks",
             files={"keep/file.txt": "mine\n"}),
    override("non-utf8-value", "trainer.project_name=caf\udce9"),
    # A byte of another encoding (what Python makes of a Latin-1 argument) is one verdict through every
    # channel: quoted (Hydra's grammar takes it) it was exit 70 when the run's files were written.
    override("non-utf8-value-quoted", "trainer.project_name='caf\udce9'"),
    override("non-utf8-run-dir", "hydra.run.dir={d}/r\udce9", named="hydra.run.dir"),
    override("non-utf8-config-dir", "--config-dir", "{d}/c\udce9", named="--config-dir"),
    override("nul-in-value", "trainer.project_name='a\x00b'"),
    sweep("non-utf8-value", "trainer.project_name='caf\udce9',b"),
    command("show-non-utf8-value", "show", "trainer.project_name='caf\udce9'"),
    command("check-sweep-non-utf8-value", "check-sweep", "trainer.project_name='caf\udce9',b"),
    command("explain-non-utf8-value", "explain", "trainer.project_name", "trainer.project_name='caf\udce9'"),
    override("search-path-missing-dir", "hydra.searchpath=[file://{d}/nope]", "role/critic=other",
             named=("hydra.searchpath", "nope")),
    override("config-dir-missing", "--config-dir", "{d}/nope", "role/critic=other", named="nope"),
    override("config-dir-is-a-file", "--config-dir", "{d}/file.txt", "role/critic=other", named="file.txt",
             files={"file.txt": "not a dir\n"}),
    override("stacked-option-with-path", "role/critic=[default,../../model_engine/megatron]",
             named="role/critic"),
    override("logging-handler-class", "+hydra.job_logging.handlers.evil.class=shutil.rmtree"),
    override("launcher-target", "hydra.launcher._target_=shutil.rmtree"),
    override("search-path-to-hydra-config", "hydra.searchpath=[file://{d}/conf]", "hydra/launcher=bad",
             named="bad.yaml", files={"conf/hydra/launcher/bad.yaml": "_target_: shutil.rmtree\n"}),
    # A key through a list by a name or a missing position (OmegaConf raised a bare ValueError; the
    # first was found by benchmarks/fuzz_long.py).
    override("name-inside-a-list", "trainer.logger.extra=1", named=("trainer.logger.extra", "is a list")),
    override("position-past-a-list", "trainer.logger.5=1", named=("trainer.logger.5", "items 0 to 1")),
    override("name-inside-a-list-set-empty", "actor_critic_same_topology=[]",
             "actor_critic_same_topology.extra=null", named=("actor_critic_same_topology.extra", "no items")),
    sweep("name-inside-a-list", "trainer.logger.extra=1,2", named="trainer.logger.extra"),

    # --- option files under --config-dir ---------------------------------------------------------
    option_file("non-utf8", NON_UTF8),
    option_file("is-a-directory", FOLDER, named="role/critic"),
    option_file("yaml-syntax-error", "# @package critic\noptim:\n  lr: [1.0e-05\n"),
    option_file("yaml-tab-indent", "# @package critic\noptim:\n\tlr: 1.0e-05\n"),
    option_file("duplicate-key", "# @package critic\noptim:\n  lr: 1.0e-05\n  lr: 2.0e-05\n"),
    option_file("bare-scalar", "# @package critic\n3\n"),
    option_file("bare-list", "# @package critic\n- 1\n- 2\n"),
    option_file("python-tag", "# @package critic\noptim: !!python/object/apply:os.system ['true']\n"),
    option_file("no-package-header", "optim:\n  lr: 2.0e-05\n"),
    option_file("other-role-package", "# @package actor_rollout_ref.actor\noptim:\n  lr: 9.0e-05\n"),
    option_file("global-package-run-dir", "# @package _global_\nhydra:\n  run:\n    dir: {d}/elsewhere\n"),
    option_file("global-package-callback", "# @package _global_\nhydra:\n  callbacks:\n    evil:\n"
                "      _target_: shutil.rmtree\n      path: {d}/keep\n", files={"keep/file.txt": "mine\n"}),
    option_file("global-package-trainer", "# @package _global_\ntrainer:\n  nnodes: 4\n"),
    option_file("hydra-package", "# @package hydra\nrun:\n  dir: {d}/elsewhere\n"),
    option_file("unknown-key", "# @package critic\noptim:\n  lrr: 2.0e-05\n", named=("bad.yaml", "lrr")),
    option_file("unknown-top-key", "# @package critic\nnope: 1\n", named=("bad.yaml", "nope")),
    option_file("defaults-escape", "# @package critic\ndefaults:\n  - /model_engine@_global_: megatron\n"),
    option_file("defaults-missing", "# @package critic\ndefaults:\n  - nope\n  - _self_\n"),
    option_file("defaults-parent-path", "# @package critic\ndefaults:\n  - ../../../etc/x\n"),
    option_file("interpolation-missing", "# @package critic\noptim:\n  lr: ${nope.key}\n", named="nope.key"),
    option_file("lr-text", "# @package critic\noptim:\n  lr: fast\n", named="critic.optim.lr"),
    option_file("lr-nan", "# @package critic\noptim:\n  lr: .nan\n", named="critic.optim.lr"),
    option_file("mini-batch-zero", "# @package critic\nppo_mini_batch_size: 0\n",
                named="critic.ppo_mini_batch_size"),
    option_file("section-scalar", "# @package critic\noptim: 3\n", named="critic.optim"),
    option_file("deep-flow-nesting", "# @package critic\n" + DEEP_FLOW),
    option_file("deep-block-nesting", "# @package critic\n" + DEEP_BLOCK),
    option_file("too-big", "# @package critic\n" + BIG_SCALAR),
    option_file("too-many-keys", "# @package critic\n" + MANY_KEYS),
    option_file("target-key", "# @package critic\n_target_: os.system\n", named=("bad.yaml", "_target_")),
    option_file("engine-option-broken", "# @package _global_\nmegatron: [\n", group="model_engine",
                named="bad.yaml"),
    option_file("actor-role-non-utf8", NON_UTF8, group="role/actor"),
    option_file("actor-option-sets-critic", "# @package critic\noptim:\n  lr: 9.0e-05\n",
                group="role/actor"),
    option_file("sub-section-package-typo", "# @package critic.optim\nlrr: 2.0e-05\n",
                named=("bad.yaml", "lrr")),
    option_file("header-without-value", "# @package\noptim:\n  lr: 2.0e-05\n"),
    option_file("header-two-values", "# @package critic optim\nlr: 2.0e-05\n"),
    option_file("alias-bomb", "# @package critic\n" + ALIAS_BOMB),
    # Hydra lists only regular files as options: never opened, so nothing hangs or fills memory.
    # A defaults list that is no list (Hydra raised a bare ValueError; found by benchmarks/fuzz_long.py).
    option_file("defaults-null", "# @package critic\noptim:\n  lr: 2.0e-05\ndefaults: null\n",
                named=("bad.yaml, line 4", "defaults")),
    _case("option-file", "primary-config-defaults-not-a-list", "--config-dir", "{d}/conf", "--config-name",
          "mine", named=("mine.yaml, line 1", "defaults"),
          files={"conf/mine.yaml": "defaults: 3\ntrainer:\n  nnodes: 1\n"}),
    option_file("fifo", FIFO, named="role/critic"),
    option_file("endless-device", ENDLESS, named="role/critic"),
    option_file("hydra-launcher-in-config-dir", "_target_: shutil.rmtree\n", "hydra/launcher=bad",
                group="hydra/launcher"),
    _case("option-file", "primary-config-adds-callback", "--config-dir", "{d}/conf", "--config-name", "mine",
          named="hydra.callbacks", files={"conf/mine.yaml": "defaults:\n  - ppo_trainer\n  - _self_\n"
                                          "hydra:\n  callbacks:\n    evil:\n      _target_: shutil.rmtree\n"
                                          "      path: {d}/keep\n", "keep/file.txt": "mine\n"}),

    # --- slime per-role files ---------------------------------------------------------------------
    slime("non-utf8", b"megatron:\n  - role: actor\n    overrides: {lr: 1e-5}  # caf\xe9\n"),
    slime("is-a-directory", FOLDER),
    slime("empty-file", ""),
    slime("yaml-syntax-error", "megatron: [\n"),
    slime("bare-scalar", "3\n"),
    slime("no-megatron-key", "roles: []\n"),
    slime("megatron-not-a-list", "megatron: {role: actor}\n"),
    slime("entry-not-a-mapping", "megatron:\n  - actor\n"),
    slime("unknown-field", "megatron:\n  - role: actor\n    overides: {lr: 1e-5}\n", named="overides"),
    slime("no-role", "megatron:\n  - overrides: {lr: 1e-5}\n", named="role"),
    slime("unknown-role", "megatron:\n  - role: ref\n    overrides: {lr: 1e-5}\n", named="ref"),
    slime("role-not-a-string", "megatron:\n  - role: [actor]\n    overrides: {lr: 1e-5}\n", named="role"),
    slime("duplicate-role", "megatron:\n  - role: actor\n  - role: actor\n", named="duplicate"),
    slime("overrides-and-args",
          "megatron:\n  - role: actor\n    overrides: {lr: 1e-5}\n    args: {lr: 2e-5}\n",
          named="args"),
    slime("overrides-not-a-mapping", "megatron:\n  - role: actor\n    overrides: [lr, 1e-5]\n",
          named="overrides"),
    slime("non-string-key", _slime_values(**{"1": "2"}), named="1"),
    slime("adam-beta-above-one", _slime_values(adam_beta2="1.5"),
          named=("actor_rollout_ref.actor.optim.override_optimizer_config.adam_beta2", "adam_beta2")),
    slime("null-key", SLIME_HEAD + "      ~: 1\n", named="None"),
    slime("list-key", SLIME_HEAD + "      ? [a, b]\n      : 1\n", named=("slime.yaml", "line 4")),
    slime("hyphenated-key", _slime_values(**{"tensor-model-parallel-size": "2"}),
          named="tensor-model-parallel-size"),
    slime("unknown-key", _slime_values(lrr="1e-5"), named="lrr"),
    slime("unsupported-key", _slime_values(save="/ckpt"), named="save"),
    slime("lr-text", _slime_values(lr="fast"), named="lr"),
    slime("lr-nan", _slime_values(lr=".nan"), named="lr"),
    slime("lr-inf", _slime_values(lr=".inf"), named="lr"),
    slime("lr-negative", _slime_values(lr="-1e-5"), named="lr"),
    slime("tp-zero", _slime_values(tensor_model_parallel_size="0"), named="tensor_model_parallel_size"),
    slime("pp-negative", _slime_values(pipeline_model_parallel_size="-2"),
          named="pipeline_model_parallel_size"),
    slime("tp-float", _slime_values(tensor_model_parallel_size="1.5"), named="tensor_model_parallel_size"),
    slime("bool-maybe", _slime_values(sequence_parallel="maybe"), named="sequence_parallel"),
    slime("interpolation-env", _slime_values(load='"${oc.env:HOME}"'), named="load"),
    slime("interpolation-missing", _slime_values(load='"${nope}"'), named="load"),
    slime("interpolation-in-number", _slime_values(lr='"${actor_rollout_ref.actor.optim.lr}"'), named="lr"),
    slime("name-not-a-string", "megatron:\n  - role: actor\n    name: [x]\n", named="name"),
    slime("duplicate-key", _slime_values(lr="1e-5") + "      lr: 2e-5\n", named="lr"),
    slime("python-tag", "megatron: !!python/object/apply:os.system ['true']\n"),
    slime("deep-nesting", "megatron: " + "[" * 1500 + "]" * 1500 + "\n"),
    slime("too-big", "megatron: []\nblob: " + "x" * 3_000_000 + "\n"),
    slime("fifo", FIFO),
    slime("alias-bomb", "megatron: []\n" + ALIAS_BOMB),
    slime("topology-mismatch",
          "megatron:\n  - role: critic\n    overrides: {tensor_model_parallel_size: 2}\n",
          named="tensor_model_parallel_size"),
    slime("tp-not-dividing", _slime_values(tensor_model_parallel_size="3"),
          "actor_critic_same_topology=false", named="tensor_model_parallel_size"),
    slime("under-dp", "megatron:\n  - role: actor\n    overrides: {lr: 1e-5}\n", "model_engine=dp",
          named="megatron_config_path"),

    # --- verl-roles commands ---------------------------------------------------------------------
    command("no-command", named="COMMAND"),
    command("unknown-command", "difff", named="difff"),
    # Near-miss options of every command that reads its own words (case, `_` for `-`, a longer spelling).
    command("launch-flag-underscore", "launch", "--skip_verl_checks", named=("--skip_verl_checks",
                                                                              "--skip-verl-checks")),
    command("migrate-flag-upper-case", "migrate", "--TO=0.8.0", "trainer.nnodes=1", named=("--TO", "--to")),
    command("migrate-flag-longer", "migrate", "--to-release", "0.8.0", "trainer.nnodes=1",
            named=("--to-release", "--to")),
    command("diff-flag-underscore", "diff", "--config_name", "x", named=("--config_name", "--config-name")),
    command("diff-bad-override", "diff", "critic=0", "--"),
    command("diff-bad-value", "diff", "--", "trainer.nnodes=0"),
    command("diff-unknown-key", "diff", "trainer.nope=1", "--"),
    command("diff-three-sides", "diff", "--", "--", named="--"),
    command("diff-unknown-config-name", "diff", "--config-name", "nope", "--", named="nope"),
    command("diff-config-name-without-value", "diff", "--", "--config-name", named="--config-name"),
    command("explain-no-key", "explain", named="KEY"),
    command("explain-unknown-key", "explain", "trainer.nope", named="trainer.nope"),
    command("explain-bad-override", "explain", "trainer.nnodes", "critic=0"),
    command("explain-config-dir-missing", "explain", "--config-dir", "{d}/nope", "trainer.nnodes",
            named="nope"),
    command("explain-config-dir-without-value", "explain", "trainer.nnodes", "--config-dir",
            named="--config-dir"),
    command("explain-non-utf8-option", "explain", "--config-dir", "{d}/conf", "critic.optim.lr",
            "role/critic=bad", named="bad.yaml", files={"conf/role/critic/bad.yaml": NON_UTF8}),
    command("migrate-config-name-without-value", "migrate", "--config-name", named="--config-name"),
    command("migrate-bad-override", "migrate", "trainer.logger=[console"),
    command("export-slime-under-dp", "export-slime", named="model_engine"),
    command("export-slime-bad-override", "export-slime", MEGATRON, "critic=0"),
    command("export-slime-output-is-a-dir", "export-slime", "-o", "{d}/run", MEGATRON, named="run",
            files={"run/keep.txt": "x\n"}),
    command("export-slime-output-missing-value", "export-slime", MEGATRON, "-o", named="-o"),
    command("export-slime-output-under-a-file", "export-slime", "-o", "{d}/file.txt/out.yaml", MEGATRON,
            named="file.txt", files={"file.txt": "x\n"}),
    command("export-slime-bad-slime", "export-slime", MEGATRON, "megatron_config_path={d}/slime.yaml",
            named="slime.yaml", files={"slime.yaml": "megatron: [\n"}),

    # --- sweeps ----------------------------------------------------------------------------------
    sweep("one-job-invalid", "trainer.nnodes=1,0"),
    sweep("every-job-invalid", "trainer.nnodes=0,-1"),
    sweep("section-set-to-int", "critic=0,1"),
    sweep("unknown-engine", "model_engine=dp,nope"),
    sweep("nan-lr", "actor_rollout_ref.actor.optim.lr=nan,1e-5"),
    sweep("range-with-zero", "trainer.nnodes=range(0,2)", named="trainer.nnodes"),
    sweep("unknown-launcher", "hydra/launcher=nope", "trainer.nnodes=1,2", named="hydra/launcher"),
    sweep("parse-error", "trainer.nnodes=1,,2"),

    # --- the snapshot script ---------------------------------------------------------------------
    # A damaged snapshot is stale (exit 1, the documented code), not a crash; generating repairs it
    # (tests/test_snapshots.py).
    snapshot("check-non-utf8-snapshot", "--check", named="_generated_ppo_trainer.yaml",
             setup="non-utf8-snapshot", code=1),
    snapshot("snapshot-is-a-directory", named="_generated_ppo_trainer.yaml",
             setup="snapshot-is-a-directory"),
    snapshot("generated-is-a-file", named="_generated", setup="generated-is-a-file"),
    snapshot("broken-config-file", "--check", named="trainer.yaml", setup="broken-config-file",
             runner="subprocess"),
    snapshot("unknown-flag", "--chek", named="--chek"),
    # A link planted in _generated/ (a cloned repository can carry one): never written (or read) through.
    snapshot("snapshot-is-a-symlink", named=("_generated_ppo_trainer.yaml", "symbolic link"),
             setup="snapshot-is-a-symlink", files={"outside.txt": "mine\n"}),
    snapshot("check-snapshot-is-a-symlink", "--check", named=("_generated_ppo_trainer.yaml", "symbolic link"),
             setup="snapshot-is-a-symlink", files={"outside.txt": "mine\n"}),
    snapshot("last-snapshot-is-a-symlink", named=(LAST_SNAPSHOT, "symbolic link"),
             setup="last-snapshot-is-a-symlink", files={"outside.txt": "mine\n"}),
    snapshot("snapshot-is-a-hard-link", named=("_generated_ppo_trainer.yaml", "hard link"),
             setup="snapshot-is-a-hard-link", files={"outside.txt": "mine\n"}),
    snapshot("snapshot-is-a-fifo", named=("_generated_ppo_trainer.yaml", "not a regular file"),
             setup="snapshot-is-a-fifo"),
    snapshot("generated-is-a-symlink", named=("_generated", "symbolic link"), setup="generated-is-a-symlink",
             files={"elsewhere/keep.txt": "mine\n"}),

    # --- output directories ------------------------------------------------------------------------
    output("read-only-run-dir", "hydra.run.dir={d}/run", named="/run", fault="read-only"),
    output("read-only-run-dir-no-hydra-subdir", "hydra.run.dir={d}/run", "hydra.output_subdir=null",
           named="/run", fault="read-only"),
    output("full-disk", "hydra.run.dir={d}/run", named="hydra.run.dir", fault="full-disk"),
    output("full-disk-no-hydra-subdir", "hydra.run.dir={d}/run", "hydra.output_subdir=null",
           named="/run", fault="full-disk"),
    output("file-size-limit", "hydra.run.dir={d}/run", "hydra.output_subdir=null", named="resolved.yaml",
           fault="file-size-limit"),
    output("run-dir-under-a-file", "hydra.run.dir={d}/file.txt/run", named="file.txt",
           files={"file.txt": "x\n"}),
    output("run-dir-is-a-file", "hydra.run.dir={d}/run", named="/run", files={"run": "x\n"}),

    # --- inputs this user may not read -----------------------------------------------------------
    # Hydra skips a folder it cannot list without a word (exit 0 without the user's options, or "no
    # option"); a group folder it cannot enter was a traceback of every command.
    unreadable("config-dir", "--config-dir", "{d}/conf", paths=("conf",), named=("--config-dir", "conf"),
               files={"conf/role/critic/mine.yaml": USER_CRITIC_OPTION}),
    unreadable("group-folder", "show", "--config-dir", "{d}/conf", "role/critic=mine", program="verl-roles",
               paths=("conf/role/critic",), named=("--config-dir", "role/critic"),
               files={"conf/role/critic/mine.yaml": USER_CRITIC_OPTION}),
    unreadable("option-file", "--config-dir", "{d}/conf", "role/critic=mine",
               paths=("conf/role/critic/mine.yaml",), named="mine.yaml",
               files={"conf/role/critic/mine.yaml": USER_CRITIC_OPTION}),
    unreadable("slime-file", MEGATRON, "megatron_config_path={d}/slime.yaml", paths=("slime.yaml",),
               named="slime.yaml", files={"slime.yaml": SLIME_HEAD + "      lr: 2.0e-05\n"}),
)

# The same inputs as a user types them in a shell, in a real process (exit code, stderr, no traceback).
SUBPROCESS_SAMPLE: tuple[str, ...] = (
    "override/lr-nan",
    "override/non-utf8-value-quoted",
    "option-file/non-utf8",
    "slime/non-string-key",
    "command/export-slime-output-is-a-dir",
    "sweep/every-job-invalid",
)



# Entries that are not clean yet, with the reason: the one list the fixes shrink (test id -> reason;
# "api:ID" for the Python API run, "subprocess:ID" for a real process, "fuzz:NAME" for a property of
# tests/test_fuzz.py). The tests expect these to fail (strictly: an entry that becomes clean must
# leave the list); `python benchmarks/bad_inputs.py --known-failures` prints what the list should be.
# Empty since every entry of the catalogue is clean.
KNOWN_FAILURES: dict[str, str] = {}


# ---------------------------------------------------------------------------------------------------
# Running a case.


# What a developer may have set for their own debugging: a case runs without it, unless the run is one of
# the catalogue under a given environment (:func:`codes_under`), which keeps what it was started with.
DEBUG_ENV = ("HYDRA_FULL_ERROR", "VERL_ROLES_DEBUG")
_KEEP_ENV = False


@dataclass
class Outcome:
    """What a run did: exit code (None when an exception escaped), output, and the files it left."""

    code: int | None
    output: str
    escaped: str = ""
    files: list[str] = field(default_factory=list)


def verdict(case: Case, outcome: Outcome, *, api: bool = False) -> str:
    """``clean``, or the first way the run failed the rule (the failure kinds of the figures)."""
    if outcome.escaped or "Traceback" in outcome.output:
        return f"not a ConfigError ({outcome.escaped})" if api and outcome.escaped else "traceback"
    if outcome.files:
        return "files written"
    if outcome.code == 0:
        return "accepted"
    if outcome.code != case.code:
        return f"exit {outcome.code}"
    folded = " ".join(outcome.output.split())
    if not all(phrase in folded for phrase in case.named):
        return "key or file not named"
    if "Fix:" not in folded and "did you mean" not in folded.lower():
        return "no fix named"
    return "clean"


@contextlib.contextmanager
def _working_dir(path: Path) -> Iterator[None]:
    saved = os.getcwd()
    os.chdir(path)
    try:
        yield
    finally:
        os.chdir(saved)


def prepare(case: Case, folder: Path) -> None:
    """Write the case's files into ``folder`` and set up its special condition."""
    folder.mkdir(parents=True, exist_ok=True)
    for name, content in case.files:
        path = folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if content is FOLDER:
            (path / "x.yaml").parent.mkdir(parents=True, exist_ok=True)
            (path / "x.yaml").write_text("a: 1\n", encoding="utf-8")
        elif content == FIFO:
            os.mkfifo(path)
        elif content == ENDLESS:
            path.symlink_to("/dev/zero")
        elif isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content.replace("{d}", str(folder)), encoding="utf-8")
    if case.program == "snapshot-script":
        _copy_checkout(folder / "checkout", whole=case.runner == "subprocess")
        _snapshot_setup(case.setup, folder / "checkout")
    if case.fault in ("read-only", "full-disk"):
        (folder / RUN_DIR).mkdir(exist_ok=True)


def _copy_checkout(target: Path, whole: bool) -> None:
    """A copy of the checkout: all of what the script needs, or only ``_generated/`` next to a link to
    this checkout's ``conf/`` (the generator refuses a config tree other than the one it imports)."""
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    for name in ("conf", "verl_roles", "_generated", "scripts") if whole else ("_generated",):
        shutil.copytree(REPO / name, target / name, ignore=ignore, symlinks=True)
    if not whole:
        (target / "conf").symlink_to(CONF)


def _snapshot_setup(setup: str, checkout: Path) -> None:
    generated = checkout / "_generated"
    first = generated / "_generated_ppo_trainer.yaml"
    if setup == "non-utf8-snapshot":
        first.write_bytes(first.read_bytes() + b"# caf\xe9\n")
    elif setup == "snapshot-is-a-directory":
        first.unlink()
        first.mkdir()
    elif setup == "generated-is-a-file":
        shutil.rmtree(generated)
        generated.write_text("not a folder\n", encoding="utf-8")
    elif setup in ("snapshot-is-a-symlink", "last-snapshot-is-a-symlink"):
        planted = first if setup == "snapshot-is-a-symlink" else generated / LAST_SNAPSHOT
        planted.unlink()
        planted.symlink_to(checkout.parent / "outside.txt")
    elif setup == "snapshot-is-a-hard-link":
        first.unlink()
        os.link(checkout.parent / "outside.txt", first)
    elif setup == "snapshot-is-a-fifo":
        first.unlink()
        os.mkfifo(first)
    elif setup == "generated-is-a-symlink":
        shutil.rmtree(generated)
        generated.symlink_to(checkout.parent / "elsewhere")
    elif setup == "broken-config-file":
        path = checkout / "conf" / "trainer" / "trainer.yaml"
        path.write_text(path.read_text(encoding="utf-8") + "\n  broken: [\n", encoding="utf-8")


def _argv(case: Case, folder: Path) -> list[str]:
    args = [arg.replace("{d}", str(folder)) for arg in case.args]
    if case.program == "snapshot-script" and case.runner == "in-process":
        return ["--root", str(folder / "checkout"), *args]
    if case.program != "main":
        return args
    given = {arg.split("=", 1)[0] for arg in args}
    if "hydra.run.dir" not in given:
        args.append(f"hydra.run.dir={folder / RUN_DIR}")
    if case.kind == "sweep":
        args.append(f"hydra.sweep.dir={folder / SWEEP_DIR}")
    return args


def fingerprint(folder: Path) -> dict[str, str]:
    """Relative path -> digest of every file (and "dir" for every folder) under ``folder``."""
    prints: dict[str, str] = {}
    for root, dirs, files in os.walk(folder):
        for name in dirs:
            prints[os.path.relpath(os.path.join(root, name), folder)] = "dir"
        for name in files:
            path = os.path.join(root, name)
            prints[os.path.relpath(path, folder)] = _digest(path)
    return prints


def _digest(path: str) -> str:
    """A regular file's content digest; a FIFO or a link to a device is named, never opened."""
    if os.path.islink(path) or not stat.S_ISREG(os.stat(path).st_mode):
        return f"special:{os.readlink(path) if os.path.islink(path) else 'fifo'}"
    try:
        with open(path, "rb") as handle:
            return hashlib.sha1(handle.read()).hexdigest()
    except OSError:
        return "unreadable"


def written_files(
    case: Case, folder: Path, before: dict[str, str], after: dict[str, str], failed: bool
) -> list[str]:
    """What the run wrote that the rule forbids: a file of a failed run (or failed sweep job), a
    temporary file, a ``resolved.yaml`` without its role files, anything outside the run folder."""
    changed = sorted(p for p in set(before) | set(after) if before.get(p) != after.get(p))
    bad = []
    ok_job_dirs = _ok_job_dirs(folder) if case.kind == "sweep" else set()
    for path in changed:
        parts = Path(path).parts
        inside = parts[0] in (RUN_DIR, SWEEP_DIR) and case.program == "main"
        if not inside or path.endswith(".tmp"):
            bad.append(path)
        elif parts[-1] == "resolved.yaml" or (len(parts) >= 2 and parts[-2] == "roles"):
            job_dir = str(Path(*parts[: -2 if parts[-2] == "roles" else -1]))
            if failed and job_dir not in ok_job_dirs:
                bad.append(path)
    for path in after:
        if path.endswith("resolved.yaml"):
            job_dir = Path(path).parent
            missing = [r for r in ROLE_FILES if str(job_dir / "roles" / f"{r}.yaml") not in after]
            if missing:
                bad.append(f"{path} without roles/{missing[0]}.yaml")
    return bad


def _ok_job_dirs(folder: Path) -> set[str]:
    """Job folders (relative to ``folder``) of the sweep jobs its summary lists as ok."""
    summary = folder / SWEEP_DIR / "sweep_summary.csv"
    if not summary.is_file():
        return set()
    with summary.open(encoding="utf-8", newline="") as handle:
        rows = list(csv.DictReader(handle))
    return {os.path.relpath(row["output_dir"], folder) for row in rows if row.get("status") == "ok"}


def run_case(case: Case, folder: Path) -> Outcome:
    """Run ``case`` in ``folder`` (fresh, prepared here) and return what happened."""
    prepare(case, folder)
    before = fingerprint(folder)
    if case.runner == "subprocess" or case.fault:
        outcome = _run_subprocess(case, folder)
    else:
        outcome = _run_in_process(case, folder)
    outcome.files = written_files(case, folder, before, fingerprint(folder), failed=outcome.code != 0)
    return outcome


def _run_in_process(case: Case, folder: Path) -> Outcome:
    argv = _argv(case, folder)
    if case.program == "main":
        from verl_roles.main import main as entry

        # Hydra's own log and .hydra/ files cost more than the run itself and are not ours to test.
        argv += ["hydra/job_logging=none", "hydra/hydra_logging=none", "hydra.output_subdir=null"]
    elif case.program == "snapshot-script":
        from verl_roles.commands.snapshots import main as entry
    else:
        from verl_roles.cli import main as entry
    out, err = io.StringIO(), io.StringIO()
    code: int | None = None
    escaped = ""
    saved_env = {} if _KEEP_ENV else {k: os.environ.pop(k) for k in DEBUG_ENV if k in os.environ}
    try:
        with _working_dir(folder), contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = entry(argv)
    except SystemExit as exit_:
        code = exit_.code if isinstance(exit_.code, int) else 1
    except BaseException as error:  # noqa: BLE001 - an escaping exception is what we look for
        escaped = f"{type(error).__name__}: {error}"[:300]
    finally:
        os.environ.update(saved_env)
    return Outcome(code=code, output=out.getvalue() + err.getvalue(), escaped=escaped)


def _command(case: Case, folder: Path) -> list[str]:
    argv = _argv(case, folder)
    if case.program == "main":
        return [sys.executable, "-m", "verl_roles.main", *argv]
    if case.program == "verl-roles":
        return [sys.executable, "-m", "verl_roles.cli", *argv]
    return ["bash", str(folder / "checkout" / "scripts" / "generate_trainer_config.sh"), *argv]


# Root reads any file; without these two capabilities it meets permissions as their owner does.
WITHOUT_ROOTS_READ_POWER = ("setpriv", "--bounding-set=-dac_override,-dac_read_search")


def unreadable_works() -> bool:
    """True when a run can be denied a file: not root, or root with ``setpriv`` to drop its power."""
    if os.geteuid() != 0:
        return True
    if shutil.which("setpriv") is None:
        return False
    probe = subprocess.run([*WITHOUT_ROOTS_READ_POWER, "true"], capture_output=True)
    return probe.returncode == 0


def unshare_works() -> bool:
    """True when this machine lets a process mount in its own user namespace (read-only and tiny
    file systems for the fault cases)."""
    if shutil.which("unshare") is None:
        return False
    probe = subprocess.run(["unshare", "-rm", "true"], capture_output=True)
    return probe.returncode == 0


def fault_supported(case: Case) -> bool:
    """False when this machine cannot set up the case's fault (the tests skip such a case)."""
    needs_unshare = case.fault == "full-disk" or (case.fault == "read-only" and os.geteuid() == 0)
    if needs_unshare and not unshare_works():
        return False
    return case.fault != "unreadable" or unreadable_works()


# What each fault mounts over the run folder inside `unshare -rm` (a private mount namespace).
_MOUNTS = {
    "read-only": 'mount --bind "$RUN" "$RUN" && mount -o remount,ro,bind "$RUN" "$RUN"',
    # Room for the small role files but not for resolved.yaml.
    "full-disk": 'mount -t tmpfs -o size=16k tmpfs "$RUN"',
}


def _run_subprocess(case: Case, folder: Path) -> Outcome:
    command = _command(case, folder)
    env = {k: v for k, v in os.environ.items() if _KEEP_ENV or k not in DEBUG_ENV}
    env["PYTHONHASHSEED"] = "0"
    env["PYTHON"] = sys.executable
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    preexec: Callable[[], None] | None = None
    if case.fault in _MOUNTS:
        if os.geteuid() != 0 and case.fault == "read-only":
            os.chmod(folder / RUN_DIR, 0o555)
        else:
            env["RUN"] = str(folder / RUN_DIR)
            script = f'{_MOUNTS[case.fault]} && exec "$@"'
            command = ["unshare", "-rm", "sh", "-c", script, "sh", *command]
    elif case.fault == "file-size-limit":
        preexec = _limit_file_size
    elif case.fault == "unreadable":
        for path in case.unreadable:
            os.chmod(folder / path, 0)
        if os.geteuid() == 0:
            command = [*WITHOUT_ROOTS_READ_POWER, *command]
    try:
        result = subprocess.run(command, cwd=folder, env=env, capture_output=True, text=True, timeout=300,
                                preexec_fn=preexec)
    finally:
        if case.fault == "read-only" and os.geteuid() != 0:
            os.chmod(folder / RUN_DIR, 0o755)
        for path in case.unreadable:
            os.chmod(folder / path, 0o755)
    return Outcome(code=result.returncode, output=result.stdout + result.stderr)


def _limit_file_size() -> None:
    """In the child: files may not grow past 8 KiB (the role files fit, resolved.yaml does not), and a
    write past it fails with EFBIG instead of killing the process."""
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (8192, 8192))


def run_api_case(case: Case, folder: Path) -> Outcome:
    """Compose ``case`` through ``verl_roles.compose``; the outcome's code is 2 for a ConfigError."""
    import verl_roles

    prepare(case, folder)
    before = fingerprint(folder)
    spec = case.api_overrides()
    assert spec is not None
    config_name, overrides, config_dir = spec
    overrides = [o.replace("{d}", str(folder)) for o in overrides]
    if config_dir is not None:
        config_dir = config_dir.replace("{d}", str(folder))
    code: int | None = None
    message, escaped = "", ""
    try:
        with _working_dir(folder), contextlib.redirect_stderr(io.StringIO()):
            verl_roles.compose(overrides, config_name=config_name, config_dir=config_dir)
        code = 0
    except verl_roles.ConfigError as error:
        code, message = 2, str(error)
    except BaseException as error:  # noqa: BLE001 - anything else is what we look for
        escaped = f"{type(error).__name__}: {error}"[:300]
    outcome = Outcome(code=code, output=message, escaped=escaped)
    outcome.files = written_files(case, folder, before, fingerprint(folder), failed=True)
    return outcome


API_CASES: tuple[Case, ...] = tuple(case for case in CASES if case.api_overrides() is not None)


# ---------------------------------------------------------------------------------------------------
# The catalogue under another environment: the exit codes must not depend on it.

# What only a process's start reads: a shell without a UTF-8 locale. (HYDRA_FULL_ERROR, which verl's
# scripts export, is read when an error happens: tests/test_bad_inputs.py sets it in-process.)
ENVIRONMENTS: dict[str, dict[str, str]] = {
    "LC_ALL=C": {"LC_ALL": "C", "LANG": "C"},
}


def codes_under(environment: str, root: Path) -> dict[str, tuple[int | None, str, list[str]]]:
    """Run every case of the catalogue in one fresh Python process started with ``environment`` (each
    case in a folder under ``root``, in its usual runner) and return case id -> (exit code, what escaped,
    files written). For what only a process's start reads (the locale)."""
    import json

    env = {**os.environ, **ENVIRONMENTS[environment], "PYTHONHASHSEED": "0", "PYTHONDONTWRITEBYTECODE": "1"}
    env["PYTHONPATH"] = os.pathsep.join([str(Path(__file__).parent), env.get("PYTHONPATH", "")])
    result = subprocess.run([sys.executable, __file__, str(root)], env=env, capture_output=True,
                            text=True, timeout=1800)
    assert result.returncode == 0, result.stderr[-3000:]
    return {key: tuple(value) for key, value in json.loads(result.stdout.splitlines()[-1]).items()}


@contextlib.contextmanager
def environment_kept() -> Iterator[None]:
    """Runs within keep the variables a developer's debugging may set (HYDRA_FULL_ERROR...), which
    :func:`run_case` otherwise leaves out: the environment under test."""
    global _KEEP_ENV
    saved, _KEEP_ENV = _KEEP_ENV, True
    try:
        yield
    finally:
        _KEEP_ENV = saved


def _print_codes(root: Path) -> None:
    """In the process :func:`codes_under` starts: run every case and print the outcomes."""
    import json

    outcomes = {}
    with environment_kept():
        for number, case in enumerate(CASES):
            if not fault_supported(case):
                continue
            outcome = run_case(case, root / str(number))
            outcomes[case.id] = (outcome.code, outcome.escaped, outcome.files)
    sys.stdout.write(json.dumps(outcomes) + "\n")


if __name__ == "__main__":
    _print_codes(Path(sys.argv[1]))

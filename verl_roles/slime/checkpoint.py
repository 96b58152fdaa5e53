"""slime's ``load`` and the folder verl loads.

slime (slime/backends/megatron_utils/checkpoint.py, ``load_checkpoint``) loads a role's ``load`` as a
Megatron checkpoint when it is a checkpoint root (it holds ``latest_checkpointed_iteration.txt``, whose
text names the iteration) or an iteration folder itself (named ``iter_`` and seven digits), and as Hugging
Face weights otherwise. Megatron keeps iteration N of a root in ``<root>/iter_<N, 7 digits>`` (``release``
when the tracker says so).

verl reads ``megatron.dist_checkpointing_path`` with Megatron-Core's ``dist_checkpointing.load`` as the
checkpoint folder itself (``load_mcore_dist_weights`` in verl/utils/model.py, called by the Megatron
engine when ``use_dist_checkpointing`` is on), and loads the model weights only.

So a root is resolved here to its iteration folder; an iteration folder is kept; anything else is
refused with the reason: Hugging Face weights are the role's model path in verl, and a folder that is
not on this machine cannot be resolved (its iteration folder can be written instead).
"""

from __future__ import annotations

import re
from pathlib import Path

# Megatron's names: the tracker file of a checkpoint root, and the folder of one saved iteration.
TRACKER = "latest_checkpointed_iteration.txt"
# What the tracker holds for a saved iteration: its number in ASCII digits (``str.isdigit`` would take
# "²" too, and int() refuses more than 4,300 digits; no run reaches 10**12 iterations).
ITERATION = re.compile(r"[0-9]{1,12}")
RELEASE = "release"
_ITERATION_FOLDER = re.compile(r"iter_\d{7}")

# What marks a folder as a distributed (torch_dist) checkpoint: dist_checkpointing.load reads it first.
DIST_METADATA = "metadata.json"

# Hugging Face's model config: slime loads such a folder as Hugging Face weights.
HF_CONFIG = "config.json"

# Where verl reads a role's Hugging Face weights from, by slime role.
MODEL_PATHS = {"actor": "actor_rollout_ref.model.path", "critic": "critic.model.path"}


class LoadError(ValueError):
    """A ``load`` verl-roles cannot turn into the folder verl loads; ``fix`` says what to write."""

    def __init__(self, message: str, fix: str) -> None:
        super().__init__(message)
        self.fix = fix


def _is(check: str, path: Path) -> bool:
    """``path.exists()`` / ``is_file()`` / ``is_dir()``, false for a name the system cannot look up (a NUL
    byte, a name too long)."""
    try:
        return bool(getattr(path, check)())
    except (OSError, ValueError):
        return False


def is_iteration_folder(path: str) -> bool:
    """Whether ``path`` names one saved iteration of a Megatron checkpoint (``.../iter_0000100``), which
    slime and verl both load as it is."""
    return _ITERATION_FOLDER.fullmatch(Path(path).name) is not None


# The way round: verl's own keys, which the entry may hold as verl paths and which are read as they are.
VERL_PATHS_FIX = ("or give verl's folder as verl paths in the entry: `megatron.dist_checkpointing_path: "
                  "<folder>` and `megatron.use_dist_checkpointing: true`")


def resolve_load(value: str, role: str) -> tuple[str, str]:
    """The folder verl loads for slime's ``load: value`` in ``role``'s entry, and a note saying how it was
    found (empty when ``value`` is that folder); :class:`LoadError` when there is none."""
    root = Path(value)
    if is_iteration_folder(value):
        if _is("exists", root) and not _is("is_file", root / DIST_METADATA):
            raise LoadError(
                f"{value} holds no {DIST_METADATA}, so it is no distributed checkpoint: verl loads the "
                "folder with Megatron-Core's dist_checkpointing, which reads only the distributed "
                "(torch_dist) format",
                "save the checkpoint in Megatron's torch_dist format, or name another iteration folder",
            )
        return value, ""
    if not _is("exists", root):
        raise LoadError(
            f"{value} is not on this machine, so the folder verl loads cannot be found: slime's `load` is "
            f"usually a checkpoint root, whose {TRACKER} names the iteration folder it loads, while verl's "
            "megatron.dist_checkpointing_path must be that folder itself",
            f"write the iteration folder (`load: {value.rstrip('/')}/iter_0000100` for iteration 100: slime "
            "loads it as it is too), "
            f"{VERL_PATHS_FIX}",
        )
    tracker = root / TRACKER
    if _is("is_file", tracker):
        try:
            text = tracker.read_text(encoding="utf-8").strip()
        except (OSError, UnicodeDecodeError) as error:
            raise LoadError(f"{tracker} cannot be read ({type(error).__name__})",
                            "name the iteration folder itself (`load: <root>/iter_0000100`)") from None
        return _iteration_of(value, root, text)
    if _is("is_file", root / HF_CONFIG):
        raise LoadError(
            f"{value} holds Hugging Face weights ({HF_CONFIG}, no {TRACKER}), which slime loads into "
            "Megatron; verl loads a role's Hugging Face weights from its model path, not from a Megatron "
            "checkpoint key",
            f"remove `load` and set {MODEL_PATHS[role]}={value} on the command line",
        )
    raise LoadError(
        f"{value} is no Megatron checkpoint slime loads (no {TRACKER}, not named iter_<7 digits>) and holds "
        f"no {HF_CONFIG}: slime would try to load it as Hugging Face weights",
        f"name the checkpoint root or its iteration folder, {VERL_PATHS_FIX}",
    )


def _iteration_of(value: str, root: Path, text: str) -> tuple[str, str]:
    """The iteration folder the tracker text ``text`` of the checkpoint root ``root`` names."""
    if text == RELEASE:
        name = RELEASE
    elif ITERATION.fullmatch(text):
        name = f"iter_{int(text):07d}"
    else:
        shown = text if len(text) <= 40 else f"{text[:40]}... ({len(text)} characters)"
        raise LoadError(
            f"{value}/{TRACKER} holds {shown!r}, which names no iteration (Megatron writes the iteration as "
            f"ASCII digits, or {RELEASE!r})",
            "name the iteration folder itself (`load: <root>/iter_0000100`)",
        )
    leaf = root / name
    if not _is("is_file", leaf / DIST_METADATA):
        found = "is missing"
        if _is("is_dir", leaf):
            found = f"holds no {DIST_METADATA} (no distributed checkpoint)"
        raise LoadError(
            f"{value}/{TRACKER} names {name}, which {found}: verl loads the folder with Megatron-Core's "
            "dist_checkpointing, which reads only the distributed (torch_dist) format",
            "save the checkpoint in Megatron's torch_dist format, or name another iteration folder",
        )
    resolved = str(Path(value) / name)
    return resolved, (
        f"{value} is a checkpoint root: its {TRACKER} names {name}, so verl loads {resolved} "
        "(megatron.dist_checkpointing_path); verl loads the model weights from it, not the optimizer state "
        "or the iteration slime also restores from a root"
    )

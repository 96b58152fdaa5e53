"""Files a run writes: the whole resolved config and one file per role. Writes are atomic."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from omegaconf import DictConfig, OmegaConf

from verl_roles import paths
from verl_roles.hydra_adapter.yaml_dialect import dump
from verl_roles.layout import ROLE_SECTIONS


def to_yaml(cfg: DictConfig) -> str:
    """The canonical text of a resolved config: same input, byte-identical output.

    The same text as ``OmegaConf.to_yaml(cfg, resolve=True)`` (tests/test_output_yaml.py checks it).
    """
    return dump(OmegaConf.to_container(cfg, resolve=True, enum_to_str=True))


def write_atomic(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` through a temporary file and a rename: no half-written file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        # mkstemp creates the file 0600; give it the mode an ordinary write would (umask applied).
        os.chmod(tmp, 0o666 & ~_umask())
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as handle:
            handle.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def run_files(resolved: DictConfig) -> dict[str, str]:
    """Relative file name -> text, for everything a run writes."""
    container = OmegaConf.to_container(resolved, resolve=True, enum_to_str=True)
    files = {"resolved.yaml": dump(container)}
    for role, section in ROLE_SECTIONS.items():
        files[f"roles/{role}.yaml"] = dump(paths.get(container, section))
    return files


def write_run_files(resolved: DictConfig, out_dir: Path) -> list[Path]:
    """Render every file first, then write them; returns the paths written."""
    files = run_files(resolved)
    written = []
    for name, text in files.items():
        path = out_dir / name
        write_atomic(path, text)
        written.append(path)
    return written

"""What a run writes: the text of ``resolved.yaml`` and of one file per role, rendered before anything is
written (the write protocol, :mod:`verl_roles.runs.write_protocol`, puts them on disk)."""

from __future__ import annotations

from omegaconf import DictConfig, OmegaConf

from verl_roles.base.layout import ROLE_SECTIONS
from verl_roles.inputs import paths
from verl_roles.omegaconf_adapter.yaml_dialect import dump

# The file whose presence says a run's file set is complete (written last).
RESOLVED = "resolved.yaml"

__all__ = ["RESOLVED", "ROLE_SECTIONS", "run_files", "to_yaml"]


def to_yaml(cfg: DictConfig) -> str:
    """The canonical text of a resolved config: same input, byte-identical output.

    The same text as ``OmegaConf.to_yaml(cfg, resolve=True)`` (tests/test_output_yaml.py checks it).
    """
    return dump(OmegaConf.to_container(cfg, resolve=True, enum_to_str=True))


def run_files(resolved: DictConfig) -> dict[str, str]:
    """Relative file name -> text, for everything a run writes: the role files, then ``resolved.yaml``
    (written last, so its presence means the set is complete)."""
    container = OmegaConf.to_container(resolved, resolve=True, enum_to_str=True)
    files = {f"roles/{role}.yaml": dump(paths.get(container, section))
             for role, section in ROLE_SECTIONS.items()}
    files[RESOLVED] = dump(container)
    return files

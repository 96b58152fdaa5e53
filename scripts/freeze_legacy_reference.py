"""Freeze verl's legacy trainer config into the flat reference the legacy-equivalence test reads.

Source: verl's own generated reference configs at the last commit before verl unified
``ppo_trainer.yaml`` and ``ppo_megatron_trainer.yaml`` (repository verl-project/verl, formerly
volcengine/verl): ``verl/trainer/config/_generated_ppo_megatron_trainer.yaml`` and
``verl/trainer/config/_generated_ppo_trainer.yaml``. verl writes those with
``scripts/generate_trainer_config.sh`` (``print_cfg.py --cfg job``), so they hold every key of the
composed legacy config.

Each file is resolved (its ``${...}`` and ``oc.select`` interpolations replaced by their values;
mandatory ``???`` kept as the text ``???``), flattened to ``dotted.key -> value`` and written as
sorted JSON, so the test compares values, not spelling.

usage: python scripts/freeze_legacy_reference.py LEGACY_YAML ENGINE OUT_JSON
  e.g. python scripts/freeze_legacy_reference.py _generated_ppo_megatron_trainer.yaml megatron \
           tests/data/legacy/ppo_megatron_trainer.json
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

from omegaconf import OmegaConf

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # this checkout's verl_roles

from verl_roles.inputs.paths import flat_leaves  # noqa: E402


def freeze(source: Path, engine: str) -> dict[str, object]:
    cfg = OmegaConf.load(source)
    values = flat_leaves(OmegaConf.to_container(cfg, resolve=True, throw_on_missing=False))
    return {
        "source": (
            f"verl {source.name} at the last commit before the ppo_trainer/ppo_megatron_trainer "
            "unification, resolved and flattened by scripts/freeze_legacy_reference.py"
        ),
        "source_sha256": hashlib.sha256(source.read_bytes()).hexdigest(),
        "model_engine": engine,
        "values": dict(sorted(values.items())),
    }


def main(argv: list[str]) -> int:
    if len(argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    source, engine, out = Path(argv[0]), argv[1], Path(argv[2])
    out.parent.mkdir(parents=True, exist_ok=True)
    frozen = freeze(source, engine)
    out.write_text(json.dumps(frozen, indent=1) + "\n", encoding="utf-8")
    print(f"wrote {out} ({len(frozen['values'])} keys)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

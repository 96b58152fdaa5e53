"""The walk of one command line through the package: how often a run moves between verl_roles' modules
and folders, and how often a call climbs back up the tiers (a lower tier calling into a higher one,
through a callback or a hook). A measure of how tangled one run's path is, not of its speed.

    python benchmarks/walk.py [ARGS...]        (default: model_engine=megatron)

Runs the main job with ARGS in this process (its output into a temporary folder) under a profiler hook
that sees every Python call, and counts the calls from one verl_roles module into another:

- stops: the distinct steps (caller module -> callee module) the run takes from one module of verl_roles
  to another, each counted once however often it is taken;
- folder stops: the distinct steps from one folder (concern) to another;
- climbs: the distinct steps whose callee sits in a higher tier than its caller (verl_roles/tiers.py);
- calls across modules: every such call, counted each time;
- modules / folders visited;
- compositions: the calls of Hydra's config loader (``load_configuration``), one per composed config.

Prints one line per figure; deterministic for the same checkout and arguments.
"""

from __future__ import annotations

import io
import sys
import tempfile
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from verl_roles.tiers import rank, tier_of  # noqa: E402

PACKAGE = str(ROOT / "verl_roles") + "/"


def module_of(filename: str) -> str | None:
    if not filename.startswith(PACKAGE) or not filename.endswith(".py"):
        return None
    parts = list(Path(filename[len(PACKAGE):]).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(["verl_roles", *parts])


def folder_of(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 2 else "(root)"


def walk(args: list[str]) -> dict[str, int]:
    from verl_roles.main import main

    edges: set[tuple[str, str]] = set()
    calls = compositions = 0
    cache: dict[str, str | None] = {}

    def profile(frame, event, arg):  # noqa: ANN001 - sys.setprofile's signature
        nonlocal calls, compositions
        if event != "call" or frame.f_back is None:
            return
        filename, caller = frame.f_code.co_filename, frame.f_back.f_code.co_filename
        if frame.f_code.co_name == "load_configuration" and filename.endswith("config_loader_impl.py"):
            compositions += 1
        here = cache[filename] if filename in cache else cache.setdefault(filename, module_of(filename))
        there = cache[caller] if caller in cache else cache.setdefault(caller, module_of(caller))
        if here is not None and there is not None and here != there:
            calls += 1
            edges.add((there, here))

    with tempfile.TemporaryDirectory() as folder:
        argv = [*args, f"hydra.run.dir={folder}/run", "hydra/job_logging=none", "hydra/hydra_logging=none"]
        out = io.StringIO()
        sys.setprofile(profile)
        try:
            with redirect_stdout(out), redirect_stderr(out):
                code = main(argv)
        finally:
            sys.setprofile(None)
    modules = {module for edge in edges for module in edge}
    climbs = [(a, b) for a, b in edges if tier_of(a) and tier_of(b) and rank(tier_of(b)) > rank(tier_of(a))]
    return {
        "stops": len(edges),
        "folder stops": len({(folder_of(a), folder_of(b)) for a, b in edges if folder_of(a) != folder_of(b)}),
        "climbs": len(climbs),
        "calls across modules": calls,
        "modules visited": len(modules),
        "folders visited": len({folder_of(module) for module in modules}),
        "compositions": compositions,
        "exit code": code,
    }


if __name__ == "__main__":
    for name, value in walk(sys.argv[1:] or ["model_engine=megatron"]).items():
        print(f"{name}: {value}")

"""verl as the oracle on a population of command lines: where verl_roles and verl disagree, by class.

Developer measurement (the acceptance suite runs the same properties on a smaller population):

    python scripts/verl_oracle.py --verl-python ~/verl-0.9.1/bin/python --draws 300
    python scripts/verl_oracle.py --verl-python PY --draws 100 --seed 7 --json report.json

Each draw (tests/verl_population.py: a launch of verl's corpus or an engine's bare defaults, mutated) is
composed by verl_roles for the release installed in that Python, and the run directory goes through the
release's own pre-Ray checks (tests/verl_driver.py); the same overrides also go through verl's own config
tree (the control). Every draw lands in one of:

- ``agree: accepted``     we write a config and verl passes every step on it;
- ``agree: refused``      we refuse and verl's own tree refuses the same overrides;
- ``launchable``          we write a config verl passes, where verl's own tree refuses the overrides
                          (our defaults fill what verl leaves unset);
- ``WE ACCEPT, VERL REFUSES``  what we wrote fails a verl step (property (a) of the acceptance suite);
- ``WE REFUSE, VERL ACCEPTS``  verl's own tree passes every step and we refuse: a deliberate difference
                          when tests/verl_known_failures.py lists it (property (b)), otherwise a bug.

The report prints each class with its count, and each disagreement grouped by its error (numbers
elided), with one draw's command line to reproduce it. The warnings we printed are counted too.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
import time
from collections import Counter, defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO), str(REPO / "tests")]

from verl_judge import Case, compose_and_check, failed_steps, one_line, verl_accepts_control  # noqa: E402
from verl_known_failures import deliberate_refusal  # noqa: E402
from verl_population import population  # noqa: E402

from verl_roles.base import releases  # noqa: E402

AGREE_ACCEPTED = "agree: accepted"
AGREE_REFUSED = "agree: refused"
LAUNCHABLE = "launchable"
WE_ACCEPT_VERL_REFUSES = "WE ACCEPT, VERL REFUSES"
WE_REFUSE_VERL_ACCEPTS = "WE REFUSE, VERL ACCEPTS"
DELIBERATE = "we refuse on purpose (verl_known_failures.DELIBERATE_REFUSALS)"
WARNING_LINE = re.compile(r"^verl_roles warning: (.*)$", re.MULTILINE)


def installed_release(python: str) -> str:
    probe = "import importlib.metadata as m; print(m.version('verl'))"
    return subprocess.run([python, "-c", probe], capture_output=True, text=True, check=True).stdout.strip()


def classify(composed, result, release: str, name: str) -> tuple[str, str]:
    """(class, the error that decided it) for one draw."""
    steps = result.get("steps", [])
    if composed.exit_code == 0:
        failed = failed_steps(steps)
        if failed:
            step, error = next(iter(failed.items()))
            return WE_ACCEPT_VERL_REFUSES, f"{step}: {error}"
        return (AGREE_ACCEPTED if verl_accepts_control(result) else LAUNCHABLE), ""
    ours = one_line(composed.stderr.split("verl_roles error:", 1)[-1])
    if verl_accepts_control(result):
        if deliberate_refusal(name, ours, release) or deliberate_refusal("example:*", ours, release):
            return DELIBERATE, ours
        return WE_REFUSE_VERL_ACCEPTS, ours
    return AGREE_REFUSED, ours


def shape(error: str) -> str:
    """An error with its numbers and quoted values elided, so one class is one line."""
    error = re.sub(r"'[^']*'|`[^`]*`", "'…'", error)
    return re.sub(r"\d+(\.\d+)?(e-?\d+)?", "N", error)[:220]


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--verl-python", required=True)
    parser.add_argument("--draws", type=int, default=300)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--start", type=int, default=0)
    parser.add_argument("--json", type=Path, help="write every draw's class and error here")
    parser.add_argument("--work", type=Path, help="keep the run directories here (default: a temp folder)")
    args = parser.parse_args()

    release = installed_release(args.verl_python)
    if not releases.is_supported(release):
        parser.error(f"verl {release} in {args.verl_python} is not a release verl_roles supports")
    draws = list(population(release, args.draws, args.seed, args.start))
    cases = [Case(d.name, (releases.choice(release), *d.ours()), control_args=d.tokens) for d in draws]
    work = args.work or Path(tempfile.mkdtemp(prefix="verl_oracle_"))
    work.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    composed, results = compose_and_check(args.verl_python, work, cases, work / "model", lambda *_: "always")
    seconds = time.perf_counter() - started

    by_class: Counter[str] = Counter()
    groups: dict[tuple[str, str], list[str]] = defaultdict(list)
    warnings: Counter[str] = Counter()
    rows = []
    for d in draws:
        verdict, error = classify(composed[d.name], results["cases"][d.name], release, d.name)
        by_class[verdict] += 1
        for text in WARNING_LINE.findall(composed[d.name].stderr):
            warnings[shape(text)[:140]] += 1
        if verdict in (WE_ACCEPT_VERL_REFUSES, WE_REFUSE_VERL_ACCEPTS, DELIBERATE):
            groups[(verdict, shape(error))].append(d.name)
        rows.append({"draw": d.name, "seed": d.seed, "mutations": list(d.mutations), "class": verdict,
                     "error": error, "line": d.line()})

    print(f"verl {release}: {len(draws)} draws (seed {args.seed}, from {args.start}) in {seconds:.0f} s")
    for verdict, number in by_class.most_common():
        print(f"  {number:4d}  {verdict}")
    by_name = {row["draw"]: row for row in rows}
    for (verdict, error), names in sorted(groups.items(), key=lambda item: (item[0][0], -len(item[1]))):
        example = by_name[names[0]]
        print(f"\n[{verdict}] x{len(names)}: {error}")
        mutations = ", ".join(example["mutations"]) or "no mutation"
        print(f"  e.g. {example['draw']} ({example['seed']} + {mutations})")
        print(f"  {example['line'][:600]}")
    print("\nwarnings printed (draws):")
    for text, number in warnings.most_common(40):
        print(f"  {number:4d}  {text}")
    if args.json:
        args.json.write_text(json.dumps({"release": release, "classes": by_class, "draws": rows}, indent=1))
    return 1 if by_class[WE_ACCEPT_VERL_REFUSES] or by_class[WE_REFUSE_VERL_ACCEPTS] else 0


if __name__ == "__main__":
    sys.exit(main())

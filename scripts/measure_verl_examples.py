"""How close verl_roles is to each verl release: the example launches each composes, and leaf coverage.

Developer measurement (not a test); runs with verl_roles installed and without verl, reading what
scripts/freeze_verl_reference.py froze::

    python scripts/measure_verl_examples.py                    # the report, for every supported release
    python scripts/measure_verl_examples.py --release 0.8.0    # one release (verl_version=0.8.0)
    python scripts/measure_verl_examples.py --json             # the same figures as JSON

It prints, for each release R (verl_roles composing with ``verl_version=R``):

- per corpus source (tests/data/verl_examples/<source>/, the release whose era it is marked): the
  launches, how many verl R composes (tests/data/verl-R/examples_verdicts.json), how many verl_roles
  composes (``verl_roles.compose``), and the launches only one of them composes. Launches whose
  ``--config-path`` names a folder outside verl's package are counted apart: neither side has
  that folder here;
- the launches verl composes and verl_roles refuses, grouped by cause (the kind of error and the key
  it names), each with its first error line;
- per engine verl R ships: of verl's leaves (``_target_`` leaves counted apart), how many exist in
  verl_roles' composition of ``model_engine=<engine>`` with the same resolved value, how many with a
  different one, how many are missing.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import warnings
from collections import defaultdict
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
DATA = REPO / "tests" / "data"
EXAMPLES = DATA / "verl_examples"
sys.path.insert(0, str(REPO))  # this checkout's verl_roles, whatever is installed
OUTSIDE_VERL = "ConfigPathOutsideVerl"


def load_json(path: Path) -> Any:
    return json.loads(path.read_text(encoding="utf-8"))


def read_example(path: Path) -> list[str]:
    lines = path.read_text(encoding="utf-8").splitlines()
    return [line for line in lines if line.strip() and not line.startswith("#")]


def split_config_options(tokens: list[str]) -> tuple[str | None, str | None, list[str]]:
    """(``--config-path``, ``--config-name``, other overrides), as the freeze script splits them."""
    config_path = config_name = None
    rest: list[str] = []
    pending: str | None = None
    for token in tokens:
        if pending is not None:
            config_path, config_name = (token, config_name) if pending == "path" else (config_path, token)
            pending = None
            continue
        match = re.fullmatch(r"(--config-path|-cp|--config-name|-cn)(?:=(.*))?", token)
        if match is None:
            rest.append(token)
            continue
        kind = "path" if match.group(1) in ("--config-path", "-cp") else "name"
        if match.group(2) is None:
            pending = kind
        elif kind == "path":
            config_path = match.group(2)
        else:
            config_name = match.group(2)
    return config_path, config_name, rest


def compose_with_verl_roles(tokens: list[str], release: str) -> tuple[Any | None, str | None]:
    """(config, None) or (None, first line of the error), written for ``release``. ``--config-path``
    naming verl's own folder is dropped (ours is the counterpart); ``--config-name`` is passed as written."""
    import verl_roles
    from verl_roles.base import releases

    _, config_name, overrides = split_config_options(tokens)
    overrides = [releases.choice(release), *overrides]
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            cfg = verl_roles.compose(overrides, **({"config_name": config_name} if config_name else {}))
        return cfg, None
    except Exception as exc:  # noqa: BLE001 - every refusal is a measured outcome
        return None, first_error(exc)


def first_error(exc: BaseException) -> str:
    """``Class: first line``; for a report of several problems, its first problem."""
    lines = [line.strip() for line in str(exc).strip().splitlines() if line.strip()]
    text = lines[0] if lines else ""
    if re.fullmatch(r"\d+ problems in the config:", text) and len(lines) > 1:
        first_problem = re.sub(r"^(\d+\.|[-*])\s*", "", lines[1])
        text = f"{text} {first_problem}"
    return f"{type(exc).__name__}: {text}"


def cause_of(error: str) -> str:
    """A grouping key for an error line: its kind, the key it names and its wording, values left out."""
    kind, _, text = error.partition(": ")
    text = re.sub(r"^\d+ problems in the config: ", "", text)
    match = re.match(r"([A-Za-z_][\w.-]*|model_engine): ", text)
    key = match.group(1) if match else ""
    phrase = text[match.end() :] if match else text
    phrase = re.sub(r"(`[^`]*`|'[^']*'|\"[^\"]*\")", "…", phrase)
    phrase = re.sub(r"\d+(\.\d+)?", "N", phrase).split(". ")[0][:80]
    return f"{kind} {key}: {phrase}" if key else f"{kind} {phrase}"


def measure_examples(release: str) -> dict[str, Any]:
    verdicts = load_json(DATA / f"verl-{release}" / "examples_verdicts.json")["verdicts"]
    summary: dict[str, dict[str, int]] = {}
    order = [
        "launches",
        "composed by verl",
        "composed by verl_roles",
        "verl composes, verl_roles refuses",
        "verl_roles composes, verl refuses",
        "config folder outside verl (not composed by either)",
    ]
    refused: dict[str, list[tuple[str, str]]] = defaultdict(list)
    accepted_only_by_us: list[tuple[str, str]] = []
    for source in sorted(verdicts):
        counts = dict.fromkeys(order, 0)
        for name, verdict in sorted(verdicts[source].items()):
            counts["launches"] += 1
            if verdict.get("error", "").startswith(OUTSIDE_VERL):
                counts["config folder outside verl (not composed by either)"] += 1
                continue
            tokens = read_example(EXAMPLES / source / f"{name}.txt")
            ours, error = compose_with_verl_roles(tokens, release)
            counts["composed by verl"] += bool(verdict["composes"])
            counts["composed by verl_roles"] += ours is not None
            if verdict["composes"] and ours is None:
                counts["verl composes, verl_roles refuses"] += 1
                refused[cause_of(error)].append((f"{source}/{name}", error))
            elif ours is not None and not verdict["composes"]:
                counts["verl_roles composes, verl refuses"] += 1
                accepted_only_by_us.append((verdict["error"], f"{source}/{name}"))
        summary[source] = dict(counts)
    only_ours: dict[str, list[str]] = defaultdict(list)
    for error, name in accepted_only_by_us:
        only_ours[error].append(name)
    return {
        "summary": summary,
        "refused_by_cause": dict(refused),
        "composed_only_by_verl_roles": dict(only_ours),
    }


def measure_coverage(release: str) -> dict[str, Any]:
    from omegaconf import OmegaConf

    import verl_roles
    from verl_roles.base import releases
    from verl_roles.inputs.paths import flat_leaves, same_value

    meta = load_json(DATA / f"verl-{release}" / "meta.json")
    coverage: dict[str, Any] = {}
    for engine in meta["engines"]:
        leaves = load_json(DATA / f"verl-{release}" / "composition" / f"{engine}.json")["leaves"]
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                ours = flat_leaves(OmegaConf.to_container(
                    verl_roles.compose([f"model_engine={engine}", releases.choice(release)])))
            compose_error = None
        except Exception as exc:  # noqa: BLE001 - an engine we lack is a measured outcome
            ours, compose_error = {}, f"{type(exc).__name__}: {str(exc).strip().splitlines()[0]}"
        counts = defaultdict(int)
        differing: list[str] = []
        missing: list[str] = []
        for path, leaf in sorted(leaves.items()):
            group = "_target_ leaves" if path.endswith("._target_") else "leaves"
            counts[f"verl {group}"] += 1
            if path not in ours:
                counts[f"{group} missing"] += 1
                if group == "leaves":
                    missing.append(path)
            elif "resolved" not in leaf:
                counts[f"{group} present, verl has no value ({leaf['unresolved'].split(':')[0]})"] += 1
            elif same_value(leaf["resolved"], ours[path]):
                counts[f"{group} same default"] += 1
            else:
                counts[f"{group} different default"] += 1
                if group == "leaves":
                    differing.append(
                        f"{path}: verl {json.dumps(leaf['resolved'])}, ours {json.dumps(ours[path])}"
                    )
        counts["verl_roles leaves not in verl"] = len(set(ours) - set(leaves))
        coverage[engine] = {
            "compose_error": compose_error,
            "counts": dict(counts),
            "different": differing,
            "missing": missing,
        }
    return coverage


def section_of(path: str) -> str:
    """The section a leaf is reported under: two keys deep (three under actor_rollout_ref)."""
    keys = path.split(".")
    depth = 3 if keys[0] == "actor_rollout_ref" else 2
    return ".".join(keys[: min(depth, len(keys) - 1)]) or path


def print_report(release: str, examples: dict[str, Any], coverage: dict[str, Any], details: bool) -> None:
    print(f"######## verl {release} (verl_roles with verl_version={release})")
    print(f"== verl example launches (verl {release} verdicts frozen in tests/data/verl-{release}/)")
    sources = load_json(DATA / f"verl-{release}" / "meta.json").get("corpus", {}).get("sources", {})
    for source, counts in examples["summary"].items():
        era = sources.get(source, {}).get("release")
        label = f"{source} (launches of verl {era})" if era else source
        print(f"{label}: " + ", ".join(f"{k} {v}" for k, v in counts.items()))
    print()
    print("== launches verl composes and verl_roles refuses, by cause (launch count)")
    for cause, items in sorted(examples["refused_by_cause"].items(), key=lambda kv: (-len(kv[1]), kv[0])):
        print(f"[{len(items)}] {cause}")
        for name, error in items if details else items[:1]:
            print(f"      {name}: {error[:200]}")
    if examples["composed_only_by_verl_roles"]:
        print()
        print("== launches verl_roles composes and verl refuses, by verl's error (launch count)")
        for error, names in sorted(
            examples["composed_only_by_verl_roles"].items(), key=lambda kv: -len(kv[1])
        ):
            print(f"[{len(names)}] {error[:200]}")
            for name in names if details else names[:1]:
                print(f"      {name}")
    print()
    print("== leaf coverage per engine (verl's leaves in verl_roles' composition of model_engine=<engine>)")
    for engine, result in coverage.items():
        counts = result["counts"]
        line = ", ".join(f"{k} {v}" for k, v in counts.items())
        print(f"{engine}: {line}")
        if result["compose_error"]:
            print(f"      verl_roles cannot compose it: {result['compose_error'][:200]}")
            continue
        by_section: dict[str, int] = defaultdict(int)
        for path in result["missing"]:
            by_section[section_of(path)] += 1
        ranked = sorted(by_section.items(), key=lambda kv: (-kv[1], kv[0]))
        print("      missing by section: " + ", ".join(f"{k} {v}" for k, v in ranked))
        if details:
            for item in result["different"]:
                print(f"      different  {item[:200]}")
            for item in result["missing"]:
                print(f"      missing    {item}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Measure verl_roles against the frozen verl reference.")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    parser.add_argument(
        "--details", action="store_true", help="list every refused launch, differing and missing leaf"
    )
    from verl_roles.base import releases

    parser.add_argument("--release", choices=releases.supported(), action="append",
                        help="measure this release only (repeatable; default: every supported release)")
    args = parser.parse_args(argv)
    figures = {}
    for release in args.release or releases.supported():
        figures[release] = {"examples": measure_examples(release), "coverage": measure_coverage(release)}
        if not args.json:
            print_report(release, figures[release]["examples"], figures[release]["coverage"], args.details)
            print()
    if args.json:
        print(json.dumps(figures, indent=1, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())

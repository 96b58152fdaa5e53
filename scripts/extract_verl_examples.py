"""Extract the trainer overrides of verl's PPO launch scripts into tests/data/verl_examples/<source>/.

Developer tool (not used by the tests): it needs a git directory of verl's repository and bash.

    python scripts/extract_verl_examples.py /path/to/verl.git verl-X.Y.Z --rev vX.Y.Z     # a release tag
    python scripts/extract_verl_examples.py /path/to/verl.git some-source --release X.Y.Z  # between releases

(each source's MANIFEST says which commit, and which release, it was written from).

Each source belongs to one verl release (the release of its era: the freeze of that release records the
source as its own corpus). A snapshot with a release tag (``vX.Y.Z``), or else a version file naming a
release, belongs to that release; a snapshot between releases (a ``.dev`` version, no tag) needs
``--release``.

Every ``.sh`` file of the snapshot (``--rev``, default HEAD) that runs ``-m verl.trainer.main_ppo``
is run by bash, from the root of a temporary copy of the snapshot, with nothing else able to run:

- ``PATH`` names no folder, so every external command (python3, uv, ray, tee, date, nvidia-smi, ...)
  reaches a shell function that does nothing and prints nothing, except that a launch of
  ``-m verl.trainer.main_ppo`` records the arguments after the module name, and a Python snippet
  asking verl for the device name is answered ``cuda``;
- the script gets no arguments, so ``$@`` / ``${@}`` expand to nothing;
- the environment is empty but for ``HOME`` (a stand-in); a variable the script requires from the
  environment (bash reports it unbound, or ``${NAME:?...}`` stops the script) gets a fixed stand-in
  (the script's own plain default for it if it has one further down, else STAND_INS, else
  ``ENV_<NAME>``), and the script runs again. Variables with an in-script default
  (``${NAME:-default}``) take that default. ``cd``, ``ulimit`` and sourcing a file that does not
  exist never stop a script.

So bash itself expands the script's variables, arrays and arithmetic. Each recorded launch becomes
``<out>/<source>/<slug>.txt`` (slug: the script path with ``/`` as ``__`` and no ``.sh``; ``-<n>``
per launch when a script launches more than once): a header saying what was substituted, then one
override per line, in launch order (``--config-path`` / ``--config-name`` included). The path of
the temporary copy is written as ``/workspace/verl``. ``<out>/<source>/MANIFEST`` lists the
snapshot's commit, its date, its version file and tags, the release it belongs to, every script found and
what it gave (scripts that launched nothing, with the last line bash printed). The source folder is
rewritten whole.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
from dataclasses import dataclass, field
from io import BytesIO
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
DEFAULT_OUT = REPO / "tests" / "data" / "verl_examples"
# verl's version file, relative to the repository root.
VERSION_FILE = "verl/version/version"
# A version text that names a release (not a development or candidate version), and a release tag.
RELEASE_VERSION = re.compile(r"\d+(\.\d+)+")
RELEASE_TAG = re.compile(r"v(\d+(\.\d+)+)")
LAUNCH = re.compile(r"-m\s+verl\.trainer\.main_ppo(?![\w.])")
REPO_ROOT_STAND_IN = "/workspace/verl"
HOME_STAND_IN = "/home/user"
# Stand-ins for variables scripts take from the environment without a default. Names not listed get
# "ENV_<NAME>". Counts follow verl's own defaults (one node of 8 GPUs).
STAND_INS = {
    "HOME": HOME_STAND_IN,
    "USER": "user",
    "NNODES": "1",
    "NODES": "1",
    "NUM_NODES": "1",
    "NGPUS_PER_NODE": "8",
    "N_GPUS_PER_NODE": "8",
    "GPUS_PER_NODE": "8",
    "NUM_GPUS": "8",
    "N_GPUS": "8",
    "WORLD_SIZE": "8",
    "RANK": "0",
    "NODE_RANK": "0",
    "LOCAL_RANK": "0",
    "MASTER_ADDR": "127.0.0.1",
    "MASTER_PORT": "29500",
    "SLURM_JOB_NUM_NODES": "1",
    "SLURM_NNODES": "1",
    "ARNOLD_WORKER_NUM": "1",
    "ARNOLD_WORKER_GPU": "8",
}
MAX_RUNS = 40
TIMEOUT_SECONDS = 30
# Messages bash prints when a script needs a variable it does not have.
NEEDS_VARIABLE = re.compile(r"line \d+: ([A-Za-z_][A-Za-z0-9_]*): (unbound variable|.*)$", re.MULTILINE)
NOT_VARIABLES = {"ulimit", "cd", "source", "export", "read", "shift", "set", "declare", "local", "exec"}

PREAMBLE = r"""
set -u
command_not_found_handle() {
    { set +x; } 2>/dev/null
    local args=("$@") i=1 files text
    while [ "$i" -lt "${#args[@]}" ]; do
        if [ "${args[$((i - 1))]}" = "-m" ] && [ "${args[$i]}" = "verl.trainer.main_ppo" ]; then
            shopt -s nullglob
            files=("$VERL_CAPTURE_DIR"/launch_*)
            printf '%s\0' "${args[@]:$((i + 1))}" > "$VERL_CAPTURE_DIR/launch_$(printf '%03d' "${#files[@]}")"
            return 0
        fi
        i=$((i + 1))
    done
    text=""
    if [ ! -t 0 ]; then
        while IFS= read -r line || [ -n "$line" ]; do text+="$line"$'\n'; done
    fi
    case "$text ${args[*]}" in
        *get_device_name*) echo cuda ;;
    esac
    return 0
}
cd() { builtin cd "$@" 2>/dev/null || true; }
source() { [ -f "$1" ] || return 0; builtin source "$@"; }
.() { [ -f "$1" ] || return 0; builtin source "$@"; }
ulimit() { builtin ulimit "$@" 2>/dev/null || true; }
"""


@dataclass
class ScriptResult:
    """What running one launch script gave."""

    path: str
    launches: list[list[str]] = field(default_factory=list)
    stand_ins: dict[str, str] = field(default_factory=dict)
    last_error: str = ""


def unpack_snapshot(git_dir: Path, rev: str, into: Path) -> str:
    """Extract ``rev`` of the repository into ``into``; returns the full commit id."""
    commit = git(git_dir, "rev-parse", f"{rev}^{{commit}}").strip()
    archive = subprocess.run(
        ["git", "--git-dir", str(git_dir), "archive", "--format=tar", commit],
        check=True,
        capture_output=True,
    ).stdout
    with tarfile.open(fileobj=BytesIO(archive)) as tar:
        tar.extractall(into, filter="data")
    return commit


def git(git_dir: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "--git-dir", str(git_dir), *args], check=True, capture_output=True, text=True
    ).stdout


def launch_scripts(root: Path) -> list[str]:
    found = []
    for path in sorted(root.rglob("*.sh")):
        if path.is_file() and LAUNCH.search(path.read_text(encoding="utf-8", errors="replace")):
            found.append(path.relative_to(root).as_posix())
    return found


def run_script(root: Path, script: str, preamble: Path) -> ScriptResult:
    """Run one script until it launches or needs no further environment variable."""
    result = ScriptResult(script)
    stand_ins = {"HOME": HOME_STAND_IN}
    for _ in range(MAX_RUNS):
        with tempfile.TemporaryDirectory() as capture:
            env = {"PATH": "/nonexistent", "BASH_ENV": str(preamble), "VERL_CAPTURE_DIR": capture}
            env.update(stand_ins)
            try:
                completed = subprocess.run(
                    ["/bin/bash", script],
                    cwd=root,
                    env=env,
                    stdin=subprocess.DEVNULL,
                    capture_output=True,
                    text=True,
                    errors="replace",
                    timeout=TIMEOUT_SECONDS,
                )
                stderr = completed.stderr
            except subprocess.TimeoutExpired:
                stderr = f"(stopped after {TIMEOUT_SECONDS} s)"
            launches = [read_capture(Path(capture, name)) for name in sorted(os.listdir(capture))]
        if launches:
            result.launches = launches
            break
        needed = needed_variable(stderr, stand_ins)
        if needed is None:
            result.last_error = last_line(stderr)
            break
        numeric_use = [k for k, v in stand_ins.items() if v == needed]
        if numeric_use:
            # bash took the stand-in text as a variable name: the variable is used in arithmetic.
            stand_ins[numeric_use[0]] = "1"
            continue
        stand_ins[needed] = stand_in(needed, (root / script).read_text(encoding="utf-8", errors="replace"))
    result.stand_ins = stand_ins
    return result


def stand_in(name: str, script_text: str) -> str:
    """The value given to a variable the script reads before it sets it: the script's own plain
    default for it (``${NAME:-default}``) or plain value (``NAME=value`` on a line of its own) when it
    has one further down, else STAND_INS, else ``ENV_<NAME>`` (``1`` where bash needs a number)."""
    match = re.search(r"\$\{" + re.escape(name) + r":?[-=]([^}$`]*)\}", script_text)
    if match and match.group(1):
        return match.group(1).strip("\"'")
    assigned = re.search(r"^\s*(?:export\s+)?" + re.escape(name) + r"=([^\s$`;()]+)\s*$", script_text, re.M)
    if assigned:
        return assigned.group(1).strip("\"'")
    return STAND_INS.get(name, f"ENV_{name}")


def read_capture(path: Path) -> list[str]:
    return path.read_bytes().decode("utf-8", errors="replace").split("\0")[:-1]


def needed_variable(stderr: str, known: dict[str, str]) -> str | None:
    for match in reversed(list(NEEDS_VARIABLE.finditer(stderr))):
        name = match.group(1)
        if name not in NOT_VARIABLES and name not in known and "command not found" not in match.group(2):
            return name
    return None


def last_line(text: str) -> str:
    lines = [line for line in text.splitlines() if line.strip() and not line.startswith("+")]
    return lines[-1][:200] if lines else ""


def slug(script: str) -> str:
    return script.removesuffix(".sh").replace("/", "__")


def corpus_text(
    script: str, source: str, commit: str, tokens: list[str], result: ScriptResult, root: Path
) -> str:
    """One launch as a corpus file: a header, then one override per line."""
    overrides = [t.replace(str(root), REPO_ROOT_STAND_IN) for t in tokens if t.strip()]
    if any("\n" in t for t in overrides):
        raise ValueError(f"{script}: an override spans lines; the corpus format cannot hold it")
    used_root = any(REPO_ROOT_STAND_IN in t for t in overrides)
    dropped = len(tokens) - len(overrides)
    stand_ins = ", ".join(f"{k}={v}" for k, v in sorted(result.stand_ins.items()))
    header = [
        f"# Overrides of verl's {script} ({source} snapshot {commit[:12]}), run by bash with no arguments",
        f"# ($@ dropped) and in-script defaults; environment stand-ins: {stand_ins}.",
        "# External commands print nothing (a device probe prints cuda)"
        + (f"; the repository root is {REPO_ROOT_STAND_IN}" if used_root else "")
        + (f"; {dropped} empty or blank argument(s) dropped" if dropped else "")
        + ". One override per line.",
    ]
    return "\n".join(header + overrides) + "\n"


@dataclass
class Snapshot:
    """Facts of the commit a corpus is read from."""

    commit: str
    date: str
    version: str
    tags: list[str]


def snapshot_facts(git_dir: Path, commit: str, root: Path) -> Snapshot:
    version_file = root / VERSION_FILE
    version = version_file.read_text(encoding="utf-8").strip() if version_file.is_file() else ""
    tags = git(git_dir, "tag", "--points-at", commit).split()
    return Snapshot(commit, git(git_dir, "log", "-1", "--format=%ci", commit).strip(), version, sorted(tags))


def release_of(snapshot: Snapshot, given: str | None) -> tuple[str, str]:
    """(release, how it was decided): ``--release`` when given, else the release tag on the snapshot
    (``vX.Y.Z``; a tag can sit on a commit whose version file still says ``.dev``), else the snapshot's
    version file when it names a release; a snapshot between releases without ``--release`` is refused."""
    if given is not None:
        return given, "given with --release"
    tagged = sorted({m.group(1) for tag in snapshot.tags if (m := RELEASE_TAG.fullmatch(tag))})
    if len(tagged) == 1:
        return tagged[0], f"the snapshot's tag v{tagged[0]}"
    if RELEASE_VERSION.fullmatch(snapshot.version) and not tagged:
        return snapshot.version, f"the snapshot's {VERSION_FILE}"
    raise SystemExit(
        f"error: the snapshot {snapshot.commit[:12]} has version "
        f"{snapshot.version or '(no version file)'!r} and release tags {tagged or 'none'}: name the verl "
        "release whose era it is with --release X"
    )


def manifest_text(
    source: str,
    git_dir: Path,
    snapshot: Snapshot,
    release: tuple[str, str],
    results: list[ScriptResult],
    written: dict,
) -> str:
    lines = [
        f"verl examples corpus: {source}",
        f"snapshot: {snapshot.commit} of {git_dir.name if git_dir.name != 'repo' else git_dir.parent.name}",
        f"snapshot date: {snapshot.date}",
        f"snapshot version file: {snapshot.version or '(none)'}",
        f"snapshot tags: {', '.join(snapshot.tags) or '(none)'}",
        f"release: {release[0]} ({release[1]})",
        "written by: scripts/extract_verl_examples.py",
        f"scripts running -m verl.trainer.main_ppo: {len(results)}; launches recorded: {len(written)}",
        "",
    ]
    for result in results:
        files = [name for name, script in written.items() if script == result.path]
        if files:
            lines.append(f"{result.path} -> {', '.join(sorted(files))}")
        else:
            lines.append(f"{result.path} -> no launch ({result.last_error or 'no error printed'})")
    return "\n".join(lines) + "\n"


def extract(git_dir: Path, source: str, out: Path, rev: str, release: str | None) -> tuple[int, int]:
    with tempfile.TemporaryDirectory() as work:
        root = Path(work, "src")
        root.mkdir()
        commit = unpack_snapshot(git_dir, rev, root)
        snapshot = snapshot_facts(git_dir, commit, root)
        belongs_to = release_of(snapshot, release)
        preamble = Path(work, "preamble.sh")
        preamble.write_text(PREAMBLE, encoding="utf-8")
        results = [run_script(root, script, preamble) for script in launch_scripts(root)]
        texts: dict[str, str] = {}
        written: dict[str, str] = {}
        for result in results:
            for number, tokens in enumerate(result.launches, start=1):
                name = slug(result.path) + (f"-{number}" if len(result.launches) > 1 else "") + ".txt"
                texts[name] = corpus_text(result.path, source, commit, tokens, result, root)
                written[name] = result.path
        target = out / source
        if target.exists():
            shutil.rmtree(target)
        target.mkdir(parents=True)
        for name, text in sorted(texts.items()):
            (target / name).write_text(text, encoding="utf-8")
        manifest = manifest_text(source, git_dir, snapshot, belongs_to, results, written)
        (target / "MANIFEST").write_text(manifest, encoding="utf-8")
    return len(results), len(texts)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Extract verl's PPO launch overrides into the corpus.")
    parser.add_argument("git_dir", type=Path, help="a git directory of verl's repository (bare or .git)")
    parser.add_argument("source", help="the corpus folder name for this snapshot, e.g. verl-project")
    parser.add_argument("--rev", default="HEAD", help="the commit or tag to read (default HEAD)")
    parser.add_argument(
        "--release",
        default=None,
        help="the verl release whose era the snapshot is (default: its version file, when that names a "
        "release; required for a snapshot between releases)",
    )
    parser.add_argument(
        "--out", type=Path, default=DEFAULT_OUT, help="corpus root (tests/data/verl_examples)"
    )
    args = parser.parse_args(argv)
    scripts, launches = extract(args.git_dir, args.source, args.out, args.rev, args.release)
    print(f"{args.source}: {scripts} scripts run -m verl.trainer.main_ppo, {launches} launches written")
    return 0


if __name__ == "__main__":
    sys.exit(main())

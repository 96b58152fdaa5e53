#!/usr/bin/env bash
# The acceptance suite against the real verl, for one or more supported releases: builds (or reuses) a
# venv with that release of verl, then runs the tests that need verl (`pytest -m verl`: the oracle of
# tests/test_verl_acceptance.py, launch's runs of verl's checks and trainer, the calls verl makes) with
# VERL_PYTHON set to it, so none of them is skipped.
#
# Usage: scripts/verl_acceptance.sh [--sample] [--venvs-only] RELEASE...   (RELEASE: 0.9.1, 0.9.0, 0.8.0
#        or `all`; run from a venv where this checkout is installed with its test extra)
#   --sample      the documented sample of the population (VERL_ROLES_ACCEPTANCE=sample, docs/testing.md);
#                 without it, the full population
#   --venvs-only  build the venvs and print where each is, run nothing
#
# Each release's venv lives outside the checkout, in $VERL_ROLES_VENVS (default
# ${XDG_CACHE_HOME:-$HOME/.cache}/verl_roles-ci), named by the release and a digest of what is installed
# into it (the requirements of its extra in pyproject.toml, and the torch build), and is reused while it
# is complete and imports that release; a missing, half-built or broken one is built again from scratch.
# It is built with uv (a fast installer sharing one cache among the venvs, files hard-linked) when uv is
# on PATH or importable, else with pip. Where pip is configured with a folder of wheels holding a CPU
# build of torch for this Python (this project's CI machines), torch is that build: verl's CPU checks
# need no CUDA, and the CUDA build is some 3 GB more to fetch and unpack.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
python="${PYTHON:-python}"

sample=0
venvs_only=0
wanted=()
for arg in "$@"; do
  case "$arg" in
    --sample) sample=1 ;;
    --venvs-only) venvs_only=1 ;;
    -h|--help) sed -n '2,19p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) echo "verl_acceptance.sh: unknown option $arg (expected --sample, --venvs-only). Fix: scripts/verl_acceptance.sh --help" >&2; exit 2 ;;
    *) wanted+=("$arg") ;;
  esac
done
supported="$("$python" -c 'from verl_roles.base import releases; print(" ".join(releases.supported()))')"
if [ "${#wanted[@]}" -eq 0 ]; then
  echo "verl_acceptance.sh: name a release ($supported) or all. Fix: scripts/verl_acceptance.sh ${supported##* }" >&2
  exit 2
fi
if [ "${wanted[*]}" = "all" ]; then
  read -r -a wanted <<<"$supported"
fi
for release in "${wanted[@]}"; do
  case " $supported " in
    *" $release "*) ;;
    *) echo "verl_acceptance.sh: verl $release is not a release verl_roles supports ($supported). Fix: scripts/verl_acceptance.sh ${supported##* }" >&2; exit 2 ;;
  esac
done

venvs="${VERL_ROLES_VENVS:-${XDG_CACHE_HOME:-$HOME/.cache}/verl_roles-ci}"

# A CPU build of torch in a folder of wheels pip is configured with (--find-links), for this Python.
cpu_torch() {
  "$python" - <<'EOF'
import glob, os, subprocess, sys
found = subprocess.run([sys.executable, "-m", "pip", "config", "get", "global.find-links"],
                       capture_output=True, text=True).stdout.split()
tag = f"cp{sys.version_info.major}{sys.version_info.minor}"
for folder in found:
    folder = folder.removeprefix("file://")
    for wheel in sorted(glob.glob(os.path.join(folder, f"torch-*+cpu-{tag}-{tag}-*.whl"))):
        version = os.path.basename(wheel).split("-")[1]
        print(folder, version)
        raise SystemExit
EOF
}

installer=pip
if command -v uv >/dev/null 2>&1; then
  installer="uv"
elif "$python" -c 'import uv' >/dev/null 2>&1; then
  installer="$("$python" -c 'import uv; print(uv.find_uv_bin())')"
fi

venv_is_healthy() {  # venv release stamp
  [ -f "$1/.verl_roles-ci-complete" ] && [ "$(cat "$1/.verl_roles-ci-complete")" = "$3" ] &&
    "$1/bin/python" -c '
import importlib.metadata, sys
assert importlib.metadata.version("verl") == sys.argv[1], importlib.metadata.version("verl")
import verl.trainer.main_ppo, tokenizers  # noqa: F401  (what the acceptance driver needs)
' "$2" >/dev/null 2>&1
}

# Builds (or reuses) the venv of one release; prints its path on the last line.
build_venv() {
  local release="$1" extra key stamp venv started
  extra="$("$python" -c 'import sys; from verl_roles.base import releases; print(releases.extra(sys.argv[1]))' "$release")"
  mapfile -t requirements < <("$python" -c '
import sys, tomllib
print("\n".join(tomllib.load(open("pyproject.toml", "rb"))["project"]["optional-dependencies"][sys.argv[1]]))
' "$extra")
  local links=() torch=()
  read -r torch_folder torch_version < <(cpu_torch || true) || true
  if [ -n "${torch_folder:-}" ]; then
    links=(--find-links "$torch_folder")
    torch=("torch==$torch_version")
  fi
  stamp="${requirements[*]} ${torch[*]}"
  key="$(printf '%s\n' "$stamp" | sha256sum | cut -c1-16)"
  venv="$venvs/verl-$release-$key"
  started=$SECONDS
  if venv_is_healthy "$venv" "$release" "$stamp"; then
    echo "verl $release venv: reusing $venv" >&2
  else
    echo "verl $release venv: building $venv with $(basename "$installer") (${requirements[*]} ${torch[*]})" >&2
    rm -rf "$venv"
    mkdir -p "$venvs"
    if [ "$installer" = pip ]; then
      "$python" -m venv "$venv"
      "$venv/bin/python" -m pip install -q --upgrade pip >&2
      "$venv/bin/python" -m pip install -q "${links[@]}" "${torch[@]}" "${requirements[@]}" >&2
    else
      "$installer" venv -q --python "$(command -v "$python")" "$venv" >&2
      "$installer" pip install -q --python "$venv/bin/python" "${links[@]}" "${torch[@]}" "${requirements[@]}" >&2
    fi
    echo "$stamp" >"$venv/.verl_roles-ci-complete"
    if ! venv_is_healthy "$venv" "$release" "$stamp"; then
      echo "verl $release venv: $venv does not import verl $release after a fresh install" >&2
      exit 1
    fi
    echo "verl $release venv: built in $((SECONDS - started)) s" >&2
  fi
  echo "$venv"
}

declare -A built
for release in "${wanted[@]}"; do
  built[$release]="$(build_venv "$release" | tail -n 1)"
  if [ "$venvs_only" = 1 ]; then
    echo "verl $release: ${built[$release]}/bin/python"
  fi
done
[ "$venvs_only" = 1 ] && exit 0

status=0
for release in "${wanted[@]}"; do
  started=$SECONDS
  mode=full
  [ "$sample" = 1 ] && mode=sample
  echo "verl $release: acceptance ($mode population)"
  VERL_PYTHON="${built[$release]}/bin/python" VERL_ROLES_ACCEPTANCE="$mode" \
    "$python" -m pytest -m verl -rxs -p no:cacheprovider || status=1
  echo "verl $release: acceptance took $((SECONDS - started)) s"
done
exit "$status"

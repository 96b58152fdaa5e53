#!/usr/bin/env bash
# Regenerate the resolved-config snapshots in _generated/ from conf/ (the variants are listed in
# verl_roles/commands/snapshots.py). With --check, write nothing: print a unified diff of every stale
# snapshot and exit 1 when any is stale, 0 when all are fresh.
#
# Usage: scripts/generate_trainer_config.sh [--check]
# Uses $PYTHON if set, else python3 (or python) from PATH, i.e. the active virtual environment.
# All snapshots are composed in one Python process.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

python="${PYTHON:-}"
if [ -z "$python" ]; then
  if command -v python3 >/dev/null 2>&1; then
    python=python3
  elif command -v python >/dev/null 2>&1; then
    python=python
  else
    echo "generate_trainer_config.sh: no python3 or python on PATH. Activate the project's virtual environment (pip install -e .) and retry." >&2
    exit 2
  fi
fi

# Compose with this checkout's package and conf/, whatever else is installed.
export PYTHONPATH="$root${PYTHONPATH:+:$PYTHONPATH}"

exec "$python" -c '
import sys
try:
    from verl_roles.commands.snapshots import main
except ImportError as error:
    print(
        f"generate_trainer_config.sh: {sys.executable} cannot import verl_roles ({error}). "
        "Activate the virtual environment of this checkout, or install it: pip install -e .",
        file=sys.stderr,
    )
    sys.exit(2)
sys.exit(main(sys.argv[1:]))
' --root "$root" "$@"

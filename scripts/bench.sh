#!/usr/bin/env bash
# Run every bench/*.py with the venv's python, one after another.
set -euo pipefail

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo_root"
bash scripts/ensure_env.sh
export PATH="$repo_root/.venv/bin:$PATH"

shopt -s nullglob
benches=(bench/*.py)
if [ "${#benches[@]}" -eq 0 ]; then
    printf 'bench: no bench/*.py yet\n'
    exit 0
fi
for bench in "${benches[@]}"; do
    printf '==> %s\n' "$bench"
    python "$bench"
done

#!/usr/bin/env bash
# Static checks: generated code up to date, ruff lint, ruff format, mypy (strict).
set -euo pipefail

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo_root"
bash scripts/ensure_env.sh
export PATH="$repo_root/.venv/bin:$PATH"

step() { printf '==> %s\n' "$*"; }

if [ -f scripts/gen_proto.sh ]; then
    step "gen_proto.sh --check"
    bash scripts/gen_proto.sh --check
fi
step "ruff check"
ruff check .
step "ruff format --check"
ruff format --check .
step "mypy"
mypy

#!/usr/bin/env bash
# The full check: environment, static checks, then pytest.
#   scripts/test.sh                         everything
#   scripts/test.sh tests/test_x.py::test_y  static checks + that test (args go to pytest)
#   TIERED_FAST=1 scripts/test.sh ...        skip the static checks
set -euo pipefail

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo_root"

printf '==> %s\n' "ensure_env"
bash scripts/ensure_env.sh
export PATH="$repo_root/.venv/bin:$PATH"

if [ "${TIERED_FAST:-0}" != 1 ]; then
    bash scripts/lint.sh
fi

printf '==> %s\n' "pytest${*:+ $*}"
status=0
pytest "$@" || status=$?
if [ "$status" -eq 5 ]; then
    printf 'test.sh: pytest collected no tests (exit 5): failing\n' >&2
fi
exit "$status"

#!/usr/bin/env bash
# The full check: environment, static checks, then pytest.
#   scripts/test.sh                         everything
#   scripts/test.sh tests/test_x.py::test_y  static checks + that test (args go to pytest)
#   TIERED_FAST=1 scripts/test.sh ...        skip the static checks
#   TIERED_TEST_WORKERS=N scripts/test.sh     pytest-xdist workers (default 3, whole files each;
#                                             0: one process)
set -euo pipefail

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo_root"

printf '==> %s\n' "ensure_env"
bash scripts/ensure_env.sh
export PATH="$repo_root/.venv/bin:$PATH"

if [ "${TIERED_FAST:-0}" != 1 ]; then
    bash scripts/lint.sh
fi

# Tests spend much of their time waiting on the processes they start: three workers, each taking
# whole files (module fixtures stay in one process; ports come from disjoint shares), in the order
# conftest.py collects them, longest first: xdist would otherwise hand out the files with the most
# tests first, and the few-test files that start whole clusters last, where one of them is the
# run's tail.
workers="${TIERED_TEST_WORKERS:-3}"
parallel=()
if [ "$workers" != 0 ]; then
    parallel=(-n "$workers" --dist loadfile --no-loadscope-reorder)
fi

printf '==> %s\n' "pytest ${parallel[*]}${*:+ $*}"
status=0
pytest "${parallel[@]}" "$@" || status=$?
if [ "$status" -eq 5 ]; then
    printf 'test.sh: pytest collected no tests (exit 5): failing\n' >&2
fi
exit "$status"

#!/usr/bin/env bash
# Quickstart demo (`make demo`): installs what is missing (scripts/ensure_env.sh), then runs
# scripts/demo.py: a local 3-broker cluster, a tiered topic, a disable with the delete policy
# (DISABLING, the Spark bulk delete, DISABLED), a re-enable, and the cluster stopped again.
#   TIERED_DEMO_DIR=DIR       the cluster's data directory (default: a new temporary directory)
#   TIERED_DEMO_RECORDS=N     records produced before the disable (default 24000)
#   TIERED_DEMO_PROFILE=P     local (default) or distributed: the same story on a ZooKeeper
#                             ensemble, an S3 endpoint and a Spark standalone cluster
# Exits non-zero if a step fails; the cluster is stopped in any case.
set -euo pipefail

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo_root"

TIERED_DEMO_STARTED_AT="$(date +%s.%N)"
export TIERED_DEMO_STARTED_AT
bash scripts/ensure_env.sh
exec "$repo_root/.venv/bin/python" scripts/demo.py "$@"

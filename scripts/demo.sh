#!/usr/bin/env bash
# Quickstart demo. The local-cluster demo needs the cluster command, which is not
# in the repo yet; until then this only prepares the environment.
set -euo pipefail

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo_root"
bash scripts/ensure_env.sh

cat <<'MSG'
tiered demo: the environment is ready (.venv, ZooKeeper, Java).
The local-cluster demo (ZooKeeper + controller + brokers, disabling tiered
storage for a topic) arrives with the cluster command; it is not available yet.
Meanwhile, `make test` runs the checks and the test suite.
MSG

#!/usr/bin/env bash
# Quickstart demo. The scripted demo (a disable with --wait on a local cluster) is
# not written yet; until then this prepares the environment and says how to start
# a cluster by hand.
set -euo pipefail

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo_root"
bash scripts/ensure_env.sh

cat <<'MSG'
tiered demo: the environment is ready (.venv, ZooKeeper, Java).
The scripted demo is not written yet. A local cluster by hand:
  .venv/bin/tiered-cluster up --data-dir /tmp/tiered-demo --brokers 3
  .venv/bin/tiered-topics --bootstrap-server <address printed last> --create \
      --topic orders --partitions 3 --config remote.storage.enable=true
  .venv/bin/tiered-configs --bootstrap-server <address> --alter --entity-type topics \
      --entity-name orders --add-config 'remote.log.disable.policy=delete, remote.storage.enable=false' --wait
  .venv/bin/tiered-cluster down --data-dir /tmp/tiered-demo
`make test` runs the checks and the test suite.
MSG

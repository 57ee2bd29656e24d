#!/usr/bin/env bash
# Regenerates tiered/rpc/v1 from proto/tiered/v1 with the pinned grpcio-tools.
# --check: regenerate into a temp dir and fail if the committed code differs.
set -euo pipefail
cd "$(dirname "$0")/.."
py=${PYTHON:-.venv/bin/python}
generate() {  # $1: output root
    # The virtual include path maps proto/tiered/v1 onto the package tiered/rpc/v1, so the
    # generated modules import each other absolutely (tiered.rpc.v1.x_pb2).
    "$py" -m grpc_tools.protoc -Itiered/rpc/v1=proto/tiered/v1 \
        --python_out="$1" --pyi_out="$1" --grpc_python_out="$1" \
        proto/tiered/v1/*.proto
}
if [[ "${1:-}" == "--check" ]]; then
    tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
    generate "$tmp"
    if ! diff -r -q -x __init__.py -x __pycache__ -x py.typed "$tmp/tiered/rpc/v1" tiered/rpc/v1; then
        echo "generated protobuf code is stale: run 'make proto' and commit tiered/rpc/v1" >&2
        diff -r -x __init__.py -x __pycache__ -x py.typed "$tmp/tiered/rpc/v1" tiered/rpc/v1 | head -40 >&2
        exit 1
    fi
    echo "generated protobuf code is up to date"
else
    generate .
    echo "regenerated tiered/rpc/v1"
fi

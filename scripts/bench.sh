#!/usr/bin/env bash
# Run the benchmarks with the venv's python, one after another, then write bench/RESULTS.md.
#
#   make bench                       every benchmark at full size (tens of minutes on 2 CPUs)
#   make bench BENCH=tiering         only bench/tiering.py (BENCH="tiering state_machine": several)
#   make bench BENCH_ARGS=--quick    arguments given to every benchmark (split on spaces)
#
# A benchmark is a bench/*.py that runs as a script (it has `if __name__ == "__main__":`) and is
# not in SKIP below (helpers, the report, data seeding, the seeded S3 endpoint). Each writes
# bench/results/<name>.json with a "summary" of ratios against a baseline measured in the same
# run. A failing benchmark does not stop the others; bench/report.py then writes bench/RESULTS.md
# from every bench/results/*.json (including those of earlier runs), and the script exits 1
# naming the benchmarks that failed.
set -euo pipefail

SKIP=(__init__ common report seed_metadata moto_seeded)

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo_root"
bash scripts/ensure_env.sh
export PATH="$repo_root/.venv/bin:$PATH"

read -r -a bench_args <<<"${BENCH_ARGS:-}"

is_benchmark() {
    local name
    name="$(basename "$1" .py)"
    for skip in "${SKIP[@]}"; do
        [ "$name" = "$skip" ] && return 1
    done
    grep -q '^if __name__ == "__main__":' "$1"
}

benches=()
if [ -n "${BENCH:-}" ]; then
    for name in $BENCH; do
        name="$(basename "$name" .py)"
        if [ ! -f "bench/$name.py" ] || ! is_benchmark "bench/$name.py"; then
            printf 'bench: no benchmark bench/%s.py\n' "$name" >&2
            exit 2
        fi
        benches+=("bench/$name.py")
    done
else
    for file in bench/*.py; do
        if is_benchmark "$file"; then
            benches+=("$file")
        fi
    done
fi

failed=()
timings=()
for bench in "${benches[@]}"; do
    printf '==> %s %s\n' "$bench" "${bench_args[*]:-}"
    started=$(date +%s.%N)
    if python "$bench" ${bench_args[@]+"${bench_args[@]}"}; then
        status=ok
    else
        status="FAILED (exit $?)"
        failed+=("$bench")
    fi
    elapsed=$(python -c "import sys; print(f'{float(sys.argv[2]) - float(sys.argv[1]):.1f}')" \
        "$started" "$(date +%s.%N)")
    timings+=("$bench: $status in ${elapsed} s")
    printf '<== %s: %s in %s s\n\n' "$bench" "$status" "$elapsed"
done

if ! python bench/report.py; then
    failed+=(bench/report.py)
fi

printf '\nbench:\n'
printf '  %s\n' "${timings[@]+"${timings[@]}"}"
if [ "${#failed[@]}" -gt 0 ]; then
    printf 'bench: %d failed: %s\n' "${#failed[@]}" "${failed[*]}" >&2
    exit 1
fi
printf 'bench: results in bench/results/, table in bench/RESULTS.md\n'

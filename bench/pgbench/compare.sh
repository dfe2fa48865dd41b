#!/usr/bin/env bash
# Runs `pgtier bench tatp` and pgbench's TATP mix back to back on the same
# database, alternating, ROUNDS times per thread count, and prints both TPS
# figures and their ratio (issue 2: within ±15 %).
#
#   bench/pgbench/compare.sh URL N_SUBSCRIBERS "1 4 16" DURATION_S [ROUNDS]
#
# PGTIER (default: pgtier on PATH) is the binary to measure. pgtier's figure
# is attempts/s (executed + acceptable errors), which is what pgbench counts:
# its INSERT_CALL_FORWARDING turns the acceptable errors into no-op inserts.
set -euo pipefail
if [[ $# -lt 4 ]]; then
    echo "usage: $0 URL N_SUBSCRIBERS \"THREADS...\" DURATION_S [ROUNDS]" >&2
    exit 2
fi
url=$1 subscribers=$2 threads_list=$3 duration=$4 rounds=${5:-3}
dir=$(cd "$(dirname "$0")" && pwd)
pgtier=${PGTIER:-pgtier}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

printf '%-8s %-6s %12s %12s %8s\n' threads round pgtier_tps pgbench_tps ratio
for threads in $threads_list; do
    for round in $(seq 1 "$rounds"); do
        "$pgtier" bench tatp --url "$url" --subscribers "$subscribers" --threads "$threads" \
            --duration "$duration" --ramp-up 1 --ramp-down 0 --json "$tmp/r.json" >/dev/null
        ours=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["tatp"]["repetitions"][0]["attempts_per_s"])' "$tmp/r.json")
        theirs=$("$dir/run.sh" "$url" "$subscribers" "$threads" "$duration" | sed -n 's/^TPS //p')
        ratio=$(python3 -c "print(f'{$ours / $theirs:.3f}')")
        printf '%-8s %-6s %12.1f %12.1f %8s\n' "$threads" "$round" "$ours" "$theirs" "$ratio"
    done
done

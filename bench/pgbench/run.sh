#!/usr/bin/env bash
# pgbench running TATP's 7-transaction mix (35/10/35/2/14/2/2) with prepared
# statements: the cross-check for `pgtier bench tatp` (issue 2).
#
#   bench/pgbench/run.sh URL N_SUBSCRIBERS THREADS DURATION_S
#
# The database must hold a TATP population of N_SUBSCRIBERS, e.g. from
#   pgtier bench tatp --url URL --populate --populate-only --subscribers N
# Prints pgbench's report, then one line: "TPS <number>".
# PGBENCH_MODE=extended|simple switches pgbench's -M (default: prepared);
# PGBENCH names the pgbench program (default: pgbench on PATH).
set -euo pipefail

if [[ $# -ne 4 ]]; then
    echo "usage: $0 URL N_SUBSCRIBERS THREADS DURATION_S" >&2
    exit 2
fi
url=$1 subscribers=$2 threads=$3 duration=$4
for n in "$subscribers" "$threads" "$duration"; do
    [[ $n =~ ^[1-9][0-9]*$ ]] || { echo "$0: '$n' is not a positive whole number" >&2; exit 2; }
done
dir=$(cd "$(dirname "$0")" && pwd)
pgbench=${PGBENCH:-pgbench}
command -v "$pgbench" >/dev/null || { echo "$0: pgbench not found (apt-get install postgresql-contrib, or set PGBENCH)" >&2; exit 1; }

# NURand's A by the size of the targeted range (TATP spec p. 11).
if (( subscribers <= 1000000 )); then a=65535
elif (( subscribers <= 10000000 )); then a=1048575
else a=2097151
fi

mode=${PGBENCH_MODE:-prepared}
[[ $mode =~ ^(prepared|extended|simple)$ ]] || { echo "$0: PGBENCH_MODE='$mode' is not prepared, extended or simple" >&2; exit 2; }

out=$("$pgbench" -M "$mode" -n -c "$threads" -j "$threads" -T "$duration" \
    -D A="$a" -D MIN=1 -D MAX="$subscribers" \
    -f "$dir/get_subscriber_data.sql@35" \
    -f "$dir/get_new_destination.sql@10" \
    -f "$dir/get_access_data.sql@35" \
    -f "$dir/update_subscriber_data.sql@2" \
    -f "$dir/update_location.sql@14" \
    -f "$dir/insert_call_forwarding.sql@2" \
    -f "$dir/delete_call_forwarding.sql@2" \
    "$url" 2>&1) || { echo "$out" >&2; echo "$0: pgbench failed" >&2; exit 1; }
echo "$out"
tps=$(sed -n 's/^tps = \([0-9.]*\) (without initial connection time)$/\1/p' <<<"$out")
[[ -n $tps ]] || { echo "$0: no tps line in pgbench output" >&2; exit 1; }
echo "TPS $tps"

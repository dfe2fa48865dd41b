#!/usr/bin/env bash
# What a hot standby costs a commit (issue 35): one pgtier server alone,
# then an active with an async standby, then with a sync standby, each
# taking the same pgbench single-row UPDATE load at a fixed rate, so
# latency counts from each transaction's scheduled start (pgbench -R).
# The modes run in turn, ROUNDS times, on the same machine.
# Usage: scripts/ha-commit-cost.sh PGTIER_BIN [ROUNDS] ; knobs: RATE
# (transactions/s, default 2000), DUR (s, default 15), CLIENTS (default 4).
# Prints one line per run: mode, round, tps, p50/p99/max latency (ms).
set -euo pipefail
BIN=$1; ROUNDS=${2:-3}; RATE=${RATE:-2000}; DUR=${DUR:-15}; CLIENTS=${CLIENTS:-4}
PGB=/usr/lib/postgresql/15/bin/pgbench
PSQL=/usr/lib/postgresql/15/bin/psql
BASE=$(mktemp -d /tmp/pgtier-ha-cost.XXXX)
trap 'pkill -f "$BASE" 2>/dev/null || true; rm -rf "$BASE"' EXIT

config() { # port dir [replication lines]
    printf 'listen = "127.0.0.1:%s"\ndata_dir = "%s"\ncommit_mode = "sync"\n[auth]\nmethod = "trust"\n%s' "$1" "$2" "${3:-}"
}

wait_port() {
    for _ in $(seq 100); do
        "$PSQL" -qAt "host=127.0.0.1 port=$1 user=app dbname=app" -c "SELECT 1" >/dev/null 2>&1 && return 0
        sleep 0.1
    done
    echo "server on port $1 did not start" >&2; return 1
}

run() { # mode round
    local mode=$1 round=$2 d="$BASE/$1-$2" repl=""
    mkdir -p "$d"
    if [ "$mode" != none ]; then
        repl=$(printf '[replication]\nrole = "active"\nmode = "%s"\nlisten = "127.0.0.1:5599"\nsync_timeout_ms = 10000\n' "$mode")
    fi
    config 5533 "$d/a" "$repl" > "$d/a.toml"
    "$BIN" serve --config "$d/a.toml" 2> "$d/a.log" & local active=$!
    wait_port 5533
    local standby=""
    if [ "$mode" != none ]; then
        "$BIN" backup --url postgresql://app@127.0.0.1:5533/app "$d/seed" > /dev/null 2>&1
        "$BIN" restore --standby "$d/seed" "$d/s" > /dev/null
        config 5534 "$d/s" "$(printf '[replication]\nrole = "standby"\nmode = "%s"\nprimary = "127.0.0.1:5599"\n' "$mode")" > "$d/s.toml"
        "$BIN" serve --config "$d/s.toml" 2> "$d/s.log" & standby=$!
        wait_port 5534
    fi
    "$PSQL" -q "host=127.0.0.1 port=5533 user=app dbname=app" \
        -c "CREATE TABLE kv (k int PRIMARY KEY, v int NOT NULL)" \
        -c "INSERT INTO kv SELECT g, 0 FROM generate_series(1, 100000) g"
    printf '\\set k random(1, 100000)\nUPDATE kv SET v = v + 1 WHERE k = :k;\n' > "$d/upd.sql"
    (cd "$d" && "$PGB" -n -M prepared -c "$CLIENTS" -j 2 -R "$RATE" -T "$DUR" -l -f upd.sql \
        "host=127.0.0.1 port=5533 user=app dbname=app" > pgbench.out 2>&1)
    # Log lines: client txn latency_us script epoch_s epoch_us lag_us; the
    # latency there already counts from the scheduled start under -R.
    local tps
    tps=$(grep -E "^tps" "$d/pgbench.out" | head -1 | awk '{print $3}')
    cat "$d"/pgbench_log.* | awk '{print $3}' | sort -n | awk -v mode="$mode" -v round="$round" -v tps="$tps" '
        { v[NR] = $1 } END {
            printf "%-6s round %d: tps %s, latency p50 %.3f ms, p99 %.3f ms, max %.3f ms (%d transactions)\n",
                mode, round, tps, v[int(NR * 0.5)] / 1000, v[int(NR * 0.99)] / 1000, v[NR] / 1000, NR }'
    [ -n "$standby" ] && kill "$standby"
    kill "$active"
    wait 2> /dev/null || true
    rm -rf "$d"
}

for round in $(seq "$ROUNDS"); do
    for mode in none async sync; do run "$mode" "$round"; done
done

#!/usr/bin/env bash
# Issue 15's write-through measurements (crates/bench/tests/write_through.rs):
# (1) TATP mix, 16 threads, 2 minutes over the wire on an AWT group, then
#     drain, lag p50/p99 and VERIFY (cache == PostgreSQL, per-table checksums);
# (2) PostgreSQL stopped (immediate mode) for 60 s during a 120 s TATP run:
#     TPS per 5 s window, backlog and lag while down, catch-up and drain
#     times, VERIFY.
# Each starts its own private PostgreSQL with the benchmark settings and an
# in-process pgtier server.
# Usage: scripts/measure-write-through.sh [TEST_NAME_FILTER...]; sizes and
# times through the PGTIER_MEASURE_* variables listed at the top of the test
# file. Output: $OUT/write_through.log, $OUT/write_through_outage.csv and its
# charts (OUT defaults to /tmp/pgtier-measure).
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/pgtier-measure}; mkdir -p "$OUT"
export PGTIER_MEASURE_OUT=$OUT
{ date -u; nproc; grep -m1 'model name' /proc/cpuinfo; uptime; } > "$OUT/write_through.log"
# Built first, then run directly: the runs take minutes and must not hold
# cargo's lock on a shared target directory.
BIN=$(cargo test --release -p pgtier-bench --test write_through --no-run --message-format=json \
  | sed -n 's/.*"executable":"\([^"]*\)".*/\1/p' | tail -1)
"$BIN" --ignored --nocapture --test-threads 1 "$@" 2>&1 | tee -a "$OUT/write_through.log"

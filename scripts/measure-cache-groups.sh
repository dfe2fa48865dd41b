#!/usr/bin/env bash
# Issue 14's cache-group measurements (crates/bench/tests/cache_groups.rs):
# (a) LOAD speed at PARALLEL 1/2/4 + per-table checksums against PostgreSQL,
# (b) TATP direct mode A/B (local population vs loaded group),
# (c) dynamic-load latency, (d) memory budget under read-only TATP.
# Each starts its own private PostgreSQL with the benchmark settings.
# Usage: scripts/measure-cache-groups.sh [TEST_NAME_FILTER...]; sizes and
# windows through the PGTIER_MEASURE_* variables listed at the top of the
# test file. Output: $OUT/cache_groups.log and $OUT/cache_memory_budget.csv
# (OUT defaults to /tmp/pgtier-measure).
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/pgtier-measure}; mkdir -p "$OUT"
export PGTIER_MEASURE_OUT=$OUT
{ date -u; nproc; grep -m1 'model name' /proc/cpuinfo; uptime; } > "$OUT/cache_groups.log"
cargo test --release -p pgtier-bench --test cache_groups -- --ignored --nocapture --test-threads 1 "$@" 2>&1 | tee -a "$OUT/cache_groups.log"

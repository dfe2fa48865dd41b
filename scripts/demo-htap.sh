#!/usr/bin/env bash
# Study 004 (analytics beside OLTP) end to end: builds pgtier with the cargo
# feature `analytics` (the DataFusion executor over the columnar copies),
# release profile as scripts/demo.sh builds (the figures are speed figures;
# a dev build's DataFusion is several times slower), then `pgtier demo htap`:
# a private PostgreSQL, TPC-H on PostgreSQL / pgtier row path / pgtier
# columnar (DuckDB beside them when `python3 -c 'import duckdb'` works),
# compression per table, the freshness proof, CH-benCHmark's three phases;
# results/demo-htap/report.md with charts and htap.json. Ctrl-C stops cleanly
# and leaves a partial report.
#
# The build is long the first time (DataFusion: tens of CPU-minutes in
# release), so the target dir persists: CARGO_TARGET_DIR, default
# ~/.cache/pgtier-target-analytics (apart from target/, whose release
# pgtier scripts/demo.sh builds without the feature: one build would
# overwrite the other's binary).
#
# About 11 minutes of running on 2 shared cores (measured with a debug
# build: 10.6 minutes at the defaults, 17 with 3 timed runs per TPC-H
# query), plus the build.
#
# Knobs (environment): TPCH_SCALE (default 0.1), CH_DURATION seconds per
# phase (40), FRESHNESS_QUERIES (1000), RESULTS dir (results/demo-htap),
# DEMO_ARGS (more `pgtier demo htap` flags, see `pgtier demo htap --help`).
set -euo pipefail
cd "$(dirname "$0")/.."

TPCH_SCALE="${TPCH_SCALE:-0.1}"
CH_DURATION="${CH_DURATION:-40}"
FRESHNESS_QUERIES="${FRESHNESS_QUERIES:-1000}"
RESULTS="${RESULTS:-results/demo-htap}"

bash scripts/ensure-postgres.sh

export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/pgtier-target-analytics}"
echo "==> building pgtier with the analytic executor (release, --features analytics) in $CARGO_TARGET_DIR"
cargo build --release --locked -p pgtier --features analytics
PGTIER="$CARGO_TARGET_DIR/release/pgtier"

echo "==> pgtier demo htap: TPC-H SF $TPCH_SCALE, CH-benCHmark $CH_DURATION s per phase, $FRESHNESS_QUERIES freshness queries"
# shellcheck disable=SC2086 # DEMO_ARGS is a list of flags
exec "$PGTIER" demo htap --tpch-scale "$TPCH_SCALE" --ch-duration "$CH_DURATION" \
  --freshness-queries "$FRESHNESS_QUERIES" --out "$RESULTS" ${DEMO_ARGS:-}

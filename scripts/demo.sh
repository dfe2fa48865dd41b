#!/usr/bin/env bash
# README command 1: the main job. Starts a private PostgreSQL tuned for
# benchmarking (fsync on, synchronous_commit on), populates TATP, runs the
# baseline thread sweep of reference study 000 against PostgreSQL alone, prints
# the report and writes CSV, JSON and charts to results/.
#
# Knobs (environment): SUBSCRIBERS (default 1000000), THREADS (default
# 1,2,4,8,16), DURATION / RAMP_UP seconds per point (default 10 / 3),
# RESULTS dir (default results/).
set -euo pipefail
cd "$(dirname "$0")/.."

SUBSCRIBERS="${SUBSCRIBERS:-1000000}"
THREADS="${THREADS:-1,2,4,8,16}"
DURATION="${DURATION:-10}"
RAMP_UP="${RAMP_UP:-3}"
RESULTS="${RESULTS:-results}"
BACKEND_DIR="${BACKEND_DIR:-.pgtier/demo-backend}"

bash scripts/ensure-postgres.sh

export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$PWD/target}"
echo "==> building pgtier (release)"
cargo build --release --locked -p pgtier
PGTIER="$CARGO_TARGET_DIR/release/pgtier"

echo "==> starting a private PostgreSQL in $BACKEND_DIR"
URL="$("$PGTIER" backend start --dir "$BACKEND_DIR" | tail -n 1)"
trap '"$PGTIER" backend stop --dir "$BACKEND_DIR" >/dev/null 2>&1 || true' EXIT

mkdir -p "$RESULTS"
echo "==> TATP baseline against PostgreSQL: $SUBSCRIBERS subscribers, threads $THREADS"
"$PGTIER" bench tatp --url "$URL" --populate --subscribers "$SUBSCRIBERS" \
  --threads "$THREADS" --duration "$DURATION" --ramp-up "$RAMP_UP" \
  --label postgresql --json "$RESULTS/tatp-postgresql.json" \
  --csv "$RESULTS/tatp-postgresql.csv" --charts "$RESULTS"

echo "==> results in $RESULTS/:"
ls -1 "$RESULTS"

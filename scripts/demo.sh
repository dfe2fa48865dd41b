#!/usr/bin/env bash
# README command 1: the main job, reference study 000 (HLR/TATP) end to end.
# Builds pgtier (release), then `pgtier demo`: a private PostgreSQL (fsync on,
# synchronous_commit on), TATP populated, the baseline thread sweep against
# PostgreSQL alone, an AWT cache group over 16 % of the subscribers LOADed,
# the same sweep against pgtier in direct mode and over the wire, the
# rate-cap search, every side at the capped rate three times (pgtier direct
# in both commit modes), verify, and the report (results/demo/report.md,
# charts beside it). Ctrl-C stops cleanly and leaves a partial report.
# 8 to 10 minutes of running on 2 cores shared with other work (load
# average 7 to 11), plus the build (3 to 6 minutes from scratch).
#
# Knobs (environment): SUBSCRIBERS (default 500000), CACHED_FRACTION (0.16),
# THREADS (1,2,4,8), DURATION / RAMP_UP seconds per point (8 / 2),
# RESULTS dir (results/demo), DEMO_ARGS (more `pgtier demo` flags, see
# `pgtier demo --help`).
set -euo pipefail
cd "$(dirname "$0")/.."

SUBSCRIBERS="${SUBSCRIBERS:-500000}"
CACHED_FRACTION="${CACHED_FRACTION:-0.16}"
THREADS="${THREADS:-1,2,4,8}"
DURATION="${DURATION:-8}"
RAMP_UP="${RAMP_UP:-2}"
RESULTS="${RESULTS:-results/demo}"

bash scripts/ensure-postgres.sh

export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$PWD/target}"
echo "==> building pgtier (release)"
cargo build --release --locked -p pgtier
PGTIER="$CARGO_TARGET_DIR/release/pgtier"

echo "==> pgtier demo: $SUBSCRIBERS subscribers, $CACHED_FRACTION cached, threads $THREADS"
# shellcheck disable=SC2086 # DEMO_ARGS is a list of flags
exec "$PGTIER" demo --subscribers "$SUBSCRIBERS" --cached-fraction "$CACHED_FRACTION" \
  --threads "$THREADS" --duration "$DURATION" --ramp-up "$RAMP_UP" --out "$RESULTS" ${DEMO_ARGS:-}

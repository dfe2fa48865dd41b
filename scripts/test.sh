#!/usr/bin/env bash
# README command 2: installs what the tests need on a fresh Debian machine
# (PostgreSQL server binaries, an unprivileged user to run them, the client
# drivers of crates/server/tests/drivers/ under .pgtier/clients/), then runs the
# whole test suite against real private PostgreSQL clusters.
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/ensure-postgres.sh
# Toolchains and packages of the real-client tests (crates/server/tests/drivers/).
bash scripts/ensure-clients.sh

# A persistent target dir keeps rebuilds cheap across sessions; CI starts empty.
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$PWD/target}"
export CARGO_TERM_COLOR="${CARGO_TERM_COLOR:-never}"

# Formatting (rustfmt.toml) and lints are part of the suite: a change that
# is not formatted or warns fails here, before anything is built for tests.
for tool in rustfmt clippy; do
    cargo "${tool/rustfmt/fmt}" --version >/dev/null 2>&1 || rustup component add "$tool"
done
echo "==> cargo fmt --check"
cargo fmt --all --check
echo "==> cargo clippy -D warnings"
cargo clippy --workspace --all-targets --locked -- -D warnings

# One profile for everything: `cargo test` builds with the test profile, so
# compiling benches and examples with it too (--no-run) costs no second build
# of the workspace and still proves every bench and example compiles.
echo "==> building all targets (test profile)"
cargo test --workspace --all-targets --locked --no-run

echo "==> running tests"
cargo test --workspace --locked --no-fail-fast

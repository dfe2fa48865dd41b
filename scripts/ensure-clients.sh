#!/usr/bin/env bash
# Makes sure this machine can run the real-client tests (crates/server/tests/
# drivers.rs, pgbench.rs): psql and pgbench (from scripts/ensure-postgres.sh),
# and for each driver program in crates/server/tests/drivers/ its toolchain and
# packages, installed under .pgtier/clients/ (gitignored) so the tests run
# offline afterwards:
#   python/  a venv with psycopg 3 (pure Python, on the system libpq5; never the
#            prebuilt psycopg[binary]), SQLAlchemy 2 and Django 5.2 (their
#            pure-Python wheels)                    <- PyPI
#   node/    node_modules with pg                   <- the npm registry
#   m2/      Maven's local repository: pgJDBC and the build plugins <- Maven Central
#   go/      Go module cache (pgx) and build cache  <- the Go module proxy
# Debian packages (apt) only for a missing toolchain: libpq5, python3-venv,
# a JDK, maven, golang, nodejs/npm. Idempotent: each part records the hash of
# its manifest and is skipped while that is unchanged (about a second in all).
# Non-interactive; prints one line per part.
set -euo pipefail
cd "$(dirname "$0")/.."

drivers=crates/server/tests/drivers
clients=$PWD/.pgtier/clients
mkdir -p "$clients"

say() { echo "ensure-clients: $*"; }

if [[ $(id -u) -eq 0 ]]; then
    as_root=()
elif command -v sudo >/dev/null && sudo -n true 2>/dev/null; then
    as_root=(sudo -n)
else
    as_root=(no-root)
fi

apt_updated=false
apt_install() {
    if [[ "${as_root[*]}" == no-root ]]; then
        echo "ensure-clients: need root (or password-less sudo) to install: $*" >&2
        exit 1
    fi
    export DEBIAN_FRONTEND=noninteractive
    if ! $apt_updated; then
        "${as_root[@]}" apt-get update -q >/dev/null
        apt_updated=true
    fi
    "${as_root[@]}" apt-get install -y -q -o Dpkg::Options::=--force-confdef \
        -o Dpkg::Options::=--force-confold "$@" >/dev/null
    say "installed from apt: $*"
}

# Hash of the given files; a part is redone when it changes.
manifest_hash() { cat "$@" | sha256sum | cut -d' ' -f1; }
up_to_date() { [[ -f $1 && "$(cat "$1")" == "$2" ]]; }

# --- system packages ---------------------------------------------------------
ldconfig -p 2>/dev/null | grep -q 'libpq\.so\.5 ' || apt_install libpq5
command -v psql >/dev/null || apt_install postgresql-client
# `ip netns`: the failover tests cut a member off in a network namespace.
command -v ip >/dev/null || apt_install iproute2
python3 -c 'import venv, ensurepip' 2>/dev/null || apt_install python3-venv
command -v javac >/dev/null || apt_install default-jdk-headless
command -v mvn >/dev/null || apt_install maven
command -v go >/dev/null || apt_install golang-go
command -v node >/dev/null || apt_install nodejs
command -v npm >/dev/null || apt_install npm
# The server's TLS-to-backend test makes its CA and certificates with the openssl CLI.
command -v openssl >/dev/null || apt_install openssl

# --- Python: psycopg 3 in a venv ----------------------------------------------
venv=$clients/python
key=$(manifest_hash "$drivers/python/requirements.txt" "$drivers/python/orm-requirements.txt")
if ! up_to_date "$venv/.installed" "$key" || ! "$venv/bin/python" -c 'import psycopg, sqlalchemy, django' 2>/dev/null; then
    rm -rf "$venv"
    python3 -m venv "$venv"
    # psycopg without the [binary] extra: pure Python, loads the system libpq.
    "$venv/bin/pip" install -q --disable-pip-version-check -r "$drivers/python/requirements.txt"
    "$venv/bin/python" -c 'import psycopg; psycopg.pq.version()'
    # SQLAlchemy and Django for the ORM tests, as pure-Python wheels
    # (--platform any admits only py3-none-any wheels, never a compiled one).
    "$venv/bin/pip" download -q --disable-pip-version-check --only-binary :all: --platform any \
        --implementation py --python-version 3.11 --no-deps -d "$venv/wheels" -r "$drivers/python/orm-requirements.txt"
    "$venv/bin/pip" install -q --disable-pip-version-check --no-index --no-deps "$venv"/wheels/*.whl
    echo "$key" >"$venv/.installed"
    say "python venv with $("$venv/bin/python" -c 'import psycopg, sqlalchemy, django; print("psycopg", psycopg.__version__, psycopg.pq.__impl__, "sqlalchemy", sqlalchemy.__version__, "django", django.__version__)')"
else
    say "python venv up to date"
fi

# --- Node: pg ------------------------------------------------------------------
node_dir=$clients/node
key=$(manifest_hash "$drivers/node/package.json" "$drivers/node/package-lock.json")
if ! up_to_date "$node_dir/.installed" "$key" || [[ ! -f $node_dir/node_modules/pg/package.json ]]; then
    rm -rf "$node_dir"
    mkdir -p "$node_dir"
    cp "$drivers/node/package.json" "$drivers/node/package-lock.json" "$node_dir/"
    (cd "$node_dir" && npm ci --no-audit --no-fund --loglevel=error >/dev/null)
    echo "$key" >"$node_dir/.installed"
    say "node_modules with pg $(node -p "require('$node_dir/node_modules/pg/package.json').version")"
else
    say "node_modules up to date"
fi

# --- Java: pgJDBC and Maven's plugins, so tests can build with mvn -o -----------
m2=$clients/m2
key=$(manifest_hash "$drivers/java/pom.xml")
if ! up_to_date "$m2/.installed" "$key"; then
    build=$(mktemp -d)
    if ! log=$(cd "$drivers/java" && mvn -B -q -Dstyle.color=never -Dmaven.repo.local="$m2" \
            -Dpgtier.build.dir="$build" compile 2>&1); then
        echo "$log" >&2
        echo "ensure-clients: maven could not resolve the pgJDBC client's dependencies" >&2
        exit 1
    fi
    rm -rf "$build"
    echo "$key" >"$m2/.installed"
    say "maven repository resolved (pgJDBC, plugins)"
else
    say "maven repository up to date"
fi

# --- Go: pgx module and a warm build cache --------------------------------------
go_dir=$clients/go
key=$(manifest_hash "$drivers/go/go.mod" "$drivers/go/go.sum")
if ! up_to_date "$go_dir/.installed" "$key"; then
    (
        cd "$drivers/go"
        export GOMODCACHE=$go_dir/mod GOCACHE=$go_dir/cache GOFLAGS="-modcacherw -mod=readonly" GOTOOLCHAIN=local
        go mod download
        go build -o /dev/null .
    )
    echo "$key" >"$go_dir/.installed"
    say "go modules downloaded (pgx), build cache warm"
else
    say "go modules up to date"
fi

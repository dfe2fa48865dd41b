#!/usr/bin/env bash
# Makes sure this machine can run pgtier's private PostgreSQL clusters:
#  - PostgreSQL server binaries (initdb, postgres, pg_ctl) and pgbench, found the
#    way crates/backend finds them (PGTIER_PG_BIN, else pg_ctl on PATH, else the
#    newest /usr/lib/postgresql/*/bin), installed from apt when missing;
#  - when run as root, an unprivileged `postgres` user to run them as
#    (PostgreSQL refuses to run as root).
# Idempotent, non-interactive (CI has no stdin), prints one line per action.
set -euo pipefail

required=(initdb postgres pg_ctl)

holds_server_binaries() {
    local dir=$1 program
    for program in "${required[@]}"; do
        [[ -x "$dir/$program" && -f "$dir/$program" ]] || return 1
    done
}

find_bin_dir() {
    if [[ -n "${PGTIER_PG_BIN:-}" ]]; then
        holds_server_binaries "$PGTIER_PG_BIN" && { echo "$PGTIER_PG_BIN"; return 0; }
        return 1
    fi
    local pg_ctl dir
    if pg_ctl=$(command -v pg_ctl 2>/dev/null); then
        dir=$(dirname "$(readlink -f "$pg_ctl")")
        holds_server_binaries "$dir" && { echo "$dir"; return 0; }
    fi
    local newest=""
    for dir in $(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V); do
        holds_server_binaries "$dir" && newest=$dir
    done
    [[ -n "$newest" ]] && { echo "$newest"; return 0; }
    return 1
}

if [[ $(id -u) -eq 0 ]]; then
    as_root=()
elif command -v sudo >/dev/null && sudo -n true 2>/dev/null; then
    as_root=(sudo -n)
else
    as_root=(no-root)
fi

run_as_root() {
    if [[ "${as_root[*]}" == no-root ]]; then
        echo "ensure-postgres: need root (or password-less sudo) to: $*" >&2
        exit 1
    fi
    "${as_root[@]}" "$@"
}

bin_dir=$(find_bin_dir || true)
pgbench_ok() { [[ -n "$bin_dir" && -x "$bin_dir/pgbench" ]] || command -v pgbench >/dev/null; }

if [[ -z "$bin_dir" ]] || ! pgbench_ok; then
    if [[ -n "${PGTIER_PG_BIN:-}" && -z "$bin_dir" ]]; then
        echo "ensure-postgres: PGTIER_PG_BIN=$PGTIER_PG_BIN lacks ${required[*]}; unset it or fix it" >&2
        exit 1
    fi
    export DEBIAN_FRONTEND=noninteractive
    apt_quiet=(-y -q -o Dpkg::Options::=--force-confdef -o Dpkg::Options::=--force-confold)
    run_as_root apt-get update -q >/dev/null
    # Debian's packaging would otherwise create and start a 'main' cluster on
    # port 5432 that nothing here uses: switch that off before installing.
    run_as_root apt-get install "${apt_quiet[@]}" postgresql-common >/dev/null
    if [[ -f /etc/postgresql-common/createcluster.conf ]]; then
        run_as_root sed -ri 's/^#?\s*create_main_cluster\s*=.*/create_main_cluster = false/' \
            /etc/postgresql-common/createcluster.conf
    fi
    # On Debian 12 pgbench ships in postgresql-<major> (pulled in by postgresql);
    # /usr/bin/pgbench is postgresql-client-common's wrapper for it.
    run_as_root apt-get install "${apt_quiet[@]}" postgresql postgresql-contrib >/dev/null
    bin_dir=$(find_bin_dir || true)
    if [[ -z "$bin_dir" ]]; then
        echo "ensure-postgres: installed postgresql but still no ${required[*]} found" >&2
        exit 1
    fi
    echo "ensure-postgres: installed PostgreSQL from apt: $bin_dir ($("$bin_dir/postgres" --version))"
else
    echo "ensure-postgres: PostgreSQL server binaries present: $bin_dir ($("$bin_dir/postgres" --version))"
fi

if [[ $(id -u) -eq 0 ]]; then
    pg_user=${PGTIER_PG_USER:-postgres}
    if id -u "$pg_user" >/dev/null 2>&1; then
        echo "ensure-postgres: PostgreSQL will run as user '$pg_user' (uid $(id -u "$pg_user"))"
    elif [[ "$pg_user" != postgres ]]; then
        echo "ensure-postgres: PGTIER_PG_USER=$pg_user does not exist; create it or unset PGTIER_PG_USER" >&2
        exit 1
    else
        useradd --system --user-group --home-dir /var/lib/postgresql --no-create-home \
            --shell /usr/sbin/nologin "$pg_user"
        echo "ensure-postgres: created system user '$pg_user' to run PostgreSQL (it refuses root)"
    fi
fi

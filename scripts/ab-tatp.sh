#!/usr/bin/env bash
# A/B of two pgtier binaries: TATP direct mode (1M subscribers, async,
# 1 and 2 threads) and server mode (async, event loops, 16 threads), run
# alternately on the same machine (CONTRIBUTING.md, "Benchmark").
# Usage: scripts/ab-tatp.sh OLD_BIN NEW_BIN [ROUNDS]; knobs: SUBS, DUR, RAMP,
# AB_DIR (default /tmp/pgtier-ab), AB_AUTH=scram (the server with an
# [[auth.users]] user instead of trust, so its sessions log in and take the
# privilege checks; trust sessions skip them). Results: $AB_DIR/{old,new}-{direct,server}-N.{log,json};
# compare with `pgtier bench compare OLD.json NEW.json`.
set -euo pipefail
OLD=$1; NEW=$2; ROUNDS=${3:-2} # even, so each binary goes first as often
W=${AB_DIR:-/tmp/pgtier-ab}; mkdir -p "$W"
if [[ ${AB_AUTH:-trust} == scram ]]; then
  AUTH_PW=ab-pw; AUTH_TOML=$'[[auth.users]]\nname = "app"\npassword = "ab-pw"'
else
  AUTH_PW=; AUTH_TOML=$'[auth]\nmethod = "trust"'
fi
DUR=${DUR:-20}; RAMP=${RAMP:-5}; SUBS=${SUBS:-1000000}; PORT=${AB_PORT:-5499}
populate() { # bin name
  rm -rf $W/$2-db
  $1 bench tatp --target embedded:$W/$2-db --commit-mode async --populate-only --populate --subscribers $SUBS --seed 7 > $W/$2-pop.log 2>&1
}
direct() { # bin name round
  $1 bench tatp --target embedded:$W/$2-db --commit-mode async --subscribers $SUBS --threads 1,2 \
     --duration $DUR --ramp-up $RAMP --ramp-down 1 --seed 11 --label $2-direct --json $W/$2-direct-$3.json > $W/$2-direct-$3.log 2>&1
}
server() { # bin name round
  rm -rf $W/$2-srv; mkdir -p $W/$2-srv
  cat > $W/$2-srv/pgtier.toml <<TOML
listen = "127.0.0.1:$PORT"
data_dir = "data"
commit_mode = "async"
$AUTH_TOML
TOML
  $1 serve --config $W/$2-srv/pgtier.toml > $W/$2-srv/serve.log 2>&1 &
  local pid=$!
  # Ready once it logs its address.
  for _ in $(seq 1 100); do grep -q listening $W/$2-srv/serve.log && break; sleep 0.1; done
  local url="postgres://app${AUTH_PW:+:$AUTH_PW}@127.0.0.1:$PORT/app"
  $1 bench tatp --url "$url" --populate --populate-only --subscribers $SUBS --seed 7 > $W/$2-srvpop-$3.log 2>&1
  $1 bench tatp --url "$url" --subscribers $SUBS --threads 16 --duration $DUR --ramp-up $RAMP --ramp-down 1 --seed 11 \
     --label $2-server --json $W/$2-server-$3.json > $W/$2-server-$3.log 2>&1
  kill $pid; wait $pid || true
}
populate $OLD old; populate $NEW new
# The binary that runs second in a pair is measurably slower on a shared
# VM (5-10% at 2 threads): odd rounds run OLD first, even rounds NEW
# first, so an even ROUNDS cancels the order.
for r in $(seq 1 $ROUNDS); do
  if (( r % 2 == 1 )); then
    direct $OLD old $r; direct $NEW new $r
    server $OLD old $r; server $NEW new $r
  else
    direct $NEW new $r; direct $OLD old $r
    server $NEW new $r; server $OLD old $r
  fi
done
echo done

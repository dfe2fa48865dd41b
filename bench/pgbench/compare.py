#!/usr/bin/env python3
"""Runs `pgtier bench tatp` and pgbench's TATP mix (run.sh) back to back on the
same database, alternating, and prints per thread count the median TPS of
each, the median of the per-round ratios (issue 2: within +-15 %), and where
the CPU went:

  client us/txn  CPU of the load generator process (user + system) per txn
  server us/txn  CPU of the PostgreSQL processes per txn (equal when both
                 tools make the server do the same work)

On a small shared machine TPS swings with whatever else runs; the CPU per
transaction does not, so it says whether a TPS gap comes from the client.

  bench/pgbench/compare.py URL DATA_DIR N_SUBSCRIBERS THREADS DURATION_S [ROUNDS]

DATA_DIR is the server's data directory (to find its processes; the server
must run on this host), THREADS a list like 1,4,16. PGTIER names the pgtier
binary (default: pgtier on PATH); extra pgtier flags go in PGTIER_ARGS.
pgtier's TPS is attempts/s (executed + acceptable errors), which is what
pgbench counts (see README.md).
"""

import json
import os
import re
import shlex
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def server_ticks(postmaster):
    """CPU ticks of the postmaster, its live children, and its reaped children."""
    total = 0
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        fields = stat[stat.rfind(")") + 2:].split()
        ppid = int(fields[1])
        utime, stime, cutime, cstime = map(int, fields[11:15])
        if int(pid) == postmaster:
            total += utime + stime + cutime + cstime
        elif ppid == postmaster:
            total += utime + stime
    return total


def measured(cmd, postmaster):
    """Runs cmd; returns (stdout, client CPU s, server CPU s)."""
    before = server_ticks(postmaster)
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    out = proc.stdout.read()
    _, status, usage = os.wait4(proc.pid, 0)
    after = server_ticks(postmaster)
    if status != 0:
        sys.exit(f"{shlex.join(cmd)} failed:\n{out}")
    ticks = os.sysconf("SC_CLK_TCK")
    return out, usage.ru_utime + usage.ru_stime, (after - before) / ticks


def main():
    if len(sys.argv) < 6:
        sys.exit(__doc__)
    url, data_dir, subscribers, threads, duration = sys.argv[1:6]
    rounds = int(sys.argv[6]) if len(sys.argv) > 6 else 3
    pgtier = os.environ.get("PGTIER", "pgtier")
    extra = shlex.split(os.environ.get("PGTIER_ARGS", ""))
    with open(os.path.join(data_dir, "postmaster.pid")) as f:
        postmaster = int(f.readline())
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        result_file = os.path.join(tmp, "r.json")
        for t in threads.split(","):
            for r in range(rounds):
                out, client, server = measured(
                    [pgtier, "bench", "tatp", "--url", url, "--subscribers", subscribers, "--threads", t,
                     "--duration", duration, "--ramp-up", "0", "--ramp-down", "0", "--json", result_file] + extra,
                    postmaster)
                with open(result_file) as f:
                    tps = json.load(f)["tatp"]["repetitions"][0]["attempts_per_s"]
                n = tps * float(duration)
                results.setdefault((t, "pgtier"), []).append((tps, client / n * 1e6, server / n * 1e6))

                out, client, server = measured([os.path.join(HERE, "run.sh"), url, subscribers, t, duration],
                                               postmaster)
                n = int(re.search(r"number of transactions actually processed: (\d+)", out).group(1))
                tps = float(re.search(r"^TPS (\S+)", out, re.M).group(1))
                results.setdefault((t, "pgbench"), []).append((tps, client / n * 1e6, server / n * 1e6))
                print(f"  {t:>3} threads round {r + 1}: pgtier {results[(t, 'pgtier')][-1][0]:9.1f}  "
                      f"pgbench {tps:9.1f}", flush=True)

    # The ratio is the median of per-round ratios: the two runs of a round
    # are back to back, so they share whatever else the machine was doing.
    print(f"{'threads':>7} {'tool':8} {'TPS median':>10} {'ratio':>6} {'client us/txn':>13} {'server us/txn':>13}  all TPS")
    for t in threads.split(","):
        pairs = zip(results[(t, "pgtier")], results[(t, "pgbench")])
        ratio = statistics.median(ours[0] / theirs[0] for ours, theirs in pairs)
        for tool in ("pgtier", "pgbench"):
            runs = results[(t, tool)]
            tps = statistics.median(x[0] for x in runs)
            shown = f"{ratio:6.3f}" if tool == "pgtier" else f"{1:6.3f}"
            print(f"{t:>7} {tool:8} {tps:10.1f} {shown} {statistics.median(x[1] for x in runs):13.1f} "
                  f"{statistics.median(x[2] for x in runs):13.1f}  {[round(x[0]) for x in runs]}")
    print(f"load average at the end: {os.getloadavg()[0]:.1f} (other processes competing for the cores)")


if __name__ == "__main__":
    main()

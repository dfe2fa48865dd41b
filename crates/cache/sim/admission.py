#!/usr/bin/env python3
"""What an admission policy would save `pgtier demo flash` (study 003).

A trace simulation, not pgtier code: TATP's NURand subscriber keys
(A = 65,535 over 300,000 subscribers, the demo's defaults) run through a
model of the two tiers the demo measures, at its four cache sizes:

- DRAM holds a fixed 5 % of the subscribers (the demo's DRAM budget),
  least recently used first out;
- flash holds the rest of the cache size, first in first out (its regions
  are reclaimed oldest first); a flash hit moves the instance to DRAM.

It reports, per key drawn after a warm-up, the loads from PostgreSQL and
the flash reads, for three policies:

- `lru`: what pgtier does today (every instance DRAM evicts goes to flash);
- `tinylfu-flash`: an instance DRAM evicts goes to flash only when a
  frequency sketch counts it more often than the flash record it would push
  out (TinyLFU, Einziger, Friedman and Manes, ACM ToS 2017);
- `tinylfu`: the same, and a key just loaded is kept in DRAM only when it
  is counted more often than DRAM's least recently used instance (otherwise
  it answers its transaction and goes first).

- `sampled-K`: nearer what pgtier's aging could do: DRAM evicts, of K
  instances drawn at random among those not used in the last 20 % of its
  capacity's worth of keys, the one counted least (then the oldest); every
  evicted instance goes to flash. Aging today draws candidates worth twice
  the bytes it frees (K = 2 in effect) and reads each candidate whole.

The sketch here is an exact counter halved every 10 x cache-size accesses;
a count-min sketch of 4-bit counters approximates it in a few bytes per
cached instance. Every access counts (hits too): a sketch fed only by
misses does not help (tried: the 60 % point got worse).

Run: python3 crates/cache/sim/admission.py   (about 10 minutes)
"""

import collections
import random

SUBSCRIBERS = 300_000
NURAND_A = 65_535
DRAM_SHARE = 0.05
DRAWS = 3_000_000
WARM_UP = 1_000_000
SIZES = (0.1, 0.2, 0.4, 0.6)


class Counts:
    """Accesses per key, every count halved each `10 x capacity` accesses."""

    def __init__(self, capacity):
        self.freq = collections.Counter()
        self.period = 10 * capacity
        self.since_halving = 0

    def record(self, key):
        self.freq[key] += 1
        self.since_halving += 1
        if self.since_halving >= self.period:
            self.freq = collections.Counter({k: v // 2 for k, v in self.freq.items() if v > 1})
            self.since_halving = 0

    def __getitem__(self, key):
        return self.freq[key]


def take_from_flash(flash, key):
    """True when `key` was on flash (now promoted), False for a load."""
    if key in flash:
        del flash[key]
        return True
    return False


def draws(seed=1):
    rng = random.Random(seed)
    n = SUBSCRIBERS
    return [((rng.randint(0, NURAND_A) | rng.randint(1, n)) % n) + 1 for _ in range(DRAWS)]


def run_sampled(trace, size, k):
    dram_max = int(SUBSCRIBERS * DRAM_SHARE)
    flash_max = int(SUBSCRIBERS * size) - dram_max
    last_use = {}
    keys, position = [], {}
    flash = collections.OrderedDict()
    freq = Counts(dram_max + flash_max)
    loads = flash_reads = 0
    rng = random.Random(7)
    for i, key in enumerate(trace):
        freq.record(key)
        if key in last_use:
            last_use[key] = i
            continue
        counted = i >= WARM_UP
        if take_from_flash(flash, key):
            flash_reads += counted
        else:
            loads += counted
        last_use[key] = i
        position[key] = len(keys)
        keys.append(key)
        if len(keys) <= dram_max:
            continue
        spare_from = i - int(dram_max * 0.2)
        victim = None
        for _ in range(k):
            drawn = keys[rng.randrange(len(keys))]
            if last_use[drawn] >= spare_from:
                continue
            if victim is None or (freq[drawn], last_use[drawn]) < (freq[victim], last_use[victim]):
                victim = drawn
        if victim is None:
            victim = min(keys, key=last_use.get)
        del last_use[victim]
        at = position.pop(victim)
        moved = keys.pop()
        if at < len(keys):
            keys[at] = moved
            position[moved] = at
        flash[victim] = True
        if len(flash) > flash_max:
            flash.popitem(last=False)
    counted = len(trace) - WARM_UP
    return loads / counted, flash_reads / counted


def run(trace, size, policy):
    if policy.startswith("sampled-"):
        return run_sampled(trace, size, int(policy.split("-")[1]))
    dram_max = int(SUBSCRIBERS * DRAM_SHARE)
    flash_max = int(SUBSCRIBERS * size) - dram_max
    dram = collections.OrderedDict()
    flash = collections.OrderedDict()
    freq = Counts(dram_max + flash_max)
    loads = flash_reads = 0
    for i, key in enumerate(trace):
        if policy != "lru":
            freq.record(key)
        if key in dram:
            dram.move_to_end(key)
            continue
        counted = i >= WARM_UP
        if take_from_flash(flash, key):
            flash_reads += counted
        else:
            loads += counted
        dram[key] = True
        if len(dram) <= dram_max:
            continue
        oldest = next(iter(dram))
        if policy == "tinylfu" and freq[key] <= freq[oldest]:
            victim = key
            del dram[key]
        else:
            victim, _ = dram.popitem(last=False)
        admit = True
        if policy != "lru" and len(flash) >= flash_max:
            admit = freq[victim] > freq[next(iter(flash))]
        if admit:
            flash[victim] = True
            if len(flash) > flash_max:
                flash.popitem(last=False)
    counted = len(trace) - WARM_UP
    return loads / counted, flash_reads / counted


def main():
    trace = draws()
    policies = ("lru", "tinylfu-flash", "tinylfu", "sampled-2", "sampled-4", "sampled-16")
    print("| cache size | " + " | ".join(f"{p}: loads / flash reads per key" for p in policies) + " |")
    print("|---|" + "---:|" * len(policies))
    for size in SIZES:
        cells = [run(trace, size, p) for p in policies]
        print(f"| {size:.0%} | " + " | ".join(f"{l:.3f} / {f:.3f}" for l, f in cells) + " |", flush=True)


if __name__ == "__main__":
    main()

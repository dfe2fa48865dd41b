//! The soak's TATP sessions: this kit's TATP client and standard mix, open
//! loop. Each worker follows its own Poisson schedule at `rate / threads`
//! and charges every transaction from its intended start (a stall is
//! charged to everything due during it, as the driver does). The driver's
//! run is one window whose histograms merge at its end; a soak needs them
//! per interval for hours, so each worker adds to its own [`Interval`],
//! which the sampler swaps for an empty one every sample: that mutex is the
//! worker's own, taken by the sampler once per interval, never contended
//! on the hot path.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use rand::SeedableRng;
use rand::rngs::SmallRng;

use crate::driver::{Outcome, Workload, WorkloadClient, poisson_gap, tighten_timer_slack};
use crate::stats::LatencyHistogram;
use crate::target::Target;
use crate::targets::postgres::PgTarget;
use crate::tatp::TatpWorkload;
use crate::tatp::random::SubscriberKeys;

use super::{Ctx, lock};

/// What one worker did since the sampler last took it.
#[derive(Clone, Debug, Default)]
pub(crate) struct Interval {
    pub(crate) executed: u64,
    pub(crate) acceptable: u64,
    pub(crate) latency: LatencyHistogram,
}

impl Interval {
    pub(crate) fn merge(&mut self, other: &Interval) {
        self.executed += other.executed;
        self.acceptable += other.acceptable;
        self.latency.merge(&other.latency);
    }
}

/// After a failed connect, the wait before the next (errors are counted each time).
const RECONNECT_PAUSE: Duration = Duration::from_secs(1);

fn open(ctx: &Ctx<'_>, workload: &TatpWorkload, thread: u32, seed: u64) -> Option<Box<dyn WorkloadClient>> {
    let session = PgTarget::open(&ctx.server.url)
        .map_err(|e| crate::target::DbError::new(Some(e.sqlstate()), e.to_string()))
        .and_then(|target| target.connect())
        .and_then(|session| workload.open_client(session, thread, seed));
    match session {
        Ok(client) => Some(client),
        Err(e) => {
            ctx.errors.record("tatp", &e, false, ctx.at_s());
            None
        }
    }
}

pub(crate) fn worker(ctx: &Ctx<'_>, thread: u32, slot: &Mutex<Interval>) {
    crate::cpu::name_current_thread(&format!("soak-tatp-{thread}"));
    tighten_timer_slack();
    let seed = ctx.o.seed ^ (u64::from(thread) + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    let workload = TatpWorkload { keys: SubscriberKeys::new(1, ctx.o.subscribers, false) };
    let rate = ctx.o.rate_per_s / f64::from(ctx.o.threads);
    let mut rng = SmallRng::seed_from_u64(seed ^ 0x5A5A_5A5A);
    let mut client = open(ctx, &workload, thread, seed);
    let mut opened = 0u64;
    let mut intended = Instant::now();
    while !ctx.stopped() {
        if client.is_none() {
            if !ctx.sleep(RECONNECT_PAUSE) {
                return;
            }
            opened += 1;
            client = open(ctx, &workload, thread, seed.wrapping_add(opened));
            if client.is_some() {
                ctx.counts.add(&ctx.counts.tatp_reconnects);
            }
            // The schedule restarts: time without a session is an error
            // already counted, not latency.
            intended = Instant::now();
            continue;
        }
        intended += poisson_gap(&mut rng, rate);
        let now = Instant::now();
        if intended > now {
            std::thread::sleep(intended - now);
        }
        let Some(c) = client.as_deref_mut() else { continue };
        match c.run_next() {
            Ok((_, outcome)) => {
                let latency = intended.elapsed();
                let mut s = lock(slot);
                if outcome == Outcome::AcceptableError {
                    s.acceptable += 1;
                } else {
                    s.executed += 1;
                    s.latency.record(latency);
                }
                drop(s);
                ctx.finished.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            }
            Err(e) => {
                ctx.errors.record("tatp", &e, false, ctx.at_s());
                // The session may be inside a failed transaction: a new one.
                client = None;
            }
        }
    }
}

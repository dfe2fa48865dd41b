//! The analytic executor's threads and memory (feature `datafusion`): the
//! tokio runtime DataFusion's partitions run on, each thread pinned and
//! niced as the engine's [`ExecutorPlan`] says, and DataFusion's runtime
//! environment with the memory bound.
//!
//! **Memory.** One pool per engine, shared by its queries (the bound is
//! what analytics may take from the process, not per query): a greedy
//! pool of `memory_limit` bytes, first come first served. No disk manager:
//! DataFusion's default would spill sorts and final hash aggregates to the
//! OS temp directory, writing files pgtier neither sizes nor watches; with
//! it disabled an operator past the bound fails (a final aggregate at
//! once, a sort when it would spill), a partial aggregate emits its groups
//! early first. The refusal names the limit and the operator
//! ([`OlapError::OutOfMemory`], 53200). Without a limit the pool is
//! unbounded, as DataFusion's default.

use std::fmt;
use std::sync::Arc;

use datafusion::error::DataFusionError;
use datafusion::execution::disk_manager::{DiskManagerBuilder, DiskManagerMode};
use datafusion::execution::memory_pool::{
    GreedyMemoryPool, MemoryConsumer, MemoryLimit, MemoryPool, MemoryReservation, UnboundedMemoryPool,
};
use datafusion::execution::runtime_env::{RuntimeEnv, RuntimeEnvBuilder};

use parking_lot::Mutex;

use crate::engine::OlapEngine;
use crate::error::{OlapError, Result};
use crate::resources::{ExecutorPlan, format_bytes};

/// DataFusion's runtime environment for an engine: its memory pool, no
/// spill files.
pub(crate) fn runtime_env(memory_limit: Option<usize>) -> Result<Arc<RuntimeEnv>> {
    let pool: Arc<dyn MemoryPool> = match memory_limit {
        Some(limit) => {
            Arc::new(LimitPool { inner: GreedyMemoryPool::new(limit), limit, last_refusal: Mutex::new(None) })
        }
        None => Arc::new(UnboundedMemoryPool::default()),
    };
    RuntimeEnvBuilder::new()
        .with_memory_pool(pool)
        .with_disk_manager_builder(DiskManagerBuilder::default().with_mode(DiskManagerMode::Disabled))
        .build_arc()
        .map_err(|e| OlapError::Query(format!("cannot set up the executor's memory: {e}")))
}

/// The tokio runtime of the executor: `plan.threads` workers, each pinned
/// and niced by [`ExecutorPlan::on_thread_start`] as it starts.
pub(crate) fn build_runtime(plan: &Arc<ExecutorPlan>) -> std::io::Result<tokio::runtime::Runtime> {
    let started = Arc::clone(plan);
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(plan.threads)
        .thread_name("pgtier-olap-exec")
        .on_thread_start(move || started.on_thread_start())
        .build()
}

impl OlapEngine {
    /// The error of a query that hit the memory bound: DataFusion reports
    /// it as `ResourcesExhausted`, possibly wrapped (a sort adds context, a
    /// repartition shares it between its outputs). An operator that can
    /// spill (a repartition, a sort) fails on the disabled disk manager
    /// instead, after the pool refused it: the refusal is added then (the
    /// latest of this engine's pool, which its concurrent queries share).
    pub(crate) fn out_of_memory(&self, e: &DataFusionError) -> Option<OlapError> {
        let DataFusionError::ResourcesExhausted(why) = e.find_root() else { return None };
        let pool = self.runtime_env.memory_pool.downcast_ref::<LimitPool>();
        let refusal = pool.and_then(|p| p.last_refusal.lock().clone());
        Some(OlapError::OutOfMemory(match refusal {
            Some(refusal) if !why.starts_with(LIMIT_REACHED) => format!("{refusal}; spilling to disk is off ({why})"),
            _ => why.clone(),
        }))
    }
}

const LIMIT_REACHED: &str = "memory limit of ";

/// A greedy pool whose refusal says which bound and which operator. It
/// stays a `ResourcesExhausted`: DataFusion's operators match on it (a
/// partial aggregate emits early instead of failing).
#[derive(Debug)]
struct LimitPool {
    inner: GreedyMemoryPool,
    limit: usize,
    last_refusal: Mutex<Option<String>>,
}

impl fmt::Display for LimitPool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.inner)
    }
}

impl MemoryPool for LimitPool {
    fn name(&self) -> &str {
        "pgtier-olap-limit"
    }

    fn register(&self, consumer: &MemoryConsumer) {
        self.inner.register(consumer);
    }

    fn unregister(&self, consumer: &MemoryConsumer) {
        self.inner.unregister(consumer);
    }

    fn grow(&self, reservation: &MemoryReservation, additional: usize) {
        self.inner.grow(reservation, additional);
    }

    fn shrink(&self, reservation: &MemoryReservation, shrink: usize) {
        self.inner.shrink(reservation, shrink);
    }

    fn try_grow(&self, reservation: &MemoryReservation, additional: usize) -> datafusion::error::Result<()> {
        self.inner.try_grow(reservation, additional).map_err(|e| match e {
            DataFusionError::ResourcesExhausted(_) => {
                let refusal = format!(
                    "{LIMIT_REACHED}{} (memory_limit) reached: {} asked for {} more, holding {}; {} of the limit free",
                    format_bytes(self.limit),
                    reservation.consumer().name(),
                    format_bytes(additional),
                    format_bytes(reservation.size()),
                    format_bytes(self.limit.saturating_sub(self.inner.reserved())),
                );
                *self.last_refusal.lock() = Some(refusal.clone());
                DataFusionError::ResourcesExhausted(refusal)
            }
            other => other,
        })
    }

    fn reserved(&self) -> usize {
        self.inner.reserved()
    }

    fn memory_limit(&self) -> MemoryLimit {
        MemoryLimit::Finite(self.limit)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::OlapConfig;

    /// Runs `probe` in 8 tasks on the executor `config` plans and returns
    /// what each saw, with the plan's report after they ran.
    #[cfg(target_os = "linux")]
    fn on_workers<T: Send + 'static>(
        config: &OlapConfig,
        probe: fn() -> T,
    ) -> (Vec<T>, crate::resources::ExecutorReport) {
        let plan = Arc::new(ExecutorPlan::new(config));
        let rt = build_runtime(&plan).unwrap();
        let seen = rt.block_on(async {
            let mut seen = Vec::new();
            for _ in 0..8 {
                seen.push(tokio::spawn(async move { probe() }).await.unwrap());
            }
            seen
        });
        (seen, plan.report())
    }

    /// Each worker lowers its own priority by `nice` and, pinned, runs on
    /// its CPU only.
    #[cfg(target_os = "linux")]
    #[test]
    fn workers_are_niced_and_pinned() {
        let base = crate::resources::current_thread_nice();
        let config =
            OlapConfig { threads: 2, nice: 3, placement: crate::resources::Placement::Pack, ..OlapConfig::default() };
        let (seen, report) = on_workers(&config, || {
            let cpus = std::fs::read_to_string("/proc/thread-self/status")
                .unwrap()
                .lines()
                .find_map(|l| l.strip_prefix("Cpus_allowed_list:").map(|v| v.trim().to_owned()))
                .unwrap();
            (crate::resources::current_thread_nice(), cpus)
        });
        assert!(report.thread_errors.is_empty(), "{report}");
        assert!(report.threads_started >= 1, "{report}");
        let workers: Vec<String> = report.worker_cpus.iter().map(|c| c.unwrap().to_string()).collect();
        for (nice, cpus) in seen {
            assert_eq!(nice, (base + 3).min(19), "{report}");
            assert!(workers.contains(&cpus), "a worker runs on {cpus}, planned {workers:?}");
        }
    }

    /// With `sched_idle` every worker runs under SCHED_IDLE (and `nice`
    /// is not applied on top).
    #[cfg(target_os = "linux")]
    #[test]
    fn workers_run_under_sched_idle_when_asked() {
        let base = crate::resources::current_thread_nice();
        let config = OlapConfig { threads: 2, nice: 3, sched_idle: true, ..OlapConfig::default() };
        // SAFETY: plain system call on the calling thread.
        let (seen, report) =
            on_workers(&config, || (unsafe { libc::sched_getscheduler(0) }, crate::resources::current_thread_nice()));
        assert!(report.thread_errors.is_empty(), "{report}");
        assert!(report.to_string().contains("SCHED_IDLE"), "{report}");
        for (policy, nice) in seen {
            assert_eq!(policy, libc::SCHED_IDLE, "{report}");
            assert_eq!(nice, base, "{report}");
        }
    }

    #[test]
    fn the_bound_is_reported_with_the_operator() {
        let env = runtime_env(Some(1 << 20)).unwrap();
        assert!(!env.disk_manager.tmp_files_enabled());
        let r = MemoryConsumer::new("HashJoinInput").register(&env.memory_pool);
        r.try_grow(1000).unwrap();
        let e = r.try_grow(1 << 20).unwrap_err();
        let DataFusionError::ResourcesExhausted(why) = e.find_root() else { panic!("{e}") };
        assert_eq!(
            why,
            "memory limit of 1MB (memory_limit) reached: HashJoinInput asked for 1MB more, holding 1000 bytes; \
             1047576 bytes of the limit free"
        );
        let pool = env.memory_pool.downcast_ref::<LimitPool>().unwrap();
        assert_eq!(pool.last_refusal.lock().as_deref(), Some(why.as_str()));
    }
}

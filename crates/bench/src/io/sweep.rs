//! A run, point by point: pgtier's measurement, then fio's with the
//! equivalent job when fio is there. The caller loops over
//! [`IoPlan::points`], shows progress from the ticks and writes the
//! results after each point, so an interrupted sweep still leaves them.

use std::time::Duration;

use super::IoError;
use super::fio::{self, FioStatus};
use super::measure::measure_point;
use super::output::{IoRun, PointResult, Settings, method};
use super::spec::{IoPlan, Mode, Point};
use super::target::Target;
use crate::report;

/// How long fio may take beyond its warm-up and window before it is stopped.
const FIO_GRACE: Duration = Duration::from_secs(60);

/// What is running, for a progress line.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
    Pgtier,
    Fio,
}

/// The run's result file before its first point.
pub fn new_run(plan: &IoPlan, target: Target, fio: &FioStatus) -> IoRun {
    let settings = Settings {
        modes: plan.modes.clone(),
        read_pct: plan.read_pct,
        block_sizes: plan.block_sizes.clone(),
        queue_depths: plan.queue_depths.clone(),
        duration_s: plan.duration.as_secs_f64(),
        warmup_s: plan.warmup.as_secs_f64(),
        direct_requested: plan.direct,
        fsync_every: plan.fsync_every,
        seed: plan.seed,
    };
    IoRun {
        tool_version: env!("CARGO_PKG_VERSION").to_owned(),
        started_at: report::now_rfc3339(),
        machine: report::machine_info(),
        method: method(&settings, &target),
        target,
        settings,
        fio: fio.describe(),
        fio_version: match fio {
            FioStatus::Found(f) => Some(f.version.clone()),
            _ => None,
        },
        points: Vec::new(),
    }
}

/// Measures `point` with pgtier, then with fio if found. A fio failure is
/// recorded in the result, not returned: pgtier's figures stand alone.
/// `tick(phase, elapsed in the phase, I/Os completed so far by pgtier)`.
pub fn run_point(
    plan: &IoPlan,
    target: &Target,
    fio: &FioStatus,
    point: Point,
    tick: &mut dyn FnMut(Phase, Duration, Option<u64>),
) -> Result<PointResult, IoError> {
    let pgtier = measure_point(target, plan, point, &mut |ios, elapsed| tick(Phase::Pgtier, elapsed, Some(ios)))?;
    let mut result = PointResult {
        point,
        read_pct: (point.mode == Mode::Mixed).then_some(plan.read_pct),
        pgtier,
        fio: None,
        fio_error: None,
        fio_command: None,
    };
    if let FioStatus::Found(found) = fio {
        let args = fio::job_args(target, plan, &point);
        result.fio_command = Some(fio::command_line(found, &args));
        let limit = plan.warmup + plan.duration + FIO_GRACE;
        match fio::run(found, &args, limit, &mut |elapsed| tick(Phase::Fio, elapsed, None)) {
            Ok(figures) => result.fio = Some(figures),
            Err(e) => result.fio_error = Some(e),
        }
    }
    Ok(result)
}

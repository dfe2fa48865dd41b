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
        method: method(&settings, &target, matches!(fio, FioStatus::Found(_))),
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

/// Measures `point` with pgtier and, if found, with fio; `fio_first`
/// puts fio before pgtier (callers alternate it, so whatever the first run
/// leaves the device doing, such as writing back a cache, does not always
/// fall on the same side). A fio failure is recorded in the result, not
/// returned: pgtier's figures stand alone.
/// `tick(phase, elapsed in the phase, I/Os completed so far by pgtier)`.
pub fn run_point(
    plan: &IoPlan,
    target: &Target,
    fio: &FioStatus,
    point: Point,
    fio_first: bool,
    tick: &mut dyn FnMut(Phase, Duration, Option<u64>),
) -> Result<PointResult, IoError> {
    let found = match fio {
        FioStatus::Found(found) => Some(found),
        _ => None,
    };
    let mut result = PointResult {
        point,
        read_pct: (point.mode == Mode::Mixed).then_some(plan.read_pct),
        pgtier: Default::default(),
        fio: None,
        fio_error: None,
        fio_command: None,
        fio_ran_first: found.is_some() && fio_first,
        load_average: None,
    };
    let run_fio = |result: &mut PointResult, tick: &mut dyn FnMut(Phase, Duration, Option<u64>)| {
        let Some(found) = found else { return };
        let args = fio::job_args(target, plan, &point);
        result.fio_command = Some(fio::command_line(found, &args));
        let limit = plan.warmup + plan.duration + FIO_GRACE;
        match fio::run(found, &args, limit, &mut |elapsed| tick(Phase::Fio, elapsed, None)) {
            Ok(figures) => result.fio = Some(figures),
            Err(e) => result.fio_error = Some(e),
        }
    };
    if result.fio_ran_first {
        run_fio(&mut result, tick);
    }
    result.pgtier = measure_point(target, plan, point, &mut |ios, elapsed| tick(Phase::Pgtier, elapsed, Some(ios)))?;
    if !result.fio_ran_first {
        run_fio(&mut result, tick);
    }
    result.load_average = load_average();
    Ok(result)
}

/// The 1-minute load average (/proc/loadavg).
fn load_average() -> Option<f64> {
    std::fs::read_to_string("/proc/loadavg").ok()?.split_whitespace().next()?.parse().ok()
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use std::path::PathBuf;

    use super::super::fio::fake_fio;
    use super::super::target::prepare;
    use super::*;

    fn setup(dir: &std::path::Path) -> (IoPlan, Target) {
        let plan = IoPlan {
            size_bytes: 4 << 20,
            duration: Duration::from_millis(200),
            ..IoPlan::for_test(dir.join("s.bench"))
        };
        let target = prepare(&plan, &mut |_, _| {}).unwrap();
        (plan, target)
    }

    /// The phases in the order the ticks saw them first.
    fn run(plan: &IoPlan, target: &Target, fio: &FioStatus, fio_first: bool) -> (PointResult, Vec<Phase>) {
        let mut order = Vec::new();
        let point = plan.points()[0];
        let result = run_point(plan, target, fio, point, fio_first, &mut |phase, _, _| {
            if !order.contains(&phase) {
                order.push(phase);
            }
        })
        .unwrap();
        (result, order)
    }

    #[test]
    fn fio_beside_pgtier_in_either_order() {
        let dir = tempfile::tempdir().unwrap();
        let (plan, target) = setup(dir.path());
        let fixture = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("src/io/fixtures/fio-randread-4k-qd2.json");
        let fio = FioStatus::Found(fake_fio(dir.path(), &format!("sleep 0.3; cat {}", fixture.display())));
        for fio_first in [false, true] {
            let (r, order) = run(&plan, &target, &fio, fio_first);
            let want = if fio_first { [Phase::Fio, Phase::Pgtier] } else { [Phase::Pgtier, Phase::Fio] };
            assert_eq!(order, want);
            assert_eq!(r.fio_ran_first, fio_first);
            assert!(r.pgtier.ios > 0 && r.fio.as_ref().unwrap().ios == 19885, "{r:?}");
            assert!(r.fio_command.as_ref().unwrap().contains("--rw=randread --bs=4096"), "{r:?}");
            assert!(r.iops_ratio().is_some() && r.fio_error.is_none());
            assert!(r.load_average.is_some_and(|l| l >= 0.0), "{r:?}");
        }
    }

    #[test]
    fn a_failing_fio_leaves_pgtier_figures_and_its_reason() {
        let dir = tempfile::tempdir().unwrap();
        let (plan, target) = setup(dir.path());
        let fio = FioStatus::Found(fake_fio(dir.path(), "echo 'fio: bad option' >&2; exit 1"));
        let (r, _) = run(&plan, &target, &fio, false);
        assert!(r.pgtier.ios > 0);
        assert!(r.fio.is_none() && r.iops_ratio().is_none());
        assert_eq!(r.fio_error.as_deref(), Some("fio exited with exit status: 1: fio: bad option"));
        let (r, order) = run(&plan, &target, &FioStatus::Skipped, true);
        assert_eq!(order, [Phase::Pgtier]);
        assert!(!r.fio_ran_first && r.fio_command.is_none() && r.fio_error.is_none());
    }
}

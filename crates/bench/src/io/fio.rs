//! fio beside pgtier: each point run again by fio with the equivalent job
//! (`--ioengine=psync --numjobs=QD --group_reporting`, same file, block
//! size, mode, O_DIRECT, warm-up and window), its JSON output parsed, so
//! the table shows both and their ratio. fio's latencies are its
//! completion latency (`clat_ns`; for psync the whole call, `slat` is 0),
//! percentiles from its own histogram (about 1.5 % buckets).

use std::io::Read;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::spec::{IoPlan, Mode, Point};
use super::target::Target;
use crate::result::LatencyUs;

/// fio on this machine.
#[derive(Clone, Debug, PartialEq)]
pub struct Fio {
    pub path: PathBuf,
    /// e.g. "fio-3.33".
    pub version: String,
}

/// Whether fio can run beside pgtier, and the one line that says so.
#[derive(Clone, Debug, PartialEq)]
pub enum FioStatus {
    Found(Fio),
    /// `--no-fio`.
    Skipped,
    /// Not on PATH, or on it and not answering `--version`: the reason.
    Unavailable(String),
}

impl FioStatus {
    pub fn describe(&self) -> String {
        match self {
            FioStatus::Found(fio) => {
                format!(
                    "{} at {}: each point run again by fio with the equivalent job",
                    fio.version,
                    fio.path.display()
                )
            }
            FioStatus::Skipped => "not run (--no-fio)".to_owned(),
            FioStatus::Unavailable(why) => why.clone(),
        }
    }
}

/// Looks for `fio` on PATH and asks its version.
pub fn detect() -> FioStatus {
    let Some(path) = find_on_path("fio", std::env::var_os("PATH").as_deref()) else {
        return FioStatus::Unavailable(
            "fio is not installed (not on PATH), so only pgtier's figures are shown; \
             `apt-get install fio` adds the side-by-side comparison"
                .to_owned(),
        );
    };
    match Command::new(&path).arg("--version").output() {
        Ok(out) if out.status.success() => {
            let version = String::from_utf8_lossy(&out.stdout).trim().to_owned();
            FioStatus::Found(Fio { path, version })
        }
        Ok(out) => FioStatus::Unavailable(format!(
            "{} --version failed ({}); fio comparison skipped",
            path.display(),
            out.status
        )),
        Err(e) => FioStatus::Unavailable(format!("{} cannot run ({e}); fio comparison skipped", path.display())),
    }
}

fn find_on_path(name: &str, path_var: Option<&std::ffi::OsStr>) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    std::env::split_paths(path_var?).map(|dir| dir.join(name)).find(|candidate| {
        std::fs::metadata(candidate).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    })
}

/// fio's figures at one point.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct FioFigures {
    pub ios: u64,
    pub iops: f64,
    /// 10^6 bytes per second (fio's `bw_bytes` / 10^6).
    pub mb_per_s: f64,
    /// Completion latency (`clat_ns`) in µs; p50..p99.9 from fio's percentiles.
    pub latency_us: LatencyUs,
    /// fio's `usr_cpu` and `sys_cpu` as it reports them with `group_reporting`.
    pub usr_cpu: f64,
    pub sys_cpu: f64,
}

/// fio's arguments for the job equivalent to `point` on `target`.
pub fn job_args(target: &Target, plan: &IoPlan, point: &Point) -> Vec<String> {
    let ms = |d: Duration| format!("{}ms", d.as_millis());
    let mut args = vec![
        "--name=pgtier-io".to_owned(),
        format!("--filename={}", target.path.display()),
        format!("--direct={}", u8::from(target.direct)),
        format!("--rw={}", point.mode.fio_rw()),
        format!("--bs={}", point.block_size),
        "--ioengine=psync".to_owned(),
        format!("--numjobs={}", point.queue_depth),
        "--thread".to_owned(),
        "--group_reporting".to_owned(),
        "--time_based".to_owned(),
        format!("--runtime={}", ms(plan.duration)),
        format!("--ramp_time={}", ms(plan.warmup)),
        "--output-format=json".to_owned(),
        // The prepared file as it is: never created, extended or laid out by fio.
        "--allow_file_create=0".to_owned(),
        // Uniform offsets with replacement, fresh each run, as pgtier draws them.
        "--norandommap".to_owned(),
        "--randrepeat=0".to_owned(),
        // Reads and writes of a mixed job in one set of figures, as pgtier reports them.
        "--unified_rw_reporting=mixed".to_owned(),
    ];
    if point.mode == Mode::Mixed {
        args.push(format!("--rwmixread={}", plan.read_pct));
    }
    if point.mode.is_random() {
        args.push(format!("--size={}", target.size_bytes));
    } else {
        // Each job its own slice, side by side, as pgtier's threads.
        let (_, blocks) = super::measure::slice(target.size_bytes / point.block_size, u64::from(point.queue_depth), 0);
        let slice_bytes = blocks * point.block_size;
        args.push(format!("--size={slice_bytes}"));
        args.push(format!("--offset_increment={slice_bytes}"));
    }
    if let Some(every) = plan.fsync_every {
        args.push(format!("--fsync={every}"));
    }
    args
}

/// "fio --name=... --filename=..." as a user would type it.
pub fn command_line(fio: &Fio, args: &[String]) -> String {
    let mut line = fio.path.display().to_string();
    for a in args {
        line.push(' ');
        line.push_str(a);
    }
    line
}

/// Runs fio with `args`, killing it after `limit`; `tick(elapsed)` about
/// every 100 ms. The error is one line: fio's own message when it has one.
pub fn run(fio: &Fio, args: &[String], limit: Duration, tick: &mut dyn FnMut(Duration)) -> Result<FioFigures, String> {
    let mut child = Command::new(&fio.path)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot start {}: {e}", fio.path.display()))?;
    // Read both pipes while fio runs, so a chatty fio never blocks on a full pipe.
    let reader = |pipe: Option<Box<dyn Read + Send>>| {
        std::thread::spawn(move || {
            let mut text = String::new();
            if let Some(mut p) = pipe {
                let _ = p.read_to_string(&mut text);
            }
            text
        })
    };
    let stdout = reader(child.stdout.take().map(|p| Box::new(p) as Box<dyn Read + Send>));
    let stderr = reader(child.stderr.take().map(|p| Box::new(p) as Box<dyn Read + Send>));
    let started = Instant::now();
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if started.elapsed() > limit => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!("fio did not finish within {} s and was stopped", limit.as_secs()));
            }
            Ok(None) => {
                tick(started.elapsed());
                std::thread::sleep(Duration::from_millis(100));
            }
            Err(e) => return Err(format!("waiting for fio: {e}")),
        }
    };
    let stdout = stdout.join().unwrap_or_default();
    let stderr = stderr.join().unwrap_or_default();
    if !status.success() {
        let said = stderr.lines().chain(stdout.lines()).map(str::trim).find(|l| !l.is_empty()).unwrap_or("");
        return Err(format!("fio exited with {status}: {said}"));
    }
    parse(&stdout)
}

/// fio's `--output-format=json` text (anything it printed before the JSON
/// is skipped): the job's figures, from `mixed` (`unified_rw_reporting`)
/// or from the one direction that did I/O.
pub fn parse(text: &str) -> Result<FioFigures, String> {
    let start = text.find('{').ok_or("fio printed no JSON")?;
    let json: Value = serde_json::from_str(&text[start..]).map_err(|e| format!("fio's JSON does not parse: {e}"))?;
    let job = json.get("jobs").and_then(|j| j.get(0)).ok_or("fio's JSON has no job")?;
    let error = job.get("error").and_then(Value::as_i64).unwrap_or(0);
    if error != 0 {
        return Err(format!("fio's job failed with error {error}"));
    }
    let did_io = |name: &str| job.get(name).filter(|d| number(d, "total_ios") > 0.0);
    let dir = match (job.get("mixed"), did_io("read"), did_io("write")) {
        (Some(mixed), _, _) => mixed,
        (None, Some(one), None) | (None, None, Some(one)) => one,
        (None, Some(_), Some(_)) => {
            return Err("fio reported reads and writes apart; run it with --unified_rw_reporting=mixed".into());
        }
        (None, None, None) => return Err("fio completed no I/O".into()),
    };
    let ios = number(dir, "total_ios") as u64;
    if ios == 0 {
        return Err("fio completed no I/O".into());
    }
    let clat = dir.get("clat_ns").ok_or("fio's JSON has no clat_ns")?;
    let percentiles = clat.get("percentile").ok_or("fio's JSON has no clat percentiles")?;
    let pct = |p: f64| percentile_us(percentiles, p).ok_or(format!("fio's JSON has no p{p} percentile"));
    Ok(FioFigures {
        ios,
        iops: number(dir, "iops"),
        mb_per_s: number(dir, "bw_bytes") / 1e6,
        latency_us: LatencyUs {
            min: number(clat, "min") / 1e3,
            avg: number(clat, "mean") / 1e3,
            p50: pct(50.0)?,
            p90: pct(90.0)?,
            p99: pct(99.0)?,
            p999: pct(99.9)?,
            max: number(clat, "max") / 1e3,
        },
        usr_cpu: number(job, "usr_cpu"),
        sys_cpu: number(job, "sys_cpu"),
    })
}

fn number(v: &Value, key: &str) -> f64 {
    v.get(key).and_then(Value::as_f64).unwrap_or(0.0)
}

/// The value at percentile `p` in µs: fio keys them "99.900000" (ns).
fn percentile_us(percentiles: &Value, p: f64) -> Option<f64> {
    percentiles
        .as_object()?
        .iter()
        .find(|(key, _)| key.parse::<f64>().is_ok_and(|k| (k - p).abs() < 1e-6))
        .and_then(|(_, v)| v.as_f64())
        .map(|ns| ns / 1e3)
}

/// A `fio` stand-in for tests: the path of a script in `dir`.
#[cfg(test)]
pub(crate) fn fake_fio(dir: &std::path::Path, script: &str) -> Fio {
    use std::os::unix::fs::PermissionsExt;
    let path = dir.join("fio");
    std::fs::write(&path, format!("#!/bin/sh\n{script}\n")).unwrap_or_default();
    let _ = std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755));
    Fio { path, version: "fio-fake".to_owned() }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::super::spec::FioUse;
    use super::*;

    /// Captured on this machine: `fio ... --rw=randread --bs=4k --numjobs=2`
    /// without unified reporting (reads and writes apart).
    const RANDREAD: &str = include_str!("fixtures/fio-randread-4k-qd2.json");
    /// Captured on this machine: `--rw=randrw --rwmixread=70 --unified_rw_reporting=mixed`.
    const MIXED: &str = include_str!("fixtures/fio-randrw-4k-qd2-mixed.json");

    #[test]
    fn parses_a_read_job() {
        let f = parse(RANDREAD).unwrap();
        assert_eq!(f.ios, 19885);
        assert!((f.iops - 19865.134865).abs() < 1e-6);
        assert!((f.mb_per_s - 81.367592).abs() < 1e-9);
        let l = &f.latency_us;
        assert_eq!((l.p50, l.p90, l.p99, l.p999), (94.72, 136.192, 189.44, 536.576));
        assert_eq!((l.min, l.max), (25.813, 3455.705));
        assert!((l.avg - 100.128270807).abs() < 1e-9);
        assert_eq!((f.usr_cpu, f.sys_cpu), (1.8, 23.3));
    }

    #[test]
    fn parses_a_mixed_job() {
        let f = parse(MIXED).unwrap();
        assert_eq!(f.ios, 20146);
        assert!((f.iops - 20125.874126).abs() < 1e-6);
        assert_eq!(f.latency_us.p50, 95.744);
        let l = &f.latency_us;
        assert!(l.min <= l.p50 && l.p50 <= l.p90 && l.p90 <= l.p99 && l.p99 <= l.p999 && l.p999 <= l.max);
    }

    #[test]
    fn bad_output_is_a_clear_error() {
        assert_eq!(parse("fio: no such file").unwrap_err(), "fio printed no JSON");
        assert!(parse("{ not json").unwrap_err().starts_with("fio's JSON does not parse"));
        assert_eq!(parse(r#"{"jobs": []}"#).unwrap_err(), "fio's JSON has no job");
        assert_eq!(parse(r#"{"jobs": [{"error": 5}]}"#).unwrap_err(), "fio's job failed with error 5");
        let none = r#"{"jobs": [{"error": 0, "read": {"total_ios": 0}, "write": {"total_ios": 0}}]}"#;
        assert_eq!(parse(none).unwrap_err(), "fio completed no I/O");
        // Warnings before the JSON are skipped; a missing percentile is named.
        let text = format!("fio: some warning\n{}", RANDREAD.replace("\"99.900000\"", "\"99.910000\""));
        assert_eq!(parse(&text).unwrap_err(), "fio's JSON has no p99.9 percentile");
    }

    fn plan_and_target() -> (IoPlan, Target) {
        let plan = IoPlan {
            modes: vec![Mode::Mixed],
            queue_depths: vec![4],
            duration: Duration::from_secs(5),
            warmup: Duration::from_millis(1500),
            fsync_every: Some(16),
            fio: FioUse::IfInstalled,
            ..IoPlan::for_test(PathBuf::from("/tmp/x.bench"))
        };
        let target = Target::for_test(&plan);
        (plan, target)
    }

    #[test]
    fn equivalent_jobs() {
        let (plan, target) = plan_and_target();
        let mixed = job_args(&target, &plan, &Point { mode: Mode::Mixed, block_size: 4096, queue_depth: 4 });
        for want in [
            "--filename=/tmp/x.bench",
            "--direct=1",
            "--rw=randrw",
            "--rwmixread=70",
            "--bs=4096",
            "--ioengine=psync",
            "--numjobs=4",
            "--group_reporting",
            "--time_based",
            "--runtime=5000ms",
            "--ramp_time=1500ms",
            "--output-format=json",
            "--size=67108864",
            "--fsync=16",
        ] {
            assert!(mixed.iter().any(|a| a == want), "{want} missing from {mixed:?}");
        }
        let seq = job_args(&target, &plan, &Point { mode: Mode::SeqWrite, block_size: 1 << 20, queue_depth: 4 });
        assert!(seq.contains(&"--rw=write".to_owned()));
        assert!(seq.contains(&"--size=16777216".to_owned()) && seq.contains(&"--offset_increment=16777216".to_owned()));
        assert!(!seq.iter().any(|a| a.starts_with("--rwmixread")));
        let buffered = Target { direct: false, ..target };
        let read = job_args(&buffered, &plan, &Point { mode: Mode::RandRead, block_size: 4096, queue_depth: 1 });
        assert!(read.contains(&"--direct=0".to_owned()));
    }

    #[test]
    fn runs_a_fio_and_reports_its_failures() {
        let dir = tempfile::tempdir().unwrap();
        let fixture = dir.path().join("out.json");
        std::fs::write(&fixture, RANDREAD).unwrap();
        let ok = fake_fio(dir.path(), &format!("cat {}", fixture.display()));
        let mut ticks = 0;
        let f = run(&ok, &[], Duration::from_secs(10), &mut |_| ticks += 1).unwrap();
        assert_eq!(f.ios, 19885);
        let failing = fake_fio(
            dir.path(),
            "echo 'fio: pid=0, err=22/file:filesetup.c:805, func=open, error=Invalid argument' >&2; exit 1",
        );
        let e = run(&failing, &[], Duration::from_secs(10), &mut |_| {}).unwrap_err();
        assert!(e.starts_with("fio exited with exit status: 1: fio: pid=0"), "{e}");
        let slow = fake_fio(dir.path(), "sleep 5");
        let e = run(&slow, &[], Duration::from_millis(300), &mut |_| {}).unwrap_err();
        assert!(e.contains("did not finish within"), "{e}");
    }

    #[test]
    fn path_lookup() {
        let dir = tempfile::tempdir().unwrap();
        let fio = fake_fio(dir.path(), "true");
        let other = tempfile::tempdir().unwrap();
        let joined = std::env::join_paths([other.path(), dir.path()]).unwrap();
        assert_eq!(find_on_path("fio", Some(&joined)), Some(fio.path));
        assert_eq!(find_on_path("fio", Some(other.path().as_os_str())), None);
        assert_eq!(find_on_path("fio", None), None);
    }
}

//! `pgtier bench tpcc`: TPC-C in HammerDB TPROC-C's shape on PostgreSQL,
//! the pgtier server and the embedded engine, one after another
//! (crates/bench/src/tpcc). This file turns flags into targets and
//! options, shows progress and writes the outputs.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, bail};
use indicatif::{ProgressBar, ProgressStyle};
use pgtier_bench::driver::{Phase, fresh_seed};
use pgtier_bench::progress::RunProgress;
use pgtier_bench::target::Target;
use pgtier_bench::targets::embedded::EmbeddedTarget;
use pgtier_bench::targets::postgres::{CopyFormat, PgTarget};
use pgtier_bench::tpcc::{self, LoadReport, Scale, Side, SideKind, SideResult, TpccOptions, TpccProgress};
use pgtier_engine::CommitMode;

use crate::bench_cmd::url_or_managed;

const HELP: &str = "\
TPC-C as HammerDB runs TPROC-C: each target gets the 9 TPC-C tables (the spec's columns and
primary keys, HammerDB's two secondary indexes), populated per spec 4.3 at --warehouses (100,000
items; per warehouse 100,000 stock rows, 10 districts of 3,000 customers and 3,000 orders, the
last 900 new). Then --clients sessions, each bound to a home warehouse, run the five
transactions (New-Order 45 %, Payment 43 %, Order-Status, Delivery, Stock-Level 4 % each) with
no keying or thinking time: --rampup seconds, then --duration seconds measured. The targets run
one after another, never at once.

Figures per target: NOPM (committed New-Orders per minute), TPM (committed transactions per
minute, counted by the client), p50/p95/p99 latency per transaction, serialization failures and
deadlocks (40001, 40P01; counted apart, not retried). After the load and after the run, the
spec's consistency conditions 3.3.2.1-3.3.2.4, 3.3.2.8 and 3.3.2.9 are checked on each target.

Targets (--targets, any of):
  postgresql   --url, else $PGTIER_BENCH_URL, else the cluster of `pgtier backend start`
  server       --pgtier-url, else a pgtier server this command starts in-process
               (loopback, trust auth, --pgtier-commit, data in --work-dir)
  embedded     the engine in this process (--pgtier-commit), data in --work-dir

Output: a one-screen summary on stdout (NOPM, TPM, pgtier / PostgreSQL ratio), and report.md +
tpcc.json in --out. Exit status 1 when a target's run stops on an error (its SQLSTATE is
reported) or a consistency check fails; 2 for bad flags.

Examples:
  pgtier bench tpcc --warehouses 2 --clients 2 --duration 60
  pgtier bench tpcc --targets postgresql,embedded --pgtier-commit async --rampup 30";

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum CommitArg {
    /// Acknowledged after the WAL fsync (as PostgreSQL's synchronous_commit=on)
    Sync,
    /// Acknowledged when in the WAL buffer, flushed within 10 ms
    Async,
}

#[derive(clap::Args)]
#[command(after_long_help = HELP)]
pub struct TpccArgs {
    /// Warehouses to populate (the scale)
    #[arg(long, value_name = "N", default_value_t = 1,
          value_parser = clap::value_parser!(u32).range(1..=i64::from(tpcc::WAREHOUSES_MAX)))]
    warehouses: u32,
    /// Client sessions (HammerDB's virtual users) [default: one per warehouse]
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=256))]
    clients: Option<u32>,
    /// Measure window, seconds
    #[arg(long, value_name = "S", default_value_t = 60, value_parser = clap::value_parser!(u64).range(1..=86_400))]
    duration: u64,
    /// Ramp-up before the measure window, seconds
    #[arg(long, value_name = "S", default_value_t = 10, value_parser = clap::value_parser!(u64).range(0..=3_600))]
    rampup: u64,
    /// Targets to run, comma-separated: postgresql, server, embedded
    #[arg(long, value_name = "LIST", default_value = "postgresql,server,embedded", value_parser = parse_targets)]
    targets: Targets,
    /// PostgreSQL URL [default: $PGTIER_BENCH_URL, else the cluster of `pgtier backend start`]
    #[arg(long, env = "PGTIER_BENCH_URL", hide_env_values = true)]
    url: Option<String>,
    /// A running pgtier server [default: one started in-process]
    #[arg(long, value_name = "URL")]
    pgtier_url: Option<String>,
    /// Commit mode of the in-process server and the embedded engine
    #[arg(long, value_enum, default_value_t = CommitArg::Sync)]
    pgtier_commit: CommitArg,
    /// Where the in-process server and the embedded engine keep their data [default: a temporary directory, removed after]
    #[arg(long, value_name = "DIR")]
    work_dir: Option<PathBuf>,
    /// Parallel bulk-load streams per target [default: CPUs]
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u16).range(1..=64))]
    load_streams: Option<u16>,
    /// Seed of the population and the clients' random streams [default: a fresh one, printed]
    #[arg(long)]
    seed: Option<u64>,
    /// Test-only scale: 1,000 items and 300 customers per district instead of 100,000 and 3,000
    #[arg(long)]
    test_scale: bool,
    /// Report directory: report.md and tpcc.json
    #[arg(long, value_name = "DIR", default_value = "results/tpcc")]
    out: PathBuf,
}

#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Targets(pub(crate) Vec<SideKind>);

pub(crate) fn parse_targets(list: &str) -> Result<Targets, String> {
    let mut out = Vec::new();
    for name in list.split(',').map(str::trim) {
        let kind = match name {
            "postgresql" | "postgres" | "pg" => SideKind::Postgresql,
            "server" | "pgtier" => SideKind::PgtierServer,
            "embedded" => SideKind::Embedded,
            _ => return Err(format!("'{name}' is not a target (postgresql, server, embedded)")),
        };
        if !out.contains(&kind) {
            out.push(kind);
        }
    }
    // PostgreSQL first: the reference of the ratios.
    out.sort_by_key(|k| match k {
        SideKind::Postgresql => 0,
        SideKind::PgtierServer => 1,
        SideKind::Embedded => 2,
        SideKind::Columnar => 3,
    });
    Ok(Targets(out))
}

/// A load bar and a run line on stderr (hidden when stderr is not a
/// terminal), and one plain line per load and per side either way.
struct Bars {
    load: Option<ProgressBar>,
    run: Option<RunProgress>,
    total: Duration,
}

impl TpccProgress for Bars {
    fn loading(&mut self, side: SideKind, rows: u64, expected: u64) {
        let bar = self.load.get_or_insert_with(|| {
            let bar = ProgressBar::new(expected.max(1));
            bar.set_style(
                ProgressStyle::with_template("{prefix} {bar:30} {pos}/~{len} rows {per_sec}")
                    .unwrap_or_else(|_| ProgressStyle::default_bar()),
            );
            bar.set_prefix(format!("loading {:<14}", side.label()));
            bar
        });
        bar.set_position(rows);
    }

    fn loaded(&mut self, side: SideKind, report: &LoadReport) {
        if let Some(b) = self.load.take() {
            b.finish_and_clear();
        }
        let rows: u64 = report.rows.iter().map(|(_, n)| n).sum();
        eprintln!(
            "pgtier: {} loaded: {rows} rows in {:.1} s, keys and indexes {:.1} s{}",
            side.label(),
            report.load_s,
            report.build_s,
            if report.refused.is_empty() { String::new() } else { format!("; refused: {}", report.refused.join("; ")) }
        );
    }

    fn running(&mut self, side: SideKind, phase: Phase, elapsed: Duration, finished: u64) {
        let total = self.total;
        self.run
            .get_or_insert_with(|| RunProgress::new(total, &format!("tpcc {:<14}", side.label())))
            .tick(phase, elapsed, finished);
    }

    fn side_done(&mut self, r: &SideResult) {
        if let Some(p) = self.run.take() {
            p.finish();
        }
        let checks = if r.checks_passed() { "consistent" } else { "INCONSISTENT" };
        match &r.error {
            Some(e) => eprintln!("pgtier: {} run STOPPED: {e}; consistency after it: {checks}", r.side.label()),
            None => eprintln!("pgtier: {}: NOPM {:.0}, TPM {:.0}, {checks}", r.side.label(), r.nopm, r.tpm),
        }
    }
}

/// The targets of a run, opened: PostgreSQL (`url`, else the managed
/// cluster), the pgtier server (`pgtier_url`, else one started in-process
/// with its data in the work directory), the embedded engine (data in the
/// work directory); the work directory a temporary one unless given.
/// Shared by `bench tpcc`, `bench ch` and `bench tpch`.
pub(crate) struct OpenedTargets {
    pub(crate) pg: Option<PgTarget>,
    pub(crate) served: Option<PgTarget>,
    pub(crate) embedded: Option<EmbeddedTarget>,
    server: Option<pgtier_server::RunningServer>,
    // Last: removed after the targets above are closed.
    _temp: Option<crate::bench_cmd::TempDir>,
}

/// Where [`OpenedTargets::open`] finds its targets.
pub(crate) struct TargetFlags<'a> {
    pub(crate) kinds: &'a [SideKind],
    pub(crate) url: Option<&'a str>,
    pub(crate) pgtier_url: Option<&'a str>,
    pub(crate) work_dir: Option<&'a Path>,
    pub(crate) commit: CommitArg,
    /// Names the temporary work directory (`pgtier-<name>-<pid>`).
    pub(crate) name: &'a str,
    /// The embedded engine's data directory [default: in the work directory].
    pub(crate) embedded_dir: Option<&'a Path>,
    /// Open the pgtier targets' data as it is (a rerun over tables an
    /// earlier run loaded) instead of emptying it first.
    pub(crate) keep_data: bool,
}

impl OpenedTargets {
    pub(crate) fn open(flags: &TargetFlags<'_>) -> anyhow::Result<OpenedTargets> {
        let kinds = flags.kinds;
        let pg = if kinds.contains(&SideKind::Postgresql) {
            let url = url_or_managed(flags.url)?;
            let t = PgTarget::open(&url).context("opening the PostgreSQL target")?.with_copy_format(CopyFormat::Text);
            if t.is_pgtier() {
                bail!("--url must be PostgreSQL, not a pgtier server; pass that as --pgtier-url");
            }
            Some(t)
        } else {
            None
        };
        let mut temp = None;
        let work_dir = match flags.work_dir {
            Some(dir) => dir.to_path_buf(),
            None => temp.insert(crate::bench_cmd::TempDir::new(flags.name)?).0.clone(),
        };
        std::fs::create_dir_all(&work_dir).with_context(|| format!("creating {}", work_dir.display()))?;
        let mut server = None;
        let served = if kinds.contains(&SideKind::PgtierServer) {
            let url = match flags.pgtier_url {
                Some(u) => u.to_owned(),
                None => {
                    let dir = work_dir.join("server");
                    if !flags.keep_data {
                        let _ = std::fs::remove_dir_all(&dir);
                    }
                    let (s, u) = start_server(&dir, flags.commit)?;
                    server = Some(s);
                    u
                }
            };
            let t = PgTarget::open(&url).context("opening the pgtier server target")?;
            if !t.is_pgtier() {
                bail!("--pgtier-url answers as PostgreSQL, not as a pgtier server");
            }
            Some(t.with_copy_format(CopyFormat::Text))
        } else {
            None
        };
        let embedded = if kinds.contains(&SideKind::Embedded) {
            let dir = flags.embedded_dir.map_or_else(|| work_dir.join("embedded"), Path::to_path_buf);
            if !flags.keep_data {
                let _ = std::fs::remove_dir_all(&dir);
            }
            let mode = match flags.commit {
                CommitArg::Sync => CommitMode::Sync,
                CommitArg::Async => CommitMode::Async,
            };
            Some(EmbeddedTarget::open(&dir, mode)?)
        } else {
            None
        };
        Ok(OpenedTargets { pg, served, embedded, server, _temp: temp })
    }

    /// The opened targets in the order PostgreSQL, server, embedded.
    pub(crate) fn sides(&self) -> Vec<Side<'_>> {
        let mut sides = Vec::new();
        if let Some(t) = &self.pg {
            sides.push(Side { kind: SideKind::Postgresql, target: t as &dyn Target });
        }
        if let Some(t) = &self.served {
            sides.push(Side { kind: SideKind::PgtierServer, target: t });
        }
        if let Some(t) = &self.embedded {
            sides.push(Side { kind: SideKind::Embedded, target: t });
        }
        sides
    }

    /// Stops the in-process server, if one was started.
    pub(crate) fn shutdown_server(&mut self) {
        if let Some(s) = self.server.take() {
            s.shutdown();
        }
    }
}

fn start_server(data_dir: &Path, commit: CommitArg) -> anyhow::Result<(pgtier_server::RunningServer, String)> {
    let mode = match commit {
        CommitArg::Sync => "sync",
        CommitArg::Async => "async",
    };
    crate::bench_cmd::start_bench_server(data_dir, mode)
}

pub fn run(args: TpccArgs) -> anyhow::Result<()> {
    let mut opened = OpenedTargets::open(&TargetFlags {
        kinds: &args.targets.0,
        url: args.url.as_deref(),
        pgtier_url: args.pgtier_url.as_deref(),
        work_dir: args.work_dir.as_deref(),
        commit: args.pgtier_commit,
        name: "tpcc",
        embedded_dir: None,
        keep_data: false,
    })?;
    let sides = opened.sides();
    let scale = if args.test_scale { Scale::small(args.warehouses) } else { Scale::spec(args.warehouses) };
    let cpus = std::thread::available_parallelism().map_or(2, std::num::NonZero::get);
    let options = TpccOptions {
        scale,
        clients: args.clients.unwrap_or(args.warehouses.min(256)),
        rampup: Duration::from_secs(args.rampup),
        measure: Duration::from_secs(args.duration),
        load_streams: args.load_streams.map_or(cpus, usize::from),
        seed: args.seed.unwrap_or_else(fresh_seed),
    };
    eprintln!(
        "pgtier: bench tpcc: {} warehouses, {} clients, ramp-up {} s, measure {} s, seed {}; targets: {}",
        args.warehouses,
        options.clients,
        args.rampup,
        args.duration,
        options.seed,
        sides.iter().map(|s| s.target.describe()).collect::<Vec<_>>().join("; ")
    );
    let mut bars = Bars { load: None, run: None, total: options.rampup + options.measure };
    let report = tpcc::run(&options, &sides, &mut bars);
    drop(sides);
    opened.shutdown_server();
    let report = report.context("bench tpcc")?;
    print!("{}", tpcc::output::summary(&report));
    for f in tpcc::output::write_files(&args.out, &report)? {
        println!("wrote {}", f.display());
    }
    let failures = report.failures();
    if !failures.is_empty() {
        bail!("{} failures:\n  {}", failures.len(), failures.join("\n  "));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn target_lists_put_postgresql_first() {
        assert_eq!(parse_targets("embedded").map(|t| t.0), Ok(vec![SideKind::Embedded]));
        assert_eq!(
            parse_targets("server,postgresql,server").map(|t| t.0),
            Ok(vec![SideKind::Postgresql, SideKind::PgtierServer])
        );
        assert!(parse_targets("oracle").is_err());
    }
}

//! The `pgtier` binary: one front door for serving, benchmarking and
//! administration. Each subcommand lives in its own module; this file only
//! parses the command line and reports errors as one clear line.

mod backend_cmd;
mod backup_cmd;
mod bench_cmd;
mod cache_cmd;
mod ch_cmd;
mod compare_cmd;
mod demo_cmd;
mod demo_flash_cmd;
mod demo_htap_cmd;
mod io_cmd;
mod jpetstore_cmd;
mod micro_cmd;
mod serve_cmd;
mod soak_cmd;
mod tier_cmd;
mod tpcc_cmd;
mod tpch_cmd;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(name = "pgtier", version, about = "pgtier: an application-tier cache for PostgreSQL")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Serve the PostgreSQL wire protocol (psql, JDBC, psycopg, pgx, ...).
    Serve(serve_cmd::ServeArgs),
    /// Manage a private PostgreSQL cluster for demos, tests and benchmarks.
    Backend {
        #[command(subcommand)]
        command: backend_cmd::BackendCommand,
    },
    /// Copy a running server's data into DIR on its machine, while it serves (BACKUP TO).
    Backup(backup_cmd::BackupArgs),
    /// Restore a backup into a new data directory (offline; checks every checksum first).
    Restore(backup_cmd::RestoreArgs),
    /// Manage cache groups on a running pgtier server (create, drop, load, unload, refresh, list, stats, verify).
    Cache(cache_cmd::CacheArgs),
    /// Compare a cache group with PostgreSQL; exit 1 on a difference.
    Verify(cache_cmd::VerifyArgs),
    /// One screen of a running pgtier: write-through lag and backlog, flash tier, cache groups.
    Status(cache_cmd::StatusArgs),
    /// Hand an active's writes to its standby ([replication] lease_ms): it stops writing, waits for the standby, gives the lease up.
    Switchover(cache_cmd::SwitchoverArgs),
    /// The flash tier of a running pgtier: status, enable, disable, resize (online).
    Tier(tier_cmd::TierArgs),
    /// Study 000 end to end (private PostgreSQL, TATP, baseline vs cache, rate cap, report); `demo flash`: the flash studies; `demo htap`: study 004.
    Demo(Box<demo_cmd::DemoArgs>),
    /// Run benchmarks side by side against PostgreSQL and pgtier.
    Bench {
        #[command(subcommand)]
        command: BenchCommand,
    },
}

#[derive(Subcommand)]
enum BenchCommand {
    /// The TATP (HLR) benchmark of reference study 000.
    Tatp(Box<bench_cmd::TatpArgs>),
    /// Compare two result files: print ratios and draw the side-by-side chart.
    Compare(compare_cmd::CompareArgs),
    /// Study 001's ORION-style I/O calibration of the flash tier's device, with fio beside it.
    Io(Box<io_cmd::IoArgs>),
    /// Study 002's micro-benchmark library: scan, random read, insert, update, index build.
    Micro(Box<micro_cmd::MicroArgs>),
    /// Study 001's JPetStore-shaped OLTP: search range x threads on PostgreSQL, pgtier and pgtier with flash.
    Jpetstore(Box<jpetstore_cmd::JpetstoreArgs>),
    /// Study 004's OLAP side: TPC-H's 22 queries on PostgreSQL, the pgtier server and the embedded engine, answers compared.
    Tpch(Box<tpch_cmd::TpchArgs>),
    /// Study 004's OLTP side: TPC-C as HammerDB TPROC-C runs it (NOPM, TPM, consistency checks) on PostgreSQL, the pgtier server and the embedded engine.
    Tpcc(Box<tpcc_cmd::TpccArgs>),
    /// Study 004's mixed side: CH-benCHmark, TPC-C and the 22 analytic queries at once (NOPM kept, query slowdown, answers compared) on PostgreSQL, the pgtier server and the embedded engine.
    Ch(Box<ch_cmd::ChArgs>),
    /// An hour (--duration) of TATP over the wire with cache-group cycles, connection churn and cancels against a spawned server: RSS, fds, threads and p99 over time, growth judged.
    Soak(Box<soak_cmd::SoakArgs>),
}

fn main() {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(error) => {
            use clap::error::ErrorKind;
            if matches!(error.kind(), ErrorKind::DisplayHelp | ErrorKind::DisplayVersion)
                || matches!(error.kind(), ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand)
            {
                // Help and version are answers, not errors: print them whole.
                error.exit();
            }
            // Bad input gets one line, like every other pgtier error; clap's
            // first line already names the argument and the problem.
            let rendered = error.to_string();
            let first_line = rendered.lines().next().unwrap_or("invalid arguments");
            let message = first_line.trim_start_matches("error: ").trim();
            eprintln!("pgtier: error: {message} (see `pgtier --help`)");
            std::process::exit(2);
        }
    };
    if !matches!(cli.command, Command::Serve(_)) {
        // What the libraries log while a tool runs (write-through held or
        // stalled, the flash tier failing): warnings and errors, as text on
        // stderr. `pgtier serve` installs its own from `[log]`.
        let warnings = pgtier_server::LogSection { level: "warn".into(), ..pgtier_server::LogSection::default() };
        if let Ok(settings) = warnings.settings() {
            let _ = pgtier_server::logging::init(&settings);
        }
    }
    let outcome = match cli.command {
        Command::Serve(args) => serve_cmd::run(args),
        Command::Backend { command } => backend_cmd::run(command),
        Command::Backup(args) => backup_cmd::backup(args),
        Command::Restore(args) => backup_cmd::restore(args),
        Command::Cache(args) => cache_cmd::run(args),
        Command::Verify(args) => cache_cmd::verify(args),
        Command::Status(args) => cache_cmd::status(args),
        Command::Switchover(args) => cache_cmd::switchover(args),
        Command::Tier(args) => tier_cmd::run(args),
        Command::Demo(args) => demo_cmd::run(*args),
        Command::Bench { command } => match command {
            BenchCommand::Tatp(args) => bench_cmd::run(*args),
            BenchCommand::Compare(args) => compare_cmd::run(args),
            BenchCommand::Io(args) => io_cmd::run(*args),
            BenchCommand::Micro(args) => micro_cmd::run(*args),
            BenchCommand::Jpetstore(args) => jpetstore_cmd::run(*args),
            BenchCommand::Tpch(args) => tpch_cmd::run(*args),
            BenchCommand::Tpcc(args) => tpcc_cmd::run(*args),
            BenchCommand::Ch(args) => ch_cmd::run(*args),
            BenchCommand::Soak(args) => soak_cmd::run(*args),
        },
    };
    if let Err(error) = outcome {
        // One line a user can act on; the chain of causes joined with ": ".
        eprintln!("pgtier: error: {error:#}");
        std::process::exit(1);
    }
}

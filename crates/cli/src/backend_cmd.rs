//! `pgtier backend start|stop|status|url`: a persistent private PostgreSQL
//! for demos, benchmarks and experiments (pgtier_backend::managed).
//!
//! `start` prints the connection URL as the last line of stdout, so scripts
//! can take it with `| tail -n 1`.

use std::path::PathBuf;

use anyhow::Context;
use clap::{Args, Subcommand, ValueEnum};
use pgtier_backend::managed::{self, ManagedOptions, StopOutcome};
use pgtier_backend::redact_url;

#[derive(Subcommand)]
pub enum BackendCommand {
    /// Start the private PostgreSQL cluster (create it on first use); prints its URL last.
    Start(StartArgs),
    /// Stop it (fast shutdown).
    Stop(DirArg),
    /// Show whether it runs, its pid, port, URL, server version and data size.
    Status(DirArg),
    /// Print just its connection URL.
    Url(DirArg),
}

#[derive(Args)]
pub struct DirArg {
    /// Directory holding the cluster.
    #[arg(long, default_value = managed::DEFAULT_DIR)]
    dir: PathBuf,
}

#[derive(Args)]
pub struct StartArgs {
    #[command(flatten)]
    dir: DirArg,
    /// TCP port on 127.0.0.1 [default: the remembered one, else a free one]
    #[arg(long)]
    port: Option<u16>,
    /// Flush WAL and data to disk; `off` only for throwaway data.
    #[arg(long, value_enum, default_value_t = OnOff::On)]
    fsync: OnOff,
    /// Password for the superuser `postgres` over TCP [default: the remembered one, else none (trust)]
    #[arg(long, env = "PGTIER_BACKEND_PASSWORD", hide_env_values = true)]
    password: Option<String>,
}

#[derive(Clone, Copy, ValueEnum)]
enum OnOff {
    On,
    Off,
}

pub fn run(command: BackendCommand) -> anyhow::Result<()> {
    match command {
        BackendCommand::Start(args) => start(args),
        BackendCommand::Stop(args) => stop(args),
        BackendCommand::Status(args) => status(args),
        BackendCommand::Url(args) => {
            println!("{}", managed::url(&args.dir)?);
            Ok(())
        }
    }
}

fn start(args: StartArgs) -> anyhow::Result<()> {
    let options = ManagedOptions {
        dir: args.dir.dir.clone(),
        port: args.port,
        fsync: matches!(args.fsync, OnOff::On),
        password: args.password,
    };
    let started =
        managed::start(&options).with_context(|| format!("starting PostgreSQL in {}", args.dir.dir.display()))?;
    if started.already_running {
        println!("PostgreSQL already running in {} (pid {})", args.dir.dir.display(), started.pid);
    } else {
        println!("PostgreSQL started in {} (pid {}, port {})", args.dir.dir.display(), started.pid, started.port);
    }
    println!("{}", started.url);
    Ok(())
}

fn stop(args: DirArg) -> anyhow::Result<()> {
    match managed::stop(&args.dir).with_context(|| format!("stopping PostgreSQL in {}", args.dir.display()))? {
        StopOutcome::Stopped { pid } => println!("PostgreSQL stopped (was pid {pid})"),
        StopOutcome::NotRunning => println!("PostgreSQL was not running in {}", args.dir.display()),
    }
    Ok(())
}

fn status(args: DirArg) -> anyhow::Result<()> {
    let status = managed::status(&args.dir)?;
    let pid = status.pid.map_or_else(|| "-".to_owned(), |pid| pid.to_string());
    let version = status.server_version.as_deref().unwrap_or("-");
    println!("status:         {}", if status.running { "running" } else { "stopped" });
    println!("pid:            {pid}");
    println!("port:           {}", status.port);
    println!("url:            {}", redact_url(&status.url));
    println!("server version: {version}");
    println!("data size:      {}", human_bytes(status.data_size_bytes));
    println!("data dir:       {}", status.data_dir.display());
    Ok(())
}

fn human_bytes(bytes: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut value = bytes as f64;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    if unit == 0 { format!("{bytes} B") } else { format!("{value:.1} {}", UNITS[unit]) }
}

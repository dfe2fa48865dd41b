//! `pgtier serve --config pgtier.toml`: the PostgreSQL wire-protocol server
//! in the foreground until Ctrl-C or SIGTERM, then a clean shutdown
//! (sessions end, open transactions roll back, checkpoint, WAL flushed).
//! SIGHUP reads the file again (`RunningServer::reload`: `[auth]` applies
//! to new connections, other changed keys are named as needing a restart).

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use anyhow::Context;
use pgtier_server::ServerConfig;

#[derive(clap::Args)]
pub struct ServeArgs {
    /// The server's TOML configuration (see crates/server/pgtier.example.toml).
    #[arg(long, short, default_value = "pgtier.toml")]
    config: PathBuf,
    /// Take the cache's node name ([cache] awt_node) over in PostgreSQL
    /// from another data directory before starting: for a data directory
    /// that replaced a lost one. The lost directory's transactions not yet in
    /// PostgreSQL are lost with it; its rows stay for inspection.
    #[arg(long)]
    takeover: bool,
    /// Log lines as `text` or `json` (one object per line); overrides [log] format.
    #[arg(long, value_parser = ["text", "json"])]
    log_format: Option<String>,
}

static STOP: AtomicBool = AtomicBool::new(false);
static RELOAD: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(_: libc::c_int) {
    // Only an atomic store: the one thing a signal handler may safely do.
    STOP.store(true, Ordering::SeqCst);
}

extern "C" fn on_hangup(_: libc::c_int) {
    RELOAD.store(true, Ordering::SeqCst);
}

pub fn run(args: ServeArgs) -> anyhow::Result<()> {
    let mut config = ServerConfig::from_toml_file(&args.config)?;
    config.takeover = args.takeover;
    if let Some(format) = args.log_format {
        config.log.format = format;
    }
    // Logs go to stderr from here on, as `[log]` says (checked first: a bad
    // value names its key); the lines below are for the person at the terminal.
    pgtier_server::logging::init(&config.log.settings()?)?;
    let mode = format!("{:?}", config.commit_mode).to_lowercase();
    let data_dir = config.data_dir.clone();
    let server = pgtier_server::start(config)?;
    // SAFETY: installs an async-signal-safe handler (one atomic store).
    unsafe {
        libc::signal(libc::SIGINT, on_signal as extern "C" fn(libc::c_int) as libc::sighandler_t);
        libc::signal(libc::SIGTERM, on_signal as extern "C" fn(libc::c_int) as libc::sighandler_t);
        libc::signal(libc::SIGHUP, on_hangup as extern "C" fn(libc::c_int) as libc::sighandler_t);
    }
    eprintln!("pgtier: listening on {} (data {}, commit_mode {mode})", server.local_addr(), data_dir.display());
    while !STOP.load(Ordering::SeqCst) {
        std::thread::sleep(Duration::from_millis(100));
        if RELOAD.swap(false, Ordering::SeqCst) {
            // The server says on stderr what it did, or why it kept the old file.
            let _ = server.reload();
        }
    }
    eprintln!("pgtier: shutting down (checkpoint and WAL flush)");
    server.shutdown_checked().context("shutdown")?;
    eprintln!("pgtier: stopped");
    Ok(())
}

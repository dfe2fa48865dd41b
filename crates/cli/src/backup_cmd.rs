//! `pgtier backup DIR` and `pgtier restore BACKUP_DIR DATA_DIR`.
//!
//! `backup` is a client: the running server holds its data directory's
//! lock, so it makes the copy itself (`BACKUP TO '/dir'`, crates/server
//! session/backup.rs) into a directory on its own machine, while it serves.
//! The progress NOTICEs it sends about once a second are printed as they
//! arrive. `restore` is offline and local: it checks the backup's manifest
//! and every file's checksum, refuses a non-empty target, and copies
//! (crates/engine backup.rs); the next `pgtier serve` on the target recovers
//! to the backup's end point.

use std::path::{Path, PathBuf};

use anyhow::{Context, anyhow};
use clap::Args;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use crate::cache_cmd::client_config;

#[derive(Args)]
#[command(after_help = "Examples:
  pgtier backup --url postgresql://app@127.0.0.1:5433/app /var/backups/pgtier/monday
  pgtier restore /var/backups/pgtier/monday /var/lib/pgtier/restored

The directory is on the server's machine, must be missing or empty, and is
made absolute against this command's working directory. The backup holds
every transaction committed before its end point (printed), which comes
after everything acknowledged before the command started.

Exit status: 0 when the backup is complete (its manifest written); 1 with the server's message and SQLSTATE.")]
pub struct BackupArgs {
    /// The pgtier server [default: $PGTIER_URL, else postgresql://$USER@127.0.0.1:5433/pgtier; password from the URL or $PGPASSWORD]
    #[arg(long, env = "PGTIER_URL", hide_env_values = true)]
    url: Option<String>,
    /// Where the server writes the backup (missing or empty).
    dir: PathBuf,
}

#[derive(Args)]
#[command(after_help = "Run it with no server on DATA_DIR; then `pgtier serve` with data_dir = DATA_DIR.
The restored directory gets a new identity: a cache with cache groups started on it
is refused the source's node name in PostgreSQL ([cache] awt_node) while the source
owns it. Give it another node name, or start it with `pgtier serve --takeover` when
it replaces the source for good.

Exit status: 0 when restored; 1 on a damaged or unfinished backup, or a non-empty DATA_DIR (nothing written).")]
pub struct RestoreArgs {
    /// A directory `pgtier backup` wrote.
    backup_dir: PathBuf,
    /// The new data directory (missing or empty).
    data_dir: PathBuf,
    /// Only check the backup's manifest and files; write nothing.
    #[arg(long)]
    verify_only: bool,
    /// Seed a hot standby ([replication] role = "standby"): the directory
    /// keeps the source's identity, because the standby continues the
    /// source's log at the same positions.
    #[arg(long)]
    standby: bool,
}

pub fn backup(args: BackupArgs) -> anyhow::Result<()> {
    let dir = absolute(&args.dir)?;
    let text = dir.to_str().ok_or_else(|| anyhow!("backup directory {} is not UTF-8", dir.display()))?;
    let mut config = client_config(args.url.as_deref())?;
    config.application_name("pgtier-backup");
    // Progress arrives as NOTICEs while the statement runs: print them then.
    config.notice_callback(|notice| eprintln!("pgtier: {}", notice.message()));
    let shown = format!("{:?}:{:?}", config.get_hosts(), config.get_ports());
    let mut client = config
        .connect(postgres::NoTls)
        .map_err(|e| describe(&e))
        .with_context(|| format!("connecting to pgtier at {shown}"))?;
    client
        .simple_query(&format!("BACKUP TO '{}'", text.replace('\'', "''")))
        .map_err(|e| describe(&e))
        .with_context(|| format!("backup into {}", dir.display()))?;
    // Only the manifest: reading every file back here would double the I/O.
    let manifest = std::fs::read_to_string(dir.join(pgtier_engine::MANIFEST_FILE))
        .ok()
        .and_then(|text| pgtier_engine::BackupManifest::decode(&text).ok());
    match manifest {
        Some(m) => println!("BACKUP {} (end LSN {}, {} files)", dir.display(), m.end_lsn.0, m.files.len()),
        // The directory is on the server's machine, not necessarily this one.
        None => println!("BACKUP {}", dir.display()),
    }
    Ok(())
}

pub fn restore(args: RestoreArgs) -> anyhow::Result<()> {
    if args.verify_only {
        let m = pgtier_engine::verify_backup(&args.backup_dir)
            .with_context(|| format!("verifying {}", args.backup_dir.display()))?;
        println!("backup {} is whole: end LSN {}, {} files", args.backup_dir.display(), m.end_lsn.0, m.files.len());
        return Ok(());
    }
    let bar = ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr());
    bar.set_style(
        ProgressStyle::with_template("restore {bar:30} {binary_bytes}/{binary_total_bytes} {binary_bytes_per_sec}")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    let restore = if args.standby { pgtier_engine::restore_standby } else { pgtier_engine::restore };
    let report = restore(&args.backup_dir, &args.data_dir, &mut |p| {
        bar.set_length(p.bytes_total);
        bar.set_position(p.bytes_done);
    });
    bar.finish_and_clear();
    let report =
        report.with_context(|| format!("restoring {} into {}", args.backup_dir.display(), args.data_dir.display()))?;
    println!(
        "RESTORE {} (end LSN {}, {} files, {:.1} MiB in {:.1} s); start it with `pgtier serve` (data_dir = {})",
        args.data_dir.display(),
        report.manifest.end_lsn.0,
        report.manifest.files.len(),
        report.bytes as f64 / f64::from(1 << 20),
        report.duration.as_secs_f64(),
        args.data_dir.display()
    );
    Ok(())
}

fn absolute(dir: &Path) -> anyhow::Result<PathBuf> {
    if dir.is_absolute() {
        return Ok(dir.to_path_buf());
    }
    Ok(std::env::current_dir().context("reading the working directory")?.join(dir))
}

/// The server's message with its SQLSTATE, as psql shows it.
fn describe(error: &postgres::Error) -> anyhow::Error {
    match error.as_db_error() {
        Some(db) => anyhow!("{} (SQLSTATE {})", db.message(), db.code().code()),
        None => anyhow!("{error}"),
    }
}

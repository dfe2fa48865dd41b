//! `pgtier tier status|enable|disable|resize`: the flash tier of a running
//! pgtier server, managed online (`ALTER CACHE TIER`) and watched
//! (`pgtier_tier_stats`), as a client would.

use clap::{Args, Subcommand};

use crate::cache_cmd::{client_config, connect, query_table, run_statement};

/// What `pgtier tier status` and the flash section of `pgtier status` show.
pub(crate) const STATUS_SQL: &str = "SELECT coalesce(\"group\", '(store)') AS \"group\", state, policy, memory_instances, \
     round(memory_bytes / 1048576.0, 1) AS memory_mb, flash_records, round(flash_live_bytes / 1048576.0, 1) AS flash_mb, \
     round(flash_capacity_bytes / 1048576.0) AS capacity_mb, round(index_bytes / 1048576.0, 1) AS index_mb, flash_hits, promotions, \
     backend_loads, round(flash_hit_ratio::numeric, 3) AS flash_hit_ratio, demotions, dirty_demotions, durable_records, invalidations, rejections, \
     round(read_p50_us::numeric) AS read_p50_us, round(read_p99_us::numeric) AS read_p99_us, \
     round(write_amplification::numeric, 2) AS write_amp, hot_rows, warm_rows, cold_rows FROM pgtier_tier_stats";

#[derive(Args)]
#[command(
    after_help = "The tier is configured in the server's [tier] section (size, path, direct_io, admission); these
commands act on it while the server runs, and no client sees an error meanwhile:
  pgtier tier status
  pgtier tier disable         # records dropped: in clean mode PostgreSQL has every one of them
  pgtier tier enable          # starts filling again, empty
  pgtier tier resize 16GB     # online, up or down

Exit status: 0 on success; 1 with the server's message, SQLSTATE and hint on an error."
)]
pub struct TierArgs {
    /// The pgtier server [default: $PGTIER_URL, else postgresql://$USER@127.0.0.1:5433/pgtier; password from the URL or $PGPASSWORD]
    #[arg(long, env = "PGTIER_URL", hide_env_values = true, global = true)]
    url: Option<String>,
    #[command(subcommand)]
    command: TierCommand,
}

#[derive(Subcommand)]
enum TierCommand {
    /// The store (capacity, records, index memory, read latency, write amplification) and each group (hits, demotions).
    Status,
    /// Start using the configured flash tier (ALTER CACHE TIER ENABLE).
    Enable,
    /// Stop using it; its records are dropped (ALTER CACHE TIER DISABLE).
    Disable,
    /// Give it a new size, PostgreSQL units (ALTER CACHE TIER RESIZE '16GB').
    Resize {
        /// The new size (`16GB`).
        size: String,
    },
}

pub fn run(args: TierArgs) -> anyhow::Result<()> {
    let config = client_config(args.url.as_deref())?;
    match args.command {
        TierCommand::Status => {
            let mut client = connect(&config, None)?;
            println!("{}", query_table(&mut client, STATUS_SQL)?);
            Ok(())
        }
        TierCommand::Enable => run_statement(&config, "ALTER CACHE TIER ENABLE", "ALTER CACHE TIER", false),
        TierCommand::Disable => run_statement(&config, "ALTER CACHE TIER DISABLE", "ALTER CACHE TIER", false),
        TierCommand::Resize { size } => {
            let sql = format!("ALTER CACHE TIER RESIZE '{}'", size.replace('\'', "''"));
            run_statement(&config, &sql, "ALTER CACHE TIER", false)
        }
    }
}

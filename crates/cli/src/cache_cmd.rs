//! `pgtier cache create|drop|load|unload|refresh|list|stats|verify|takeover`: cache
//! statements for scripts, sent to a running pgtier server as a client
//! would send them (DESIGN.md §3; the server README, "Cache groups").
//!
//! `load` and `refresh` show a spinner with instances and rows/s, read by
//! polling `pgtier_cache_stats` on a second connection (the statement's own
//! connection is busy until it ends), then print the command tag and the
//! server's NOTICEs. An error exits 1 with its SQLSTATE and hint.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, anyhow};
use clap::{Args, Subcommand, ValueEnum};
use comfy_table::{Table, presets};
use indicatif::{ProgressBar, ProgressDrawTarget};
use parking_lot::Mutex;
use postgres::{Client, Config, NoTls, SimpleQueryMessage};

/// Where `pgtier serve` listens by default (crates/server config.rs).
const DEFAULT_URL: &str = "postgresql://127.0.0.1:5433/pgtier";
/// How often the progress display reads `pgtier_cache_stats`.
const PROGRESS_POLL: Duration = Duration::from_millis(250);

#[derive(Args)]
#[command(after_help = "Examples:
  pgtier cache create tatp --root subscriber --child access_info --child special_facility --child call_forwarding
  pgtier cache load tatp --where 's_id <= 100000' --parallel 4
  pgtier cache stats tatp
  pgtier cache refresh tatp --where 's_id <= 10'
  pgtier cache unload tatp && pgtier cache drop tatp

Exit status: 0 on success; 1 with the server's message, SQLSTATE and hint on an error.")]
pub struct CacheArgs {
    /// The pgtier server [default: $PGTIER_URL, else postgresql://$USER@127.0.0.1:5433/pgtier; password from the URL or $PGPASSWORD]
    #[arg(long, env = "PGTIER_URL", hide_env_values = true, global = true)]
    url: Option<String>,
    #[command(subcommand)]
    command: CacheCommand,
}

#[derive(Subcommand)]
enum CacheCommand {
    /// Define a cache group: its tables are imported from PostgreSQL (CREATE ... CACHE GROUP).
    Create(CreateArgs),
    /// Drop a cache group's tables from the cache; PostgreSQL is untouched (DROP CACHE GROUP).
    Drop {
        /// The cache group.
        name: String,
        /// No error when the group does not exist.
        #[arg(long)]
        if_exists: bool,
    },
    /// Load the instances whose root row matches --where from PostgreSQL (LOAD CACHE GROUP).
    Load(LoadArgs),
    /// Remove instances from the cache only (UNLOAD CACHE GROUP); without --where, all.
    Unload {
        /// The cache group.
        name: String,
        /// Condition on the root table's columns, evaluated on the cache.
        #[arg(long = "where", value_name = "PREDICATE")]
        predicate: Option<String>,
    },
    /// Read instances again from PostgreSQL (REFRESH CACHE GROUP).
    Refresh(LoadArgs),
    /// The cache groups and their tables.
    List,
    /// Instances, rows, memory and counters per cache group.
    Stats {
        /// Only this group.
        name: Option<String>,
    },
    /// Compare every cached instance with PostgreSQL's (VERIFY CACHE GROUP); exit 1 on a difference.
    Verify {
        /// The cache group.
        name: String,
    },
    /// Accept PostgreSQL's changed definitions of a group's tables when the
    /// columns the cache holds are the same (ALTER CACHE GROUP ... ACCEPT
    /// DEFINITION): a held group's write-through resumes.
    AcceptDefinition {
        /// The cache group.
        name: String,
    },
    /// Make the server's node name ([cache] awt_node) its data directory's in
    /// PostgreSQL, taking it from another (TAKEOVER CACHE NODE): after a lost
    /// data directory was replaced. The lost directory's transactions not yet in
    /// PostgreSQL are lost with it; its progress rows stay for inspection.
    Takeover,
}

/// `pgtier verify GROUP`: the same as `pgtier cache verify GROUP`.
#[derive(Args)]
#[command(after_help = "Compares every cached instance of the group with PostgreSQL's rows (read in one snapshot).
Run it when write-through has drained (pgtier_cache_propagation shows no backlog).

Exit status: 0 when the cache equals PostgreSQL; 1 with the differences (SQLSTATE XX001) or another error.")]
pub struct VerifyArgs {
    /// The pgtier server [default: $PGTIER_URL, else postgresql://$USER@127.0.0.1:5433/pgtier; password from the URL or $PGPASSWORD]
    #[arg(long, env = "PGTIER_URL", hide_env_values = true)]
    url: Option<String>,
    /// The cache group.
    group: String,
}

pub fn verify(args: VerifyArgs) -> anyhow::Result<()> {
    run(CacheArgs { url: args.url, command: CacheCommand::Verify { name: args.group } })
}

/// `pgtier status`: one screen of where the cache stands.
#[derive(Args)]
#[command(
    after_help = "Shows write-through (AWT: node, state, connected, lanes, applied, backlog, lag now and p50/p99, refused, reconnects,
stalls, held groups and why, last error, and per apply lane its state, queue, applied, wait and PostgreSQL pid; SWT: commits, refused, in-doubt resolved, repairs, time in PostgreSQL; autorefresh of READONLY groups: state, applied,
lag in bytes and ms with p50/p99, WAL retained by the slot, re-snapshots, errors) and every cache group (instances, rows, memory, loads, evictions, dynamic loads, miss latency)."
)]
pub struct StatusArgs {
    /// The pgtier server [default: $PGTIER_URL, else postgresql://$USER@127.0.0.1:5433/pgtier; password from the URL or $PGPASSWORD]
    #[arg(long, env = "PGTIER_URL", hide_env_values = true)]
    url: Option<String>,
}

/// `pgtier switchover`: `SELECT pgtier_switchover()` on the active.
#[derive(Args)]
#[command(
    after_help = "Run it against the active of a pair with [replication] lease_ms. The active refuses new writes (25006),
waits up to sync_timeout_ms for its standby to acknowledge everything durable, and gives the lease up; the
standby takes it on its next poll and promotes. The old active stays read-only; re-seed it as the new standby
(README, \"Automatic failover\"). Fails with 55000 when this server is not the active holding the lease or no
standby is connected, 57014 when the standby did not catch up in time (writes then resume)."
)]
pub struct SwitchoverArgs {
    /// The active pgtier server [default: $PGTIER_URL, else postgresql://$USER@127.0.0.1:5433/pgtier; password from the URL or $PGPASSWORD]
    #[arg(long, env = "PGTIER_URL", hide_env_values = true)]
    url: Option<String>,
}

pub fn switchover(args: SwitchoverArgs) -> anyhow::Result<()> {
    let config = client_config(args.url.as_deref())?;
    let mut client = connect(&config, None)?;
    client.simple_query("SELECT pgtier_switchover()").map_err(|e| describe(&e))?;
    println!("switchover: this server gave the lease up; its standby takes over on its next poll");
    println!("{}", query_table(&mut client, "SELECT * FROM pgtier_replication")?);
    Ok(())
}

pub fn status(args: StatusArgs) -> anyhow::Result<()> {
    let config = client_config(args.url.as_deref())?;
    let mut client = connect(&config, None)?;
    // `[replication]`: the server answers this one statement itself; an
    // error means replication is off.
    if client.simple_query("SELECT * FROM pgtier_replication").is_ok() {
        println!("Replication");
        println!("{}\n", query_table(&mut client, "SELECT * FROM pgtier_replication")?);
    }
    let propagation = client.simple_query("SELECT * FROM pgtier_cache_propagation").map_err(|e| describe(&e))?;
    let running = propagation.iter().any(|m| matches!(m, SimpleQueryMessage::Row(_)));
    println!("Write-through (AWT)");
    if running {
        println!(
            "{}",
            query_table(
                &mut client,
                "SELECT node, state, connected, lanes, applied_txns, backlog_bytes, round(lag_ms::numeric, 1) AS lag_ms, round(lag_p50_ms::numeric, 2) AS lag_p50_ms, round(lag_p99_ms::numeric, 2) AS lag_p99_ms, errors, retries, stalls FROM pgtier_cache_propagation"
            )?
        );
        for (what, column) in [("held groups", "held_groups"), ("last error", "last_error")] {
            let sql = format!("SELECT {column} FROM pgtier_cache_propagation WHERE {column} IS NOT NULL");
            if let Some(SimpleQueryMessage::Row(row)) = client.simple_query(&sql).map_err(|e| describe(&e))?.first() {
                println!("{what}: {}", row.get(0).unwrap_or(""));
            }
        }
        println!(
            "{}",
            query_table(
                &mut client,
                "SELECT lane, state, queued_txns, queued_bytes, applied_txns, round(waiting_ms::numeric) AS waiting_ms, backend_pid, last_error FROM pgtier_cache_lanes"
            )?
        );
    } else {
        println!("  not running (no AWT cache group, or no [backend])");
    }
    let swt = client.simple_query("SELECT * FROM pgtier_cache_swt").map_err(|e| describe(&e))?;
    if swt.iter().any(|m| matches!(m, SimpleQueryMessage::Row(_))) {
        println!("\nWrite-through (SWT)");
        println!(
            "{}",
            query_table(
                &mut client,
                "SELECT commits, refused, in_doubt_resolved, repairs, round(backend_p50_ms::numeric, 2) AS backend_p50_ms, round(backend_p99_ms::numeric, 2) AS backend_p99_ms FROM pgtier_cache_swt"
            )?
        );
        for (what, column) in
            [("groups refused for a changed definition", "drifted_groups"), ("last error", "last_error")]
        {
            let sql = format!("SELECT {column} FROM pgtier_cache_swt WHERE {column} IS NOT NULL");
            if let Some(SimpleQueryMessage::Row(row)) = client.simple_query(&sql).map_err(|e| describe(&e))?.first() {
                println!("{what}: {}", row.get(0).unwrap_or(""));
            }
        }
    }
    let autorefresh = client.simple_query("SELECT * FROM pgtier_cache_autorefresh").map_err(|e| describe(&e))?;
    if autorefresh.iter().any(|m| matches!(m, SimpleQueryMessage::Row(_))) {
        println!("\nAutorefresh (READONLY groups)");
        println!(
            "{}",
            query_table(
                &mut client,
                "SELECT \"group\", state, connected, applied_txns, applied_changes, lag_bytes, round(lag_ms::numeric, 1) AS lag_ms, round(lag_p50_ms::numeric, 2) AS lag_p50_ms, round(lag_p99_ms::numeric, 2) AS lag_p99_ms, retained_wal_bytes, resnapshots, errors FROM pgtier_cache_autorefresh ORDER BY 1"
            )?
        );
        for message in client
            .simple_query(
                "SELECT \"group\", last_error FROM pgtier_cache_autorefresh WHERE last_error IS NOT NULL ORDER BY 1",
            )
            .map_err(|e| describe(&e))?
        {
            if let SimpleQueryMessage::Row(row) = message {
                println!("last error of {}: {}", row.get(0).unwrap_or(""), row.get(1).unwrap_or(""));
            }
        }
    }
    let tier =
        client.simple_query("SELECT state FROM pgtier_tier_stats WHERE \"group\" IS NULL").map_err(|e| describe(&e))?;
    if let Some(SimpleQueryMessage::Row(row)) = tier.iter().find(|m| matches!(m, SimpleQueryMessage::Row(_)))
        && row.get(0) != Some("not configured")
    {
        println!("\nFlash tier");
        println!("{}", query_table(&mut client, crate::tier_cmd::STATUS_SQL)?);
    }
    println!("\nCache groups");
    println!(
        "{}",
        query_table(
            &mut client,
            "SELECT g.name, g.kind, g.dynamic, g.aging, s.instances, s.\"rows\", round(s.memory_bytes / 1048576.0, 1) AS memory_mb, s.loaded_instances, s.evicted_instances, s.dynamic_loads, round(s.miss_latency_avg_us::numeric) AS miss_us FROM pgtier_cache_groups g JOIN pgtier_cache_stats s ON s.\"group\" = g.name ORDER BY g.name"
        )?
    );
    Ok(())
}

#[derive(Args)]
struct CreateArgs {
    /// The cache group's name.
    name: String,
    /// How changes flow: readonly (from PostgreSQL), awt (asynchronous write-through), swt (synchronous).
    #[arg(long, value_enum, default_value_t = Kind::Readonly)]
    kind: Kind,
    /// Load a missing instance on a key lookup.
    #[arg(long)]
    dynamic: bool,
    /// The root table, `[schema.]table`.
    #[arg(long)]
    root: String,
    /// The condition every instance's root row satisfies.
    #[arg(long = "where", value_name = "PREDICATE")]
    predicate: Option<String>,
    /// A child table (each references its parent in the group by foreign key); repeat for more.
    #[arg(long = "child", value_name = "TABLE")]
    children: Vec<String>,
    /// Aging: `lru`, `off`, or `use COLUMN lifetime N days` [default: lru with --dynamic, else off]
    #[arg(long)]
    aging: Option<String>,
    /// Never evict for the memory budget.
    #[arg(long)]
    keep: bool,
    /// The group's own memory budget, PostgreSQL units (`64MB`).
    #[arg(long, value_name = "SIZE")]
    memory: Option<String>,
    /// A READONLY group that changes only by LOAD and REFRESH (no logical
    /// replication from PostgreSQL, so no `wal_level = logical` needed).
    #[arg(long)]
    no_autorefresh: bool,
    /// Where evicted instances go with a flash tier configured: `default`
    /// (to flash), `keep` (preferred there) or `none` (away) [DYNAMIC groups only]
    #[arg(long, value_parser = ["default", "keep", "none"])]
    flash: Option<String>,
}

#[derive(Clone, Copy, ValueEnum)]
enum Kind {
    Readonly,
    Awt,
    Swt,
}

#[derive(Args)]
struct LoadArgs {
    /// The cache group.
    name: String,
    /// Condition on the root table's columns (sent to PostgreSQL as given).
    #[arg(long = "where", value_name = "PREDICATE")]
    predicate: Option<String>,
    /// Workers, each with its own PostgreSQL connections [default: the server's [cache] load_parallel]
    #[arg(long, value_name = "N")]
    parallel: Option<u32>,
}

pub fn run(args: CacheArgs) -> anyhow::Result<()> {
    let config = client_config(args.url.as_deref())?;
    match args.command {
        CacheCommand::Create(create) => run_statement(&config, &create_sql(&create), "CREATE CACHE GROUP", false),
        CacheCommand::Drop { name, if_exists } => {
            let sql = format!("DROP CACHE GROUP {}{name}", if if_exists { "IF EXISTS " } else { "" });
            run_statement(&config, &sql, "DROP CACHE GROUP", false)
        }
        CacheCommand::Load(load) => run_statement(&config, &load_sql("LOAD", &load), "LOAD CACHE GROUP", true),
        CacheCommand::Refresh(load) => run_statement(&config, &load_sql("REFRESH", &load), "REFRESH CACHE GROUP", true),
        CacheCommand::Unload { name, predicate } => {
            let sql = format!("UNLOAD CACHE GROUP {name}{}", where_clause(predicate.as_deref()));
            run_statement(&config, &sql, "UNLOAD CACHE GROUP", true)
        }
        CacheCommand::List => list(&config),
        CacheCommand::Stats { name } => stats(&config, name.as_deref()),
        CacheCommand::Verify { name } => {
            run_statement(&config, &format!("VERIFY CACHE GROUP {name}"), "VERIFY CACHE GROUP", true)
        }
        CacheCommand::Takeover => run_statement(&config, "TAKEOVER CACHE NODE", "TAKEOVER CACHE NODE", false),
        CacheCommand::AcceptDefinition { name } => {
            run_statement(&config, &format!("ALTER CACHE GROUP {name} ACCEPT DEFINITION"), "ALTER CACHE GROUP", false)
        }
    }
}

/// The URL as postgres::Config, with a user ($USER) and password ($PGPASSWORD) when it names none.
pub(crate) fn client_config(url: Option<&str>) -> anyhow::Result<Config> {
    let url = url.unwrap_or(DEFAULT_URL);
    let mut config: Config =
        url.parse().map_err(|e| anyhow!("invalid --url {}: {e}", pgtier_backend::redact_url(url)))?;
    if config.get_user().is_none() {
        config.user(&std::env::var("USER").unwrap_or_else(|_| "postgres".to_owned()));
    }
    if config.get_password().is_none()
        && let Ok(password) = std::env::var("PGPASSWORD")
    {
        config.password(password);
    }
    if config.get_connect_timeout().is_none() {
        config.connect_timeout(Duration::from_secs(10));
    }
    config.application_name("pgtier-cache");
    Ok(config)
}

pub(crate) fn connect(config: &Config, notices: Option<Arc<Mutex<Vec<String>>>>) -> anyhow::Result<Client> {
    let mut config = config.clone();
    if let Some(notices) = notices {
        config
            .notice_callback(move |notice| notices.lock().push(format!("{}: {}", notice.severity(), notice.message())));
    }
    let shown = format!("{:?}:{:?}", config.get_hosts(), config.get_ports());
    config.connect(NoTls).map_err(|e| describe(&e)).with_context(|| format!("connecting to pgtier at {shown}"))
}

/// One line: the message, its SQLSTATE and hint, as psql shows them.
fn describe(error: &postgres::Error) -> anyhow::Error {
    match error.as_db_error() {
        Some(db) => {
            let detail = db.detail().map(|d| format!("\nDETAIL: {d}")).unwrap_or_default();
            let hint = db.hint().map(|h| format!("\nHINT: {h}")).unwrap_or_default();
            anyhow!("{} (SQLSTATE {}){detail}{hint}", db.message(), db.code().code())
        }
        None => anyhow!("{error}"),
    }
}

fn where_clause(predicate: Option<&str>) -> String {
    predicate.map(|p| format!(" WHERE {p}")).unwrap_or_default()
}

fn create_sql(c: &CreateArgs) -> String {
    let kind = match c.kind {
        Kind::Readonly => "READONLY",
        Kind::Awt => "AWT",
        Kind::Swt => "SWT",
    };
    let mut sql = format!(
        "CREATE {}{kind} CACHE GROUP {} FROM {}{}",
        if c.dynamic { "DYNAMIC " } else { "" },
        c.name,
        c.root,
        where_clause(c.predicate.as_deref())
    );
    for child in &c.children {
        sql.push_str(", ");
        sql.push_str(child);
    }
    if let Some(aging) = &c.aging {
        sql.push_str(&format!(" AGING {aging}"));
    }
    if c.keep {
        sql.push_str(" KEEP");
    }
    if let Some(memory) = &c.memory {
        sql.push_str(&format!(" MEMORY '{}'", memory.replace('\'', "''")));
    }
    if c.no_autorefresh {
        sql.push_str(" AUTOREFRESH OFF");
    }
    if let Some(flash) = &c.flash {
        sql.push_str(&format!(" FLASH {}", flash.to_uppercase()));
    }
    sql
}

fn load_sql(verb: &str, l: &LoadArgs) -> String {
    let parallel = l.parallel.map(|n| format!(" PARALLEL {n}")).unwrap_or_default();
    format!("{verb} CACHE GROUP {}{}{parallel}", l.name, where_clause(l.predicate.as_deref()))
}

/// Sends `sql`, prints `tag` (with the instance count when `counted`) and the NOTICEs.
pub(crate) fn run_statement(config: &Config, sql: &str, tag: &str, counted: bool) -> anyhow::Result<()> {
    let notices = Arc::new(Mutex::new(Vec::new()));
    let mut client = connect(config, Some(notices.clone()))?;
    let group = sql.split_whitespace().nth(3).unwrap_or("").to_owned();
    let watch = tag.starts_with("LOAD") || tag.starts_with("REFRESH");
    let done = AtomicBool::new(false);
    let result = std::thread::scope(|scope| {
        if watch {
            scope.spawn(|| show_progress(config, &group, &done));
        }
        let result = client.simple_query(sql);
        done.store(true, Ordering::Release);
        result
    });
    for notice in notices.lock().drain(..) {
        eprintln!("{notice}");
    }
    let messages = result.map_err(|e| describe(&e))?;
    let n = messages
        .iter()
        .rev()
        .find_map(|m| if let SimpleQueryMessage::CommandComplete(n) = m { Some(*n) } else { None });
    match (counted, n) {
        (true, Some(n)) => println!("{tag} {n}"),
        _ => println!("{tag}"),
    }
    Ok(())
}

/// A spinner with the group's cached instances and rows/s until `done`;
/// hidden when stderr is not a terminal. Polling errors only stop it.
fn show_progress(config: &Config, group: &str, done: &AtomicBool) {
    let bar = ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr());
    bar.enable_steady_tick(Duration::from_millis(120));
    let Ok(mut client) = connect(config, None) else { return bar.finish_and_clear() };
    let sql = "SELECT instances, \"rows\" FROM pgtier_cache_stats WHERE \"group\" = $1";
    let read = |client: &mut Client| {
        client.query_opt(sql, &[&group]).ok().flatten().map(|r| (r.get::<_, i64>(0), r.get::<_, i64>(1)))
    };
    let Some((first_instances, first_rows)) = read(&mut client) else { return bar.finish_and_clear() };
    let started = Instant::now();
    while !done.load(Ordering::Acquire) {
        if let Some((instances, rows)) = read(&mut client) {
            let seconds = started.elapsed().as_secs_f64().max(0.001);
            let rate = (rows - first_rows) as f64 / seconds;
            bar.set_message(format!(
                "{group}: {} instances ({} new), {rate:.0} rows/s",
                instances,
                instances - first_instances
            ));
        }
        std::thread::sleep(PROGRESS_POLL);
    }
    bar.finish_and_clear();
}

pub(crate) fn query_table(client: &mut Client, sql: &str) -> anyhow::Result<Table> {
    let messages = client.simple_query(sql).map_err(|e| describe(&e))?;
    let mut table = Table::new();
    table.load_style(presets::UTF8_FULL_CONDENSED);
    for message in messages {
        match message {
            SimpleQueryMessage::RowDescription(columns) => {
                table.set_header(columns.iter().map(|c| c.name().to_owned()).collect::<Vec<_>>());
            }
            SimpleQueryMessage::Row(row) => {
                table.add_row((0..row.len()).map(|i| row.get(i).unwrap_or("").to_owned()).collect::<Vec<_>>());
            }
            _ => {}
        }
    }
    Ok(table)
}

fn list(config: &Config) -> anyhow::Result<()> {
    let mut client = connect(config, None)?;
    println!("{}", query_table(&mut client, "SELECT * FROM pgtier_cache_groups ORDER BY name")?);
    println!("{}", query_table(&mut client, "SELECT * FROM pgtier_cache_tables ORDER BY \"group\", \"table\"")?);
    Ok(())
}

fn stats(config: &Config, name: Option<&str>) -> anyhow::Result<()> {
    let mut client = connect(config, None)?;
    let filter = name.map(|n| format!(" WHERE \"group\" = '{}'", n.replace('\'', "''"))).unwrap_or_default();
    println!("{}", query_table(&mut client, &format!("SELECT * FROM pgtier_cache_stats{filter} ORDER BY \"group\""))?);
    Ok(())
}

//! `[metrics] listen`: a Prometheus text endpoint (`GET /metrics`) with the
//! engine's, the cache groups' and write-through's figures, for scrapers
//! and dashboards. One small thread, one request at a time, bounded reads
//! and timeouts: a slow or hostile client delays only the next scrape.

use std::fmt::Write as _;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::thread::JoinHandle;
use std::time::Duration;

use crate::server::{Shared, wait_readable};

/// A request larger than this is answered 431 and closed.
const REQUEST_BYTES_MAX: usize = 8 << 10;
const IO_TIMEOUT: Duration = Duration::from_secs(2);

pub(crate) fn start(listener: TcpListener, shared: Arc<Shared>) -> std::io::Result<JoinHandle<()>> {
    listener.set_nonblocking(true)?;
    std::thread::Builder::new().name("pgtier-metrics".into()).spawn(move || {
        while !shared.is_shutting_down() {
            wait_readable(&listener);
            if let Ok((tcp, _)) = listener.accept() {
                let _ = answer(tcp, &shared);
            }
        }
    })
}

fn answer(mut tcp: TcpStream, shared: &Shared) -> std::io::Result<()> {
    tcp.set_nonblocking(false)?;
    tcp.set_read_timeout(Some(IO_TIMEOUT))?;
    tcp.set_write_timeout(Some(IO_TIMEOUT))?;
    let mut request = Vec::with_capacity(512);
    let mut buf = [0u8; 1024];
    while !request.windows(4).any(|w| w == b"\r\n\r\n") {
        let n = tcp.read(&mut buf)?;
        if n == 0 {
            return Ok(());
        }
        request.extend_from_slice(&buf[..n]);
        if request.len() > REQUEST_BYTES_MAX {
            respond(&mut tcp, "431 Request Header Fields Too Large", "text/plain", "request too large\n")?;
            // Closing with unread input would reset the connection, and the
            // client could lose the answer: read a little more first.
            tcp.shutdown(std::net::Shutdown::Write)?;
            let mut drained = 0;
            while drained < 16 * REQUEST_BYTES_MAX {
                match tcp.read(&mut buf) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => drained += n,
                }
            }
            return Ok(());
        }
    }
    let line = request.split(|&b| b == b'\r').next().unwrap_or_default();
    let mut words = line.split(|&b| b == b' ');
    match (words.next(), words.next()) {
        (Some(b"GET"), Some(b"/metrics")) => respond(&mut tcp, "200 OK", "text/plain; version=0.0.4", &render(shared)),
        (Some(b"GET"), Some(_)) => respond(&mut tcp, "404 Not Found", "text/plain", "pgtier serves /metrics\n"),
        _ => respond(&mut tcp, "405 Method Not Allowed", "text/plain", "only GET\n"),
    }
}

fn respond(tcp: &mut TcpStream, status: &str, content_type: &str, body: &str) -> std::io::Result<()> {
    let head = format!(
        "HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    tcp.write_all(head.as_bytes())?;
    tcp.write_all(body.as_bytes())
}

/// A label value as the text format wants it.
fn label(value: &str) -> String {
    value.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n")
}

struct Out(String);

impl Out {
    fn metric(&mut self, name: &str, kind: &str, help: &str, samples: &[(String, f64)]) {
        let _ = writeln!(self.0, "# HELP {name} {help}\n# TYPE {name} {kind}");
        for (labels, value) in samples {
            let _ = writeln!(self.0, "{name}{labels} {value}");
        }
    }

    fn one(&mut self, name: &str, kind: &str, help: &str, value: f64) {
        self.metric(name, kind, help, &[(String::new(), value)]);
    }
}

/// `[replication]`: role, the standby's link and the loss window.
fn render_replication(r: &crate::replication::ReplicationStatus, out: &mut Out) {
    let labels = format!("{{role=\"{}\",mode=\"{}\"}}", r.role, r.mode);
    out.metric(
        "pgtier_replication_info",
        "gauge",
        "This server's replication role and mode (value 1).",
        &[(labels, 1.0)],
    );
    out.one(
        "pgtier_replication_connected",
        "gauge",
        "1 while the standby (on an active) or the active (on a standby) is connected.",
        f64::from(u8::from(r.connected)),
    );
    out.one(
        "pgtier_replication_standby_durable_lsn",
        "gauge",
        "The standby's durable WAL end (acknowledged, on an active).",
        r.standby_durable_lsn as f64,
    );
    out.one(
        "pgtier_replication_standby_applied_lsn",
        "gauge",
        "The standby's applied WAL end.",
        r.standby_applied_lsn as f64,
    );
    out.one(
        "pgtier_replication_active_durable_lsn",
        "gauge",
        "The active's durable WAL end (as last heard, on a standby).",
        r.active_durable_lsn as f64,
    );
    out.one(
        "pgtier_replication_lag_bytes",
        "gauge",
        "WAL durable on the active and not acknowledged by the standby: what a failover would lose in async mode.",
        r.lag_bytes as f64,
    );
    out.one(
        "pgtier_replication_lag_ms",
        "gauge",
        "Age of the oldest WAL sent and not yet acknowledged by the standby (0 when it has everything).",
        r.lag_ms as f64,
    );
    out.metric(
        "pgtier_replication_lease_info",
        "gauge",
        "The pair's lease as this server sees it (value 1): off, held, fenced, catching_up, waiting, stepped_down.",
        &[(format!("{{state=\"{}\"}}", r.lease.state), 1.0)],
    );
    out.one(
        "pgtier_replication_lease_epoch",
        "gauge",
        "The epoch of the lease this server holds (0: none).",
        r.lease.epoch as f64,
    );
    out.metric(
        "pgtier_replication_standby_link_info",
        "gauge",
        "How the active stands with its standby (value 1): following, gone, dropped (going on without it past standby_timeout_ms), rejoining; - on a standby.",
        &[(format!("{{state=\"{}\"}}", r.standby_link), 1.0)],
    );
    out.one(
        "pgtier_replication_lease_valid_ms",
        "gauge",
        "How long this server may still write on its lease without a renewal (0 unless held).",
        r.lease.valid_ms as f64,
    );
}

fn render(shared: &Shared) -> String {
    let mut out = Out(String::new());
    let stats = shared.db.stats();
    out.one("pgtier_sessions", "gauge", "Sessions connected.", shared.active.load(Ordering::Acquire) as f64);
    out.one(
        "pgtier_session_panics_total",
        "counter",
        "Sessions ended by a panic (a bug: please report it; the server goes on).",
        shared.session_panics.load(Ordering::Relaxed) as f64,
    );
    render_auth(shared, &mut out);
    out.one("pgtier_engine_commits_total", "counter", "Transactions committed.", stats.commits as f64);
    out.one("pgtier_engine_rollbacks_total", "counter", "Transactions rolled back.", stats.rollbacks as f64);
    out.one("pgtier_engine_lock_waits_total", "counter", "Row-lock waits begun.", stats.lock_waits as f64);
    out.one("pgtier_engine_wal_end_bytes", "counter", "WAL position written.", stats.wal_end.0 as f64);
    out.one("pgtier_engine_memory_bytes", "gauge", "Bytes the tables hold in memory.", shared.db.memory_total() as f64);
    if let Some(replication) = &shared.replication {
        render_replication(&replication.status(), &mut out);
    }
    let Some(cache) = shared.cache.get() else { return out.0 };
    render_tier(cache, &mut out);
    let groups = cache.stats();
    let per_group = |f: &dyn Fn(&pgtier_cache::GroupStats) -> f64| -> Vec<(String, f64)> {
        groups.iter().map(|g| (format!("{{group=\"{}\"}}", label(&g.group)), f(g))).collect()
    };
    out.metric("pgtier_cache_instances", "gauge", "Cache instances held.", &per_group(&|g| g.instances as f64));
    out.metric("pgtier_cache_rows", "gauge", "Rows held.", &per_group(&|g| g.rows as f64));
    out.metric(
        "pgtier_cache_memory_bytes",
        "gauge",
        "Memory the group's tables hold.",
        &per_group(&|g| g.memory_bytes as f64),
    );
    out.metric(
        "pgtier_cache_loaded_instances_total",
        "counter",
        "Instances loaded by LOAD.",
        &per_group(&|g| g.loaded_instances as f64),
    );
    out.metric(
        "pgtier_cache_evicted_instances_total",
        "counter",
        "Instances evicted by aging.",
        &per_group(&|g| g.evicted_instances as f64),
    );
    out.metric(
        "pgtier_cache_dynamic_loads_total",
        "counter",
        "Instances loaded on a miss.",
        &per_group(&|g| g.dynamic_loads as f64),
    );
    out.metric(
        "pgtier_cache_dynamic_absent_total",
        "counter",
        "Misses PostgreSQL had no row for.",
        &per_group(&|g| g.dynamic_absent as f64),
    );
    out.metric(
        "pgtier_cache_miss_latency_avg_us",
        "gauge",
        "Mean time of a miss, microseconds.",
        &per_group(&|g| g.miss_latency_avg_us),
    );
    if let Some(p) = cache.propagation_info() {
        out.one(
            "pgtier_awt_connected",
            "gauge",
            "1 while write-through is connected to PostgreSQL.",
            f64::from(u8::from(p.connected)),
        );
        out.one(
            "pgtier_awt_applied_transactions_total",
            "counter",
            "Transactions applied to PostgreSQL.",
            p.applied_txns as f64,
        );
        out.one(
            "pgtier_awt_refused_transactions_total",
            "counter",
            "Transactions PostgreSQL refused (pgtier.awt_errors).",
            p.errors as f64,
        );
        out.one(
            "pgtier_awt_reconnects_total",
            "counter",
            "Write-through sessions ended by an error.",
            p.retries as f64,
        );
        out.one("pgtier_awt_backlog_bytes", "gauge", "WAL committed and not yet propagated.", p.backlog_bytes as f64);
        out.one("pgtier_awt_lag_ms", "gauge", "How far behind PostgreSQL is, milliseconds.", p.lag_ms);
        out.metric(
            "pgtier_awt_commit_lag_ms",
            "gauge",
            "Commit in the cache to commit in PostgreSQL, quantiles over applied transactions.",
            &[("{quantile=\"0.5\"}".into(), p.lag_p50_ms), ("{quantile=\"0.99\"}".into(), p.lag_p99_ms)],
        );
        out.one(
            "pgtier_awt_refused",
            "gauge",
            "1 while the node name is another data directory's: nothing propagates, AWT writes fail.",
            f64::from(u8::from(p.state == "refused")),
        );
        out.one(
            "pgtier_awt_stalls_total",
            "counter",
            "Apply lanes found with work and no progress for the stall timeout (each reconnected).",
            p.stalls as f64,
        );
        let held: Vec<(String, f64)> = groups
            .iter()
            .map(|g| {
                (
                    format!("{{group=\"{}\"}}", label(&g.group)),
                    f64::from(u8::from(p.held_groups.iter().any(|(h, _)| *h == g.group))),
                )
            })
            .collect();
        out.metric(
            "pgtier_awt_group_held",
            "gauge",
            "1 while the group's write-through is held (a table changed in PostgreSQL).",
            &held,
        );
        let lanes = cache.lanes();
        let per_lane = |f: &dyn Fn(&pgtier_cache::LaneInfo) -> f64| -> Vec<(String, f64)> {
            lanes.iter().map(|l| (format!("{{lane=\"{}\"}}", label(&l.lane)), f(l))).collect()
        };
        out.metric(
            "pgtier_awt_lane_queued_transactions",
            "gauge",
            "Transactions queued on an apply lane.",
            &per_lane(&|l| l.queued_txns as f64),
        );
        out.metric(
            "pgtier_awt_lane_waiting_ms",
            "gauge",
            "How long a lane has had work without applying any, milliseconds.",
            &per_lane(&|l| l.waiting_ms),
        );
    }
    if let Some(swt) = cache.swt_status() {
        let load = |v: &std::sync::atomic::AtomicU64| v.load(std::sync::atomic::Ordering::Relaxed) as f64;
        out.one(
            "pgtier_swt_commits_total",
            "counter",
            "SWT transactions committed in PostgreSQL and then in the cache.",
            load(&swt.commits),
        );
        out.one(
            "pgtier_swt_refused_total",
            "counter",
            "SWT commits PostgreSQL refused (rolled back in the cache).",
            load(&swt.refused),
        );
        out.one(
            "pgtier_swt_in_doubt_resolved_total",
            "counter",
            "SWT transactions committed only in PostgreSQL (a crash between the commits), repaired from PostgreSQL.",
            load(&swt.in_doubt_resolved),
        );
        out.one(
            "pgtier_swt_repairs_total",
            "counter",
            "Instances reloaded because PostgreSQL's rows differed from the cache's.",
            load(&swt.repairs),
        );
        out.metric(
            "pgtier_swt_backend_commit_ms",
            "gauge",
            "Time an SWT commit spends in PostgreSQL, quantiles.",
            &[
                ("{quantile=\"0.5\"}".into(), swt.latency.quantile_us(0.5) / 1000.0),
                ("{quantile=\"0.99\"}".into(), swt.latency.quantile_us(0.99) / 1000.0),
            ],
        );
    }
    let autorefresh = cache.autorefresh_status();
    if !autorefresh.is_empty() {
        let load = |v: &std::sync::atomic::AtomicU64| v.load(std::sync::atomic::Ordering::Relaxed) as f64;
        let per_group = |f: &dyn Fn(&pgtier_cache::AutorefreshStatus) -> f64| -> Vec<(String, f64)> {
            autorefresh.iter().map(|s| (format!("{{group=\"{}\"}}", label(&s.group)), f(s))).collect()
        };
        out.metric(
            "pgtier_autorefresh_applied_txns_total",
            "counter",
            "PostgreSQL transactions applied to READONLY groups.",
            &per_group(&|s| load(&s.applied_txns)),
        );
        out.metric(
            "pgtier_autorefresh_applied_changes_total",
            "counter",
            "Row changes applied to READONLY groups.",
            &per_group(&|s| load(&s.applied_changes)),
        );
        out.metric(
            "pgtier_autorefresh_lag_bytes",
            "gauge",
            "PostgreSQL WAL not yet looked through by the group's autorefresh.",
            &per_group(&|s| s.lag_bytes() as f64),
        );
        out.metric(
            "pgtier_autorefresh_lag_ms",
            "gauge",
            "How far behind PostgreSQL the group is, milliseconds.",
            &per_group(&|s| s.lag_ms()),
        );
        out.metric(
            "pgtier_autorefresh_retained_wal_bytes",
            "gauge",
            "WAL the group's replication slot keeps PostgreSQL from removing.",
            &per_group(&|s| load(&s.retained_wal_bytes)),
        );
        out.metric(
            "pgtier_autorefresh_resnapshots_total",
            "counter",
            "Times a group loaded again from a new slot (invalidated, missing or past the bound).",
            &per_group(&|s| load(&s.resnapshots)),
        );
        out.metric(
            "pgtier_autorefresh_errors_total",
            "counter",
            "Autorefresh sessions ended by an error.",
            &per_group(&|s| load(&s.errors)),
        );
        out.metric(
            "pgtier_autorefresh_connected",
            "gauge",
            "1 while the group streams from PostgreSQL.",
            &per_group(&|s| if s.connected.load(std::sync::atomic::Ordering::Relaxed) { 1.0 } else { 0.0 }),
        );
        let mut quantiles = Vec::new();
        for s in &autorefresh {
            for q in [0.5, 0.99] {
                quantiles.push((
                    format!("{{group=\"{}\",quantile=\"{q}\"}}", label(&s.group)),
                    s.lag.quantile_us(q) / 1000.0,
                ));
            }
        }
        out.metric(
            "pgtier_autorefresh_commit_lag_ms",
            "gauge",
            "Commit in PostgreSQL to commit in the cache, quantiles over applied transactions.",
            &quantiles,
        );
    }
    out.0
}

/// Logins (login.rs): never a password; user names and addresses only
/// of failures, at most `login::TRACKED_MAX` of each.
fn render_auth(shared: &Shared, out: &mut Out) {
    let logins = shared.logins.snapshot();
    out.one("pgtier_auth_successes_total", "counter", "Logins that started a session.", logins.successes as f64);
    let reasons: Vec<(String, f64)> =
        logins.failures.iter().map(|(why, n)| (format!("{{reason=\"{}\"}}", why.label()), *n as f64)).collect();
    out.metric(
        "pgtier_auth_failures_total",
        "counter",
        "Logins refused: password, unknown_user, no_rule, rejected, client_cert (each answered after [auth] failure_delay_ms), user_connection_limit.",
        &reasons,
    );
    let mut by_user: Vec<(String, f64)> =
        logins.by_user.iter().map(|(u, n)| (format!("{{user=\"{}\"}}", label(u)), *n as f64)).collect();
    by_user.sort_by(|a, b| a.0.cmp(&b.0));
    out.metric(
        "pgtier_auth_failures_by_user_total",
        "counter",
        "Failed logins by the user name given (the most recently failing names only).",
        &by_user,
    );
    let mut by_address: Vec<(String, f64)> =
        logins.by_address.iter().map(|(a, n)| (format!("{{address=\"{a}\"}}"), *n as f64)).collect();
    by_address.sort_by(|a, b| a.0.cmp(&b.0));
    out.metric(
        "pgtier_auth_failures_by_address_total",
        "counter",
        "Failed logins by client address (the most recently failing addresses only).",
        &by_address,
    );
    out.one(
        "pgtier_auth_failures_forgotten_total",
        "counter",
        "User names and addresses dropped from the two tables above to keep them bounded.",
        logins.forgotten as f64,
    );
    let reloads = [("ok", 0), ("failed", 1)]
        .map(|(result, i)| (format!("{{result=\"{result}\"}}"), shared.reloads[i].load(Ordering::Relaxed) as f64));
    out.metric(
        "pgtier_config_reloads_total",
        "counter",
        "Configuration reloads (SIGHUP, pg_reload_conf()); a failed one changed nothing.",
        &reloads,
    );
}

/// The flash tier (`pgtier_tier_stats`): the store unlabelled, groups labelled.
fn render_tier(cache: &pgtier_cache::Cache, out: &mut Out) {
    let rows = cache.tier_stats();
    let Some(store) = rows.first() else { return };
    if store.state == "not configured" {
        return;
    }
    out.one(
        "pgtier_tier_enabled",
        "gauge",
        "1 while the flash tier is in use.",
        f64::from(u8::from(store.state == "enabled")),
    );
    let optional = [
        ("pgtier_tier_records", "Records on flash.", store.flash_records.map(|n| n as f64)),
        ("pgtier_tier_live_bytes", "Bytes of live records on flash.", store.flash_live_bytes.map(|n| n as f64)),
        ("pgtier_tier_capacity_bytes", "Size of the flash store.", store.flash_capacity_bytes.map(|n| n as f64)),
        ("pgtier_tier_index_bytes", "Memory the flash index holds.", store.index_bytes.map(|n| n as f64)),
        ("pgtier_tier_read_p50_us", "Flash record read latency, median, microseconds.", store.read_p50_us),
        ("pgtier_tier_read_p99_us", "Flash record read latency, 99th percentile, microseconds.", store.read_p99_us),
        ("pgtier_tier_write_amplification", "Bytes written to flash per byte of records.", store.write_amplification),
    ];
    for (name, help, value) in optional {
        if let Some(value) = value {
            out.one(name, "gauge", help, value);
        }
    }
    let per_group = |f: &dyn Fn(&pgtier_cache::TierInfo) -> f64| -> Vec<(String, f64)> {
        rows.iter()
            .filter_map(|row| Some((format!("{{group=\"{}\"}}", label(row.group.as_deref()?)), f(row))))
            .collect()
    };
    out.metric(
        "pgtier_tier_hits_total",
        "counter",
        "Misses in memory flash answered.",
        &per_group(&|r| r.flash_hits as f64),
    );
    out.metric(
        "pgtier_tier_promotions_total",
        "counter",
        "Instances flash gave back to memory (a write, or a read of one read recently).",
        &per_group(&|r| r.promotions as f64),
    );
    out.metric(
        "pgtier_tier_demotions_total",
        "counter",
        "Instances aging moved to flash.",
        &per_group(&|r| r.demotions as f64),
    );
    out.metric(
        "pgtier_tier_rejections_total",
        "counter",
        "Instances flash did not take (too large, not admitted, index full).",
        &per_group(&|r| r.rejections as f64),
    );
    let temperatures: Vec<(String, f64)> = rows
        .iter()
        .filter_map(|row| {
            let group = label(row.group.as_deref()?);
            Some(
                [("hot", row.hot_rows), ("warm", row.warm_rows), ("cold", row.cold_rows)]
                    .map(|(t, n)| (format!("{{group=\"{group}\",temperature=\"{t}\"}}"), n as f64)),
            )
        })
        .flatten()
        .collect();
    out.metric(
        "pgtier_tier_memory_rows",
        "gauge",
        "Rows in memory by last use: hot (last aging interval), warm (last 10), cold (longer).",
        &temperatures,
    );
}

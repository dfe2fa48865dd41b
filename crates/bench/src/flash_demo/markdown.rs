//! The flash demo's report: `report.md` with its charts (PNG and SVG)
//! beside it and the raw figures as `flash.json`. Every section is written
//! even when the run stopped early; a section without data says so.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use super::{BASELINE, FlashReport, STUDY_003, SideFigures, size_label};
use crate::chart::{
    ChartError, LineFigure, LineSpec, MUTED, TimeSeries, YScale, draw_time_series, series_color, write_figure,
};
use crate::report::ReportError;

pub const REPORT_FILE: &str = "report.md";

/// The section headings, in order; a test checks every one is present.
pub const SECTIONS: [&str; 9] = [
    "## Study 003: throughput by cache size",
    "## Warm-up after enabling the tier online",
    "## Study 000, use case 2",
    "## Study 002: write-back against clean flash",
    "## The device",
    "## Answers checked against PostgreSQL",
    "## The fair baseline",
    "## Deviations from the studies",
    "## Machine, settings, phases",
];

/// Writes `report.md`, `flash.json` and the charts into `dir`; returns the
/// report's path and its text.
pub fn write_report(report: &FlashReport, dir: &Path) -> Result<(PathBuf, String), ReportError> {
    // The charts are drawn first: the report names the ones that failed.
    let charts = vec![("gain by cache size", gain_chart(report, dir)), ("warm-up curve", curve_chart(report, dir))];
    crate::report::write_demo_report(
        dir,
        charts,
        |files, missing| markdown(report, files, missing),
        REPORT_FILE,
        "flash.json",
        report,
    )
}

fn mb(bytes: u64) -> String {
    format!("{:.1}", bytes as f64 / f64::from(1u32 << 20))
}

fn opt<T: std::fmt::Display>(v: Option<T>) -> String {
    v.map_or_else(|| "n/a".into(), |v| v.to_string())
}

fn image(out: &mut String, files: &[String], stem: &str, alt: &str) {
    if files.iter().any(|f| f == &format!("{stem}.png")) {
        let _ = writeln!(out, "\n![{alt}]({stem}.png) ([SVG]({stem}.svg))\n");
    }
}

/// The study 003 runs (over the wire, or in direct mode) with their gain
/// over PostgreSQL alone.
fn size_rows<'r>(r: &'r FlashReport, access: &str) -> Vec<(f64, &'r SideFigures, Option<f64>)> {
    let baseline = r.side(BASELINE).map(|b| b.txn_per_s).filter(|t| *t > 0.0);
    let mut rows: Vec<(f64, &SideFigures, Option<f64>)> = r
        .sides
        .iter()
        .filter(|s| s.study == "003" && s.label != BASELINE && (s.access == access || access.is_empty()))
        .filter_map(|s| Some((s.cache_fraction?, s, baseline.map(|b| s.sustained() / b))))
        .collect();
    // Measured from the largest down; shown as the study's table, smallest
    // first, the wire run before the direct one.
    rows.sort_by(|a, b| a.0.total_cmp(&b.0).then_with(|| b.1.access.cmp(&a.1.access)));
    rows
}

/// The share of transactions on the hottest `fraction` of subscribers, as
/// sampled at populate.
fn hottest_share(r: &FlashReport, fraction: f64) -> Option<f64> {
    let data = r.data.as_ref()?;
    data.hottest_shares.iter().find(|(f, _)| (f - fraction).abs() < 1e-9).map(|(_, share)| *share)
}

/// A pgtier run's rate with write-through caught up, as a table cell.
fn caught_up(s: &SideFigures) -> String {
    match (s.caught_up_txn_per_s, s.drain_s) {
        (Some(rate), Some(drain)) => format!("{rate:.0} ({drain:.1} s)"),
        (Some(_), None) => "not caught up".into(),
        _ => "–".into(),
    }
}

fn study_gain(fraction: f64) -> Option<f64> {
    STUDY_003.iter().find(|(f, _)| (f - fraction).abs() < 1e-9).map(|(_, g)| *g)
}

fn markdown(r: &FlashReport, files: &[String], missing: &[String]) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "# pgtier demo flash: the flash studies on this machine\n");
    let _ = writeln!(out, "Started {} · {:.0} s in all.", r.started_at, r.total_s);
    if let Some(why) = &r.stopped_by {
        let _ = writeln!(out, "\n**Stopped early: {why}.** The sections below hold what was measured before.");
    }
    if let Some(d) = &r.data {
        let _ = writeln!(
            out,
            "\nTATP with {} subscribers: {} MB in PostgreSQL (the four tables with their indexes){}. \
             pgtier's DRAM budget in the study 003 runs: {} MB.",
            d.subscribers,
            mb(d.postgres_bytes),
            d.instance_bytes
                .map_or(String::new(), |b| format!("; pgtier holds one subscriber's instance in {b} B of memory")),
            mb(d.dram_budget_bytes),
        );
    }
    sizes(&mut out, r, files);
    curve(&mut out, r, files);
    use_case_2(&mut out, r);
    write_back(&mut out, r);
    device(&mut out, r);
    checks(&mut out, r);
    baseline(&mut out, r);
    deviations(&mut out, r);
    machine(&mut out, r, missing);
    out
}

fn sizes(out: &mut String, r: &FlashReport, files: &[String]) {
    let _ = writeln!(out, "\n{}\n", super::markdown::SECTIONS[0]);
    let _ = writeln!(
        out,
        "Study 003 (IBM AIX server-side flash cache) added a flash cache of 10 to 60 % of a 1.2 TB database to a \
         server with 62 GB of RAM and measured TPS relative to the same system without it. Here: TATP's standard \
         mix, closed loop; PostgreSQL alone with the memory of pgtier's DRAM budget, against pgtier (a DYNAMIC AWT \
         cache group over the same PostgreSQL) whose DRAM budget plus flash tier hold the share of the data in the \
         first column, reached over the wire (the PostgreSQL protocol, the same client as PostgreSQL alone's) and then \
         in direct mode (the engine in the application's process, pgtier's embedded deployment) on the same cache.\n"
    );
    let Some(base) = r.side(BASELINE) else {
        let _ = writeln!(out, "Not measured.");
        return;
    };
    let _ = writeln!(
        out,
        "| cache size | access | DRAM MB | flash MB | txn/s | caught up txn/s | memory at end MB | avg µs | p90 µs | p99 µs | from flash /s | from PostgreSQL /s | gain | study 003 |"
    );
    let _ = writeln!(out, "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    let _ = writeln!(
        out,
        "| PostgreSQL alone | wire | {} | – | {:.0} | – | – | {:.0} | {:.0} | {:.0} | – | – | 1.0x | 1.0x |",
        r.memory_limit.limit_bytes.map_or_else(|| "unlimited".into(), mb),
        base.txn_per_s,
        base.avg_us,
        base.p90_us,
        base.p99_us
    );
    let rows = size_rows(r, "");
    let per_s = |n: Option<u64>, s: &SideFigures| {
        let window = s.txns.iter().map(|t| t.executed).sum::<u64>() as f64 / s.txn_per_s.max(1e-9);
        n.map_or("n/a".into(), |n| format!("{:.0}", n as f64 / window.max(1e-9)))
    };
    for (fraction, s, gain) in &rows {
        let _ = writeln!(
            out,
            "| {:.0} % | {} | {} | {} | {:.0} | {} | {} | {:.0} | {:.0} | {:.0} | {} | {} | {} | {} |",
            fraction * 100.0,
            s.access,
            opt(s.dram_budget_bytes.map(mb)),
            opt(s.flash_bytes.map(mb)),
            s.txn_per_s,
            caught_up(s),
            opt(s.end_memory_bytes.map(mb)),
            s.avg_us,
            s.p90_us,
            s.p99_us,
            per_s(s.flash_answers, s),
            per_s(s.backend_loads, s),
            gain.map_or("n/a".into(), |g| format!("{g:.1}x")),
            study_gain(*fraction).map_or("–".into(), |g| format!("{g:.1}x")),
        );
    }
    let _ = writeln!(
        out,
        "\nThe gain is pgtier's rate with write-through caught up (the window's transactions over the window plus \
         the time write-through then took to send PostgreSQL the rest, the clients stopped) over PostgreSQL alone's: \
         a rate whose writes outrun what PostgreSQL applies grows a backlog, and instances with changes PostgreSQL \
         does not have stay in memory past the budget (memory at end)."
    );
    image(out, files, "flash-gain-by-size", "gain over PostgreSQL alone by cache size");
    if let Some(d) = r.data.as_ref().filter(|d| !d.hottest_shares.is_empty()) {
        let shares: Vec<String> = d
            .hottest_shares
            .iter()
            .map(|(fraction, share)| format!("{:.0} % of them {:.0} %", fraction * 100.0, share * 100.0))
            .collect();
        let _ = writeln!(
            out,
            "\nHow skewed the clients' keys are (TATP's NURand, {} draws of the clients' own generator): the hottest \
             subscribers draw {} of the transactions. They lie all over the key range (NURand favours ids with many \
             low bits set), so each of PostgreSQL's pages holds hot and cold subscribers alike, where pgtier holds \
             whole hot subscribers.",
            super::SKEW_DRAWS,
            shares.join(", ")
        );
    }
    // The shape, measured: where pgtier's gain falls short of the study's,
    // what the runs did instead (misses to PostgreSQL per transaction).
    let short: Vec<String> = rows
        .iter()
        .filter_map(|(fraction, s, gain)| {
            let (gain, study) = ((*gain)?, study_gain(*fraction)?);
            (gain < study).then(|| {
                let executed = s.txns.iter().map(|t| t.executed).sum::<u64>().max(1) as f64;
                format!(
                    "{:.0} % ({}): {gain:.1}x against the study's {study:.1}x; {:.2} loads from PostgreSQL, {:.2} \
                     flash answers and {:.2} questions to PostgreSQL of whose row a sub_nbr is ({:.2} answered by \
                     flash's key records) per transaction{}",
                    fraction * 100.0,
                    s.access,
                    s.backend_loads.unwrap_or(0) as f64 / executed,
                    s.flash_answers.unwrap_or(0) as f64 / executed,
                    s.unique_asked.unwrap_or(0) as f64 / executed,
                    s.unique_on_flash.unwrap_or(0) as f64 / executed,
                    hottest_share(r, *fraction).map_or(String::new(), |share| format!(
                        " (a cache holding the hottest {:.0} % of subscribers would miss {:.2})",
                        fraction * 100.0,
                        1.0 - share
                    )),
                )
            })
        })
        .collect();
    if short.is_empty() && !rows.is_empty() {
        let _ = writeln!(out, "At every size measured, pgtier's gain is at or above the study's.");
    } else if !short.is_empty() {
        let _ = writeln!(out, "Below the study's gain:\n");
        for line in &short {
            let _ = writeln!(out, "- {line}");
        }
        let _ = writeln!(
            out,
            "\nA transaction whose subscriber is in neither DRAM nor flash costs a load from PostgreSQL (one statement \
             reading the subscriber's rows of every table, then inserting them into memory and making room) on top of \
             the transaction itself, against PostgreSQL alone's one statement: at a small cache the misses dominate and \
             the gain stays small.{}",
            r.data.as_ref().map_or(String::new(), |d| {
                let postgres_each = d.postgres_bytes / d.subscribers.max(1);
                match d.instance_bytes {
                    Some(b) if b > postgres_each => format!(
                        " The sizes are shares of PostgreSQL's bytes, and pgtier holds a subscriber in {b} B against \
                         PostgreSQL's {postgres_each} B (tables and indexes), so a cache of a given share holds a \
                         smaller share of the subscribers."
                    ),
                    _ => String::new(),
                }
            })
        );
    }
    if let (Some(iops), Some(disk)) = (r.storage.read_iops_ceiling, &r.storage.disk) {
        let _ = writeln!(
            out,
            "\nPostgreSQL's storage stood in for the study's: its reads from disk {disk} were held to {iops} a second \
             (a block I/O cgroup; study 003's database sat on 95 spinning disks at several milliseconds a read), {}, \
             PostgreSQL alone's reads and pgtier's misses alike; pgtier's flash file, on the same disk, was not \
             held. PostgreSQL alone read {} blocks/s from the disk during its window. Without `--primary-read-iops` \
             the demo measures the disk as it is.",
            match &r.storage.lifted_before {
                Some(phase) => format!(
                    "in study 003's runs (PostgreSQL alone, each size, the warm-up curve) and lifted before \"{phase}\", \
                     which compares pgtier with itself"
                ),
                None => "in every run".into(),
            },
            base.device.as_ref().map_or("n/a".into(), |d| format!("{:.0}", d.read_iops)),
        );
    } else if !short.is_empty()
        && let Some(d) = &base.device
    {
        let _ = writeln!(
            out,
            "\nThe baseline's storage is the other half of the shape: with its memory limited, PostgreSQL alone read \
             {:.0} blocks/s ({:.1} MB/s) from the device during its window and still ran {:.0} txn/s, because a \
             read from this device takes about a tenth of a millisecond (see the device table), where study 003's \
             baseline read from 10,000 rpm disks at several milliseconds each. A flash tier on the same device as \
             PostgreSQL's data can only save PostgreSQL's CPU and round trips, not a slow device's latency \
             (`--primary-read-iops` holds PostgreSQL's reads to a slower storage's rate).",
            d.read_iops, d.read_mb_per_s, base.txn_per_s
        );
    }
    if let Some(why) = &r.storage.unavailable {
        let _ = writeln!(
            out,
            "\n**PostgreSQL's reads were to be held to {} a second and were not: {why}.** Every figure above is on the \
             disk as it is.",
            opt(r.storage.read_iops_ceiling)
        );
    }
}

fn curve(out: &mut String, r: &FlashReport, files: &[String]) {
    let _ = writeln!(out, "\n{}\n", SECTIONS[1]);
    if r.curve.is_empty() {
        let _ = writeln!(out, "Not measured.");
        return;
    }
    let _ = writeln!(
        out,
        "Study 003 started its cache while the workload ran and watched TPS climb for 30 to 45 minutes until the \
         cache was full. Here the group starts with the tier disabled (aging drops what leaves DRAM), the load \
         starts, and `ALTER CACHE TIER ENABLE` comes at second {}.",
        opt(r.curve_enabled_at)
    );
    image(out, files, "flash-warm-up", "throughput per second before and after the tier is enabled");
    let at = r.curve_enabled_at.unwrap_or(0);
    let mean = |from: u32, to: u32| {
        let points: Vec<f64> =
            r.curve.iter().filter(|p| p.second > from && p.second <= to).map(|p| p.txn_per_s).collect();
        (!points.is_empty()).then(|| points.iter().sum::<f64>() / points.len() as f64)
    };
    let last = r.curve.last().map_or(0, |p| p.second);
    let before = mean(0, at);
    let end = mean(last.saturating_sub(5), last);
    let _ = writeln!(
        out,
        "Before ENABLE: {} txn/s on average; the last 5 s: {} txn/s; flash held {} records at the end.",
        before.map_or("n/a".into(), |v| format!("{v:.0}")),
        end.map_or("n/a".into(), |v| format!("{v:.0}")),
        r.curve.last().map_or(0, |p| p.flash_records)
    );
    if let (Some(before), Some(end)) = (before, end) {
        let target = before + 0.9 * (end - before);
        if let Some(p) = r.curve.iter().find(|p| p.second > at && p.txn_per_s >= target) {
            let _ = writeln!(out, "Warm-up: 90 % of the way to the final rate {} s after ENABLE.", p.second - at);
        }
    }
}

fn use_case_2(out: &mut String, r: &FlashReport) {
    let _ = writeln!(out, "\n{}\n", SECTIONS[2]);
    let (Some(all), Some(flash)) = (r.side("uc1-all-dram"), r.side("uc2-flash")) else {
        let _ = writeln!(out, "Not measured.");
        return;
    };
    let _ = writeln!(
        out,
        "Study 000 cached 4.5 times more subscribers in use case 2 by putting a slower tier (Intel PMem) under DRAM, \
         at near-DRAM latency. Here: the same population, direct mode (the engine in the process, as the study's \
         application ran TimesTen), once with every subscriber in DRAM (use case 1, {} MB) and once with a DRAM \
         budget of {} MB and the flash tier under it (TATP over {:.1}x the DRAM budget).\n",
        opt(all.loaded_bytes.map(mb)),
        opt(flash.dram_budget_bytes.map(mb)),
        all.loaded_bytes.unwrap_or(0) as f64 / flash.dram_budget_bytes.unwrap_or(1).max(1) as f64,
    );
    let _ =
        writeln!(out, "| transaction | all in DRAM avg / p90 / p99 µs | DRAM + flash avg / p90 / p99 µs | avg ratio |");
    let _ = writeln!(out, "|---|---:|---:|---:|");
    for t in &all.txns {
        let Some(f) = flash.txns.iter().find(|f| f.name == t.name) else { continue };
        let _ = writeln!(
            out,
            "| {} | {:.1} / {:.1} / {:.1} | {:.1} / {:.1} / {:.1} | {:.1}x |",
            t.name,
            t.avg_us,
            t.p90_us,
            t.p99_us,
            f.avg_us,
            f.p90_us,
            f.p99_us,
            f.avg_us / t.avg_us.max(1e-9)
        );
    }
    let _ = writeln!(
        out,
        "| **all** ({:.0} vs {:.0} txn/s with write-through caught up: {:.0} %) | {:.1} / {:.1} / {:.1} | {:.1} / {:.1} / {:.1} | {:.1}x |",
        all.sustained(),
        flash.sustained(),
        100.0 * flash.sustained() / all.sustained().max(1e-9),
        all.avg_us,
        all.p90_us,
        all.p99_us,
        flash.avg_us,
        flash.p90_us,
        flash.p99_us,
        flash.avg_us / all.avg_us.max(1e-9)
    );
}

fn write_back(out: &mut String, r: &FlashReport) {
    let _ = writeln!(out, "\n{}\n", SECTIONS[3]);
    let (Some(clean), Some(back)) = (r.side("clean"), r.side("write-back")) else {
        let _ = writeln!(out, "Not measured.");
        return;
    };
    let _ = writeln!(
        out,
        "Study 002 (Exadata) measured up to 18x more random writes with the flash cache in write-back mode than in \
         write-through. Here: TATP's two updates by key (UPDATE_SUBSCRIBER_DATA, UPDATE_LOCATION) over the wire on the \
         DRAM budget with flash room for every instance; clean mode sends only instances PostgreSQL has in full to \
         flash, write-back sends changed ones too (durably, before PostgreSQL has them).\n"
    );
    let _ = writeln!(
        out,
        "| mode | txn/s | caught up txn/s | avg µs | p90 µs | p99 µs | dirty demotions | flash write amp. | device write IOPS | device write MB/s | PostgreSQL WAL MB/s |"
    );
    let _ = writeln!(out, "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    for s in [clean, back] {
        let _ = writeln!(
            out,
            "| {} | {:.0} | {} | {:.0} | {:.0} | {:.0} | {} | {} | {} | {} | {} |",
            s.label,
            s.txn_per_s,
            caught_up(s),
            s.avg_us,
            s.p90_us,
            s.p99_us,
            opt(s.dirty_demotions),
            s.write_amplification.map_or("n/a".into(), |w| format!("{w:.2}")),
            s.device.as_ref().map_or("n/a".into(), |d| format!("{:.0}", d.write_iops)),
            s.device.as_ref().map_or("n/a".into(), |d| format!("{:.1}", d.write_mb_per_s)),
            s.postgres_wal_mb_s.map_or("n/a".into(), |w| format!("{w:.2}")),
        );
    }
    let _ = writeln!(
        out,
        "\nwrite-back / clean: {:.2}x the update rate (with write-through caught up). The device is the one holding both the flash file and \
         PostgreSQL's data (one disk on this machine), so its writes are both sides'.",
        back.sustained() / clean.sustained().max(1e-9)
    );
}

fn device(out: &mut String, r: &FlashReport) {
    let _ = writeln!(out, "\n{}\n", SECTIONS[4]);
    match &r.io_table {
        Some(table) => {
            let _ =
                writeln!(out, "`pgtier bench io --quick` on the device of the flash file, fio beside it:\n\n{table}");
            for note in &r.io_notes {
                let _ = writeln!(out, "- {note}");
            }
        }
        None => {
            let _ = writeln!(out, "Not measured.");
        }
    }
    let devices: Vec<String> = r
        .sides
        .iter()
        .filter_map(|s| {
            let d = s.device.as_ref()?;
            Some(format!(
                "| {} | {} | {:.0} | {:.1} | {:.0} | {:.1} |",
                s.label,
                s.device_name.as_deref().unwrap_or("?"),
                d.read_iops,
                d.read_mb_per_s,
                d.write_iops,
                d.write_mb_per_s
            ))
        })
        .collect();
    if !devices.is_empty() {
        let _ = writeln!(out, "\nThe device during each measure window (`/proc/diskstats`):\n");
        let _ = writeln!(
            out,
            "| run | device | read IOPS | read MB/s | write IOPS | write MB/s |\n|---|---|---:|---:|---:|---:|"
        );
        for line in devices {
            let _ = writeln!(out, "{line}");
        }
    }
}

fn checks(out: &mut String, r: &FlashReport) {
    let _ = writeln!(out, "\n{}\n", SECTIONS[5]);
    let _ = writeln!(
        out,
        "After every pgtier run: write-through drained, `VERIFY CACHE GROUP` (what memory holds against PostgreSQL), \
         and subscribers drawn as the clients draw them read through the server (flash answers included) and \
         compared row by row with PostgreSQL's.\n"
    );
    let _ = writeln!(out, "| run | drained | verified | differing | read back | differing | failed | clean |");
    let _ = writeln!(out, "|---|---|---:|---:|---:|---:|---:|---|");
    let mut differences = Vec::new();
    for s in &r.sides {
        let Some(c) = &s.check else { continue };
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {} | {} | {} | {} |",
            s.label,
            if c.drained { "yes" } else { "**no**" },
            c.verified,
            c.verify_differing,
            c.read_checked,
            c.read_differing,
            c.read_failed,
            if c.clean { "yes" } else { "**NO**" }
        );
        differences.extend(c.differences.iter().map(|d| format!("{}: {d}", s.label)));
    }
    for d in differences.iter().take(20) {
        let _ = writeln!(out, "- {d}");
    }
}

fn baseline(out: &mut String, r: &FlashReport) {
    let _ = writeln!(out, "\n{}\n", SECTIONS[6]);
    let m = &r.memory_limit;
    match (m.limit_bytes, &m.unavailable) {
        (Some(limit), _) => {
            let _ = writeln!(
                out,
                "PostgreSQL alone ran in a memory cgroup of {} MB (shared_buffers {}, work_mem 4MB): pgtier's DRAM \
                 budget plus PostgreSQL's own memory measured under the baseline's load ({} MB: backends, shared memory \
                 beside the buffer pool) plus 8 MB of slack. The limit bounds the page cache too, so PostgreSQL could not \
                 read the database from the machine's free memory: its page cache held {} MB at the end of its run. \
                 pgtier's runs open connections PostgreSQL alone's did not (pool, LOAD streams, write-through), so the \
                 limit was raised to {} MB for them (the kernel would otherwise kill a backend); what those leave unused \
                 PostgreSQL may cache with, which can only help pgtier's misses. At the end: {} MB charged, {} MB of it \
                 page cache, {} reclaims at the limit. The pgtier runs used this same PostgreSQL for their misses and \
                 write-through.",
                mb(limit),
                m.shared_buffers,
                opt(m.process_bytes.map(mb)),
                opt(m.baseline_page_cache_bytes.map(mb)),
                opt(m.pgtier_runs_limit_bytes.map(mb)),
                opt(m.usage_bytes.map(mb)),
                opt(m.page_cache_bytes.map(mb)),
                opt(m.limit_hits),
            );
        }
        (None, Some(why)) => {
            let _ = writeln!(
                out,
                "**PostgreSQL's memory was not limited**: {why}. Its page cache could hold the whole database, so the \
                 baseline is stronger than the studies' and the gains smaller."
            );
        }
        (None, None) => {
            let _ = writeln!(out, "Not applied (the run stopped before).");
        }
    }
    if !r.postgres_settings.is_empty() {
        let _ = writeln!(out, "\n| PostgreSQL setting | value |\n|---|---|");
        for (name, value) in &r.postgres_settings {
            let _ = writeln!(out, "| {name} | {value} |");
        }
    }
}

fn deviations(out: &mut String, r: &FlashReport) {
    let _ = writeln!(out, "\n{}\n", SECTIONS[7]);
    let size = r.data.as_ref().map_or("n/a".into(), |d| format!("{} MB", mb(d.postgres_bytes)));
    let lines = [
        format!(
            "scale: {size} of TATP data on one 2-core machine; study 003 ran a 1.2 TB brokerage (TPC-E-like) database with \
             58 users on POWER8, study 001 JPetStore, study 002 Benchware, study 000 1,800M subscribers"
        ),
        match (r.storage.read_iops_ceiling, &r.storage.disk) {
            (Some(iops), Some(_)) => format!(
                "device: one virtual disk holds PostgreSQL's data, its WAL and the flash file; PostgreSQL's reads from \
                 it were held to {iops}/s to stand in for study 003's 95 spinning disks during study 003's runs (a \
                 ceiling on the rate, not a disk's seek latency; writes not held)"
            ),
            _ => "device: one virtual disk holds PostgreSQL's data, its WAL and the flash file; study 003 put flash in \
                  front of 95 spinning disks, so its storage-only baseline was far slower per read than ours"
                .into(),
        },
        "what is cached: pgtier caches whole subscribers (instances of a cache group) in DRAM and on flash; the studies \
         cached storage blocks under the database's own buffer cache"
            .into(),
        "durability: pgtier's engine in the commit mode of the settings (async: acknowledged before its WAL flush, \
         within 10 ms); write-through to PostgreSQL is asynchronous (AWT); PostgreSQL alone commits synchronously \
         with fsync on"
            .into(),
        "memory: PostgreSQL alone gets the DRAM budget in a memory cgroup (plus room for its processes); pgtier's \
         process memory beyond its budget is not limited, and pgtier's runs use that same limited PostgreSQL"
            .into(),
        "windows: warm-up and measure windows of seconds (study 003: a five-hour run; TATP: 2 h of sampling)".into(),
    ];
    for line in lines {
        let _ = writeln!(out, "- {line}");
    }
}

fn machine(out: &mut String, r: &FlashReport, missing: &[String]) {
    let _ = writeln!(out, "\n{}\n", SECTIONS[8]);
    let m = &r.machine;
    let _ = writeln!(out, "{}: {} CPUs, {:.0} GiB, {}, kernel {}.\n", m.hostname, m.cpus, m.memory_gib, m.os, m.kernel);
    let _ = writeln!(out, "| setting | value |\n|---|---|");
    for (name, value) in &r.settings {
        let _ = writeln!(out, "| {name} | {value} |");
    }
    let warm_ups: Vec<String> = r.sides.iter().filter_map(warm_up_line).collect();
    if !warm_ups.is_empty() {
        let _ = writeln!(
            out,
            "\nEach run's warm-up, per window the misses of memory per transaction (pgtier: answered from flash + \
             loaded from PostgreSQL, each of which must be steady; PostgreSQL alone: reads from its device):\n"
        );
        for line in &warm_ups {
            let _ = writeln!(out, "- {line}");
        }
    }
    let _ = writeln!(out, "\n| phase | seconds |\n|---|---:|");
    for (phase, seconds) in &r.phases {
        let _ = writeln!(out, "| {phase} | {seconds:.0} |");
    }
    for m in missing {
        let _ = writeln!(out, "\nChart not drawn: {m}");
    }
}

/// `label: 0.412 + 0.090 → 0.305 + 0.071 (steady)`, None for a run
/// without warm-up.
fn warm_up_line(s: &SideFigures) -> Option<String> {
    if s.warm_up_windows.is_empty() {
        return None;
    }
    let shares: Vec<String> = s.warm_up_windows.iter().map(|w| super::sides::shares_text(w)).collect();
    let end = if s.warm_up_steady { "steady" } else { "**still moving at the window limit**" };
    Some(format!("{}: {} ({end})", s.label, shares.join(" → ")))
}

fn gain_chart(r: &FlashReport, dir: &Path) -> Result<Vec<PathBuf>, ChartError> {
    let rows = size_rows(r, "wire");
    let direct = size_rows(r, "direct");
    let labels: Vec<String> = rows.iter().map(|(f, _, _)| format!("{:.0} %", f * 100.0)).collect();
    let ours: Vec<Option<f64>> = rows.iter().map(|(_, _, g)| *g).collect();
    let ours_direct: Vec<Option<f64>> = rows
        .iter()
        .map(|(f, _, _)| direct.iter().find(|(d, _, _)| (d - f).abs() < 1e-9).and_then(|(_, _, g)| *g))
        .collect();
    let study: Vec<Option<f64>> = rows.iter().map(|(f, _, _)| study_gain(*f)).collect();
    let line = |name: &str, index: usize, values: Vec<Option<f64>>| LineSpec {
        name: name.into(),
        color: series_color(index),
        emphasis: index == 0,
        dodge: 0.0,
        point_labels: values.iter().map(|v| v.map(|v| format!("{v:.1}x"))).collect(),
        values,
        spread: Vec::new(),
    };
    let figure = LineFigure {
        title: "Throughput gain over PostgreSQL alone by cache size".into(),
        subtitle: vec![format!(
            "TATP, {} sessions; PostgreSQL alone with the memory of pgtier's DRAM budget",
            r.settings.iter().find(|(n, _)| n.starts_with("sessions")).map_or("?", |(_, v)| v.as_str())
        )],
        x_desc: "cache size (DRAM + flash) in % of the data".into(),
        x_labels: labels,
        y_desc: "TPS relative to PostgreSQL alone".into(),
        y_scale: YScale::Linear,
        y_from_zero: true,
        series: vec![
            line("pgtier over the wire", 0, ours),
            line("pgtier direct (embedded)", 2, ours_direct),
            line("study 003 (Table 3)", 1, study),
        ],
        reference_y: Some((1.0, "PostgreSQL alone".into())),
        legend_title: None,
        footnotes: vec![(
            format!("Labels: {}", rows.iter().map(|(f, _, _)| size_label(*f)).collect::<Vec<_>>().join(", ")),
            MUTED,
        )],
    };
    write_figure(&figure, dir, "flash-gain-by-size")
}

fn curve_chart(r: &FlashReport, dir: &Path) -> Result<Vec<PathBuf>, ChartError> {
    let txn: Vec<f64> = r.curve.iter().map(|p| p.txn_per_s).collect();
    let flash: Vec<f64> = r.curve.iter().map(|p| p.flash_answers as f64).collect();
    let loads: Vec<f64> = r.curve.iter().map(|p| p.backend_loads as f64).collect();
    let chart = TimeSeries {
        title: "Warm-up after ALTER CACHE TIER ENABLE".into(),
        subtitle: vec![format!("enabled at second {}", opt(r.curve_enabled_at))],
        x_labels: r.curve.iter().map(|p| p.second.to_string()).collect(),
        label_every: 5,
        y_desc: "per second".into(),
        series: vec![("transactions", txn), ("flash answers", flash), ("loads from PostgreSQL", loads)],
        reference_y: None,
        log_when_wide: false,
    };
    draw_time_series(&chart, dir, "flash-warm-up")
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::flash_demo::{CheckFigures, CurvePoint, DataFigures};

    fn side(label: &str, study: &str, fraction: Option<f64>, txn_per_s: f64) -> SideFigures {
        SideFigures {
            label: label.into(),
            study: study.into(),
            access: "wire".into(),
            cache_fraction: fraction,
            txn_per_s,
            check: (label != BASELINE).then(|| CheckFigures { drained: true, clean: true, ..CheckFigures::default() }),
            ..SideFigures::default()
        }
    }

    #[test]
    fn every_section_is_written_and_gains_are_against_the_baseline() {
        let report = FlashReport {
            data: Some(DataFigures {
                subscribers: 1000,
                postgres_bytes: 100 << 20,
                dram_budget_bytes: 5 << 20,
                instance_bytes: Some(1500),
                hottest_shares: vec![(0.05, 0.6), (0.10, 0.75), (0.20, 0.9)],
            }),
            sides: vec![
                side(BASELINE, "003", None, 1000.0),
                side("pgtier-10%", "003", Some(0.10), 3000.0),
                side("pgtier-20%", "003", Some(0.20), 2000.0),
            ],
            curve: vec![CurvePoint { second: 1, txn_per_s: 10.0, ..CurvePoint::default() }],
            curve_enabled_at: Some(1),
            ..FlashReport::default()
        };
        let text = markdown(&report, &[], &[]);
        for section in SECTIONS {
            assert!(text.contains(section), "{section} missing");
        }
        assert!(text.contains("| 10 % | wire |") && text.contains("| 3.0x | 2.4x |"), "{text}");
        // 2.0x at 20 % is below the study's 3.2x: the report says so, with figures.
        assert!(text.contains("20 % (wire): 2.0x against the study's 3.2x"), "{text}");
        // ... beside what a cache of the hottest 20 % would miss, and the keys' skew.
        assert!(text.contains("would miss 0.10"), "{text}");
        assert!(text.contains("10 % of them 75 %"), "{text}");
        assert!(report.checks_clean());
    }

    #[test]
    fn an_empty_report_still_has_every_section() {
        let text = markdown(&FlashReport::default(), &[], &[]);
        for section in SECTIONS {
            assert!(text.contains(section), "{section} missing");
        }
        assert!(!FlashReport::default().checks_clean(), "no check is not a clean check");
    }
}

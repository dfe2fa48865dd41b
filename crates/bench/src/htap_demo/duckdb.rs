//! DuckDB's TPC-H times as a reference (issue 34: "within 2x of DuckDB's
//! time on this machine when measured"), when the Python package `duckdb`
//! is importable: PostgreSQL's 8 tables exported as CSV (the same rows
//! every side answered over), loaded into an in-memory DuckDB by
//! [`SCRIPT`], then the same 22 query texts, one warm-up and `runs` timed
//! runs each, timed inside the Python process. Answers are not compared,
//! row counts are (the report marks a time whose row count differs from
//! PostgreSQL's): a reference, not a side. No package is
//! installed by the demo; without one the report says it was skipped.

use std::io::Write as _;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::target::Target;
use crate::tpch::{Timing, queries, schema};

/// The script run by `python3 - <job.json>`: DDL, COPY, timed queries.
const SCRIPT: &str = r#"
import json, re, sys, time
import duckdb
job = json.load(open(sys.argv[1]))
con = duckdb.connect()
out = {"version": duckdb.__version__, "threads": None, "queries": []}
if job["threads"] is not None:
    con.execute(f"SET threads = {int(job['threads'])}")
try:
    out["threads"] = con.execute("SELECT current_setting('threads')").fetchone()[0]
except Exception:
    pass
for ddl in job["ddl"]:
    con.execute(ddl)
for t in job["tables"]:
    con.execute(f"COPY {t} FROM '{job['dir']}/{t}.csv' (FORMAT csv, HEADER false, QUOTE '\"')")
# PostgreSQL's text output pads char(n) and its comparisons ignore the
# padding; DuckDB's char is varchar, whose comparisons do not: without
# this, n_name = 'GERMANY' matches nothing and Q20 and Q21 answer no rows.
for ddl in job["ddl"]:
    t = re.search(r"CREATE TABLE (\w+)", ddl).group(1)
    for c in re.findall(r"(\w+) char\(\d+\)", ddl):
        con.execute(f"UPDATE {t} SET {c} = rtrim({c})")
for q in job["queries"]:
    entry = {"query": q["number"], "runs_ms": [], "rows": None, "error": None}
    try:
        entry["rows"] = len(con.execute(q["sql"]).fetchall())
        for _ in range(job["runs"]):
            started = time.perf_counter()
            con.execute(q["sql"]).fetchall()
            entry["runs_ms"].append((time.perf_counter() - started) * 1e3)
    except Exception as e:
        entry["error"] = str(e).splitlines()[0][:300]
    out["queries"].append(entry)
print(json.dumps(out))
"#;

/// One query on DuckDB.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct DuckdbQuery {
    pub query: u8,
    pub timing: Option<Timing>,
    pub rows: Option<usize>,
    pub error: Option<String>,
}

/// DuckDB's run, or why there was none.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct DuckdbFigures {
    /// Why DuckDB did not run (not installed, failed).
    pub skipped: Option<String>,
    pub version: Option<String>,
    /// DuckDB's `threads` setting during the run.
    pub threads: Option<String>,
    /// The worker threads of pgtier's analytic executor in this run, beside
    /// which DuckDB's time is read.
    #[serde(default)]
    pub pgtier_threads: Option<usize>,
    pub queries: Vec<DuckdbQuery>,
}

impl DuckdbFigures {
    pub fn skipped(why: &str) -> DuckdbFigures {
        DuckdbFigures { skipped: Some(why.to_owned()), ..DuckdbFigures::default() }
    }

    pub fn query(&self, number: u8) -> Option<&DuckdbQuery> {
        self.queries.iter().find(|q| q.query == number)
    }

    /// Sum of the medians, when every query was timed.
    pub fn total_ms(&self) -> Option<f64> {
        let medians: Vec<f64> = self.queries.iter().filter_map(|q| q.timing.as_ref().map(|t| t.median_ms)).collect();
        (!medians.is_empty() && medians.len() == self.queries.len()).then(|| medians.iter().sum())
    }
}

#[derive(Deserialize)]
struct ScriptQuery {
    query: u8,
    runs_ms: Vec<f64>,
    rows: Option<usize>,
    error: Option<String>,
}

#[derive(Deserialize)]
struct ScriptOutput {
    version: Option<String>,
    threads: Option<serde_json::Value>,
    queries: Vec<ScriptQuery>,
}

/// `python3` can import duckdb.
pub fn available() -> bool {
    Command::new("python3").args(["-c", "import duckdb"]).output().is_ok_and(|o| o.status.success())
}

/// A CSV field: every value quoted, quotes doubled (TPC-H has no NULL).
fn csv_field(value: Option<&str>) -> String {
    value.map_or_else(String::new, |v| format!("\"{}\"", v.replace('"', "\"\"")))
}

/// Writes `pg`'s 8 TPC-H tables into `dir` as `<table>.csv`.
pub fn export(pg: &dyn Target, dir: &Path) -> Result<(), String> {
    std::fs::create_dir_all(dir).map_err(|e| format!("creating {}: {e}", dir.display()))?;
    let mut session = pg.connect().map_err(|e| e.to_string())?;
    let mut query = |sql: &str| session.simple_query(sql).map_err(|e| format!("{sql}: {e}"));
    for table in schema::TABLES {
        let path = dir.join(format!("{table}.csv"));
        let file = std::fs::File::create(&path).map_err(|e| format!("{}: {e}", path.display()))?;
        let mut out = std::io::BufWriter::new(file);
        // Through a cursor, a bounded page at a time: lineitem alone is
        // 6M rows at SF 1, past what one answer may hold (54000).
        query("BEGIN")?;
        query(&format!("DECLARE export NO SCROLL CURSOR FOR SELECT * FROM {table}"))?;
        loop {
            let rows = query(&format!("FETCH {EXPORT_PAGE_ROWS} FROM export"))?;
            for row in &rows {
                let line: Vec<String> = row.iter().map(|c| csv_field(c.as_deref())).collect();
                writeln!(out, "{}", line.join(",")).map_err(|e| format!("{}: {e}", path.display()))?;
            }
            if rows.len() < EXPORT_PAGE_ROWS {
                break;
            }
        }
        query("COMMIT")?;
        out.flush().map_err(|e| format!("{}: {e}", path.display()))?;
    }
    Ok(())
}

/// Rows fetched per page of the export (lineitem takes several even at
/// the demo test's SF 0.001).
pub const EXPORT_PAGE_ROWS: usize = 5_000;

/// Exports `pg`'s TPC-H tables into `dir`, runs the queries on DuckDB and
/// returns its figures; never fails (a failure is the figures' `skipped`).
/// `timeout` bounds the whole script: 23 times it (the load and every
/// query's runs). `threads`: DuckDB's `SET threads`, None for its default
/// (every CPU).
pub fn run(
    pg: &dyn Target,
    dir: &Path,
    scale: f64,
    runs: u32,
    timeout: Duration,
    threads: Option<u32>,
) -> DuckdbFigures {
    if !available() {
        return DuckdbFigures::skipped("the Python package duckdb is not importable (pip install duckdb to add it)");
    }
    match try_run(pg, dir, scale, runs, timeout * 23, threads) {
        Ok(f) => f,
        Err(why) => DuckdbFigures::skipped(&format!("failed: {why}")),
    }
}

fn try_run(
    pg: &dyn Target,
    dir: &Path,
    scale: f64,
    runs: u32,
    limit: Duration,
    threads: Option<u32>,
) -> Result<DuckdbFigures, String> {
    export(pg, dir)?;
    let job = serde_json::json!({
        "dir": dir.display().to_string(),
        "threads": threads,
        "ddl": schema::DDL.iter().map(|(_, ddl)| *ddl).collect::<Vec<_>>(),
        "tables": schema::TABLES,
        "runs": runs,
        "queries": queries::all(scale).iter().map(|q| serde_json::json!({"number": q.number, "sql": q.sql})).collect::<Vec<_>>(),
    });
    let job_path = dir.join("job.json");
    let script_path = dir.join("tpch_duckdb.py");
    std::fs::write(&job_path, job.to_string()).map_err(|e| e.to_string())?;
    std::fs::write(&script_path, SCRIPT).map_err(|e| e.to_string())?;
    let mut child = Command::new("python3")
        .arg(&script_path)
        .arg(&job_path)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .map_err(|e| format!("python3: {e}"))?;
    let started = std::time::Instant::now();
    while child.try_wait().map_err(|e| e.to_string())?.is_none() {
        if started.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            return Err(format!("no answer within {} s", limit.as_secs()));
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let output = child.wait_with_output().map_err(|e| e.to_string())?;
    if !output.status.success() {
        let err = String::from_utf8_lossy(&output.stderr);
        return Err(format!("python3 exited {}: {}", output.status, err.lines().last().unwrap_or("")));
    }
    let parsed: ScriptOutput =
        serde_json::from_slice(&output.stdout).map_err(|e| format!("reading the script's output: {e}"))?;
    Ok(DuckdbFigures {
        skipped: None,
        version: parsed.version,
        threads: parsed.threads.map(|t| t.to_string()),
        pgtier_threads: None,
        queries: parsed
            .queries
            .into_iter()
            .map(|q| DuckdbQuery {
                query: q.query,
                timing: (!q.runs_ms.is_empty()).then(|| Timing::of(q.runs_ms)),
                rows: q.rows,
                error: q.error,
            })
            .collect(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn csv_fields_are_quoted() {
        assert_eq!(csv_field(Some("a\"b")), "\"a\"\"b\"");
        assert_eq!(csv_field(Some("x, y")), "\"x, y\"");
    }
}

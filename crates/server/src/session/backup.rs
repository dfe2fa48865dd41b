//! `BACKUP TO '/absolute/directory'`: an online backup of the engine's data
//! made by the running server (crates/engine backup.rs), for
//! `pgtier backup`.
//!
//! The server must make the copy: the engine holds an exclusive lock on its
//! data directory, so no other process can open it. The statement is
//! recognised beside CHECKPOINT, on the raw text of a simple Query, before
//! any parsing: like CHECKPOINT it is not SQL the planner knows, involves no
//! table and no transaction of the session's, and needs neither the SQL
//! layer nor the cache (a `pgtier_backup()` function would have had to go
//! through the planner and the executor, which run inside a transaction
//! and return rows, for a call that is neither). The directory is on the
//! server's machine, absolute (the server's working directory is nobody's
//! business), and must be missing or empty.
//!
//! Every configured user is a superuser today, so every user may run it.
//! While it copies, the session sends a NOTICE about once a second with the
//! bytes copied (clients that print notices, psql and `pgtier backup`, show
//! progress), then one with the end point, and completes with `BACKUP`.

use std::path::Path;
use std::time::{Duration, Instant};

use pgtier_sql::SqlError;

use super::Session;

/// How often a running backup reports progress.
const PROGRESS_EVERY: Duration = Duration::from_secs(1);

/// The directory of a `BACKUP TO '...'` statement; None for any other text.
pub(super) fn parse_backup(sql: &str) -> Option<Result<String, SqlError>> {
    let text = sql.trim().trim_end_matches(';').trim_end();
    let rest = strip_word(text, "backup")?;
    let syntax =
        || SqlError::new("42601", "syntax error at or near \"BACKUP\": expected BACKUP TO '/absolute/directory'");
    let Some(rest) = strip_word(rest, "to") else { return Some(Err(syntax())) };
    let Some(body) = rest.strip_prefix('\'') else { return Some(Err(syntax())) };
    // A standard string literal: '' is a quote; nothing may follow the closing one.
    let mut dir = String::new();
    let mut chars = body.chars().peekable();
    while let Some(c) = chars.next() {
        if c != '\'' {
            dir.push(c);
            continue;
        }
        if chars.peek() == Some(&'\'') {
            chars.next();
            dir.push('\'');
            continue;
        }
        return Some(if chars.all(char::is_whitespace) { Ok(dir) } else { Err(syntax()) });
    }
    Some(Err(SqlError::new("42601", "unterminated quoted string in BACKUP TO")))
}

/// `text` after the keyword `word` (any case) and the whitespace after it.
fn strip_word<'a>(text: &'a str, word: &str) -> Option<&'a str> {
    let head = text.get(..word.len())?;
    let rest = &text[word.len()..];
    (head.eq_ignore_ascii_case(word) && (rest.is_empty() || rest.starts_with(char::is_whitespace)))
        .then(|| rest.trim_start())
}

impl Session {
    pub(super) fn backup(&mut self, dir: &str) -> Result<(), SqlError> {
        let path = Path::new(dir);
        if !path.is_absolute() {
            return Err(SqlError::new("22023", format!("backup directory \"{dir}\" must be an absolute path")));
        }
        // A backup may copy for minutes: an event loop hands its other
        // sessions to a spare thread first.
        crate::event_loop::before_wait();
        let db = self.conn.database().clone();
        let mut last = Instant::now();
        let wire = &mut self.wire;
        // With the WAL write-through has not sent PostgreSQL yet: a standby
        // seeded from this copy and promoted resumes it from there.
        let report = db.backup_keeping_wal_for(path, &[pgtier_cache::AWT_CONSUMER], &mut |p| {
            if last.elapsed() >= PROGRESS_EVERY {
                last = Instant::now();
                let message = format!("backup: {} of {} copied", mib(p.bytes_done), mib(p.bytes_total));
                wire.notice(&SqlError::new("00000", message), "NOTICE");
                // A client that went away makes the write fail; the backup
                // finishes anyway, and the session ends at its next read.
                let _ = wire.flush();
            }
        })?;
        let m = &report.manifest;
        let message = format!(
            "backup complete: end LSN {}, commit ts {}, {} files, {} in {:.1} s",
            m.end_lsn.0,
            m.end_commit_ts.get(),
            m.files.len(),
            mib(report.bytes),
            report.duration.as_secs_f64()
        );
        self.wire.notice(&SqlError::new("00000", message), "NOTICE");
        self.wire.command_complete("BACKUP");
        Ok(())
    }
}

fn mib(bytes: u64) -> String {
    format!("{:.1} MiB", bytes as f64 / f64::from(1 << 20))
}

#[cfg(test)]
mod tests {
    use super::parse_backup;

    #[test]
    fn backup_statements() {
        assert_eq!(parse_backup("BACKUP TO '/b/x';").map(Result::ok), Some(Some("/b/x".into())));
        assert_eq!(parse_backup("  backup\n to 'it''s' ").map(Result::ok), Some(Some("it's".into())));
        assert!(parse_backup("SELECT 1").is_none());
        assert!(parse_backup("backups").is_none());
        for bad in ["BACKUP", "BACKUP '/x'", "BACKUP TO /x", "BACKUP TO '/x' now", "BACKUP TO '/x"] {
            assert_eq!(parse_backup(bad).unwrap().unwrap_err().sqlstate, "42601", "{bad}");
        }
    }
}

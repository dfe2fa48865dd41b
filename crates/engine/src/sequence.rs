//! Sequences (CREATE SEQUENCE, serial, identity columns).
//!
//! A sequence is a relation of one row, `(last_value, log_cnt, is_called)`
//! plus the hidden row id, whose schema carries the options
//! ([`SequenceOptions`]). Being a table, it is created, dropped, logged,
//! checkpointed and recovered like one; only advancing it differs.
//!
//! Invariants:
//! - Advancing is not transactional (PostgreSQL's rule): `nextval` commits
//!   the new row in a transaction of its own, so a value handed out is
//!   never handed out again, even if the caller rolls back. Callers of one
//!   sequence take turns on a per-sequence mutex, so they never conflict.
//! - That own transaction commits without waiting for the WAL; the
//!   caller's commit covers it instead. A writing caller's commit record
//!   follows it in the log, and a read-only caller in `Sync` mode waits for
//!   it ([`Transaction::observe_lsn`]). So a value a committed transaction
//!   saw is never handed out again after a crash, and nothing waits for the
//!   disk twice.
//! - A sequence created by the calling transaction is not visible to any
//!   other: it advances inside that transaction (rolled back with it).
//! - Every `nextval` logs its row (PostgreSQL logs one in 32); `log_cnt`
//!   still counts down from 32 as PostgreSQL shows it.

use std::sync::Arc;

use parking_lot::Mutex;

use crate::commit_mode::CommitMode;
use crate::error::{EngineError, Result};
use crate::schema::{ColumnDef, SEQUENCE_COLUMNS, SequenceOptions, TableDef, TableId, TableSchema};
use crate::transaction::Transaction;
use crate::types::{DataType, Value};

/// PostgreSQL's SEQ_LOG_VALS: `log_cnt` after a logged fetch.
const LOG_VALUES: i64 = 32;
/// The row id of a sequence's only row.
const ROW_ID: i64 = 1;
const LAST_VALUE: usize = 0;
const LOG_CNT: usize = 1;
const IS_CALLED: usize = 2;

/// One mutex per sequence, so callers of one sequence take turns and
/// callers of different ones do not.
#[derive(Default)]
pub(crate) struct SequenceLocks(Mutex<std::collections::HashMap<TableId, Arc<Mutex<()>>>>);

impl SequenceLocks {
    fn of(&self, id: TableId) -> Arc<Mutex<()>> {
        Arc::clone(self.0.lock().entry(id).or_default())
    }
}

impl Transaction {
    /// CREATE SEQUENCE: the relation and its first row (`last_value` =
    /// START, not yet called).
    pub fn create_sequence(&mut self, name: &str, options: SequenceOptions) -> Result<TableId> {
        let columns = vec![
            ColumnDef::new(SEQUENCE_COLUMNS[LAST_VALUE], DataType::Int8).not_null(),
            ColumnDef::new(SEQUENCE_COLUMNS[LOG_CNT], DataType::Int8).not_null(),
            ColumnDef::new(SEQUENCE_COLUMNS[IS_CALLED], DataType::Bool).not_null(),
        ];
        let start = options.start;
        let def = TableDef { sequence: Some(options), ..TableDef::new(name, columns, &[]) };
        let id = self.create_table(&def)?;
        self.insert(id, &[Value::Int8(start), Value::Int8(0), Value::Bool(false), Value::Int8(ROW_ID)])?;
        Ok(id)
    }

    /// `nextval`: advances the sequence and returns the new value.
    pub fn nextval(&mut self, sequence: TableId) -> Result<i64> {
        self.advance_sequence(sequence, |options, name, row| {
            let (last, log_cnt, called) = row;
            let value = if called { step(options, name, last)? } else { last };
            let log_cnt = if called && log_cnt > 0 { log_cnt - 1 } else { LOG_VALUES };
            Ok((value, log_cnt, true))
        })
    }

    /// `setval(seq, value, is_called)`: the next `nextval` returns the value
    /// after `value`, or `value` itself when not `is_called`.
    pub fn setval(&mut self, sequence: TableId, value: i64, is_called: bool) -> Result<i64> {
        self.advance_sequence(sequence, |options, name, _| {
            if value < options.min || value > options.max {
                return Err(EngineError::definition(
                    "22003",
                    format!(
                        "setval: value {value} is out of bounds for sequence \"{name}\" ({}..{})",
                        options.min, options.max
                    ),
                ));
            }
            Ok((value, 0, is_called))
        })
        .map(|_| value)
    }

    /// Rewrites the sequence's row with `f(options, name, (last_value,
    /// log_cnt, is_called))`; returns the new `last_value`.
    fn advance_sequence(
        &mut self,
        sequence: TableId,
        mut f: impl FnMut(&SequenceOptions, &str, (i64, i64, bool)) -> Result<(i64, i64, bool)>,
    ) -> Result<i64> {
        let schema = self
            .catalog()
            .table(sequence)
            .cloned()
            .ok_or_else(|| EngineError::Corrupt(format!("sequence {} not in the catalog", sequence.0)))?;
        let Some(options) = schema.sequence.clone() else {
            return Err(EngineError::definition("42809", format!("\"{}\" is not a sequence", schema.name)));
        };
        let db = Arc::clone(self.db());
        let committed = db.catalog.catalog().table(sequence).is_some();
        if !committed {
            // Created by this transaction: nobody else can see it.
            return rewrite(self, &schema, &options, &mut f);
        }
        let lock = db.sequence_locks.of(sequence);
        let _turn = lock.lock();
        let mut own = Transaction::begin(Arc::clone(&db), CommitMode::Async, crate::Origin::Application)?;
        let value = match rewrite(&mut own, &schema, &options, &mut f) {
            Ok(v) => v,
            Err(e) => {
                own.rollback();
                return Err(e);
            }
        };
        let info = own.commit()?;
        if let Some(lsn) = info.lsn {
            self.observe_lsn(lsn);
        }
        Ok(value)
    }
}

fn rewrite(
    txn: &mut Transaction,
    schema: &TableSchema,
    options: &SequenceOptions,
    f: &mut impl FnMut(&SequenceOptions, &str, (i64, i64, bool)) -> Result<(i64, i64, bool)>,
) -> Result<i64> {
    let mut value = None;
    let found = txn.update_with(schema.id, &[Value::Int8(ROW_ID)], |row| {
        let current = (
            row.get_i64(LAST_VALUE).unwrap_or(0),
            row.get_i64(LOG_CNT).unwrap_or(0),
            matches!(row.get(IS_CALLED), crate::types::ValueRef::Bool(true)),
        );
        let (last, log_cnt, called) = f(options, &schema.name, current)?;
        value = Some(last);
        Ok(Some(vec![
            (LAST_VALUE, Value::Int8(last)),
            (LOG_CNT, Value::Int8(log_cnt)),
            (IS_CALLED, Value::Bool(called)),
        ]))
    })?;
    match value {
        Some(v) if found => Ok(v),
        _ => Err(EngineError::Corrupt(format!("sequence \"{}\" has no row", schema.name))),
    }
}

/// The value after `last`: PostgreSQL's limits, and wrap-around with CYCLE.
fn step(options: &SequenceOptions, name: &str, last: i64) -> Result<i64> {
    let next = last.checked_add(options.increment);
    if options.increment > 0 {
        match next {
            Some(n) if n <= options.max => Ok(n),
            _ if options.cycle => Ok(options.min),
            _ => Err(EngineError::definition(
                "2200H",
                format!("nextval: reached maximum value of sequence \"{name}\" ({})", options.max),
            )),
        }
    } else {
        match next {
            Some(n) if n >= options.min => Ok(n),
            _ if options.cycle => Ok(options.max),
            _ => Err(EngineError::definition(
                "2200H",
                format!("nextval: reached minimum value of sequence \"{name}\" ({})", options.min),
            )),
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn steps_stop_or_wrap_at_the_bounds() {
        let up = SequenceOptions::new(DataType::Int2, 10, None, Some(25), None, false).unwrap();
        assert_eq!((up.start, up.min, up.max), (1, 1, 25));
        assert_eq!(step(&up, "s", 11).unwrap(), 21);
        assert_eq!(step(&up, "s", 21).unwrap_err().sqlstate(), "2200H");
        let down = SequenceOptions::new(DataType::Int8, -1, Some(-3), None, None, true).unwrap();
        assert_eq!((down.start, down.min, down.max), (-1, -3, -1));
        assert_eq!(step(&down, "s", -3).unwrap(), -1);
        let big = SequenceOptions::new(DataType::Int8, i64::MAX, None, None, None, false).unwrap();
        assert_eq!(step(&big, "s", 1).unwrap_err().sqlstate(), "2200H", "overflow is the limit, not a wrap");
    }

    #[test]
    fn options_are_checked_as_postgres_does() {
        let err = |r: Result<SequenceOptions>| r.unwrap_err().to_string();
        assert_eq!(err(SequenceOptions::new(DataType::Int4, 0, None, None, None, false)), "INCREMENT must not be zero");
        assert_eq!(
            err(SequenceOptions::new(DataType::Int4, 1, Some(5), Some(5), None, false)),
            "MINVALUE (5) must be less than MAXVALUE (5)"
        );
        assert_eq!(
            err(SequenceOptions::new(DataType::Int4, 1, None, None, Some(0), false)),
            "START value (0) cannot be less than MINVALUE (1)"
        );
        assert_eq!(
            err(SequenceOptions::new(DataType::Int2, 1, None, Some(40000), None, false)),
            "MAXVALUE (40000) is out of range for sequence data type smallint"
        );
    }
}

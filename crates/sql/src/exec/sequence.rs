//! nextval, currval, setval and lastval, and what the session remembers of them.

use std::collections::HashMap;

use pgtier_engine::{TableId, Value};

use super::Exec;
use crate::catalog::table_by_oid;
use crate::error::{Result, SqlError};
use crate::expr::SeqFunc;

/// A session's view of the sequences it used (PostgreSQL keeps the same
/// per backend): the last value `nextval` (or `setval`) gave it for each,
/// and which sequence `nextval` advanced last.
#[derive(Debug, Default)]
pub struct SessionSequences {
    values: HashMap<TableId, i64>,
    last: Option<TableId>,
}

impl Exec<'_> {
    /// nextval, currval, setval, lastval with their evaluated arguments.
    pub(super) fn sequence_call(&mut self, call: SeqFunc, args: &[Value]) -> Result<Value> {
        let (id, name) = match call {
            SeqFunc::Lastval => {
                let id = self.sequences.last.ok_or_else(|| SqlError::new("55000", "lastval is not yet defined in this session"))?;
                let name = self.txn.catalog().table(id).map(|t| t.name.clone());
                (id, name.ok_or_else(|| SqlError::new("55000", "lastval is not yet defined in this session"))?)
            }
            _ => {
                let oid = args.first().and_then(Value::as_i64).unwrap_or(0);
                let t = table_by_oid(self.txn.catalog(), oid)
                    .ok_or_else(|| SqlError::new("42P01", format!("could not open relation with OID {oid}")))?;
                if t.sequence.is_none() {
                    return Err(SqlError::new("42809", format!("\"{}\" is not a sequence", t.name)));
                }
                (t.id, t.name.clone())
            }
        };
        let current = |s: &SessionSequences| {
            s.values.get(&id).copied().ok_or_else(|| SqlError::new("55000", format!("currval of sequence \"{name}\" is not yet defined in this session")))
        };
        let v = match call {
            SeqFunc::Nextval => {
                let v = self.txn.nextval(id)?;
                self.sequences.values.insert(id, v);
                self.sequences.last = Some(id);
                v
            }
            SeqFunc::Currval | SeqFunc::Lastval => current(self.sequences)?,
            SeqFunc::Setval => {
                let value = args.get(1).and_then(Value::as_i64).unwrap_or(0);
                let is_called = !matches!(args.get(2), Some(Value::Bool(false)));
                let v = self.txn.setval(id, value, is_called)?;
                if is_called {
                    self.sequences.values.insert(id, v);
                }
                v
            }
        };
        Ok(Value::Int8(v))
    }
}

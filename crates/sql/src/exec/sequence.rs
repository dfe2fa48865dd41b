//! nextval, currval, setval and lastval, and what the session remembers of them.
//!
//! A sequence is either a local one (its argument the relation's regclass
//! oid) or PostgreSQL's sequence of a cached column (its argument the
//! sequence's name as text; the binder gives one only for such a
//! sequence): its values come from the attached cache's reserved block
//! (`Cache::sequence_nextval`), never from a counter of pgtier's.

use std::collections::HashMap;

use pgtier_cache::{CacheError, KeyDefault};
use pgtier_engine::{TableId, Value};

use super::Exec;
use crate::catalog::table_by_oid;
use crate::error::{Result, SqlError};
use crate::expr::SeqFunc;

/// Which sequence a session drew from.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum SeqKey {
    Local(TableId),
    /// PostgreSQL's, by [`KeyDefault::sequence_key`].
    Backend(String),
}

/// A session's view of the sequences it used (PostgreSQL keeps the same
/// per backend): the last value `nextval` (or `setval`) gave it for each,
/// and which sequence `nextval` advanced last.
#[derive(Debug, Default)]
pub struct SessionSequences {
    values: HashMap<SeqKey, i64>,
    last: Option<SeqKey>,
}

impl Exec<'_> {
    /// nextval, currval, setval, lastval with their evaluated arguments.
    pub(super) fn sequence_call(&mut self, call: SeqFunc, args: &[Value]) -> Result<Value> {
        let undefined_last = || SqlError::new("55000", "lastval is not yet defined in this session");
        let (key, name) = match (call, args.first()) {
            (SeqFunc::Lastval, _) => {
                let key = self.sequences.last.clone().ok_or_else(undefined_last)?;
                let name = match &key {
                    SeqKey::Local(id) => self.txn.catalog().table(*id).map(|t| t.name.clone()).ok_or_else(undefined_last)?,
                    SeqKey::Backend(sequence) => KeyDefault::sequence_relname(sequence),
                };
                (key, name)
            }
            (_, Some(Value::Text(sequence))) => (SeqKey::Backend(KeyDefault::sequence_key(sequence)), KeyDefault::sequence_relname(sequence)),
            _ => {
                let oid = args.first().and_then(Value::as_i64).unwrap_or(0);
                let t = table_by_oid(self.txn.catalog(), oid)
                    .ok_or_else(|| SqlError::new("42P01", format!("could not open relation with OID {oid}")))?;
                if t.sequence.is_none() {
                    return Err(SqlError::new("42809", format!("\"{}\" is not a sequence", t.name)));
                }
                (SeqKey::Local(t.id), t.name.clone())
            }
        };
        let current = |s: &SessionSequences| {
            s.values.get(&key).copied().ok_or_else(|| SqlError::new("55000", format!("currval of sequence \"{name}\" is not yet defined in this session")))
        };
        let v = match call {
            SeqFunc::Nextval => {
                let v = match (&key, args.first()) {
                    (SeqKey::Local(id), _) => self.txn.nextval(*id)?,
                    (SeqKey::Backend(_), Some(Value::Text(sequence))) => {
                        let cache = self.cache.ok_or(CacheError::NoBackend)?;
                        cache.sequence_nextval(sequence)?
                    }
                    (SeqKey::Backend(_), _) => return Err(SqlError::new("XX000", "nextval of PostgreSQL's sequence without its name")),
                };
                self.sequences.values.insert(key.clone(), v);
                self.sequences.last = Some(key);
                v
            }
            SeqFunc::Currval | SeqFunc::Lastval => current(self.sequences)?,
            SeqFunc::Setval => {
                let SeqKey::Local(id) = key else {
                    return Err(SqlError::new("XX000", "setval of PostgreSQL's sequence reached the executor"));
                };
                let value = args.get(1).and_then(Value::as_i64).unwrap_or(0);
                let is_called = !matches!(args.get(2), Some(Value::Bool(false)));
                let v = self.txn.setval(id, value, is_called)?;
                if is_called {
                    self.sequences.values.insert(key, v);
                }
                v
            }
        };
        Ok(Value::Int8(v))
    }
}

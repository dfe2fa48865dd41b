//! nextval, currval, setval and lastval, and what the session remembers of them.
//!
//! A sequence is either a local one (its argument the relation's regclass
//! oid) or PostgreSQL's sequence of a cached column (its argument the
//! sequence's name as text, as `KeyDefault::sequence_key` writes it; the
//! binder gives one only for such a sequence): its values come from the
//! attached cache's reserved block (`Cache::sequence_nextval`), never from
//! a counter of pgtier's.

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
    /// PostgreSQL's, by [`KeyDefault::sequence_key`] (the binder's argument).
    Backend(String),
}

impl SeqKey {
    /// The call's privilege on a local sequence: nextval USAGE or UPDATE,
    /// currval USAGE or SELECT, setval UPDATE (PostgreSQL's checks; lastval
    /// is checked on the sequence it names, when it is read).
    fn checked(self, ex: &mut Exec<'_>, call: SeqFunc, name: &str) -> Result<SeqKey> {
        use crate::catalog::roles::Privs;
        let any_of = match call {
            SeqFunc::Nextval => Privs::USAGE.union(Privs::UPDATE),
            SeqFunc::Currval | SeqFunc::Lastval => Privs::USAGE.union(Privs::SELECT),
            SeqFunc::Setval => Privs::UPDATE,
        };
        crate::catalog::roles::check_sequence(ex.txn.catalog(), ex.settings, name, any_of)?;
        Ok(self)
    }
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
        let key = match (call, args.first()) {
            (SeqFunc::Lastval, _) => self.sequences.last.clone().ok_or_else(undefined_last)?,
            (_, Some(Value::Text(sequence))) => SeqKey::Backend(sequence.clone()),
            _ => {
                let oid = args.first().and_then(Value::as_i64).unwrap_or(0);
                let t = table_by_oid(self.txn.catalog(), oid)
                    .ok_or_else(|| SqlError::new("42P01", format!("could not open relation with OID {oid}")))?;
                if t.sequence.is_none() {
                    return Err(SqlError::new("42809", format!("\"{}\" is not a sequence", t.name)));
                }
                let name = t.name.clone();
                SeqKey::Local(t.id).checked(self, call, &name)?
            }
        };
        let v = match (call, &key) {
            (SeqFunc::Nextval, SeqKey::Local(id)) => self.txn.nextval(*id)?,
            (SeqFunc::Nextval, SeqKey::Backend(sequence)) => {
                self.cache.ok_or(CacheError::NoBackend)?.sequence_nextval(sequence)?
            }
            (SeqFunc::Currval | SeqFunc::Lastval, _) => {
                return match self.sequences.values.get(&key) {
                    Some(v) => Ok(Value::Int8(*v)),
                    None if call == SeqFunc::Lastval => Err(undefined_last()),
                    None => {
                        let name = match &key {
                            SeqKey::Local(id) => {
                                self.txn.catalog().table(*id).map_or_else(String::new, |t| t.name.clone())
                            }
                            SeqKey::Backend(sequence) => KeyDefault::sequence_relname(sequence),
                        };
                        Err(SqlError::new(
                            "55000",
                            format!("currval of sequence \"{name}\" is not yet defined in this session"),
                        ))
                    }
                };
            }
            (SeqFunc::Setval, SeqKey::Local(id)) => {
                let value = args.get(1).and_then(Value::as_i64).unwrap_or(0);
                let is_called = !matches!(args.get(2), Some(Value::Bool(false)));
                let v = self.txn.setval(*id, value, is_called)?;
                if is_called {
                    self.sequences.values.insert(key, v);
                }
                return Ok(Value::Int8(v));
            }
            (SeqFunc::Setval, SeqKey::Backend(_)) => {
                return Err(SqlError::new("XX000", "setval of PostgreSQL's sequence reached the executor"));
            }
        };
        self.sequences.values.insert(key.clone(), v);
        self.sequences.last = Some(key);
        Ok(Value::Int8(v))
    }
}

//! SAVEPOINT, ROLLBACK TO SAVEPOINT and RELEASE SAVEPOINT, as PostgreSQL's
//! xact.c answers them. The engine keeps the marks (by depth); the session
//! keeps their names (a repeated name hides the older one until it goes)
//! and the settings as they were at each savepoint: ROLLBACK TO restores
//! SET, SET LOCAL and set_config() made after it, as PostgreSQL's GUC
//! nesting does (the copy shares the settings' maps until one is written).
//! ROLLBACK TO closes the cursors declared after the savepoint.

use pgtier_engine::Transaction;

use super::rows::Tag;
use super::{Block, Connection};
use crate::error::{Result, SqlError};
use crate::plan::TxnCommand;
use crate::settings::Settings;

/// A savepoint of the block: its name and the settings when it was made.
pub(super) struct Named {
    name: String,
    settings: Settings,
}

impl Connection {
    /// A savepoint statement. Its error fails an open block, as any error.
    pub(super) fn savepoint_command(&mut self, cmd: &TxnCommand) -> Result<(Tag, u64)> {
        let r = self.savepoint_inner(cmd);
        if r.is_err() && self.block != Block::None {
            self.fail();
        }
        r
    }

    fn savepoint_inner(&mut self, cmd: &TxnCommand) -> Result<(Tag, u64)> {
        let (command, tag) = match cmd {
            TxnCommand::Savepoint(_) => ("SAVEPOINT", "SAVEPOINT"),
            TxnCommand::RollbackTo(_) => ("ROLLBACK TO SAVEPOINT", "ROLLBACK"),
            _ => ("RELEASE SAVEPOINT", "RELEASE"),
        };
        // An implicit block (several statements of one Query message, a
        // run of Executes) is no transaction block here either.
        if self.block == Block::None || self.implicit {
            return Err(SqlError::new("25P01", format!("{command} can only be used in transaction blocks")));
        }
        if self.block == Block::Failed && !matches!(cmd, TxnCommand::RollbackTo(_)) {
            return Err(SqlError::transaction_aborted());
        }
        self.participants.iter_mut().try_for_each(|p| p.savepoint(command))?;
        // The engine forgets its savepoints when the transaction ends (an
        // error without savepoints rolls it back at once).
        self.savepoints.truncate(self.savepoint_depth());
        let depth = match cmd {
            TxnCommand::RollbackTo(name) | TxnCommand::Release(name) => find(&self.savepoints, name)?,
            _ => 0,
        };
        let Some(t) = self.txn.as_mut().filter(|t| t.is_open()) else {
            return Err(SqlError::new("XX000", "transaction block without a transaction"));
        };
        match cmd {
            TxnCommand::Savepoint(name) => {
                t.savepoint()?;
                self.savepoints.push(Named { name: name.clone(), settings: self.settings.clone() });
            }
            TxnCommand::RollbackTo(_) => {
                t.rollback_to_savepoint(depth)?;
                self.cursors.rolled_back_to(depth);
                self.savepoints.truncate(depth + 1);
                if let Some(sp) = self.savepoints.last() {
                    self.settings = sp.settings.clone();
                }
                self.block = Block::Active;
            }
            TxnCommand::Release(_) => {
                t.release_savepoint(depth)?;
                self.cursors.released(depth);
                self.savepoints.truncate(depth);
            }
            TxnCommand::Begin | TxnCommand::Commit | TxnCommand::Rollback => {}
        }
        Ok((Tag::Plain(tag), 0))
    }

    /// How many savepoints the open block has (0 outside one): for
    /// participants that cannot follow them.
    pub fn savepoint_depth(&self) -> usize {
        self.txn.as_ref().filter(|t| t.is_open()).map_or(0, Transaction::savepoint_depth)
    }
}

/// The newest savepoint named `name`.
fn find(savepoints: &[Named], name: &str) -> Result<usize> {
    savepoints
        .iter()
        .rposition(|s| s.name == name)
        .ok_or_else(|| SqlError::new("3B001", format!("savepoint \"{name}\" does not exist")))
}

//! The transaction clock that date/time input reads for `now`, `today`,
//! `tomorrow` and `yesterday`.
//!
//! PostgreSQL converts a literal such as `'now'::timestamptz` when it
//! analyses the statement, inside the statement's transaction, so the value
//! is that transaction's start (`'now'::timestamptz = now()` is true) and a
//! prepared statement keeps the value of its Parse. Value input has no
//! session at hand, so the connection arms this clock around a bind
//! ([`armed`]) with its open transaction's start, or with none: the first
//! read then takes the time, and the connection starts the transaction the
//! statement runs in at that same instant.
//!
//! The server arms it too for Bind's parameters and COPY FROM's fields
//! (`Connection::with_transaction_clock`). Outside an armed section (a
//! cast of a column evaluated while rows are read) and in a view's query
//! or a CHECK ([`refused`]) a read fails: the value input refuses the word
//! (0A000) rather than use a time that is not the one PostgreSQL would.

use std::cell::Cell;
use std::time::{SystemTime, UNIX_EPOCH};

/// µs between 1970-01-01 and 2000-01-01 (PostgreSQL's epoch).
const PG_EPOCH_OFFSET_MICROS: i64 = 946_684_800_000_000;

/// Now, in microseconds since 2000-01-01 (PostgreSQL's epoch): the wall
/// clock every transaction start, `clock_timestamp()` and the armed clock
/// read.
pub(crate) fn now_micros() -> i64 {
    let since_unix = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_micros()).unwrap_or(0);
    i64::try_from(since_unix).unwrap_or(i64::MAX) - PG_EPOCH_OFFSET_MICROS
}

#[derive(Clone, Copy)]
enum State {
    /// No bind or parameter conversion in progress.
    Off,
    /// Armed with this transaction start (µs since 2000-01-01).
    At(i64),
    /// Armed outside a transaction: the first read fixes the time.
    Unset,
    /// Binding an expression PostgreSQL stores with its constants folded
    /// (a view's query, a CHECK), which pgtier keeps as text and binds at
    /// each use: a read would give the using transaction's time instead
    /// of the creating one's, so it fails.
    Refused,
}

thread_local! {
    static CLOCK: Cell<State> = const { Cell::new(State::Off) };
    /// A read happened since the clock was armed.
    static READ: Cell<bool> = const { Cell::new(false) };
}

/// Runs `f` (a bind, a parameter conversion) with the clock at
/// `txn_start`, or unset when no transaction is open; also returns the time
/// a read gave, if `f` read the clock.
pub(crate) fn armed<R>(txn_start: Option<i64>, f: impl FnOnce() -> R) -> (R, Option<i64>) {
    if !matches!(CLOCK.get(), State::Off) {
        // Already armed (a bind inside a bind): the outer section decides.
        return (f(), None);
    }
    /// Disarms on the way out, a panic included, so no later statement
    /// reads this one's time.
    struct Disarm;
    impl Drop for Disarm {
        fn drop(&mut self) {
            CLOCK.set(State::Off);
            READ.set(false);
        }
    }
    let _disarm = Disarm;
    CLOCK.set(txn_start.map_or(State::Unset, State::At));
    READ.set(false);
    let out = f();
    let read = match (READ.get(), CLOCK.get()) {
        (true, State::At(t)) => Some(t),
        _ => None,
    };
    (out, read)
}

/// Runs `f` (binding a view's query or a CHECK) with reads refused.
pub(crate) fn refused<R>(f: impl FnOnce() -> R) -> R {
    struct Restore(State);
    impl Drop for Restore {
        fn drop(&mut self) {
            CLOCK.set(self.0);
        }
    }
    let _restore = Restore(CLOCK.replace(State::Refused));
    f()
}

/// The transaction start the statement being bound sees; None outside an
/// armed section or where reads are refused.
pub(crate) fn transaction_start() -> Option<i64> {
    let t = match CLOCK.get() {
        State::Off | State::Refused => return None,
        State::At(t) => t,
        State::Unset => {
            let t = now_micros();
            CLOCK.set(State::At(t));
            t
        }
    };
    READ.set(true);
    Some(t)
}

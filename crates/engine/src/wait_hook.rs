//! A thread's say before it blocks on another transaction or on the log.
//!
//! The server's event loops serve many sessions on one thread. A session
//! that waits for a row lock or for its commit to become durable must not
//! hold up the others (one of them may hold the lock), so a loop thread
//! registers a hook that hands its loop to another thread first. The
//! engine calls it only where a wait is about to block: a lock held by
//! another transaction, a commit record not yet durable.

use std::cell::Cell;

thread_local! {
    static HOOK: Cell<Option<fn()>> = const { Cell::new(None) };
}

/// Sets (or clears) the function this thread calls before such a wait.
pub fn set_wait_hook(hook: Option<fn()>) {
    HOOK.with(|h| h.set(hook));
}

pub(crate) fn before_wait() {
    if let Some(hook) = HOOK.with(Cell::get) {
        hook();
    }
}

//! What the server remembers about logins: successes and failures by
//! reason, failures by user name and by client address (bounded maps for
//! `/metrics`), and each user's live sessions against its
//! `connection_limit`. Never a password.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::Mutex;

/// Names and addresses remembered with their failures; past this the one
/// whose last failure is oldest is forgotten (a scan of a guessing bot's
/// random names must not grow memory or the metrics page).
pub const TRACKED_MAX: usize = 256;
/// A user name is remembered by its first bytes (PostgreSQL's NAMEDATALEN - 1).
const NAME_BYTES_MAX: usize = 63;

/// Why a login failed (the `reason` label of `pgtier_auth_failures_total`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Failure {
    /// Wrong password for a configured user (28P01).
    Password,
    /// A user no `[[auth.users]]` entry names (28P01, as a wrong password).
    UnknownUser,
    /// No host rule matches (28000).
    NoRule,
    /// A `reject` rule matched (28000).
    Rejected,
    /// A rule asks for a client certificate the client did not present (28000).
    ClientCert,
    /// The user's `connection_limit` was reached (53300; not delayed:
    /// the password was right).
    UserLimit,
}

impl Failure {
    pub const ALL: [Failure; 6] = [
        Failure::Password,
        Failure::UnknownUser,
        Failure::NoRule,
        Failure::Rejected,
        Failure::ClientCert,
        Failure::UserLimit,
    ];

    pub fn label(self) -> &'static str {
        match self {
            Failure::Password => "password",
            Failure::UnknownUser => "unknown_user",
            Failure::NoRule => "no_rule",
            Failure::Rejected => "rejected",
            Failure::ClientCert => "client_cert",
            Failure::UserLimit => "user_connection_limit",
        }
    }
}

/// Counts by key, at most [`TRACKED_MAX`] keys.
struct Tracked<K> {
    entries: HashMap<K, (u64, u64)>,
    /// Increases with every failure: the age of an entry's last one.
    tick: u64,
    evicted: u64,
}

impl<K: std::hash::Hash + Eq + Clone> Tracked<K> {
    fn new() -> Tracked<K> {
        Tracked { entries: HashMap::new(), tick: 0, evicted: 0 }
    }

    fn count(&mut self, key: &K) {
        self.tick += 1;
        let tick = self.tick;
        if let Some(e) = self.entries.get_mut(key) {
            *e = (e.0 + 1, tick);
            return;
        }
        if self.entries.len() >= TRACKED_MAX {
            // O(TRACKED_MAX), only on a failure from a new key.
            if let Some(oldest) = self.entries.iter().min_by_key(|(_, (_, t))| *t).map(|(k, _)| k.clone()) {
                self.entries.remove(&oldest);
                self.evicted += 1;
            }
        }
        self.entries.insert(key.clone(), (1, tick));
        debug_assert!(self.entries.len() <= TRACKED_MAX);
    }

    fn snapshot(&self) -> Vec<(K, u64)> {
        self.entries.iter().map(|(k, (n, _))| (k.clone(), *n)).collect()
    }
}

struct Book {
    by_user: Tracked<String>,
    by_address: Tracked<IpAddr>,
}

/// The server's login figures and per-user session counts.
pub struct Logins {
    successes: AtomicU64,
    failures: [AtomicU64; Failure::ALL.len()],
    book: Mutex<Book>,
    /// Live sessions per user; an entry goes when its count reaches 0,
    /// so the map is bounded by the sessions (max_connections).
    sessions: Mutex<HashMap<String, usize>>,
}

/// A figure for `/metrics`.
pub struct Snapshot {
    pub successes: u64,
    pub failures: Vec<(Failure, u64)>,
    pub by_user: Vec<(String, u64)>,
    pub by_address: Vec<(IpAddr, u64)>,
    pub forgotten: u64,
}

impl Default for Logins {
    fn default() -> Logins {
        Logins {
            successes: AtomicU64::new(0),
            failures: std::array::from_fn(|_| AtomicU64::new(0)),
            book: Mutex::new(Book { by_user: Tracked::new(), by_address: Tracked::new() }),
            sessions: Mutex::new(HashMap::new()),
        }
    }
}

impl Logins {
    pub fn succeeded(&self) {
        self.successes.fetch_add(1, Ordering::Relaxed);
    }

    pub fn failed(&self, why: Failure, user: &str, addr: IpAddr) {
        let i = Failure::ALL.iter().position(|f| *f == why).unwrap_or(0);
        self.failures[i].fetch_add(1, Ordering::Relaxed);
        let mut end = user.len().min(NAME_BYTES_MAX);
        while !user.is_char_boundary(end) {
            end -= 1;
        }
        let mut book = self.book.lock();
        book.by_user.count(&user[..end].to_owned());
        book.by_address.count(&addr);
    }

    pub fn snapshot(&self) -> Snapshot {
        let book = self.book.lock();
        Snapshot {
            successes: self.successes.load(Ordering::Relaxed),
            failures: Failure::ALL.iter().zip(&self.failures).map(|(f, n)| (*f, n.load(Ordering::Relaxed))).collect(),
            by_user: book.by_user.snapshot(),
            by_address: book.by_address.snapshot(),
            forgotten: book.by_user.evicted + book.by_address.evicted,
        }
    }

    /// A place among `user`'s sessions; None when it has `limit` already.
    pub fn join(self: &Arc<Self>, user: &str, limit: Option<usize>) -> Option<UserSlot> {
        let mut sessions = self.sessions.lock();
        let n = sessions.entry(user.to_owned()).or_insert(0);
        if limit.is_some_and(|limit| *n >= limit) {
            if *n == 0 {
                sessions.remove(user);
            }
            return None;
        }
        *n += 1;
        Some(UserSlot { logins: Arc::clone(self), user: user.to_owned() })
    }
}

/// A session's place in its user's count, released on drop.
pub struct UserSlot {
    logins: Arc<Logins>,
    user: String,
}

impl Drop for UserSlot {
    fn drop(&mut self) {
        let mut sessions = self.logins.sessions.lock();
        if let Some(n) = sessions.get_mut(&self.user) {
            *n -= 1;
            if *n == 0 {
                sessions.remove(&self.user);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tracked_keys_are_bounded_and_the_oldest_goes() {
        let mut t = Tracked::new();
        for i in 0..TRACKED_MAX {
            t.count(&i);
        }
        t.count(&0); // 0 is now the most recent
        t.count(&TRACKED_MAX);
        assert_eq!(t.entries.len(), TRACKED_MAX);
        assert!(t.entries.contains_key(&0) && !t.entries.contains_key(&1), "1 was the oldest");
        assert_eq!((t.entries[&0].0, t.evicted), (2, 1));
    }

    #[test]
    fn user_slots_count_and_release() {
        let logins = Arc::new(Logins::default());
        let a = logins.join("u", Some(2)).unwrap();
        let _b = logins.join("u", Some(2)).unwrap();
        assert!(logins.join("u", Some(2)).is_none());
        assert!(logins.join("v", Some(0)).is_none());
        drop(a);
        assert!(logins.join("u", Some(2)).is_some());
        assert!(!logins.sessions.lock().contains_key("v"));
        logins.failed(Failure::Password, &"é".repeat(40), "127.0.0.1".parse().unwrap());
        assert_eq!(logins.snapshot().by_user[0].0.len(), 62, "cut at a character boundary");
    }
}

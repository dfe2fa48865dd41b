//! Event loops: sessions over plain TCP are served by a few loop threads
//! (`event_loops`, one per CPU by default) instead of a thread each.
//!
//! Why: over loopback a round trip costs the kernel far more than pgtier
//! spends answering it. With a thread per session every request wakes that
//! session's thread and every answer puts it back to sleep. A loop thread
//! with more ready sessions goes on to the next one without sleeping, and
//! the client's request needs no wake-up when its loop is busy. TATP over
//! 16 connections on the 2-CPU machine: about +10 % throughput.
//!
//! The invariant: a waiting session never stalls the other sessions of its
//! loop, because one of them may hold the row lock it waits for, or be the
//! other end of its client's pipe. So before every wait that can last (a row
//! lock or a durable commit in the engine, a backend round trip, a socket
//! read or write that would block) the thread calls [`before_wait`]. That
//! hands its loop to a spare thread; the thread then finishes the request,
//! blocking as a session thread would, gives the session back to the loop
//! and becomes a spare itself. A blocked session holds one thread, as with
//! thread-per-session, and its loop keeps running.
//!
//! Ownership: a loop keeps its sessions in `slots`, indexed by the epoll
//! token. The thread serving a session takes it out and puts it back. A
//! slot found `Running` belongs to a thread that handed the loop off; its
//! socket is disarmed until that thread puts the session back and re-arms
//! it, so a pipelining client cannot make the loop spin on it meanwhile.
//!
//! TLS sessions keep a thread each: rustls would need its own non-blocking
//! read path.

use std::cell::RefCell;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};

use crate::server::{SESSION_STACK_BYTES, Shared};
use crate::session::Session;

/// Events one `epoll_wait` returns at most.
const EVENTS_MAX: usize = 64;
/// The epoll token of a loop's eventfd (new sessions, shutdown).
const WAKE_TOKEN: u64 = u64::MAX;
/// A spare thread with nothing to do for this long exits.
const SPARE_IDLE: Duration = Duration::from_secs(10);

/// A session and what must live exactly as long as it (its place in the
/// connection limit and in the registry).
pub struct Adopted {
    pub session: Session,
    /// Held for their drop only.
    pub _guards: Box<dyn Send>,
}

impl Adopted {
    fn fd(&self) -> RawFd {
        self.session.raw_fd().unwrap_or(-1)
    }
}

enum Slot {
    Free,
    Parked(Box<Adopted>),
    /// Taken by a thread that is serving it.
    Running(RawFd),
}

struct Loop {
    epoll: OwnedFd,
    wake: OwnedFd,
    arriving: Mutex<Vec<Adopted>>,
    /// Slots to serve at the next wake-up whatever their sockets say: what
    /// a thread that handed the loop off had left of its ready list.
    leftover: Mutex<Vec<usize>>,
    slots: Mutex<Vec<Slot>>,
    /// The earliest idle_in_transaction_session_timeout of a parked session
    /// (or earlier: a stale one only costs a scan); epoll_wait returns by then.
    next_idle_check: Mutex<Option<Instant>>,
}

pub struct Loops {
    loops: Vec<Arc<Loop>>,
    next: AtomicUsize,
    spares: Mutex<Spares>,
    spare_ready: Condvar,
    stopping: AtomicBool,
}

#[derive(Default)]
struct Spares {
    /// Loops handed off and waiting for a thread.
    queue: Vec<Arc<Loop>>,
    /// Spare threads waiting for one.
    idle: usize,
}

struct Worker {
    shared: Arc<Shared>,
    lp: Arc<Loop>,
    handed_off: bool,
}

thread_local! {
    /// Set while this thread serves a loop (see `before_wait`).
    static WORKER: RefCell<Option<Worker>> = const { RefCell::new(None) };
}

fn os_error(what: &str) -> std::io::Error {
    let e = std::io::Error::last_os_error();
    std::io::Error::new(e.kind(), format!("{what}: {e}"))
}

impl Loop {
    fn new() -> std::io::Result<Loop> {
        // SAFETY: plain syscalls; each result is checked before it is owned.
        let epoll = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
        if epoll < 0 {
            return Err(os_error("epoll_create1"));
        }
        // SAFETY: a descriptor we just created and nobody else owns.
        let epoll = unsafe { OwnedFd::from_raw_fd(epoll) };
        // SAFETY: as above.
        let wake = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK) };
        if wake < 0 {
            return Err(os_error("eventfd"));
        }
        // SAFETY: as above.
        let wake = unsafe { OwnedFd::from_raw_fd(wake) };
        let lp = Loop {
            epoll,
            wake,
            arriving: Mutex::new(Vec::new()),
            leftover: Mutex::new(Vec::new()),
            slots: Mutex::new(Vec::new()),
            next_idle_check: Mutex::new(None),
        };
        lp.control(libc::EPOLL_CTL_ADD, lp.wake.as_raw_fd(), WAKE_TOKEN, true)?;
        Ok(lp)
    }

    /// EPOLL_CTL_ADD/MOD/DEL of `fd` (level-triggered; `armed`: readable or hung up).
    fn control(&self, op: i32, fd: RawFd, token: u64, armed: bool) -> std::io::Result<()> {
        let events = if armed { (libc::EPOLLIN | libc::EPOLLRDHUP) as u32 } else { 0 };
        let mut event = libc::epoll_event { events, u64: token };
        // SAFETY: both descriptors are open; the event outlives the call.
        if unsafe { libc::epoll_ctl(self.epoll.as_raw_fd(), op, fd, &mut event) } < 0 {
            return Err(os_error("epoll_ctl"));
        }
        Ok(())
    }

    fn wake(&self) {
        let one: u64 = 1;
        // SAFETY: writes 8 bytes from a live u64 to our eventfd. A full
        // counter (EAGAIN) already means "wake up".
        unsafe {
            libc::write(self.wake.as_raw_fd(), (&raw const one).cast(), 8);
        }
    }

    /// Takes the session in slot `idx` to serve it. A `Running` slot's
    /// socket is disarmed (see module docs); `Free` is a stale event.
    fn take(&self, idx: usize) -> Option<Box<Adopted>> {
        let mut slots = self.slots.lock();
        let slot = slots.get_mut(idx)?;
        match std::mem::replace(slot, Slot::Free) {
            Slot::Parked(a) => {
                *slot = Slot::Running(a.fd());
                Some(a)
            }
            Slot::Running(fd) => {
                *slot = Slot::Running(fd);
                let _ = self.control(libc::EPOLL_CTL_MOD, fd, idx as u64, false);
                None
            }
            Slot::Free => None,
        }
    }

    /// Gives a served session back (re-armed if this thread handed the
    /// loop off), or forgets an ended one.
    fn put_back(&self, idx: usize, adopted: Box<Adopted>, alive: bool, rearm: bool) {
        let fd = adopted.fd();
        if alive {
            if let Some(d) = adopted.session.idle_deadline {
                let mut next = self.next_idle_check.lock();
                if next.is_none_or(|n| d < n) {
                    *next = Some(d);
                    // Another thread may be in epoll_wait with a later timeout.
                    self.wake();
                }
            }
            self.slots.lock()[idx] = Slot::Parked(adopted);
            if rearm {
                let _ = self.control(libc::EPOLL_CTL_MOD, fd, idx as u64, true);
            }
            return;
        }
        // Out of the interest list before the socket closes (on drop).
        let _ = self.control(libc::EPOLL_CTL_DEL, fd, 0, false);
        self.slots.lock()[idx] = Slot::Free;
        let mut adopted = adopted;
        let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| adopted.session.finish()));
        drop(adopted);
    }

    /// epoll_wait's timeout: until the next idle-in-transaction deadline
    /// (ms, rounded up), or -1 (none).
    fn epoll_timeout_ms(&self) -> i32 {
        match *self.next_idle_check.lock() {
            None => -1,
            Some(d) => {
                let left = d.saturating_duration_since(Instant::now());
                i32::try_from(left.as_millis() + 1).unwrap_or(i32::MAX)
            }
        }
    }

    /// Ends the parked sessions idle in a transaction block past their
    /// deadline (FATAL 25P03; `put_back` rolls back and closes them).
    fn expire_idle(&self) {
        let now = Instant::now();
        {
            let mut next = self.next_idle_check.lock();
            if next.is_none_or(|d| d > now) {
                return;
            }
            *next = None;
        }
        let mut due = Vec::new();
        let mut later: Option<Instant> = None;
        for (idx, slot) in self.slots.lock().iter().enumerate() {
            let Slot::Parked(a) = slot else { continue };
            match a.session.idle_deadline {
                Some(d) if d <= now => due.push(idx),
                Some(d) => later = Some(later.map_or(d, |l| l.min(d))),
                None => {}
            }
        }
        if let Some(l) = later {
            let mut next = self.next_idle_check.lock();
            *next = Some(next.map_or(l, |n| n.min(l)));
        }
        for idx in due {
            if let Some(mut adopted) = self.take(idx) {
                adopted.session.end_idle_in_transaction();
                self.put_back(idx, adopted, false, false);
            }
        }
    }

    /// Files the sessions handed to this loop; returns their slots and
    /// the leftovers to serve.
    fn file_arrivals(&self) -> Vec<usize> {
        let mut drained = 0u64;
        // SAFETY: reads 8 bytes into a live u64 from our eventfd (EAGAIN
        // when nothing arrived is fine).
        unsafe {
            libc::read(self.wake.as_raw_fd(), (&raw mut drained).cast(), 8);
        }
        let arrived = std::mem::take(&mut *self.arriving.lock());
        let mut filed = Vec::with_capacity(arrived.len());
        for adopted in arrived {
            let fd = adopted.fd();
            let mut slots = self.slots.lock();
            let idx = match slots.iter().position(|s| matches!(s, Slot::Free)) {
                Some(i) => i,
                None => {
                    slots.push(Slot::Free);
                    slots.len() - 1
                }
            };
            slots[idx] = Slot::Parked(Box::new(adopted));
            drop(slots);
            if self.control(libc::EPOLL_CTL_ADD, fd, idx as u64, true).is_ok() {
                filed.push(idx);
            } else if let Some(a) = self.take(idx) {
                self.put_back(idx, a, false, false);
            }
        }
        filed.append(&mut self.leftover.lock());
        filed
    }
}

impl Loops {
    /// `count` loops and their first threads; None for `count` 0 (a thread
    /// per session).
    pub fn start(count: usize, shared: &Arc<Shared>) -> std::io::Result<Option<Arc<Loops>>> {
        if count == 0 {
            return Ok(None);
        }
        let loops = (0..count).map(|_| Loop::new().map(Arc::new)).collect::<std::io::Result<Vec<_>>>()?;
        let this = Arc::new(Loops {
            loops,
            next: AtomicUsize::new(0),
            spares: Mutex::new(Spares::default()),
            spare_ready: Condvar::new(),
            stopping: AtomicBool::new(false),
        });
        for lp in &this.loops {
            spawn_worker(shared.clone(), this.clone(), Some(lp.clone()))?;
        }
        Ok(Some(this))
    }

    /// Hands a session (authenticated, ReadyForQuery queued) to a loop.
    pub fn adopt(&self, adopted: Adopted) {
        let i = self.next.fetch_add(1, Ordering::Relaxed) % self.loops.len();
        let lp = &self.loops[i];
        lp.arriving.lock().push(adopted);
        lp.wake();
    }

    /// Ends every loop thread and spare (sessions are gone by now).
    pub fn stop(&self) {
        self.stopping.store(true, Ordering::Release);
        for lp in &self.loops {
            lp.wake();
        }
        let _guard = self.spares.lock();
        self.spare_ready.notify_all();
    }

    /// Gives `lp` to a spare thread, starting one if none is idle.
    fn hand_over(self: &Arc<Self>, shared: &Arc<Shared>, lp: Arc<Loop>) {
        let mut spares = self.spares.lock();
        spares.queue.push(lp);
        if spares.queue.len() > spares.idle {
            drop(spares);
            if spawn_worker(shared.clone(), self.clone(), None).is_err() {
                // No thread to be had: the queued loop waits for the next
                // spare (this thread becomes one once its request is done).
            }
            return;
        }
        self.spare_ready.notify_one();
    }

    /// The next loop for a spare thread; None: idle too long, or stopping.
    fn next_handed_over(&self) -> Option<Arc<Loop>> {
        let mut spares = self.spares.lock();
        loop {
            if self.stopping.load(Ordering::Acquire) {
                return None;
            }
            if let Some(lp) = spares.queue.pop() {
                return Some(lp);
            }
            spares.idle += 1;
            let timed_out = self.spare_ready.wait_for(&mut spares, SPARE_IDLE).timed_out();
            spares.idle -= 1;
            if timed_out && spares.queue.is_empty() {
                return None;
            }
        }
    }
}

fn spawn_worker(shared: Arc<Shared>, loops: Arc<Loops>, first: Option<Arc<Loop>>) -> std::io::Result<()> {
    std::thread::Builder::new().name("pgtier-loop".to_owned()).stack_size(SESSION_STACK_BYTES).spawn(move || {
        let mut next = first;
        loop {
            let lp = match next.take() {
                Some(lp) => lp,
                None => match loops.next_handed_over() {
                    Some(lp) => lp,
                    None => return,
                },
            };
            serve_loop(&shared, &loops, lp);
        }
    })?;
    Ok(())
}

/// Serves `lp` until this thread hands it off (and has finished the
/// request that blocked) or the server stops.
fn serve_loop(shared: &Arc<Shared>, loops: &Arc<Loops>, lp: Arc<Loop>) {
    WORKER.with(|w| *w.borrow_mut() = Some(Worker { shared: shared.clone(), lp: lp.clone(), handed_off: false }));
    pgtier_engine::set_wait_hook(Some(before_wait));
    let mut events = [libc::epoll_event { events: 0, u64: 0 }; EVENTS_MAX];
    'serving: loop {
        // SAFETY: the buffer holds EVENTS_MAX events and outlives the call.
        let n = unsafe {
            libc::epoll_wait(lp.epoll.as_raw_fd(), events.as_mut_ptr(), EVENTS_MAX as i32, lp.epoll_timeout_ms())
        };
        if n < 0 {
            if std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted {
                continue;
            }
            break 'serving;
        }
        lp.expire_idle();
        if handed_off() {
            // Ending a session flushed its FATAL, which may have waited.
            lp.leftover
                .lock()
                .extend(events[..n as usize].iter().map(|e| e.u64).filter(|&t| t != WAKE_TOKEN).map(|t| t as usize));
            lp.wake();
            break 'serving;
        }
        let mut ready = Vec::with_capacity(n as usize);
        for token in events[..n as usize].iter().map(|e| e.u64) {
            if token != WAKE_TOKEN {
                ready.push(token as usize);
                continue;
            }
            if loops.stopping.load(Ordering::Acquire) {
                break 'serving;
            }
            // A new session may have pipelined past its startup into our
            // buffer, where epoll cannot see it: serve each once now.
            ready.extend(lp.file_arrivals());
        }
        for (k, &idx) in ready.iter().enumerate() {
            if let Some(mut adopted) = lp.take(idx) {
                // A panic is a bug, but it must end only this session, not
                // the loop's thread and with it the loop's other sessions.
                let alive = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| adopted.session.serve_ready()))
                    .unwrap_or_else(|_| {
                        shared.session_panics.fetch_add(1, Ordering::Relaxed);
                        false
                    });
                lp.put_back(idx, adopted, alive, handed_off());
            }
            // Checked after put_back too: ending a session flushes its
            // last answers, which may have waited (and handed off).
            if handed_off() {
                // The rest may include new sessions epoll would not report.
                lp.leftover.lock().extend_from_slice(&ready[k + 1..]);
                lp.wake();
                break 'serving;
            }
        }
    }
    pgtier_engine::set_wait_hook(None);
    WORKER.with(|w| *w.borrow_mut() = None);
}

/// True once this loop thread has handed its loop to another thread.
fn handed_off() -> bool {
    WORKER.with(|w| w.borrow().as_ref().is_some_and(|w| w.handed_off))
}

/// True on a thread serving a loop (socket waits must call `before_wait`).
pub fn on_loop_thread() -> bool {
    WORKER.with(|w| w.borrow().as_ref().is_some_and(|w| !w.handed_off))
}

/// Call before any wait that can last: on a loop thread, hands the loop to
/// a spare first (see module docs). Elsewhere, or once handed off, nothing.
pub fn before_wait() {
    let handover = WORKER.with(|w| {
        let mut w = w.borrow_mut();
        let worker = w.as_mut()?;
        if worker.handed_off {
            return None;
        }
        worker.handed_off = true;
        Some((worker.shared.clone(), worker.lp.clone()))
    });
    if let Some((shared, lp)) = handover
        && let Some(loops) = shared.loops.get().cloned()
    {
        loops.hand_over(&shared, lp);
    }
}

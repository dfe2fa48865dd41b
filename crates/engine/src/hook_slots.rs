//! One table's hook slots: the switches the cache turns on for it (miss
//! hook installed, access stamps recorded, write guard, commit participant,
//! cold rows) and the objects behind the four hooks. Nothing here is persisted; the
//! cache installs them at every open.
//!
//! The storage layer (`table`) keeps one per table and only tests its
//! switches. The objects are held opaquely: their types are the hook traits
//! of `seams`, which name the database and its transactions, so storage
//! that named them would depend on everything built on top of it. `seams`
//! adds the typed accessors (`HookSlots::miss_hook` and the like).
//!
//! Cost when off: every switch of a table is one byte (`flags`) next to the
//! fields a lookup reads anyway, tested only where the feature would act
//! (a lookup that found nothing; a read by an application transaction).

use std::any::Any;
use std::sync::atomic::{AtomicU8, Ordering};

use parking_lot::RwLock;

/// The hooks a table can hold, each with its switch in `HookSlots::flags`.
#[derive(Clone, Copy)]
pub(crate) enum Hook {
    Miss,
    WriteGuard,
    Participant,
    /// The store of the table's cold row images (cold.rs).
    Cold,
}

impl Hook {
    const fn slot(self) -> usize {
        self as usize
    }

    const fn flag(self) -> u8 {
        match self {
            Hook::Miss => 1,
            Hook::WriteGuard => 4,
            Hook::Participant => 8,
            Hook::Cold => 16,
        }
    }
}

/// The one switch without an object: access stamps.
const TRACK_ACCESS: u8 = 2;

/// A hook object of the type `seams` stores in its slot.
type HookObject = Box<dyn Any + Send + Sync>;

/// One table's switches and the objects behind its hooks.
#[derive(Default)]
pub(crate) struct HookSlots {
    flags: AtomicU8,
    objects: [RwLock<Option<HookObject>>; 4],
}

impl HookSlots {
    #[inline]
    pub(crate) fn has_miss_hook(&self) -> bool {
        self.is_on(Hook::Miss.flag())
    }

    #[inline]
    pub(crate) fn has_write_guard(&self) -> bool {
        self.is_on(Hook::WriteGuard.flag())
    }

    #[inline]
    pub(crate) fn has_participant(&self) -> bool {
        self.is_on(Hook::Participant.flag())
    }

    #[inline]
    pub(crate) fn has_cold_rows(&self) -> bool {
        self.is_on(Hook::Cold.flag())
    }

    #[inline]
    pub(crate) fn tracks_access(&self) -> bool {
        self.is_on(TRACK_ACCESS)
    }

    pub(crate) fn set_access_tracking(&self, on: bool) {
        self.set_flag(TRACK_ACCESS, on);
    }

    /// The object in `hook`'s slot, if one of type `T` is installed.
    pub(crate) fn object<T: Clone + 'static>(&self, hook: Hook) -> Option<T> {
        self.objects[hook.slot()].read().as_ref().and_then(|object| object.downcast_ref::<T>()).cloned()
    }

    /// Installs (Some) or removes (None) `hook`'s object, switching it on
    /// or off under the slot's lock.
    pub(crate) fn set_object<T: Send + Sync + 'static>(&self, hook: Hook, object: Option<T>) {
        let mut slot = self.objects[hook.slot()].write();
        self.set_flag(hook.flag(), object.is_some());
        *slot = object.map(|object| Box::new(object) as HookObject);
    }

    #[inline]
    fn is_on(&self, flag: u8) -> bool {
        self.flags.load(Ordering::Relaxed) & flag != 0
    }

    fn set_flag(&self, flag: u8, on: bool) {
        if on {
            self.flags.fetch_or(flag, Ordering::Relaxed);
        } else {
            self.flags.fetch_and(!flag, Ordering::Relaxed);
        }
    }
}

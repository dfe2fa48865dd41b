//! Model-based test: random operation sequences against a `HashMap` model.
//! Evictable and Keep records may vanish (reclamation), Durable ones never;
//! a value read is always the last one inserted for its key; once a record
//! is seen gone it stays gone; a clean reopen changes nothing, a crash
//! loses no acknowledged Durable record and brings back no removed one.

mod common;

use std::collections::HashMap;

use common::{config, value};
use pgtier_tier::{FlashStore, Inserted, Retention, TierError, Warm};
use proptest::prelude::*;

#[derive(Clone, Debug)]
enum Op {
    Insert { key: u8, len: usize, retention: Retention },
    Get(u8),
    Take(u8),
    Remove(u8),
    Contains(u8),
    Reclaim,
    DropDroppable,
    Checkpoint,
    Reopen,
    Crash,
}

fn retention() -> impl Strategy<Value = Retention> {
    prop_oneof![4 => Just(Retention::Evictable), 3 => Just(Retention::Keep), 2 => Just(Retention::Durable)]
}

fn op() -> impl Strategy<Value = Op> {
    let key = 0u8..40;
    prop_oneof![
        30 => (key.clone(), 0usize..3000, retention()).prop_map(|(key, len, retention)| Op::Insert { key, len, retention }),
        20 => key.clone().prop_map(Op::Get),
        6 => key.clone().prop_map(Op::Take),
        6 => key.clone().prop_map(Op::Remove),
        4 => key.prop_map(Op::Contains),
        4 => Just(Op::Reclaim),
        1 => Just(Op::DropDroppable),
        1 => Just(Op::Checkpoint),
        1 => Just(Op::Reopen),
        1 => Just(Op::Crash),
    ]
}

fn k(key: u8) -> Vec<u8> {
    format!("model-key-{key}").into_bytes()
}

/// The state the store must agree with.
struct Model {
    /// key → (value, retention) of its last insert, if not removed or seen gone.
    live: HashMap<u8, (Vec<u8>, Retention)>,
    version: u64,
}

impl Model {
    /// What `get` returned must agree with the model; updates it when a
    /// droppable record is seen gone.
    fn check_read(&mut self, key: u8, got: Option<(Vec<u8>, Retention)>) -> Result<(), TestCaseError> {
        match (self.live.get(&key), got) {
            (None, None) => {}
            (None, Some(g)) => prop_assert!(false, "key {key}: gone, yet read back as {:?}", g.1),
            (Some(want), Some(g)) => prop_assert!(want == &g, "key {key}: read a value that is not the last one"),
            (Some(want), None) => {
                prop_assert!(want.1 != Retention::Durable, "key {key}: Durable record vanished");
                self.live.remove(&key);
            }
        }
        Ok(())
    }
}

fn apply(store: &mut FlashStore, model: &mut Model, op: &Op, c: &pgtier_tier::TierConfig) -> Result<(), TestCaseError> {
    match *op {
        Op::Insert { key, len, retention } => {
            model.version += 1;
            let v = value(u64::from(key), model.version, len);
            match store.insert(&k(key), &v, retention) {
                Ok(Inserted::Stored) => {
                    model.live.insert(key, (v, retention));
                }
                Ok(Inserted::Rejected(_)) | Err(TierError::Full(_)) => {}
                Err(e) => prop_assert!(false, "insert: {e}"),
            }
        }
        Op::Get(key) => {
            let got = store.get(&k(key)).map_err(|e| TestCaseError::fail(e.to_string()))?;
            model.check_read(key, got)?;
        }
        Op::Take(key) => {
            let got = store.take(&k(key)).map_err(|e| TestCaseError::fail(e.to_string()))?;
            model.check_read(key, got)?;
            model.live.remove(&key);
        }
        Op::Remove(key) => {
            let removed = store.remove(&k(key)).map_err(|e| TestCaseError::fail(e.to_string()))?;
            match model.live.remove(&key) {
                None => prop_assert!(!removed, "key {key}: removed a record that was gone"),
                Some((_, Retention::Durable)) => prop_assert!(removed, "key {key}: Durable record not there to remove"),
                Some(_) => {}
            }
        }
        Op::Contains(key) => {
            let there = store.contains(&k(key));
            match model.live.get(&key) {
                None => prop_assert!(!there, "key {key}: contains a gone record"),
                Some((_, Retention::Durable)) => prop_assert!(there, "key {key}: Durable record not contained"),
                Some(_) if !there => {
                    model.live.remove(&key);
                }
                Some(_) => {}
            }
        }
        Op::Reclaim => {
            store.debug_reclaim_oldest().map_err(|e| TestCaseError::fail(e.to_string()))?;
        }
        Op::DropDroppable => {
            store.drop_droppable();
            model.live.retain(|_, (_, r)| *r == Retention::Durable);
        }
        Op::Checkpoint => store.checkpoint(b"T").map_err(|e| TestCaseError::fail(e.to_string()))?,
        Op::Reopen | Op::Crash => reopen(store, model, matches!(op, Op::Crash), c)?,
    }
    Ok(())
}

fn reopen(
    store: &mut FlashStore,
    model: &mut Model,
    crash: bool,
    c: &pgtier_tier::TierConfig,
) -> Result<(), TestCaseError> {
    let placeholder_dir = tempfile::tempdir().map_err(|e| TestCaseError::fail(e.to_string()))?;
    let (placeholder, _) =
        FlashStore::open(&config(placeholder_dir.path(), 4), b"").map_err(|e| TestCaseError::fail(e.to_string()))?;
    let old = std::mem::replace(store, placeholder);
    if crash {
        drop(old);
    } else {
        old.close(b"T").map_err(|e| TestCaseError::fail(e.to_string()))?;
    }
    let (reopened, report) = FlashStore::open(c, b"T").map_err(|e| TestCaseError::fail(e.to_string()))?;
    *store = reopened;
    if crash {
        // Droppable records cannot be vouched for after a crash: drop them,
        // as a caller does; Durable ones must be exactly the model's.
        prop_assert!(!report.clean);
        store.drop_droppable();
        model.live.retain(|_, (_, r)| *r == Retention::Durable);
    } else {
        prop_assert_eq!((report.warm, report.clean, report.regions_scanned), (Warm::FromIndex, true, 0));
    }
    Ok(())
}

fn run(ops: &[Op]) -> Result<(), TestCaseError> {
    let dir = tempfile::tempdir().map_err(|e| TestCaseError::fail(e.to_string()))?;
    let c = config(dir.path(), 8);
    let (mut store, _) = FlashStore::open(&c, b"T").map_err(|e| TestCaseError::fail(e.to_string()))?;
    let mut model = Model { live: HashMap::new(), version: 0 };
    for op in ops {
        apply(&mut store, &mut model, op, &c)?;
    }
    // Finally every key is read: Durable ones exact, droppable ones exact or gone.
    for key in 0..40 {
        let got = store.get(&k(key)).map_err(|e| TestCaseError::fail(e.to_string()))?;
        model.check_read(key, got)?;
    }
    let durable = model.live.values().filter(|(_, r)| *r == Retention::Durable).count() as u64;
    let s = store.stats();
    prop_assert_eq!(s.durable_records, durable);
    prop_assert_eq!(s.records, model.live.len() as u64);
    prop_assert!(s.live_bytes <= s.capacity_bytes && s.failed.is_none(), "{:?}", s);
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn store_agrees_with_the_model(ops in proptest::collection::vec(op(), 20..250)) {
        run(&ops)?;
    }
}

//! TATP writers for the kill rounds of failover_cli.rs: the standard mix
//! (80% reads, 20% writes) with TATP's statements, each writer owning a
//! disjoint range of subscribers (the study's routing by subscriber), and
//! a model per writer of what its rows must hold given every write that was
//! acknowledged. A write whose outcome is unknown (its connection died, a
//! sync commit timed out) leaves both outcomes possible until a later write
//! or a read decides.
//!
//! Because a writer's rows are written by it alone, reading them back from
//! the promoted standby tells exactly which acknowledged writes it lacks;
//! each field's last acknowledgement time bounds when a lost one was
//! acknowledged (checked against the async window the active reported).

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use pgtier_bench::tatp::random::{splitmix64, sub_nbr};
use pgtier_bench::tatp::transactions::{
    DELETE_CALL_FORWARDING, GET_ACCESS_DATA, GET_NEW_DESTINATION, GET_SUBSCRIBER_DATA, INSERT_CALL_FORWARDING,
    SELECT_SF_TYPES, TxnType, UPDATE_LOCATION, UPDATE_SPECIAL_FACILITY, UPDATE_SUBSCRIBER_BIT,
};

pub const SUBSCRIBERS_PER_WRITER: i32 = 50;
/// Special facility types each subscriber has (TATP draws 1-4; 3 and 4
/// exist for none, so their updates find no row, as in the spec's sparse
/// population).
const SF_TYPES: [i16; 2] = [1, 2];
const START_TIMES: [i16; 3] = [0, 8, 16];

/// TATP's four tables with its keys, and `writers * SUBSCRIBERS_PER_WRITER`
/// subscribers, each with two special facilities and one call forwarding.
pub fn populate(pg: &mut postgres::Client, writers: i32) {
    pg.batch_execute(&pgtier_bench::tatp::schema::create_tables(true)).unwrap();
    let n = writers * SUBSCRIBERS_PER_WRITER;
    pg.batch_execute(&format!(
        "INSERT INTO subscriber (s_id, sub_nbr, bit_1, msc_location, vlr_location)
             SELECT g, lpad(g::text, 15, '0'), g % 2, g * 7, g * 11 FROM generate_series(1, {n}) g;
         INSERT INTO access_info (s_id, ai_type, data1, data3) SELECT g, t, g % 255, 'abc' FROM generate_series(1, {n}) g, generate_series(1, 2) t;
         INSERT INTO special_facility (s_id, sf_type, is_active, data_a, data_b) SELECT g, t, 1, 0, 'xyz' FROM generate_series(1, {n}) g, generate_series(1, 2) t;
         INSERT INTO call_forwarding (s_id, sf_type, start_time, end_time, numberx)
             SELECT g, 1, 8, 16, lpad(g::text, 15, '0') FROM generate_series(1, {n}) g;"
    ))
    .unwrap();
}

/// The four tables as one write-through cache group, loaded.
pub fn cache(url: &str) {
    let mut c = postgres::Client::connect(url, postgres::NoTls).unwrap();
    c.batch_execute("CREATE AWT CACHE GROUP tatp FROM subscriber, access_info, special_facility, call_forwarding")
        .unwrap();
    c.batch_execute("LOAD CACHE GROUP tatp").unwrap();
}

/// The values one field may hold: one when every write to it was
/// acknowledged, more while a write of unknown outcome is undecided.
#[derive(Debug)]
struct Possible<T> {
    values: Vec<T>,
    /// When the last acknowledged value was acknowledged (or learnt).
    acked_at: Instant,
}

impl<T: PartialEq + Clone + std::fmt::Debug> Possible<T> {
    fn known(value: T) -> Possible<T> {
        Possible { values: vec![value], acked_at: Instant::now() }
    }

    fn acknowledged(&mut self, value: T) {
        self.values = vec![value];
        self.acked_at = Instant::now();
    }

    fn in_doubt(&mut self, value: T) {
        if !self.values.contains(&value) {
            self.values.push(value);
        }
    }

    fn certain(&self) -> Option<&T> {
        (self.values.len() == 1).then(|| &self.values[0])
    }

    /// Takes `actual` as decided; describes the loss when it is none of the
    /// possible values.
    fn observe(&mut self, actual: T, what: impl FnOnce() -> String) -> Option<Lost> {
        let lost = (!self.values.contains(&actual)).then(|| Lost {
            what: format!("{}: expected one of {:?}, found {actual:?}", what(), self.values),
            acked_at: self.acked_at,
        });
        self.values = vec![actual];
        lost
    }
}

/// A call forwarding row by (sf_type, start_time): absent, or its end time
/// and number.
type Forwarding = Option<(i16, String)>;

#[derive(Debug)]
struct Subscriber {
    bit_1: Possible<i16>,
    vlr_location: Possible<i64>,
    data_a: BTreeMap<i16, Possible<i16>>,
    forwarding: BTreeMap<(i16, i16), Possible<Forwarding>>,
}

/// An acknowledged write the rows lack.
#[derive(Debug)]
pub struct Lost {
    pub what: String,
    pub acked_at: Instant,
}

/// What one writer's subscribers must hold.
#[derive(Debug)]
pub struct Model {
    first: i32,
    subscribers: Vec<Subscriber>,
    /// Acknowledged writes found missing by the writer itself (a DELETE
    /// that found no row, an INSERT that found one).
    pub lost: Vec<Lost>,
    /// Reads whose answer contradicted a value the model was sure of.
    pub wrong_reads: Vec<String>,
}

impl Model {
    /// Writer `w`'s subscribers, as `c` holds them now.
    pub fn read(c: &mut postgres::Client, w: i32) -> Model {
        let first = w * SUBSCRIBERS_PER_WRITER + 1;
        let subscribers = (0..SUBSCRIBERS_PER_WRITER)
            .map(|_| Subscriber {
                bit_1: Possible::known(0),
                vlr_location: Possible::known(0),
                data_a: SF_TYPES.iter().map(|t| (*t, Possible::known(0))).collect(),
                forwarding: SF_TYPES
                    .iter()
                    .flat_map(|t| START_TIMES.iter().map(move |s| ((*t, *s), Possible::known(None))))
                    .collect(),
            })
            .collect();
        let mut model = Model { first, subscribers, lost: Vec::new(), wrong_reads: Vec::new() };
        model.verify(c);
        model
    }

    fn subscriber(&mut self, s_id: i32) -> &mut Subscriber {
        &mut self.subscribers[(s_id - self.first) as usize]
    }

    /// Reads every row of this writer's subscribers from `c` and returns the
    /// acknowledged writes they lack (none when the model agrees); the
    /// model then takes the rows as they are.
    pub fn verify(&mut self, c: &mut postgres::Client) -> Vec<Lost> {
        let (lo, hi) = (self.first, self.first + SUBSCRIBERS_PER_WRITER - 1);
        let mut lost = std::mem::take(&mut self.lost);
        for row in c
            .query("SELECT s_id, bit_1, vlr_location FROM subscriber WHERE s_id BETWEEN $1 AND $2", &[&lo, &hi])
            .unwrap()
        {
            let s_id: i32 = row.get(0);
            let sub = self.subscriber(s_id);
            lost.extend(sub.bit_1.observe(row.get(1), || format!("subscriber {s_id} bit_1")));
            lost.extend(sub.vlr_location.observe(row.get(2), || format!("subscriber {s_id} vlr_location")));
        }
        for row in c
            .query("SELECT s_id, sf_type, data_a FROM special_facility WHERE s_id BETWEEN $1 AND $2", &[&lo, &hi])
            .unwrap()
        {
            let (s_id, sf_type): (i32, i16) = (row.get(0), row.get(1));
            let field = self.subscriber(s_id).data_a.get_mut(&sf_type).expect("a populated special facility");
            lost.extend(field.observe(row.get(2), || format!("special_facility {s_id}/{sf_type} data_a")));
        }
        let mut present: BTreeMap<(i32, i16, i16), Forwarding> = BTreeMap::new();
        for row in c
            .query(
                "SELECT s_id, sf_type, start_time, end_time, numberx FROM call_forwarding WHERE s_id BETWEEN $1 AND $2",
                &[&lo, &hi],
            )
            .unwrap()
        {
            present.insert((row.get(0), row.get(1), row.get(2)), Some((row.get(3), row.get(4))));
        }
        for s_id in lo..=hi {
            for (&(sf_type, start), field) in &mut self.subscriber(s_id).forwarding {
                let actual = present.remove(&(s_id, sf_type, start)).unwrap_or(None);
                lost.extend(field.observe(actual, || format!("call_forwarding {s_id}/{sf_type}/{start}")));
            }
        }
        assert!(present.is_empty(), "call forwarding rows no writer could have made: {present:?}");
        lost
    }
}

/// Pauses, resumes and stops the writers; counts their acknowledged writes.
#[derive(Default)]
pub struct Control {
    stop: AtomicBool,
    pause: AtomicBool,
    paused: AtomicUsize,
    pub acked_writes: AtomicU64,
}

impl Control {
    /// Writers finish the transaction in flight, then wait.
    pub fn request_pause(&self) {
        self.pause.store(true, Ordering::SeqCst);
    }

    /// Returns once all `writers` wait.
    pub fn wait_paused(&self, writers: usize) {
        let deadline = Instant::now() + Duration::from_secs(60);
        while self.paused.load(Ordering::SeqCst) < writers {
            assert!(Instant::now() < deadline, "writers did not pause");
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    pub fn resume(&self) {
        self.pause.store(false, Ordering::SeqCst);
    }

    pub fn stop(&self) {
        self.stop.store(true, Ordering::SeqCst);
        self.resume();
    }

    /// Whether to go on; waits here while paused.
    fn proceed(&self) -> bool {
        if self.pause.load(Ordering::SeqCst) {
            self.paused.fetch_add(1, Ordering::SeqCst);
            while self.pause.load(Ordering::SeqCst) {
                std::thread::sleep(Duration::from_millis(2));
            }
            self.paused.fetch_sub(1, Ordering::SeqCst);
        }
        !self.stop.load(Ordering::SeqCst)
    }
}

/// A small deterministic generator (the bench's splitmix64).
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        splitmix64(self.0) % n
    }
}

/// Runs the TATP mix on writer `w`'s subscribers through `url` until
/// stopped, reconnecting after any error, keeping `model` current.
pub fn writer(url: String, w: i32, model: Arc<Mutex<Model>>, control: Arc<Control>) {
    let mut rng = Rng(w as u64 + 1);
    let mut seq: i64 = 0;
    let mut client: Option<postgres::Client> = None;
    while control.proceed() {
        let Some(c) = client.as_mut() else {
            client = postgres::Client::connect(&url, postgres::NoTls).ok();
            if client.is_none() {
                std::thread::sleep(Duration::from_millis(20));
            }
            continue;
        };
        let first = w * SUBSCRIBERS_PER_WRITER + 1;
        let s_id = first + rng.below(SUBSCRIBERS_PER_WRITER as u64) as i32;
        let txn = TxnType::from_percentile(rng.below(100) as u32);
        seq += 1;
        let mut m = model.lock().unwrap();
        let outcome = match txn {
            TxnType::GetSubscriberData => get_subscriber_data(c, s_id, &mut m),
            TxnType::GetNewDestination => {
                c.query(GET_NEW_DESTINATION, &[&s_id, &SF_TYPES[rng.below(2) as usize], &8i16, &9i16]).map(drop)
            }
            TxnType::GetAccessData => c.query(GET_ACCESS_DATA, &[&s_id, &(1 + rng.below(4) as i16)]).map(drop),
            TxnType::UpdateSubscriberData => {
                let (bit, data_a, sf_type) = (rng.below(2) as i16, rng.below(256) as i16, 1 + rng.below(4) as i16);
                update_subscriber_data(c, s_id, bit, data_a, sf_type, &mut m)
            }
            TxnType::UpdateLocation => {
                let location = (i64::from(w) << 32) | seq;
                update_location(c, s_id, location, &mut m)
            }
            TxnType::InsertCallForwarding => {
                let start = START_TIMES[rng.below(3) as usize];
                let row = (start + 1 + rng.below(8) as i16, format!("{w}-{seq}"));
                insert_call_forwarding(c, s_id, start, row, rng.below(2) as usize, &mut m)
            }
            TxnType::DeleteCallForwarding => {
                let key = (SF_TYPES[rng.below(2) as usize], START_TIMES[rng.below(3) as usize]);
                delete_call_forwarding(c, s_id, key, &mut m)
            }
        };
        drop(m);
        match outcome {
            Ok(()) => {
                if !matches!(txn, TxnType::GetSubscriberData | TxnType::GetNewDestination | TxnType::GetAccessData) {
                    control.acked_writes.fetch_add(1, Ordering::Relaxed);
                }
            }
            Err(_) => client = None,
        }
    }
}

fn get_subscriber_data(c: &mut postgres::Client, s_id: i32, m: &mut Model) -> Result<(), postgres::Error> {
    let row = c.query_one(GET_SUBSCRIBER_DATA, &[&s_id])?;
    let (bit_1, vlr): (i16, i64) = (row.get("bit_1"), row.get("vlr_location"));
    let sub = m.subscriber(s_id);
    let wrong =
        sub.bit_1.certain().is_some_and(|v| *v != bit_1) || sub.vlr_location.certain().is_some_and(|v| *v != vlr);
    if wrong {
        let read = format!(
            "GET_SUBSCRIBER_DATA {s_id}: bit_1 {bit_1} vlr {vlr}, expected {:?} {:?}",
            sub.bit_1.values, sub.vlr_location.values
        );
        m.wrong_reads.push(read);
    }
    Ok(())
}

fn update_subscriber_data(
    c: &mut postgres::Client,
    s_id: i32,
    bit: i16,
    data_a: i16,
    sf_type: i16,
    m: &mut Model,
) -> Result<(), postgres::Error> {
    let result = (|| {
        let mut tx = c.transaction()?;
        tx.execute(UPDATE_SUBSCRIBER_BIT, &[&bit, &s_id])?;
        let facilities = tx.execute(UPDATE_SPECIAL_FACILITY, &[&data_a, &s_id, &sf_type])?;
        tx.commit()?;
        Ok::<u64, postgres::Error>(facilities)
    })();
    let sub = m.subscriber(s_id);
    match &result {
        Ok(facilities) => {
            assert_eq!(*facilities, u64::from(SF_TYPES.contains(&sf_type)), "special facility {s_id}/{sf_type}");
            sub.bit_1.acknowledged(bit);
            if let Some(field) = sub.data_a.get_mut(&sf_type) {
                field.acknowledged(data_a);
            }
        }
        Err(_) => {
            sub.bit_1.in_doubt(bit);
            if let Some(field) = sub.data_a.get_mut(&sf_type) {
                field.in_doubt(data_a);
            }
        }
    }
    result.map(drop)
}

fn update_location(c: &mut postgres::Client, s_id: i32, location: i64, m: &mut Model) -> Result<(), postgres::Error> {
    let result = c.execute(UPDATE_LOCATION, &[&location, &sub_nbr(s_id as u64)]);
    let field = &mut m.subscriber(s_id).vlr_location;
    match &result {
        Ok(rows) => {
            assert_eq!(*rows, 1, "UPDATE_LOCATION {s_id}");
            field.acknowledged(location);
        }
        Err(_) => field.in_doubt(location),
    }
    result.map(drop)
}

/// TATP's INSERT_CALL_FORWARDING: the subscriber's facility types, then
/// the row for one of them. A unique violation is an accepted outcome (the
/// key exists); it is checked against the model by reading the row.
fn insert_call_forwarding(
    c: &mut postgres::Client,
    s_id: i32,
    start: i16,
    row: (i16, String),
    pick: usize,
    m: &mut Model,
) -> Result<(), postgres::Error> {
    let mut sf_type = 0;
    let result = (|| {
        let mut tx = c.transaction()?;
        let types: Vec<i16> = tx.query(SELECT_SF_TYPES, &[&s_id])?.iter().map(|r| r.get(0)).collect();
        sf_type = types[pick % types.len()];
        tx.execute(INSERT_CALL_FORWARDING, &[&s_id, &sf_type, &start, &row.0, &row.1])?;
        tx.commit()
    })();
    if sf_type == 0 {
        return result;
    }
    let key = (sf_type, start);
    match &result {
        Ok(()) => m.subscriber(s_id).forwarding.get_mut(&key).unwrap().acknowledged(Some(row)),
        Err(e) if e.code() == Some(&postgres::error::SqlState::UNIQUE_VIOLATION) => {
            let found = c.query_one(
                "SELECT end_time, numberx FROM call_forwarding WHERE s_id = $1 AND sf_type = $2 AND start_time = $3",
                &[&s_id, &sf_type, &start],
            )?;
            let field = m.subscriber(s_id).forwarding.get_mut(&key).unwrap();
            let lost = field.observe(Some((found.get(0), found.get(1))), || format!("call_forwarding {s_id}/{key:?}"));
            m.lost.extend(lost);
            return Ok(());
        }
        Err(_) => m.subscriber(s_id).forwarding.get_mut(&key).unwrap().in_doubt(Some(row)),
    }
    result
}

fn delete_call_forwarding(
    c: &mut postgres::Client,
    s_id: i32,
    key: (i16, i16),
    m: &mut Model,
) -> Result<(), postgres::Error> {
    let result = c.execute(DELETE_CALL_FORWARDING, &[&s_id, &key.0, &key.1]);
    let field = m.subscriber(s_id).forwarding.get_mut(&key).unwrap();
    match &result {
        Ok(deleted) => {
            // Whether a row was there is a read of the model's value.
            let was_present = *deleted == 1;
            if !field.values.iter().any(|v| v.is_some() == was_present) {
                let lost = Lost {
                    what: format!(
                        "call_forwarding {s_id}/{key:?}: DELETE found {deleted} rows, expected {:?}",
                        field.values
                    ),
                    acked_at: field.acked_at,
                };
                m.lost.push(lost);
            }
            m.subscriber(s_id).forwarding.get_mut(&key).unwrap().acknowledged(None);
        }
        Err(_) => field.in_doubt(None),
    }
    result.map(drop)
}

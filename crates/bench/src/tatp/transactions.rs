//! The seven TATP transactions (spec pp. 6–10, reference
//! `tr_mix_postgresql.sql`) written against [`Session`], so the same code
//! drives PostgreSQL, the pgtier server and the embedded engine.
//!
//! Error rules (spec pp. 6–7): "not found" is a valid execution; a unique
//! violation (23505) or foreign-key violation (23503) is an acceptable error —
//! rolled back, counted apart, excluded from MQTh and latency; any other
//! error is returned and stops the run.

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

use super::population::LOCATION_MAX;
use super::random::{NUMBER_DIGITS, SubscriberKeys, push_digits, start_time, write_zero_padded};
use crate::driver::{Outcome, WorkloadClient};
use crate::target::{DbError, Session, StatementId, Value};

/// Transaction types in report order; the index is the type id.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TxnType {
    GetSubscriberData,
    GetNewDestination,
    GetAccessData,
    UpdateSubscriberData,
    UpdateLocation,
    InsertCallForwarding,
    DeleteCallForwarding,
}

impl TxnType {
    pub const ALL: [TxnType; 7] = [
        TxnType::GetSubscriberData,
        TxnType::GetNewDestination,
        TxnType::GetAccessData,
        TxnType::UpdateSubscriberData,
        TxnType::UpdateLocation,
        TxnType::InsertCallForwarding,
        TxnType::DeleteCallForwarding,
    ];

    pub const NAMES: [&'static str; 7] = [
        "GET_SUBSCRIBER_DATA",
        "GET_NEW_DESTINATION",
        "GET_ACCESS_DATA",
        "UPDATE_SUBSCRIBER_DATA",
        "UPDATE_LOCATION",
        "INSERT_CALL_FORWARDING",
        "DELETE_CALL_FORWARDING",
    ];

    /// The default mix "tatp_mix_R80W20", in % (sums to 100).
    pub const MIX_PERCENT: [u32; 7] = [35, 10, 35, 2, 14, 2, 2];

    /// The spec's stated success probabilities. GET_NEW_DESTINATION's 23.9 %
    /// is inconsistent with the population rules (see
    /// [`super::derived_new_destination_success`]).
    pub const SPEC_SUCCESS: [f64; 7] = [1.0, 0.239, 0.625, 0.625, 1.0, 0.3125, 0.3125];

    pub fn name(self) -> &'static str {
        Self::NAMES[self as usize]
    }

    /// Maps a uniform draw in 0..100 onto the mix.
    pub fn from_percentile(p: u32) -> TxnType {
        let mut acc = 0;
        for (t, share) in Self::ALL.iter().zip(Self::MIX_PERCENT) {
            acc += share;
            if p < acc {
                return *t;
            }
        }
        TxnType::DeleteCallForwarding
    }
}

/// Which transactions a client draws.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Mix {
    /// The spec's "tatp_mix_R80W20" ([`TxnType::MIX_PERCENT`]).
    #[default]
    Standard,
    /// Only the three read transactions, in their standard proportions
    /// (35/10/35 of 80): for targets whose writes would make them diverge
    /// from a reference copy (a cache group before write-through).
    ReadOnly,
    /// Only the two updates by key, in their standard proportions (2/14 of
    /// 16): study 002's random-update load (write-back against clean flash).
    Updates,
}

impl Mix {
    /// Draws for [`TxnType::from_percentile`] come from this range: the read
    /// transactions lead the mix and the two updates follow them, so cutting
    /// the standard range keeps their proportions and the standard mix's
    /// draws unchanged.
    fn percentiles(self) -> std::ops::Range<u32> {
        let reads: u32 = TxnType::MIX_PERCENT[..3].iter().sum();
        match self {
            Mix::Standard => 0..100,
            Mix::ReadOnly => 0..reads,
            Mix::Updates => reads..reads + TxnType::MIX_PERCENT[3..5].iter().sum::<u32>(),
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Mix::Standard => "35/10/35/2/14/2/2 (GSD/GND/GAD/USD/UL/ICF/DCF)",
            Mix::ReadOnly => "read-only 35/10/35 of 80 (GSD/GND/GAD)",
            Mix::Updates => "updates 2/14 of 16 (USD/UL)",
        }
    }
}

pub const GET_SUBSCRIBER_DATA: &str = "SELECT s_id, sub_nbr, \
     bit_1, bit_2, bit_3, bit_4, bit_5, bit_6, bit_7, bit_8, bit_9, bit_10, \
     hex_1, hex_2, hex_3, hex_4, hex_5, hex_6, hex_7, hex_8, hex_9, hex_10, \
     byte2_1, byte2_2, byte2_3, byte2_4, byte2_5, byte2_6, byte2_7, byte2_8, byte2_9, byte2_10, \
     msc_location, vlr_location \
     FROM subscriber WHERE s_id = $1";
pub const GET_NEW_DESTINATION: &str = "SELECT cf.numberx \
     FROM special_facility AS sf, call_forwarding AS cf \
     WHERE (sf.s_id = $1 AND sf.sf_type = $2 AND sf.is_active = 1) \
     AND (cf.s_id = sf.s_id AND cf.sf_type = sf.sf_type) \
     AND (cf.start_time <= $3 AND $4 < cf.end_time)";
pub const GET_ACCESS_DATA: &str = "SELECT data1, data2, data3, data4 FROM access_info WHERE s_id = $1 AND ai_type = $2";
pub const UPDATE_SUBSCRIBER_BIT: &str = "UPDATE subscriber SET bit_1 = $1 WHERE s_id = $2";
pub const UPDATE_SPECIAL_FACILITY: &str = "UPDATE special_facility SET data_a = $1 WHERE s_id = $2 AND sf_type = $3";
pub const UPDATE_LOCATION: &str = "UPDATE subscriber SET vlr_location = $1 WHERE sub_nbr = $2";
pub const SELECT_S_ID: &str = "SELECT s_id FROM subscriber WHERE sub_nbr = $1";
pub const SELECT_SF_TYPES: &str = "SELECT sf_type FROM special_facility WHERE s_id = $1";
pub const INSERT_CALL_FORWARDING: &str = "INSERT INTO call_forwarding VALUES ($1, $2, $3, $4, $5)";
pub const DELETE_CALL_FORWARDING: &str =
    "DELETE FROM call_forwarding WHERE s_id = $1 AND sf_type = $2 AND start_time = $3";

/// SQLSTATEs the spec accepts: unique violation (INSERT_CALL_FORWARDING on an
/// existing key) and foreign-key violation (its random sf_type may not exist).
pub const ACCEPTABLE_SQLSTATES: [&str; 2] = ["23505", "23503"];

pub fn is_acceptable(e: &DbError) -> bool {
    ACCEPTABLE_SQLSTATES.iter().any(|code| e.sqlstate_is(code))
}

struct Statements {
    get_subscriber_data: StatementId,
    get_new_destination: StatementId,
    get_access_data: StatementId,
    update_subscriber_bit: StatementId,
    update_special_facility: StatementId,
    update_location: StatementId,
    select_s_id: StatementId,
    select_sf_types: StatementId,
    insert_call_forwarding: StatementId,
    delete_call_forwarding: StatementId,
}

impl Statements {
    fn prepare(session: &mut dyn Session) -> Result<Statements, DbError> {
        Ok(Statements {
            get_subscriber_data: session.prepare(GET_SUBSCRIBER_DATA)?,
            get_new_destination: session.prepare(GET_NEW_DESTINATION)?,
            get_access_data: session.prepare(GET_ACCESS_DATA)?,
            update_subscriber_bit: session.prepare(UPDATE_SUBSCRIBER_BIT)?,
            update_special_facility: session.prepare(UPDATE_SPECIAL_FACILITY)?,
            update_location: session.prepare(UPDATE_LOCATION)?,
            select_s_id: session.prepare(SELECT_S_ID)?,
            select_sf_types: session.prepare(SELECT_SF_TYPES)?,
            insert_call_forwarding: session.prepare(INSERT_CALL_FORWARDING)?,
            delete_call_forwarding: session.prepare(DELETE_CALL_FORWARDING)?,
        })
    }
}

/// Parameter slots reused across transactions: the hot loop writes integers
/// in place and rewrites the text slots' existing buffers, so running a
/// transaction allocates nothing on the client side for its parameters.
struct Params {
    slots: [Value; 5],
}

impl Params {
    fn new() -> Params {
        Params { slots: std::array::from_fn(|_| Value::Int(0)) }
    }

    fn int(&mut self, i: usize, v: i64) -> &mut Params {
        self.slots[i] = Value::Int(v);
        self
    }

    /// Sets slot `i` to text, reusing its buffer if it already holds one.
    fn text_with(&mut self, i: usize, fill: impl FnOnce(&mut String)) -> &mut Params {
        if !matches!(self.slots[i], Value::Text(_)) {
            self.slots[i] = Value::Text(String::with_capacity(NUMBER_DIGITS));
        }
        if let Value::Text(s) = &mut self.slots[i] {
            s.clear();
            fill(s);
        }
        self
    }

    fn sub_nbr(&mut self, i: usize, s_id: u64) -> &mut Params {
        self.text_with(i, |s| write_zero_padded(s, s_id, NUMBER_DIGITS))
    }

    fn get(&self, n: usize) -> &[Value] {
        &self.slots[..n]
    }
}

/// One node of a routed run (pgtier's node partitions): the subscribers
/// with `lo <= s_id < hi` (None: unbounded) go to `session`.
pub struct Route {
    pub lo: Option<i64>,
    pub hi: Option<i64>,
    pub session: Box<dyn Session>,
}

/// A route of a client: its range, and its session and statements while
/// another route's are in use.
struct Parked {
    lo: Option<i64>,
    hi: Option<i64>,
    slot: Option<(Box<dyn Session>, Statements)>,
}

impl Parked {
    fn owns(&self, s_id: i64) -> bool {
        self.lo.is_none_or(|lo| s_id >= lo) && self.hi.is_none_or(|hi| s_id < hi)
    }
}

/// One worker's TATP client: its session, prepared statements and random
/// stream; routed, one session per node and each transaction sent to the
/// node owning its subscriber, as study 000's application did.
pub struct TatpClient {
    /// The session in use (routed: the current route's, whose own slot is empty).
    session: Box<dyn Session>,
    statements: Statements,
    /// Routed runs: every node's range, with its session and statements
    /// while another's is in use; empty otherwise.
    routes: Vec<Parked>,
    current: usize,
    /// The subscriber a routed transaction was sent for, drawn before it began.
    pending: Option<u64>,
    keys: SubscriberKeys,
    rng: SmallRng,
    params: Params,
    /// Result rows of the last query (reused buffer).
    out: Vec<Value>,
    /// Parameters kept across the statements of one transaction.
    second: Params,
    /// [`Mix::percentiles`] of the client's mix.
    percentiles: std::ops::Range<u32>,
}

impl TatpClient {
    pub fn new(mut session: Box<dyn Session>, keys: SubscriberKeys, seed: u64) -> Result<TatpClient, DbError> {
        let statements = Statements::prepare(session.as_mut())?;
        Ok(TatpClient::from_parts(session, statements, keys, seed))
    }

    /// A client routing each transaction to the route owning its subscriber.
    pub fn routed(mut routes: Vec<Route>, keys: SubscriberKeys, seed: u64) -> Result<TatpClient, DbError> {
        let mut parked = Vec::with_capacity(routes.len());
        for mut route in routes.drain(..) {
            let statements = Statements::prepare(route.session.as_mut())?;
            parked.push(Parked { lo: route.lo, hi: route.hi, slot: Some((route.session, statements)) });
        }
        let Some((session, statements)) = parked.first_mut().and_then(|p| p.slot.take()) else {
            return Err(DbError::new(None, "a routed TATP client needs at least one node"));
        };
        let mut client = TatpClient::from_parts(session, statements, keys, seed);
        client.routes = parked;
        Ok(client)
    }

    fn from_parts(session: Box<dyn Session>, statements: Statements, keys: SubscriberKeys, seed: u64) -> TatpClient {
        TatpClient {
            session,
            statements,
            routes: Vec::new(),
            current: 0,
            pending: None,
            keys,
            rng: SmallRng::seed_from_u64(seed),
            params: Params::new(),
            out: Vec::with_capacity(34),
            second: Params::new(),
            percentiles: Mix::Standard.percentiles(),
        }
    }

    /// Routed: draws the next transaction's subscriber and puts the session
    /// of the node owning it in use.
    fn route_next(&mut self) -> Result<(), DbError> {
        let s_id = self.keys.next(&mut self.rng);
        self.pending = Some(s_id);
        let key = s_id as i64;
        let Some(to) = self.routes.iter().position(|route| route.owns(key)) else {
            return Err(DbError::new(None, format!("no node of the partition map owns s_id {s_id}")));
        };
        if to != self.current {
            let (session, statements) =
                self.routes[to].slot.take().ok_or_else(|| DbError::new(None, "a route without its session"))?;
            let old =
                (std::mem::replace(&mut self.session, session), std::mem::replace(&mut self.statements, statements));
            self.routes[self.current].slot = Some(old);
            self.current = to;
        }
        Ok(())
    }

    /// Draws transactions from `mix` instead of the standard mix.
    pub fn with_mix(mut self, mix: Mix) -> TatpClient {
        self.percentiles = mix.percentiles();
        self
    }

    /// Runs one transaction of `kind` with fresh random inputs.
    pub fn run(&mut self, kind: TxnType) -> Result<Outcome, DbError> {
        if !self.routes.is_empty() {
            self.route_next()?;
        }
        match kind {
            TxnType::GetSubscriberData => self.get_subscriber_data(),
            TxnType::GetNewDestination => self.get_new_destination(),
            TxnType::GetAccessData => self.get_access_data(),
            TxnType::UpdateSubscriberData => self.in_transaction(Self::update_subscriber_data),
            TxnType::UpdateLocation => self.update_location(),
            TxnType::InsertCallForwarding => self.in_transaction(Self::insert_call_forwarding),
            TxnType::DeleteCallForwarding => self.in_transaction(Self::delete_call_forwarding),
        }
    }

    fn s_id(&mut self) -> u64 {
        match self.pending.take() {
            Some(s_id) => s_id,
            None => self.keys.next(&mut self.rng),
        }
    }

    fn found_if(rows: u64) -> Outcome {
        if rows > 0 { Outcome::Found } else { Outcome::NotFound }
    }

    fn get_subscriber_data(&mut self) -> Result<Outcome, DbError> {
        let s_id = self.s_id();
        self.params.int(0, s_id as i64);
        let rows = self.session.query(self.statements.get_subscriber_data, self.params.get(1), &mut self.out)?;
        Ok(Self::found_if(rows as u64))
    }

    fn get_new_destination(&mut self) -> Result<Outcome, DbError> {
        let s_id = self.s_id();
        let sf_type = self.rng.random_range(1..=4);
        let start = start_time(&mut self.rng);
        let end = self.rng.random_range(1..=24);
        self.params.int(0, s_id as i64).int(1, sf_type).int(2, start).int(3, end);
        let rows = self.session.query(self.statements.get_new_destination, self.params.get(4), &mut self.out)?;
        Ok(Self::found_if(rows as u64))
    }

    fn get_access_data(&mut self) -> Result<Outcome, DbError> {
        let s_id = self.s_id();
        let ai_type = self.rng.random_range(1..=4);
        self.params.int(0, s_id as i64).int(1, ai_type);
        let rows = self.session.query(self.statements.get_access_data, self.params.get(2), &mut self.out)?;
        Ok(Self::found_if(rows as u64))
    }

    fn update_location(&mut self) -> Result<Outcome, DbError> {
        let s_id = self.s_id();
        let location = self.rng.random_range(1..=LOCATION_MAX);
        self.params.int(0, location).sub_nbr(1, s_id);
        let rows = self.session.execute(self.statements.update_location, self.params.get(2))?;
        Ok(Self::found_if(rows))
    }

    /// BEGIN; body; COMMIT — or ROLLBACK when the body fails. An acceptable
    /// error becomes [`Outcome::AcceptableError`]; others are returned.
    fn in_transaction(&mut self, body: fn(&mut Self) -> Result<Outcome, DbError>) -> Result<Outcome, DbError> {
        self.session.begin()?;
        match body(self) {
            Ok(outcome) => {
                self.session.commit()?;
                Ok(outcome)
            }
            Err(e) => {
                self.session.rollback()?;
                if is_acceptable(&e) { Ok(Outcome::AcceptableError) } else { Err(e) }
            }
        }
    }

    fn update_subscriber_data(&mut self) -> Result<Outcome, DbError> {
        let s_id = self.s_id() as i64;
        let bit = self.rng.random_range(0..=1);
        let data_a = self.rng.random_range(0..=255);
        let sf_type = self.rng.random_range(1..=4);
        self.params.int(0, bit).int(1, s_id);
        self.session.execute(self.statements.update_subscriber_bit, self.params.get(2))?;
        self.params.int(0, data_a).int(1, s_id).int(2, sf_type);
        let rows = self.session.execute(self.statements.update_special_facility, self.params.get(3))?;
        // The spec's 62.5 %: the facility row exists.
        Ok(Self::found_if(rows))
    }

    /// `SELECT s_id FROM subscriber WHERE sub_nbr = ?` for a random subscriber.
    fn s_id_by_sub_nbr(&mut self) -> Result<Option<i64>, DbError> {
        let s_id = self.s_id();
        self.params.sub_nbr(0, s_id);
        let rows = self.session.query(self.statements.select_s_id, self.params.get(1), &mut self.out)?;
        match (rows, self.out.first()) {
            (1, Some(Value::Int(id))) => Ok(Some(*id)),
            (0, _) => Ok(None),
            _ => Err(DbError::new(None, format!("sub_nbr lookup returned {rows} rows, expected at most 1"))),
        }
    }

    fn insert_call_forwarding(&mut self) -> Result<Outcome, DbError> {
        let Some(s_id) = self.s_id_by_sub_nbr()? else { return Ok(Outcome::NotFound) };
        self.params.int(0, s_id);
        self.session.query(self.statements.select_sf_types, self.params.get(1), &mut self.out)?;
        let sf_type = self.rng.random_range(1..=4);
        let start = start_time(&mut self.rng);
        let end = self.rng.random_range(1..=24);
        let rng = &mut self.rng;
        self.second.int(0, s_id).int(1, sf_type).int(2, start).int(3, end);
        self.second.text_with(4, |s| push_digits(s, rng, NUMBER_DIGITS));
        let rows = self.session.execute(self.statements.insert_call_forwarding, self.second.get(5))?;
        Ok(Self::found_if(rows))
    }

    fn delete_call_forwarding(&mut self) -> Result<Outcome, DbError> {
        let Some(s_id) = self.s_id_by_sub_nbr()? else { return Ok(Outcome::NotFound) };
        let sf_type = self.rng.random_range(1..=4);
        let start = start_time(&mut self.rng);
        self.params.int(0, s_id).int(1, sf_type).int(2, start);
        let rows = self.session.execute(self.statements.delete_call_forwarding, self.params.get(3))?;
        Ok(Self::found_if(rows))
    }
}

impl WorkloadClient for TatpClient {
    fn run_next(&mut self) -> Result<(usize, Outcome), DbError> {
        let kind = TxnType::from_percentile(self.rng.random_range(self.percentiles.clone()));
        Ok((kind as usize, self.run(kind)?))
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn mix_maps_percentiles_to_the_spec_shares() {
        let mut counts = [0u32; 7];
        for p in 0..100 {
            counts[TxnType::from_percentile(p) as usize] += 1;
        }
        assert_eq!(counts, TxnType::MIX_PERCENT);
        assert_eq!(TxnType::MIX_PERCENT.iter().sum::<u32>(), 100);
    }

    #[test]
    fn read_only_mix_draws_reads_in_their_proportions() {
        let mut counts = [0u32; 7];
        for p in Mix::ReadOnly.percentiles() {
            counts[TxnType::from_percentile(p) as usize] += 1;
        }
        assert_eq!(counts, [35, 10, 35, 0, 0, 0, 0]);
        assert_eq!(Mix::Standard.percentiles(), 0..100);
    }

    #[test]
    fn updates_mix_draws_the_two_updates_in_their_proportions() {
        let mut counts = [0u32; 7];
        for p in Mix::Updates.percentiles() {
            counts[TxnType::from_percentile(p) as usize] += 1;
        }
        assert_eq!(counts, [0, 0, 0, 2, 14, 0, 0]);
    }

    #[test]
    fn params_reuse_text_buffers() {
        let mut p = Params::new();
        p.sub_nbr(1, 42);
        let ptr = match &p.slots[1] {
            Value::Text(s) => s.as_ptr(),
            _ => unreachable!(),
        };
        p.sub_nbr(1, 43);
        match &p.slots[1] {
            Value::Text(s) => {
                assert_eq!(s, "000000000000043");
                assert_eq!(s.as_ptr(), ptr, "buffer reused");
            }
            _ => unreachable!(),
        }
    }

    #[test]
    fn acceptable_errors_are_unique_and_fk_violations_only() {
        assert!(is_acceptable(&DbError::new(Some("23505"), "dup")));
        assert!(is_acceptable(&DbError::new(Some("23503"), "fk")));
        assert!(!is_acceptable(&DbError::new(Some("40P01"), "deadlock")));
        assert!(!is_acceptable(&DbError::new(None, "connection lost")));
    }
}

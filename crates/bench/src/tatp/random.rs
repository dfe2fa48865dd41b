//! TATP's random inputs (spec p. 11, reference client `random.c`):
//! NURand subscriber keys, A–Z strings, digit strings, per-subscriber seeds.

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

/// The spec's A for NURand, chosen by the size of the targeted id range
/// (reference client `client.c`: `max_subs_id - min_subs_id + 1`).
pub fn nurand_a(range_size: u64) -> u64 {
    match range_size {
        0..=1_000_000 => 65_535,
        1_000_001..=10_000_000 => 1_048_575,
        _ => 2_097_151,
    }
}

/// `NURand(A, x, y) = ((random(0, A) | random(x, y)) % (y − x + 1)) + x`.
pub fn nurand(rng: &mut SmallRng, a: u64, x: u64, y: u64) -> u64 {
    debug_assert!(x <= y);
    ((rng.random_range(0..=a) | rng.random_range(x..=y)) % (y - x + 1)) + x
}

/// Picks the subscriber ids transactions target: NURand over `[min, max]`
/// (the spec default) or uniform (a labelled option; results under different
/// distributions are not comparable).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SubscriberKeys {
    pub min_id: u64,
    pub max_id: u64,
    /// `None` = uniform.
    pub nurand_a: Option<u64>,
}

impl SubscriberKeys {
    pub fn new(min_id: u64, max_id: u64, uniform: bool) -> SubscriberKeys {
        assert!(1 <= min_id && min_id <= max_id, "subscriber id range [{min_id}, {max_id}] is empty");
        let nurand_a = if uniform { None } else { Some(nurand_a(max_id - min_id + 1)) };
        SubscriberKeys { min_id, max_id, nurand_a }
    }

    pub fn next(&self, rng: &mut SmallRng) -> u64 {
        match self.nurand_a {
            Some(a) => nurand(rng, a, self.min_id, self.max_id),
            None => rng.random_range(self.min_id..=self.max_id),
        }
    }

    /// The share of `draws` keys that fall on the hottest `fraction` of the
    /// range, for each fraction: how skewed the clients' keys are (NURand
    /// favours ids with many low bits set, which lie all over the range).
    pub fn hottest_shares(&self, fractions: &[f64], draws: u64, seed: u64) -> Vec<f64> {
        assert!(draws > 0, "no draws");
        let range = (self.max_id - self.min_id + 1) as usize;
        let mut counts = vec![0u32; range];
        let mut rng = SmallRng::seed_from_u64(seed);
        for _ in 0..draws {
            counts[(self.next(&mut rng) - self.min_id) as usize] += 1;
        }
        counts.sort_unstable_by(|a, b| b.cmp(a));
        fractions
            .iter()
            .map(|fraction| {
                let hottest = ((range as f64 * fraction.clamp(0.0, 1.0)) as usize).min(range);
                counts[..hottest].iter().map(|&c| u64::from(c)).sum::<u64>() as f64 / draws as f64
            })
            .collect()
    }

    pub fn describe(&self) -> String {
        match self.nurand_a {
            Some(a) => format!("NURand(A={a}, {}, {})", self.min_id, self.max_id),
            None => format!("uniform [{}, {}]", self.min_id, self.max_id),
        }
    }
}

/// Length of `sub_nbr` and `numberx`.
pub const NUMBER_DIGITS: usize = 15;

/// Writes `value` as decimal, left-padded with zeros to `width` digits
/// (`sub_nbr` = s_id as 15 digits). Reuses `out`'s allocation.
pub fn write_zero_padded(out: &mut String, value: u64, width: usize) {
    let mut digits = [b'0'; 20];
    let mut n = value;
    let mut i = digits.len();
    loop {
        i -= 1;
        digits[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    let len = digits.len() - i;
    for _ in len..width {
        out.push('0');
    }
    for &d in &digits[i..] {
        out.push(char::from(d));
    }
}

pub fn sub_nbr(s_id: u64) -> String {
    let mut s = String::with_capacity(NUMBER_DIGITS);
    write_zero_padded(&mut s, s_id, NUMBER_DIGITS);
    s
}

/// Appends `len` random letters A–Z.
pub fn push_letters(out: &mut String, rng: &mut SmallRng, len: usize) {
    for _ in 0..len {
        out.push(char::from(b'A' + rng.random_range(0..26u8)));
    }
}

/// Appends `len` random decimal digits (`numberx`: a random 15-digit string).
pub fn push_digits(out: &mut String, rng: &mut SmallRng, len: usize) {
    for _ in 0..len {
        out.push(char::from(b'0' + rng.random_range(0..10u8)));
    }
}

/// The start times a CALL_FORWARDING row may have.
pub const START_TIMES: [i64; 3] = [0, 8, 16];

pub fn start_time(rng: &mut SmallRng) -> i64 {
    START_TIMES[rng.random_range(0..START_TIMES.len())]
}

/// An independent generator per (purpose, subscriber): population streams
/// that load different tables regenerate exactly the same SPECIAL_FACILITY
/// rows, so CALL_FORWARDING always references rows that exist.
pub fn subscriber_rng(seed: u64, purpose: u64, s_id: u64) -> SmallRng {
    SmallRng::seed_from_u64(splitmix64(seed ^ splitmix64(purpose ^ splitmix64(s_id))))
}

/// SplitMix64 finaliser: spreads nearby inputs (consecutive s_id) over the
/// whole seed space.
pub fn splitmix64(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn nurand_keys_are_skewed_and_uniform_ones_are_not() {
        let fractions = [0.1, 0.5, 1.0];
        let uniform = SubscriberKeys::new(1, 100_000, true).hottest_shares(&fractions, 1_000_000, 7);
        let nurand = SubscriberKeys::new(1, 100_000, false).hottest_shares(&fractions, 1_000_000, 7);
        // Uniform: the hottest tenth draws little more than a tenth (sampling noise makes some keys hotter).
        assert!(uniform[0] > 0.1 && uniform[0] < 0.2, "{uniform:?}");
        assert!(nurand[0] > 0.5, "{nurand:?}");
        assert!(nurand[0] > uniform[0] && nurand[1] > uniform[1], "{nurand:?} vs {uniform:?}");
        assert!((uniform[2] - 1.0).abs() < 1e-12 && (nurand[2] - 1.0).abs() < 1e-12);
    }

    #[test]
    fn a_follows_the_spec_table() {
        assert_eq!(nurand_a(1), 65_535);
        assert_eq!(nurand_a(1_000_000), 65_535);
        assert_eq!(nurand_a(1_000_001), 1_048_575);
        assert_eq!(nurand_a(10_000_000), 1_048_575);
        assert_eq!(nurand_a(10_000_001), 2_097_151);
    }

    #[test]
    fn nurand_stays_in_bounds_and_is_skewed() {
        let mut rng = SmallRng::seed_from_u64(7);
        let keys = SubscriberKeys::new(1001, 2000, false);
        let mut hits = vec![0u32; 1000];
        for _ in 0..200_000 {
            let id = keys.next(&mut rng);
            assert!((1001..=2000).contains(&id), "{id} out of range");
            hits[(id - 1001) as usize] += 1;
        }
        assert!(hits.iter().all(|&h| h > 0), "every id reachable");
        // OR with a 16-bit mask favours ids whose bits are set: the hottest
        // key gets several times the uniform share (200 per key).
        let max = *hits.iter().max().unwrap();
        let min = *hits.iter().min().unwrap();
        assert!(max > 3 * min, "non-uniform: max {max}, min {min}");
    }

    #[test]
    fn uniform_covers_range_evenly() {
        let mut rng = SmallRng::seed_from_u64(9);
        let keys = SubscriberKeys::new(1, 100, true);
        assert_eq!(keys.nurand_a, None);
        let mut hits = [0u32; 100];
        for _ in 0..100_000 {
            let id = keys.next(&mut rng);
            assert!((1..=100).contains(&id));
            hits[(id - 1) as usize] += 1;
        }
        assert!(hits.iter().all(|&h| (800..1200).contains(&h)), "{hits:?}");
    }

    #[test]
    fn nurand_single_key_range() {
        let mut rng = SmallRng::seed_from_u64(1);
        let keys = SubscriberKeys::new(5, 5, false);
        for _ in 0..100 {
            assert_eq!(keys.next(&mut rng), 5);
        }
    }

    #[test]
    fn sub_nbr_is_15_zero_padded_digits() {
        assert_eq!(sub_nbr(123), "000000000000123");
        assert_eq!(sub_nbr(0), "000000000000000");
        assert_eq!(sub_nbr(999_999_999_999_999), "999999999999999");
        let mut s = String::from("stale");
        s.clear();
        write_zero_padded(&mut s, 42, 5);
        assert_eq!(s, "00042");
    }

    #[test]
    fn strings_have_the_right_alphabet() {
        let mut rng = SmallRng::seed_from_u64(3);
        let mut s = String::new();
        push_letters(&mut s, &mut rng, 1000);
        assert!(s.bytes().all(|b| b.is_ascii_uppercase()));
        s.clear();
        push_digits(&mut s, &mut rng, 15);
        assert_eq!(s.len(), 15);
        assert!(s.bytes().all(|b| b.is_ascii_digit()));
    }

    #[test]
    fn subscriber_rng_is_reproducible_and_distinct() {
        let a: u64 = subscriber_rng(1, 2, 3).random();
        let b: u64 = subscriber_rng(1, 2, 3).random();
        let c: u64 = subscriber_rng(1, 2, 4).random();
        assert_eq!(a, b);
        assert_ne!(a, c);
    }
}

//! `IdHashing`: how the memory store's maps hash a record id.
//!
//! An id is already a SHA-256 digest, so SipHash's work over its 32 bytes
//! buys nothing: a seeded multiply-fold of its words spreads it as well, at
//! a fraction of the cost. The seed is random per map, so that a client who
//! grinds keys cannot aim them at one bucket.

use std::hash::{BuildHasher, Hasher, RandomState};

/// A multiplier with no structure to it (the fractional digits of pi).
const MULTIPLIER: u64 = 0x243f_6a88_85a3_08d3;

/// Builds [`IdHasher`]s with this map's seed.
#[derive(Clone, Debug)]
pub(crate) struct IdHashing {
    seed: u64,
}

impl Default for IdHashing {
    fn default() -> Self {
        Self {
            seed: RandomState::new().hash_one(0_u64),
        }
    }
}

impl BuildHasher for IdHashing {
    type Hasher = IdHasher;

    fn build_hasher(&self) -> IdHasher {
        IdHasher(self.seed)
    }
}

/// Folds each 8-byte word of what it is given into its state.
pub(crate) struct IdHasher(u64);

impl Hasher for IdHasher {
    fn write(&mut self, bytes: &[u8]) {
        for chunk in bytes.chunks(8) {
            let mut word = [0_u8; 8];
            word[..chunk.len()].copy_from_slice(chunk);
            self.0 = fold(self.0 ^ u64::from_le_bytes(word), MULTIPLIER);
        }
    }

    fn finish(&self) -> u64 {
        self.0
    }
}

/// The full 128-bit product, its halves folded together: every bit of
/// either factor reaches every bit of the result.
#[allow(clippy::cast_possible_truncation)] // each half, on purpose
fn fold(a: u64, b: u64) -> u64 {
    let product = u128::from(a) * u128::from(b);
    let [lo, hi] = [product, product >> 64].map(|half| half as u64);
    lo ^ hi
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;
    use std::hash::BuildHasher;

    use super::*;
    use crate::key::{IdempotencyKey, RecordId, Scope};

    fn id(n: usize) -> RecordId {
        RecordId::new(
            &Scope::new("s"),
            &IdempotencyKey::parse(&format!("k-{n}")).expect("key"),
        )
    }

    #[test]
    fn ids_of_one_shard_spread_over_the_buckets() {
        // The store picks a record's shard from the id's first bytes: the
        // map's buckets must not be picked from the same bits, or a shard's
        // records would crowd into a 64th of its buckets.
        let hashing = IdHashing::default();
        let in_shard_0: Vec<RecordId> = (0..200_000)
            .map(id)
            .filter(|id| u64::from_le_bytes(id.as_bytes()[..8].try_into().unwrap()) % 64 == 0)
            .collect();
        let buckets: HashSet<u64> = in_shard_0
            .iter()
            .map(|id| hashing.hash_one(id) & 1023)
            .collect();
        assert!(
            buckets.len() > 900,
            "{} of 1024 buckets used by {} ids",
            buckets.len(),
            in_shard_0.len()
        );
    }

    #[test]
    fn the_seed_differs_per_map() {
        let (a, b) = (IdHashing::default(), IdHashing::default());
        assert_ne!(a.hash_one(id(1)), b.hash_one(id(1)));
        assert_eq!(a.hash_one(id(1)), a.hash_one(id(1)));
    }
}

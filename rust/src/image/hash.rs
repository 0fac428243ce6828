//! The hash of the image's maps that are looked up once per replayed record (topics by id,
//! partitions by id): a folded multiply over 8-byte words, seeded per map from the standard
//! library's random keys. Several times cheaper than SipHash on these small keys; the seed and
//! the fold (the high half of each 128-bit product mixed into the low one) keep crafted keys
//! from piling into one bucket.

use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hasher};

const K: u64 = 0x9E37_79B9_7F4A_7C15;

#[inline]
fn fold_mul(a: u64, b: u64) -> u64 {
    let p = (a as u128).wrapping_mul(b as u128);
    (p as u64) ^ ((p >> 64) as u64)
}

/// Builds [`WordHasher`]s with a seed drawn once per map.
#[derive(Clone, Debug)]
pub struct WordHash {
    seed: u64,
}

impl Default for WordHash {
    fn default() -> Self {
        let mut h = RandomState::new().build_hasher();
        h.write_u64(K);
        WordHash { seed: h.finish() | 1 }
    }
}

impl BuildHasher for WordHash {
    type Hasher = WordHasher;
    #[inline]
    fn build_hasher(&self) -> WordHasher {
        WordHasher { state: self.seed }
    }
}

/// See the module documentation.
#[derive(Clone, Debug)]
pub struct WordHasher {
    state: u64,
}

impl Hasher for WordHasher {
    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for c in &mut chunks {
            let mut w = [0u8; 8];
            w.copy_from_slice(c);
            self.write_u64(u64::from_le_bytes(w));
        }
        let rest = chunks.remainder();
        if !rest.is_empty() {
            let mut w = [0u8; 8];
            w[..rest.len()].copy_from_slice(rest);
            self.write_u64(u64::from_le_bytes(w) ^ ((rest.len() as u64) << 56));
        }
    }
    #[inline]
    fn write_u64(&mut self, x: u64) {
        self.state = fold_mul(self.state ^ x, K);
    }
    #[inline]
    fn write_i64(&mut self, x: i64) {
        self.write_u64(x as u64);
    }
    #[inline]
    fn write_usize(&mut self, x: usize) {
        self.write_u64(x as u64);
    }
    #[inline]
    fn finish(&self) -> u64 {
        fold_mul(self.state, self.state ^ K)
    }
}

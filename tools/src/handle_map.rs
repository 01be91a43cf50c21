//! Maps keyed by MPI handles (requests, matched messages): a dashmap with a hasher made for small
//! integers.
use dashmap::DashMap;
use std::os::raw::c_int;

/// Handles are small integers: a multiplicative hash is enough (and much cheaper than SipHash on the
/// request path of the checking mode).
#[derive(Default, Clone, Copy)]
pub struct HandleHasher(u64);

impl std::hash::Hasher for HandleHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0.rotate_left(8) ^ b as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        }
    }
    fn write_i32(&mut self, v: i32) {
        self.0 = ((v as u32 as u64) ^ (self.0 << 32)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }
}

pub type HandleMap<V> = DashMap<c_int, V, std::hash::BuildHasherDefault<HandleHasher>>;

#[cfg(test)]
mod tests {
    use super::*;
    use std::hash::{BuildHasher, BuildHasherDefault};

    #[test]
    fn handle_hasher_spreads_consecutive_handles() {
        let b = BuildHasherDefault::<HandleHasher>::default();
        let hashes: std::collections::HashSet<u64> = (0..1000).map(|i| b.hash_one(0xac00_0000u32 as i32 + i)).collect();
        assert_eq!(hashes.len(), 1000);
        // The top bits (dashmap picks shards with them) differ too.
        let shards: std::collections::HashSet<u64> =
            (0..64).map(|i| b.hash_one(0xac00_0000u32 as i32 + i) >> 60).collect();
        assert!(shards.len() > 4);
    }
}

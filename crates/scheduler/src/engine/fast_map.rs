//! The engine's hash map for small integer keys.

use std::collections::HashMap;

/// A hash map for small integer keys: the engine hashes ids on hot paths,
/// where SipHash's flood resistance buys nothing (keys are not user input).
pub(crate) type FastMap<K, V> = HashMap<K, V, std::hash::BuildHasherDefault<IdHasher>>;

/// Multiply-rotate hashing of integers (the FxHash scheme).
#[derive(Default, Clone, Copy)]
pub(crate) struct IdHasher(u64);

impl std::hash::Hasher for IdHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.write_u64(b as u64);
        }
    }
    fn write_u64(&mut self, n: u64) {
        self.0 = (self.0.rotate_left(5) ^ n).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }
    fn write_u32(&mut self, n: u32) {
        self.write_u64(n as u64);
    }
    fn write_usize(&mut self, n: usize) {
        self.write_u64(n as u64);
    }
}

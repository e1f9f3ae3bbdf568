//! Walking the keyspace: SCAN's steps and a random key, over the index's
//! live keys.

use std::hash::{BuildHasher, RandomState};

use crate::Engine;

impl Engine {
    /// One step of a walk over every live key: starting at `cursor` (0 to
    /// begin), visits about `count` index entries, passes each live key to
    /// `f`, and returns the cursor to go on from (0 once the walk is
    /// complete). A key present from the first step to the last is passed
    /// at least once, whatever is added or deleted meanwhile; a key may be
    /// passed twice. Any `u64` is a valid cursor (one that names no place
    /// ends the walk). `f` must not use the engine.
    pub fn scan_keys(&self, cursor: u64, count: usize, mut f: impl FnMut(&[u8])) -> u64 {
        self.inner.index.scan(cursor, count, |key, _| f(key))
    }

    /// A live key, picked at random (not uniformly), or `None` if there is
    /// none.
    pub fn random_key(&self) -> Option<Vec<u8>> {
        // Every `RandomState` is seeded afresh, so this differs per call.
        let random = RandomState::new().hash_one(0u8);
        self.inner.index.random_key(random).map(|(key, _)| key)
    }
}

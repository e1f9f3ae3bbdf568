//! Walking the keyspace: SCAN's steps and a random key, over the index's
//! live keys.

use std::hash::{BuildHasher, RandomState};

use crate::expiry;
use crate::index::Index;

/// Random picks RANDOMKEY tries before it walks the index for a key that
/// has not expired.
const RANDOM_PICKS: usize = 16;
/// Entries one step of that walk visits.
const WALK_STEP: usize = 1024;

/// One step of a walk over every live key: starting at `cursor` (0 to
/// begin), visits about `count` index entries, passes each live key to
/// `f`, and returns the cursor to go on from (0 once the walk is
/// complete). A key present from the first step to the last is passed
/// at least once, whatever is added or deleted meanwhile; a key may be
/// passed twice. Any `u64` is a valid cursor (one that names no place
/// ends the walk). Expired keys are not passed. `f` must not use the
/// engine.
pub(crate) fn scan_keys(index: &Index, cursor: u64, count: usize, mut f: impl FnMut(&[u8])) -> u64 {
    let now_ms = expiry::now_ms();
    index.scan(cursor, count, |key, location| {
        if expiry::is_visible(location, now_ms) {
            f(key)
        }
    })
}

/// A live key that has not expired, picked at random (not uniformly),
/// or `None` if there is none.
pub(crate) fn random_key(index: &Index) -> Option<Vec<u8>> {
    let now_ms = expiry::now_ms();
    for _ in 0..RANDOM_PICKS {
        // Every `RandomState` is seeded afresh, so this differs per call.
        let random = RandomState::new().hash_one(0u8);
        let (key, location) = index.random_key(random)?;
        if expiry::is_visible(&location, now_ms) {
            return Some(key);
        }
    }
    // Mostly expired keys (not yet removed): walk for one that is not.
    let mut cursor = 0;
    loop {
        let mut found = None;
        cursor = index.scan(cursor, WALK_STEP, |key, location| {
            if found.is_none() && expiry::is_visible(location, now_ms) {
                found = Some(key.to_vec());
            }
        });
        if found.is_some() || cursor == 0 {
            return found;
        }
    }
}

//! Time to live: keys whose expiry time has passed are invisible at once
//! (every lookup checks the time, as Redis's `keyIsExpired` does: a key is
//! gone once the clock is past its expiry time), and the writer removes
//! them in the background with logged expire entries, so that their space
//! can be reclaimed and every node agrees they are gone.
//!
//! An expire entry names the version it removes by its sequence number, so
//! it never removes a write that came after the expiry was decided, in
//! whatever order a rebuild or a reader sees the entries (the index lets a
//! tombstone at a version's own sequence number replace that version).
//!
//! The active cycle runs [`CYCLES_PER_SECOND`] times a second on the
//! writer, as Redis's does at its default `hz`, and stops each cycle after
//! [`CYCLE_BUDGET`], so it takes at most a quarter of a core (Redis's
//! `ACTIVE_EXPIRE_CYCLE_SLOW_TIME_PERC`). It visits only index shards that
//! hold an expired key, so it costs next to nothing when none has expired.

use std::time::Duration;

use crate::index::Location;

/// Active expiry cycles per second.
pub const CYCLES_PER_SECOND: u64 = 10;
/// The longest one active cycle runs: a quarter of its period.
pub const CYCLE_BUDGET: Duration = Duration::from_millis(1000 / CYCLES_PER_SECOND / 4);

pub use splitkv_common::clock::now_ms;

/// True if a version expiring at `expire_at_ms` (0: never) has expired at
/// `now_ms`: the clock is past its time.
pub fn time_has_passed(expire_at_ms: u64, now_ms: u64) -> bool {
    expire_at_ms != 0 && now_ms > expire_at_ms
}

/// True if `location`'s version has expired at `now_ms`.
pub fn has_expired(location: &Location, now_ms: u64) -> bool {
    time_has_passed(location.expire_at_ms, now_ms)
}

/// True if `location` names a value that is visible at `now_ms`: not a
/// tombstone and not expired.
pub fn is_visible(location: &Location, now_ms: u64) -> bool {
    !location.is_tombstone() && !has_expired(location, now_ms)
}

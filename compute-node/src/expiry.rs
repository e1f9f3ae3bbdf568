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

use std::collections::BTreeMap;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use splitkv_common::client::BatchOp;

use crate::engine::Inner;
use crate::index::Location;

/// Active expiry cycles per second.
pub const CYCLES_PER_SECOND: u64 = 10;
/// The longest one active cycle runs: a quarter of its period.
pub const CYCLE_BUDGET: Duration = Duration::from_millis(1000 / CYCLES_PER_SECOND / 4);
/// Expired keys one step of a cycle collects and logs as one batch per
/// partition.
const KEYS_PER_STEP: usize = 256;

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

/// Starts the writer's active expiry; it ends with the engine (or when
/// the engine stops being the writer, and starts again on promotion).
pub(crate) fn spawn_active_expiry(inner: &Arc<Inner>) {
    let task = inner.handle.spawn(run(Arc::downgrade(inner)));
    if let Some(previous) = inner.expirer.lock().replace(task.abort_handle()) {
        previous.abort();
    }
}

async fn run(inner: Weak<Inner>) {
    let mut ticks = tokio::time::interval(Duration::from_millis(1000 / CYCLES_PER_SECOND));
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut cursor = 0;
    loop {
        ticks.tick().await;
        let Some(inner) = inner.upgrade() else {
            return;
        };
        if inner.is_writer() && !inner.client.is_fenced() {
            cursor = cycle(&inner, cursor).await;
        }
    }
}

/// One active cycle from `cursor`: collects expired keys a step at a time
/// and logs their expiry, until a step finds fewer than a full step's worth
/// or the budget is spent. Returns the cursor to go on from.
async fn cycle(inner: &Inner, mut cursor: u64) -> u64 {
    let started = Instant::now();
    loop {
        // A key is expired once the clock is past its time: collect those
        // whose time is below now.
        let now = now_ms();
        let (expired, next) =
            inner
                .index
                .collect_expired(now.saturating_sub(1), cursor, KEYS_PER_STEP);
        cursor = next;
        let found = expired.len();
        if found > 0 {
            log_expiries(inner, &expired).await;
        }
        if found < KEYS_PER_STEP || started.elapsed() >= CYCLE_BUDGET {
            return cursor;
        }
    }
}

/// Logs an expire entry for each key (into the partition of its expired
/// record, one batch per partition) and applies them to the index.
async fn log_expiries(inner: &Inner, expired: &[(Vec<u8>, Location)]) {
    let mut by_partition: BTreeMap<usize, Vec<BatchOp<'_>>> = BTreeMap::new();
    for (key, location) in expired {
        by_partition
            .entry(usize::from(location.partition) % inner.partitions())
            .or_default()
            .push(BatchOp::Expire {
                key,
                version_seq: location.seq,
            });
    }
    for (partition, ops) in by_partition {
        match inner.write_batch(partition, &ops).await {
            Ok(removed) => {
                inner
                    .counters
                    .expired_keys
                    .fetch_add(removed, Ordering::Relaxed);
                inner.applied.notify_waiters();
            }
            Err(e) => {
                // They stay invisible; the next cycle tries again.
                tracing::debug!(partition, "logging expired keys failed: {e}");
                return;
            }
        }
    }
}

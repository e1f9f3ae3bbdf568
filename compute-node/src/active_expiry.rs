//! The writer's active expiry (see [`crate::expiry`]): [`CYCLES_PER_SECOND`]
//! times a second it collects keys whose time has passed from the view's
//! index and logs their removal through the write route, within
//! [`CYCLE_BUDGET`] a cycle.

use std::collections::BTreeMap;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use bytes::Bytes;
use splitkv_common::client::KeyWrite;

use crate::expiry::{CYCLE_BUDGET, CYCLES_PER_SECOND, now_ms};
use crate::index::Location;
use crate::writes::Writes;

/// Expired keys one step of a cycle collects and logs as one batch per
/// partition.
const KEYS_PER_STEP: usize = 256;

/// Starts the writer's active expiry, logging its deletes through
/// `writes`; it ends with the engine (or when its handle is aborted: the
/// engine stops being the writer), and starts again on promotion.
pub(crate) fn spawn_active_expiry(
    writes: &Arc<Writes>,
    handle: &tokio::runtime::Handle,
) -> tokio::task::AbortHandle {
    handle.spawn(run(Arc::downgrade(writes))).abort_handle()
}

async fn run(writes: Weak<Writes>) {
    let mut ticks = tokio::time::interval(Duration::from_millis(1000 / CYCLES_PER_SECOND));
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut cursor = 0;
    loop {
        ticks.tick().await;
        let Some(writes) = writes.upgrade() else {
            return;
        };
        let storage = writes.storage();
        if storage.is_writer() && !storage.client.is_fenced() {
            cursor = cycle(&writes, cursor).await;
        }
    }
}

/// One active cycle from `cursor`: collects expired keys a step at a time
/// and logs their expiry, until a step finds fewer than a full step's worth
/// or the budget is spent. Returns the cursor to go on from.
async fn cycle(writes: &Arc<Writes>, mut cursor: u64) -> u64 {
    let started = Instant::now();
    loop {
        // A key is expired once the clock is past its time: collect those
        // whose time is below now.
        let now = now_ms();
        let (expired, next) =
            writes
                .view()
                .index
                .collect_expired(now.saturating_sub(1), cursor, KEYS_PER_STEP);
        cursor = next;
        let found = expired.len();
        if found > 0 {
            log_expiries(writes, expired).await;
        }
        if found < KEYS_PER_STEP || started.elapsed() >= CYCLE_BUDGET {
            return cursor;
        }
    }
}

/// Logs an expire entry for each key (into the partition of its expired
/// record, one batch per partition) and applies them to the index.
async fn log_expiries(writes: &Arc<Writes>, expired: Vec<(Vec<u8>, Location)>) {
    let view = writes.view();
    let mut by_partition: BTreeMap<usize, Vec<KeyWrite<Bytes>>> = BTreeMap::new();
    for (key, location) in expired {
        by_partition
            .entry(usize::from(location.partition) % view.partitions())
            .or_default()
            .push(KeyWrite::Expire {
                key: Bytes::from(key),
                version_seq: location.seq,
            });
    }
    for (partition, expiries) in by_partition {
        match Writes::write(writes, partition, expiries).await {
            Ok(removed) => {
                view.counters
                    .expired_keys
                    .fetch_add(removed, Ordering::Relaxed);
                view.notify_applied();
            }
            Err(e) => {
                // They stay invisible; the next cycle tries again.
                tracing::debug!(partition, "logging expired keys failed: {e}");
                return;
            }
        }
    }
}

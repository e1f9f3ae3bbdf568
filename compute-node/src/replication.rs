//! A reader's place beside the writer: how far behind it follows, and its
//! promotion to the writer (`REPLICAOF NO ONE`).
//!
//! Promotion keeps the reader's index: the storage client reopens its
//! connections as the writer's, which begins a new writer epoch on the
//! storage node. From that moment the old writer's writes are refused (the
//! epoch is checked where each write is applied), so the key logs end where
//! they are; the reader stops following, pulls every partition's key log
//! past what it applied, up to that end, and only then takes writes.
//!
//! A writer that finds itself fenced does the reverse ([`demote`]): it
//! stops writing and follows the new writer as a reader does, so that its
//! reads do not go stale.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use crate::engine::{Engine, Inner};
use crate::error::Result;
use crate::{follow, rebuild};

/// Where a compute node stands: the writer, or a reader and its lag.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Replication {
    /// True for the writer.
    pub writer: bool,
    /// Highest sequence number applied (acknowledged to this node, or
    /// followed).
    pub applied_seq: u64,
    /// For a reader: key-log entries the storage node holds that it has not
    /// applied yet (0 for the writer).
    pub lag_entries: u64,
    /// For a reader: an upper bound of the age of the oldest write it has
    /// not applied, in milliseconds (the time since it last applied entries
    /// of a partition that is behind; 0 when none is behind).
    pub lag_ms: u64,
    /// For a reader: every partition's key-log stream has caught up and
    /// follows what is appended.
    pub following: bool,
}

/// What a promotion did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Promotion {
    /// The writer epoch taken (every older writer is fenced).
    pub epoch: u64,
    /// Key-log entries pulled to catch up after the epoch was taken.
    pub caught_up_entries: u64,
    /// From the call until the epoch was taken and the connections were
    /// reopened as the writer's.
    pub fenced_after: Duration,
    /// From the call to accepting writes.
    pub elapsed: Duration,
}

/// Turns a writer that a newer one (of `current_epoch`) has fenced into a
/// reader: its active expiry stops, its storage connections serve it as a
/// reader's, and it follows every partition's key log past what it
/// applied, so it serves what the new writer writes. Its writes already
/// fail; from now on they get the read-only replica's error.
pub(crate) fn demote(inner: &Arc<Inner>, current_epoch: u64) {
    if !inner.writer.swap(false, Ordering::AcqRel) {
        return;
    }
    if let Some(expirer) = inner.expirer.lock().take() {
        expirer.abort();
    }
    inner.client.demote();
    follow::spawn_followers(inner);
    tracing::warn!(
        epoch = inner.client.epoch(),
        current_epoch,
        "fenced by a newer writer: following it as a reader"
    );
}

impl Engine {
    /// Turns this reader into the writer without rebuilding its index: a
    /// new writer epoch fences the old writer (its later writes fail; none
    /// is acknowledged and lost), the reader catches up to the key logs'
    /// committed ends, and from then on its writes are accepted. A writer
    /// is left as it is (its epoch is returned). If catching up fails the
    /// engine is already the epoch's holder but stays read-only; promoting
    /// again retries the catch-up.
    pub async fn promote_async(&self) -> Result<Promotion> {
        let started = Instant::now();
        let inner = &self.inner;
        if inner.is_writer() {
            return Ok(Promotion {
                epoch: inner.client.epoch(),
                caught_up_entries: 0,
                fenced_after: Duration::ZERO,
                elapsed: started.elapsed(),
            });
        }
        let epoch = inner.client.promote().await?;
        follow::stop_followers(inner);
        for partition in 0..inner.partitions() {
            inner
                .client
                .wait_up(partition, inner.reconnect_wait())
                .await?;
        }
        let fenced_after = started.elapsed();
        let caught_up_entries = rebuild::pull_tails(inner).await?;
        inner.writer.store(true, Ordering::Release);
        crate::expiry::spawn_active_expiry(inner);
        inner.applied.notify_waiters();
        let elapsed = started.elapsed();
        tracing::info!(
            epoch,
            caught_up_entries,
            fenced_ms = fenced_after.as_secs_f64() * 1e3,
            ms = elapsed.as_secs_f64() * 1e3,
            "promoted to the writer"
        );
        Ok(Promotion {
            epoch,
            caught_up_entries,
            fenced_after,
            elapsed,
        })
    }

    /// [`Engine::promote_async`], blocking.
    pub fn promote(&self) -> Result<Promotion> {
        self.block(self.promote_async())
    }

    /// This node's role and, for a reader, its lag behind the storage
    /// node's key logs (one stats request to the storage node).
    pub async fn replication_async(&self) -> Result<Replication> {
        let inner = &self.inner;
        let applied_seq = self.applied_seq();
        if inner.is_writer() {
            return Ok(Replication {
                writer: true,
                applied_seq,
                lag_entries: 0,
                lag_ms: 0,
                following: false,
            });
        }
        let report = inner.client.stats()?.wait().await?;
        let now_ms = inner.uptime_ms();
        let mut lag_entries = 0;
        let mut lag_ms = 0;
        for (partition, stored) in report.partitions.iter().enumerate() {
            let Some(applied) = inner.applied_entries.get(partition) else {
                continue;
            };
            let behind = stored
                .keylog_entries
                .saturating_sub(applied.load(Ordering::Acquire));
            if behind > 0 {
                lag_entries += behind;
                let applied_at = inner.applied_at_ms[partition].load(Ordering::Acquire);
                lag_ms = lag_ms.max(now_ms.saturating_sub(applied_at));
            }
        }
        Ok(Replication {
            writer: false,
            applied_seq,
            lag_entries,
            lag_ms,
            following: self.following(),
        })
    }
}

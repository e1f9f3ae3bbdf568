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

use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use splitkv_common::client::LinkEvent;
use tokio::sync::mpsc;

use crate::error::Result;
use crate::storage::Storage;
use crate::view::View;
use crate::writes::Writes;
use crate::{active_expiry, follow, rebuild};

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

/// This node's role, and the tasks it runs for it: the writer's active
/// expiry, or a reader's followers.
pub(crate) struct Role {
    view: Arc<View>,
    storage: Arc<Storage>,
    writes: Arc<Writes>,
    handle: tokio::runtime::Handle,
    /// A reader's tasks that follow the key logs.
    followers: Mutex<Vec<tokio::task::AbortHandle>>,
    /// The writer's active expiry task.
    expirer: Mutex<Option<tokio::task::AbortHandle>>,
}

impl Role {
    pub(crate) fn new(writes: Arc<Writes>, handle: tokio::runtime::Handle) -> Self {
        Self {
            view: Arc::clone(writes.view()),
            storage: Arc::clone(writes.storage()),
            writes,
            handle,
            followers: Mutex::new(Vec::new()),
            expirer: Mutex::new(None),
        }
    }

    /// Starts the tasks of the role the node has: the writer's active
    /// expiry, or a reader's followers.
    pub(crate) fn start(&self) {
        if self.storage.is_writer() {
            self.start_expiry();
        } else {
            self.start_followers();
        }
    }

    fn start_expiry(&self) {
        let task = active_expiry::spawn_active_expiry(&self.writes, &self.handle);
        if let Some(previous) = self.expirer.lock().replace(task) {
            previous.abort();
        }
    }

    fn start_followers(&self) {
        let followers = follow::spawn_followers(
            &self.view,
            &self.storage.client,
            self.storage.reconnect_wait(),
            &self.handle,
        );
        self.followers.lock().extend(followers);
    }

    /// Turns a writer that a newer one (of `current_epoch`) has fenced into
    /// a reader: its active expiry stops, its storage connections serve it
    /// as a reader's, and it follows every partition's key log past what it
    /// applied, so it serves what the new writer writes. Its writes already
    /// fail; from now on they get the read-only replica's error.
    pub(crate) fn demote(&self, current_epoch: u64) {
        if !self.storage.set_writer(false) {
            return;
        }
        if let Some(expirer) = self.expirer.lock().take() {
            expirer.abort();
        }
        self.storage.client.demote();
        self.start_followers();
        tracing::warn!(
            epoch = self.storage.client.epoch(),
            current_epoch,
            "fenced by a newer writer: following it as a reader"
        );
    }

    /// Turns this reader into the writer without rebuilding its index (see
    /// `Engine::promote_async`).
    pub(crate) async fn promote(&self) -> Result<Promotion> {
        let started = Instant::now();
        let client = &self.storage.client;
        if self.storage.is_writer() {
            return Ok(Promotion {
                epoch: client.epoch(),
                caught_up_entries: 0,
                fenced_after: Duration::ZERO,
                elapsed: started.elapsed(),
            });
        }
        let epoch = client.promote().await?;
        let followers = std::mem::take(&mut *self.followers.lock());
        follow::stop_followers(&self.view, followers);
        for partition in 0..self.view.partitions() {
            client
                .wait_up(partition, self.storage.reconnect_wait())
                .await?;
        }
        let fenced_after = started.elapsed();
        let caught_up_entries = rebuild::pull_tails(&self.view, client).await?;
        self.storage.set_writer(true);
        self.start_expiry();
        self.view.notify_applied();
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

    /// This node's role and, for a reader, its lag behind the storage
    /// node's key logs (see `Engine::replication_async`).
    pub(crate) async fn replication(&self) -> Result<Replication> {
        let view = &self.view;
        let applied_seq = view.acked_seqs().into_iter().max().unwrap_or(0);
        if self.storage.is_writer() {
            return Ok(Replication {
                writer: true,
                applied_seq,
                lag_entries: 0,
                lag_ms: 0,
                following: false,
            });
        }
        let report = self.storage.client.stats()?.wait().await?;
        let now_ms = view.uptime_ms();
        let mut lag_entries = 0;
        let mut lag_ms = 0;
        for (partition, stored) in report.partitions.iter().enumerate() {
            let Some((applied, applied_at)) = view.applied(partition) else {
                continue;
            };
            let behind = stored.keylog_entries.saturating_sub(applied);
            if behind > 0 {
                lag_entries += behind;
                lag_ms = lag_ms.max(now_ms.saturating_sub(applied_at));
            }
        }
        Ok(Replication {
            writer: false,
            applied_seq,
            lag_entries,
            lag_ms,
            following: view.all_caught_up(),
        })
    }
}

/// Consumes what the storage client tells of its connections until the
/// engine is gone: after a reconnection, pulls the partition's key-log
/// tail; once fenced, turns the writer into a reader.
pub(crate) async fn follow_link_events(role: Weak<Role>, mut events: mpsc::Receiver<LinkEvent>) {
    while let Some(event) = events.recv().await {
        let Some(role) = role.upgrade() else {
            return;
        };
        match event {
            // A reader's follower catches up by itself.
            LinkEvent::Reconnected {
                partition,
                generation,
            } if role.storage.is_writer() => {
                tracing::debug!(partition, generation, "connection back; pulling the tail");
                rebuild::spawn_tail_pull(
                    Arc::clone(&role.view),
                    Arc::clone(&role.storage.client),
                    partition,
                );
            }
            LinkEvent::Reconnected { .. } => {}
            LinkEvent::Down { partition } => {
                tracing::debug!(partition, "connection lost; its requests failed");
            }
            LinkEvent::Fenced { current_epoch } => role.demote(current_epoch),
        }
    }
}

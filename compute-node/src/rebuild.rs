//! Building the index from the storage node's key logs: all partitions in
//! parallel at start, and a partition's tail after its connection comes back.
//!
//! Entries are applied by sequence number, deletes included, so the order in
//! which partitions arrive does not matter. A put whose expiry time has
//! passed is applied as a tombstone at its own sequence number, as its
//! expire entry would be (see [`crate::expiry`]). Tombstones stay in the index
//! until every partition has been merged; only then can no older version of
//! a deleted key still turn up, and they are dropped.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use bytes::Bytes;
use splitkv_common::client::ClientError;
use splitkv_common::record::{self, EntryKind, Frame};

use crate::engine::Inner;
use crate::error::Result;
use crate::expiry;
use crate::index::Location;

/// What one export brought.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct Merged {
    /// Highest sequence number of any entry.
    pub(crate) max_seq: u64,
    /// Highest clear entry (FLUSHALL) seen.
    clear_seq: u64,
    /// End of the furthest record any entry points at.
    pub(crate) value_end: u64,
    /// Entries merged (puts, deletes and clears).
    pub(crate) entries: u64,
}

/// Key-log bytes of a one-entry frame with an 8-byte key, the smallest
/// common entry: a merge sizes its list of changes for a chunk's bytes
/// divided by this.
const PRESIZE_ENTRY_BYTES: u64 =
    (record::FRAME_HEADER_BYTES + record::ENTRY_HEADER_BYTES + 8) as u64;

/// Applies every entry of a run of key-log frames to the index, a chunk at
/// a time (each shard locked once per chunk), then the highest clear entry
/// of the chunk: the clear removes what the chunk and earlier chunks of any
/// partition brought below it, and refuses what later chunks bring below
/// it, so the order in which partitions arrive does not matter.
pub(crate) fn merge_frames(
    inner: &Inner,
    partition: usize,
    frames: &Bytes,
    merged: &mut Merged,
) -> Result<(), ClientError> {
    let mut changes = Vec::with_capacity(frames.len() / PRESIZE_ENTRY_BYTES as usize);
    let mut clear_seq = 0;
    let now_ms = expiry::now_ms();
    let mut at = 0;
    while at < frames.len() {
        let (frame, used) = record::decode_frame(&frames[at..]).map_err(|e| {
            ClientError::Protocol(format!("key-log export of partition {partition}: {e}"))
        })?;
        if let Frame::Entries(entries) = frame {
            for entry in entries.iter() {
                let entry = entry.map_err(|e| ClientError::Protocol(e.to_string()))?;
                merged.entries += 1;
                merged.max_seq = merged.max_seq.max(entry.seq);
                let location = match entry.kind {
                    EntryKind::Put => {
                        let len = entry.record_len();
                        merged.value_end = merged.value_end.max(entry.value_offset + len as u64);
                        let location = Location {
                            seq: entry.seq,
                            offset: entry.value_offset,
                            len: len as u32,
                            partition: partition as u16,
                            expire_at_ms: entry.expire_at_ms,
                        };
                        if expiry::has_expired(&location, now_ms) {
                            // Gone already: held as what it is, a
                            // tombstone at its own sequence number.
                            Location::tombstone(entry.seq, partition as u16)
                        } else {
                            location
                        }
                    }
                    EntryKind::Delete => Location::tombstone(entry.seq, partition as u16),
                    EntryKind::Expire { version_seq } => {
                        Location::tombstone(version_seq, partition as u16)
                    }
                    EntryKind::Clear => {
                        clear_seq = clear_seq.max(entry.seq);
                        continue;
                    }
                };
                changes.push((entry.key, location));
            }
        }
        at += used;
    }
    inner.batches.apply(|| inner.index.apply_many(&changes));
    if clear_seq > 0 {
        inner.apply_clear(clear_seq);
        merged.clear_seq = merged.clear_seq.max(clear_seq);
    }
    Ok(())
}

/// Runs `merge` on this thread after handing the runtime worker's other
/// tasks (the connections' drivers among them) to another thread, so that
/// the exports' packets keep being received and acknowledged while a chunk
/// is merged. On a runtime of one thread it just runs `merge`.
fn off_the_runtime<T>(merge: impl FnOnce() -> T) -> T {
    let flavor = tokio::runtime::Handle::try_current().map(|handle| handle.runtime_flavor());
    match flavor {
        Ok(tokio::runtime::RuntimeFlavor::MultiThread) => tokio::task::block_in_place(merge),
        _ => merge(),
    }
}

/// Pulls `partition`'s key log from `from_seq` on into the index.
async fn pull(inner: &Arc<Inner>, partition: usize, from_seq: u64) -> Result<Merged> {
    let mut merged = Merged::default();
    inner
        .client
        .export_keylog(partition, from_seq, |frames| {
            off_the_runtime(|| merge_frames(inner, partition, &frames, &mut merged))
        })
        .await?;
    inner.note_applied(partition, &merged);
    Ok(merged)
}

/// Rebuilds the index from every partition's key log, in parallel, then
/// drops the tombstones.
pub(crate) async fn rebuild_index(inner: &Arc<Inner>) -> Result<()> {
    presize(inner).await;
    pull_tails(inner).await?;
    let dropped = inner.index.drop_tombstones();
    tracing::debug!(dropped, "tombstones dropped after the rebuild");
    Ok(())
}

/// Pulls every partition's key log past what was applied of it, in
/// parallel, up to the end each has when its export begins; returns the
/// entries merged.
pub(crate) async fn pull_tails(inner: &Arc<Inner>) -> Result<u64> {
    let pulls: Vec<_> = (0..inner.partitions())
        .map(|partition| {
            let inner = Arc::clone(inner);
            let from = inner.acked_seq[partition].load(Ordering::Acquire) + 1;
            tokio::spawn(async move { pull(&inner, partition, from).await })
        })
        .collect();
    let mut entries = 0;
    for pull in pulls {
        let merged = pull
            .await
            .map_err(|e| ClientError::Protocol(format!("key-log pull task failed: {e}")))??;
        entries += merged.entries;
    }
    Ok(entries)
}

/// Reserves index room for the entries the exports will bring (each
/// partition's checkpoint and the key log after it, as the storage node
/// counts them): at least the keys, more when the log after the
/// checkpoints holds overwrites (the tables shrink again when tombstones
/// are dropped). Without the node's stats the index grows as keys arrive.
async fn presize(inner: &Inner) {
    let report = match inner.client.stats() {
        Ok(call) => call.wait().await,
        Err(e) => Err(e),
    };
    match report {
        Ok(report) => {
            let entries: u64 = report.partitions.iter().map(|p| p.keylog_entries).sum();
            inner.index.reserve(entries);
        }
        Err(e) => tracing::debug!("no stats to pre-size the index from: {e}"),
    }
}

/// After the connection of `partition` comes back, pulls its key log past the
/// highest sequence number acknowledged on it: a write whose
/// acknowledgement was lost with the connection shows up now rather than at
/// the next restart.
pub(crate) fn spawn_tail_pull(inner: Arc<Inner>, partition: usize) {
    let handle = inner.handle.clone();
    handle.spawn(async move {
        let from = inner.acked_seq[partition].load(Ordering::Acquire) + 1;
        match pull(&inner, partition, from).await {
            Ok(merged) => {
                inner.counters.tail_pulls.fetch_add(1, Ordering::Relaxed);
                tracing::info!(
                    partition,
                    from_seq = from,
                    max_seq = merged.max_seq,
                    clear_seq = merged.clear_seq,
                    "pulled the key-log tail after reconnecting"
                );
            }
            Err(e) => tracing::warn!(
                partition,
                "pulling the key-log tail after reconnecting failed: {e}"
            ),
        }
    });
}

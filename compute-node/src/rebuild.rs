//! Building the view's index from the storage node's key logs: all
//! partitions in parallel at start, and a partition's tail after its
//! connection comes back.
//!
//! Entries are applied by sequence number, deletes included, so the order in
//! which partitions arrive does not matter ([`View::merge_frames`]). A put
//! whose expiry time has passed is applied as a tombstone at its own
//! sequence number, as its expire entry would be (see [`crate::expiry`]).
//! Tombstones stay in the index until every partition has been merged; only
//! then can no older version of a deleted key still turn up, and they are
//! dropped.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use splitkv_common::client::StorageClient;

use crate::error::Result;
use crate::view::{Merged, View};

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

/// Pulls `partition`'s key log from `from_seq` on into the view.
async fn pull(
    view: &View,
    client: &StorageClient,
    partition: usize,
    from_seq: u64,
) -> Result<Merged> {
    let mut merged = Merged::default();
    client
        .export_keylog(partition, from_seq, |frames| {
            off_the_runtime(|| view.merge_frames(partition, &frames, &mut merged))
        })
        .await?;
    view.note_applied(partition, &merged);
    Ok(merged)
}

/// Rebuilds the index from every partition's key log, in parallel, then
/// drops the tombstones.
pub(crate) async fn rebuild_index(view: &Arc<View>, client: &Arc<StorageClient>) -> Result<()> {
    presize(view, client).await;
    pull_tails(view, client).await?;
    let dropped = view.index.drop_tombstones();
    tracing::debug!(dropped, "tombstones dropped after the rebuild");
    Ok(())
}

/// Pulls every partition's key log past what was applied of it, in
/// parallel, up to the end each has when its export begins; returns the
/// entries merged.
pub(crate) async fn pull_tails(view: &Arc<View>, client: &Arc<StorageClient>) -> Result<u64> {
    let pulls: Vec<_> = (0..view.partitions())
        .map(|partition| {
            let view = Arc::clone(view);
            let client = Arc::clone(client);
            let from = view.acked_seq(partition) + 1;
            tokio::spawn(async move { pull(&view, &client, partition, from).await })
        })
        .collect();
    let mut entries = 0;
    for pull in pulls {
        let merged = pull.await??;
        entries += merged.entries;
    }
    Ok(entries)
}

/// Reserves index room for the entries the exports will bring (each
/// partition's checkpoint and the key log after it, as the storage node
/// counts them): at least the keys, more when the log after the
/// checkpoints holds overwrites (the tables shrink again when tombstones
/// are dropped). Without the node's stats the index grows as keys arrive.
async fn presize(view: &View, client: &StorageClient) {
    let report = match client.stats() {
        Ok(call) => call.wait().await,
        Err(e) => Err(e),
    };
    match report {
        Ok(report) => {
            let entries: u64 = report.partitions.iter().map(|p| p.keylog_entries).sum();
            view.index.reserve(entries);
        }
        Err(e) => tracing::debug!("no stats to pre-size the index from: {e}"),
    }
}

/// After the connection of `partition` comes back, pulls its key log past the
/// highest sequence number acknowledged on it: a write whose
/// acknowledgement was lost with the connection shows up now rather than at
/// the next restart.
pub(crate) fn spawn_tail_pull(view: Arc<View>, client: Arc<StorageClient>, partition: usize) {
    tokio::spawn(async move {
        let from = view.acked_seq(partition) + 1;
        match pull(&view, &client, partition, from).await {
            Ok(merged) => {
                view.counters.tail_pulls.fetch_add(1, Ordering::Relaxed);
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

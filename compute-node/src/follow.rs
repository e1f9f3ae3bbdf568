//! A reader compute node follows the writer: each partition's key log is
//! streamed to it as it grows ([`StorageClient::follow_keylog`]) and every
//! entry is applied to the view as it comes, in the partition's order, so
//! reads answer with what the writer wrote. The index only ever moves a key
//! to a higher sequence number, so a reader never serves a value older than
//! one it has served for that key. A stream that ends (a lost connection, a
//! storage restart, a reader cut off for falling behind) is opened again
//! from the last sequence number applied once the connection is back.

use std::sync::{Arc, Weak};
use std::time::Duration;

use splitkv_common::client::{ClientError, StorageClient};

use crate::view::{Merged, View};

/// Pause before following a partition again after its stream failed at
/// once (so that a refusal does not become a busy loop).
const REFOLLOW_PAUSE: Duration = Duration::from_millis(100);

/// Starts following every partition's key log into `view`, past what it
/// applied; returns the followers' handles, which end them.
pub(crate) fn spawn_followers(
    view: &Arc<View>,
    client: &Arc<StorageClient>,
    reconnect_wait: Duration,
    handle: &tokio::runtime::Handle,
) -> Vec<tokio::task::AbortHandle> {
    (0..view.partitions())
        .map(|partition| {
            let task = handle.spawn(follow(
                Arc::downgrade(view),
                Arc::downgrade(client),
                reconnect_wait,
                partition,
            ));
            task.abort_handle()
        })
        .collect()
}

/// Ends `followers` (a promoted reader writes itself).
pub(crate) fn stop_followers(view: &View, followers: Vec<tokio::task::AbortHandle>) {
    for follower in followers {
        follower.abort();
    }
    for partition in 0..view.partitions() {
        view.set_caught_up(partition, false);
    }
}

/// Follows `partition` until the engine is gone.
async fn follow(
    view: Weak<View>,
    client: Weak<StorageClient>,
    reconnect_wait: Duration,
    partition: usize,
) {
    loop {
        let (Some(view), Some(client)) = (view.upgrade(), client.upgrade()) else {
            return;
        };
        let from_seq = view.acked_seq(partition) + 1;
        let followed = client
            .follow_keylog(partition, from_seq, |frames, caught_up| {
                let mut merged = Merged::default();
                view.merge_frames(partition, &frames, &mut merged)?;
                view.note_applied(partition, &merged);
                if caught_up {
                    view.set_caught_up(partition, true);
                }
                view.notify_applied();
                Ok(())
            })
            .await;
        view.set_caught_up(partition, false);
        match followed {
            Err(ClientError::ShutDown) => return,
            Err(e) => tracing::debug!(partition, "following the key log stopped: {e}"),
            Ok(()) => {}
        }
        if matches!(
            client.wait_up(partition, reconnect_wait).await,
            Err(ClientError::ShutDown)
        ) {
            return;
        }
        drop((view, client));
        tokio::time::sleep(REFOLLOW_PAUSE).await;
    }
}

//! A reader compute node follows the writer: each partition's key log is
//! streamed to it as it grows ([`StorageClient::follow_keylog`]) and every
//! entry is applied to the index as it comes, in the partition's order, so
//! reads answer with what the writer wrote. The index only ever moves a key
//! to a higher sequence number, so a reader never serves a value older than
//! one it has served for that key. A stream that ends (a lost connection, a
//! storage restart, a reader cut off for falling behind) is opened again
//! from the last sequence number applied once the connection is back.
//!
//! [`StorageClient::follow_keylog`]: splitkv_common::client::StorageClient::follow_keylog

use std::sync::atomic::Ordering;
use std::sync::{Arc, Weak};
use std::time::Duration;

use splitkv_common::client::ClientError;

use crate::engine::Inner;
use crate::rebuild::{Merged, merge_frames};

/// Pause before following a partition again after its stream failed at
/// once (so that a refusal does not become a busy loop).
const REFOLLOW_PAUSE: Duration = Duration::from_millis(100);

/// Starts following every partition's key log, past what the rebuild
/// applied.
pub(crate) fn spawn_followers(inner: &Arc<Inner>) {
    for partition in 0..inner.partitions() {
        inner.handle.spawn(follow(Arc::downgrade(inner), partition));
    }
}

/// Follows `partition` until the engine is gone.
async fn follow(inner: Weak<Inner>, partition: usize) {
    loop {
        let Some(strong) = inner.upgrade() else {
            return;
        };
        let from_seq = strong.acked_seq[partition].load(Ordering::Acquire) + 1;
        let followed = strong
            .client
            .follow_keylog(partition, from_seq, |frames, caught_up| {
                let mut merged = Merged::default();
                merge_frames(&strong, partition, &frames, &mut merged)?;
                strong.note_acked(partition, merged.max_seq);
                strong.windows[partition].note_committed_end(merged.value_end);
                if caught_up {
                    strong.follow_caught_up[partition].store(true, Ordering::Release);
                }
                strong.applied.notify_waiters();
                Ok(())
            })
            .await;
        strong.follow_caught_up[partition].store(false, Ordering::Release);
        match followed {
            Err(ClientError::ShutDown) => return,
            Err(e) => tracing::debug!(partition, "following the key log stopped: {e}"),
            Ok(()) => {}
        }
        if matches!(
            strong
                .client
                .wait_up(partition, strong.reconnect_wait())
                .await,
            Err(ClientError::ShutDown)
        ) {
            return;
        }
        drop(strong);
        tokio::time::sleep(REFOLLOW_PAUSE).await;
    }
}

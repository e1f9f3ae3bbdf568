//! The clients blocked on keys (BLPOP, BRPOP, BLMOVE, BRPOPLPUSH, BLMPOP,
//! BZPOPMIN, BZPOPMAX, BZMPOP), and their waking.
//!
//! A blocked client queues itself on each of its keys, in arrival order,
//! then waits. A write to a key wakes the first client queued on it; that
//! client retries its command, and if it is served leaves every queue and
//! wakes the next client on the same key (there may be more to pop); if it
//! is not (another command took the element first) it waits again, keeping
//! its place. So clients blocked on one key are served in the order they
//! blocked, as Redis serves them. A client that leaves (served, timed out
//! or disconnected) is removed from every queue by its [`Waiter`]'s drop.

use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use bytes::Bytes;
use hashbrown::HashMap;
use parking_lot::Mutex;
use tokio::sync::Notify;

/// Clients that may be blocked at once; one more is answered with an
/// error instead of blocking.
pub const MAX_BLOCKED_CLIENTS: usize = 1 << 16;

/// One blocked client's entry in a key's queue.
#[derive(Debug)]
struct Queued {
    id: u64,
    wake: Arc<Notify>,
}

/// The queues of clients blocked on each key.
#[derive(Debug, Default)]
pub struct BlockedKeys {
    queues: Mutex<HashMap<Bytes, VecDeque<Queued>>>,
    /// Clients blocked now: a write checks this before taking the lock.
    blocked: AtomicUsize,
    next_id: AtomicU64,
}

/// A client's place in the queues of its keys; dropping it leaves them.
#[derive(Debug)]
pub struct Waiter<'a> {
    registry: &'a BlockedKeys,
    id: u64,
    keys: Vec<Bytes>,
    wake: Arc<Notify>,
}

impl BlockedKeys {
    /// Queues a client on `keys`, or `None` if [`MAX_BLOCKED_CLIENTS`]
    /// are blocked already.
    pub fn block(&self, keys: &[Bytes]) -> Option<Waiter<'_>> {
        if self.blocked.fetch_add(1, Ordering::SeqCst) >= MAX_BLOCKED_CLIENTS {
            self.blocked.fetch_sub(1, Ordering::SeqCst);
            return None;
        }
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let wake = Arc::new(Notify::new());
        let mut unique: Vec<Bytes> = Vec::with_capacity(keys.len());
        for key in keys {
            if !unique.contains(key) {
                unique.push(key.clone());
            }
        }
        let mut queues = self.queues.lock();
        for key in &unique {
            queues.entry(key.clone()).or_default().push_back(Queued {
                id,
                wake: wake.clone(),
            });
        }
        Some(Waiter {
            registry: self,
            id,
            keys: unique,
            wake,
        })
    }

    /// True if any client is blocked now.
    pub fn any_blocked(&self) -> bool {
        self.blocked_clients() > 0
    }

    /// How many clients are blocked now (INFO's `blocked_clients`).
    pub fn blocked_clients(&self) -> usize {
        self.blocked.load(Ordering::SeqCst)
    }

    /// The keys `writes` put to that a client blocks on (none, without
    /// allocating, while no client is blocked): what to pass to
    /// [`BlockedKeys::written`] once the writes are acknowledged.
    pub fn keys_to_wake(&self, writes: &[crate::KeyWrite<Bytes>]) -> Vec<Bytes> {
        if !self.any_blocked() {
            return Vec::new();
        }
        let queues = self.queues.lock();
        writes
            .iter()
            .filter_map(|write| match write {
                crate::KeyWrite::Put { key, .. } if queues.contains_key(key) => Some(key.clone()),
                _ => None,
            })
            .collect()
    }

    /// Wakes the first client blocked on each of `keys`, if any: called
    /// after a write to them is acknowledged.
    pub fn written<'k>(&self, keys: impl IntoIterator<Item = &'k Bytes>) {
        if self.blocked.load(Ordering::SeqCst) == 0 {
            return;
        }
        let queues = self.queues.lock();
        for key in keys {
            if let Some(first) = queues.get(key).and_then(VecDeque::front) {
                first.wake.notify_one();
            }
        }
    }
}

impl Waiter<'_> {
    /// Waits until a write to one of the keys wakes this client.
    pub async fn woken(&self) {
        self.wake.notified().await;
    }
}

impl Drop for Waiter<'_> {
    fn drop(&mut self) {
        let mut queues = self.registry.queues.lock();
        for key in &self.keys {
            let Some(queue) = queues.get_mut(key) else {
                continue;
            };
            let was_first = queue.front().is_some_and(|q| q.id == self.id);
            queue.retain(|q| q.id != self.id);
            if queue.is_empty() {
                queues.remove(key);
            } else if was_first && let Some(next) = queue.front() {
                // The next client may have something to pop now.
                next.wake.notify_one();
            }
        }
        self.registry.blocked.fetch_sub(1, Ordering::SeqCst);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(name: &str) -> Bytes {
        Bytes::copy_from_slice(name.as_bytes())
    }

    #[tokio::test]
    async fn the_first_blocked_client_is_woken_first_and_leaving_wakes_the_next() {
        let registry = BlockedKeys::default();
        let first = registry.block(&[key("q")]).expect("room");
        let second = registry.block(&[key("q"), key("r")]).expect("room");
        registry.written([&key("q")]);
        first.woken().await;
        drop(first);
        // The first one's leaving woke the second.
        second.woken().await;
        drop(second);
        assert!(registry.queues.lock().is_empty());
        assert_eq!(registry.blocked.load(Ordering::SeqCst), 0);
    }
}

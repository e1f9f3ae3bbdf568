//! Striped per-key locks that make the read-modify-write string commands
//! atomic per key across RESP clients.
//!
//! The guarantee: while one RESP command that reads a key and writes it
//! back (INCR, INCRBY, DECR, DECRBY, INCRBYFLOAT, APPEND, SETRANGE, GETSET,
//! GETDEL, SET with NX, XX or GET, SETNX, MSETNX) holds the stripes of its
//! keys, no other such command on any of those keys runs, whichever
//! storage connection either client writes through: the lock is held from
//! the read until the storage node has acknowledged the write and the
//! index shows it, so the next holder reads it. Sixteen clients
//! incrementing one key ten thousand times each leave exactly 160 000.
//!
//! What it does not cover: writes that do not read first (a plain SET,
//! MSET, DEL, RENAME, FLUSHALL) take no stripe, so one that races a
//! read-modify-write command on the same key may be overwritten by the
//! value that command computed from the key's older value; and writers
//! that use the [`crate::Engine`] directly, outside the RESP server, are
//! not covered at all. Inside EXEC no stripe is taken: EXEC holds the
//! server's EXEC gate exclusively, so no other command runs meanwhile.
//!
//! Stripes are tokio mutexes (held across the storage round trip, never
//! while replies are written to a socket); a command needing several takes
//! them in index order, so two multi-key commands never wait on each other
//! in a cycle.

use std::hash::{BuildHasher, BuildHasherDefault, DefaultHasher};

use tokio::sync::{Mutex, MutexGuard};

/// How many stripes the keys are spread over: two keys share a stripe
/// (and so wait for each other) with odds of one in this.
pub const KEY_LOCK_STRIPES: usize = 1024;

/// The striped locks (see the module documentation).
#[derive(Debug)]
pub struct KeyLocks {
    stripes: Box<[Mutex<()>]>,
}

impl Default for KeyLocks {
    fn default() -> Self {
        Self {
            stripes: (0..KEY_LOCK_STRIPES).map(|_| Mutex::new(())).collect(),
        }
    }
}

/// The stripes one command holds; dropping it lets them go.
#[derive(Debug)]
pub struct KeyGuards<'a> {
    _held: Vec<MutexGuard<'a, ()>>,
}

impl KeyLocks {
    /// The stripe `key` falls in (the same for the same key, always).
    fn stripe(key: &[u8]) -> usize {
        let hash = BuildHasherDefault::<DefaultHasher>::default().hash_one(key);
        (hash % KEY_LOCK_STRIPES as u64) as usize
    }

    /// Waits for and holds the stripes of every key in `keys`, each once,
    /// taken in index order.
    pub async fn lock<K: AsRef<[u8]>>(&self, keys: &[K]) -> KeyGuards<'_> {
        let mut stripes: Vec<usize> = keys.iter().map(|k| Self::stripe(k.as_ref())).collect();
        stripes.sort_unstable();
        stripes.dedup();
        let mut held = Vec::with_capacity(stripes.len());
        for stripe in stripes {
            held.push(self.stripes[stripe].lock().await);
        }
        KeyGuards { _held: held }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_always_falls_in_the_same_stripe() {
        for i in 0..1000u32 {
            let key = format!("key:{i}");
            let stripe = KeyLocks::stripe(key.as_bytes());
            assert!(stripe < KEY_LOCK_STRIPES);
            assert_eq!(stripe, KeyLocks::stripe(key.as_bytes()));
        }
    }

    #[tokio::test]
    async fn a_held_stripe_blocks_a_second_holder_until_let_go() {
        let locks = KeyLocks::default();
        let first = locks.lock(&[b"a".as_slice(), b"a", b"b"]).await;
        let wanted = [b"b".as_slice()];
        let second = locks.lock(&wanted);
        tokio::pin!(second);
        assert!(
            futures_poll_once(second.as_mut()).await.is_none(),
            "the stripe of b is held"
        );
        drop(first);
        let _second = second.await;
    }

    /// Polls `future` once: its output if it was ready.
    async fn futures_poll_once<F: std::future::Future + Unpin>(mut future: F) -> Option<F::Output> {
        std::future::poll_fn(|cx| {
            std::task::Poll::Ready(match std::pin::Pin::new(&mut future).poll(cx) {
                std::task::Poll::Ready(out) => Some(out),
                std::task::Poll::Pending => None,
            })
        })
        .await
    }
}

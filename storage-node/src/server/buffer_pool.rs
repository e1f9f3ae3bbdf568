//! Export buffers used again: a key-log export sends megabyte chunks that
//! the QUIC stream keeps until the peer has acknowledged them; a chunk's
//! buffer comes back here once the stream lets go of it, so an export of
//! many chunks does not fault in and zero fresh memory for each one.

use std::sync::Arc;

use bytes::Bytes;
use parking_lot::Mutex;

/// Buffers of one capacity kept for use again, at most `max_kept` of them.
pub(crate) struct BufferPool {
    kept: Mutex<Vec<Vec<u8>>>,
    capacity_bytes: usize,
    max_kept: usize,
}

impl BufferPool {
    /// A pool of buffers of `capacity_bytes` that keeps at most `max_kept`
    /// idle ones (the rest are freed when given back).
    pub(crate) fn new(capacity_bytes: usize, max_kept: usize) -> Self {
        Self {
            kept: Mutex::new(Vec::new()),
            capacity_bytes,
            max_kept,
        }
    }

    /// An empty buffer of the pool's capacity: a kept one, or a new one.
    pub(crate) fn take(&self) -> Vec<u8> {
        match self.kept.lock().pop() {
            Some(buffer) => buffer,
            None => Vec::with_capacity(self.capacity_bytes),
        }
    }

    /// `buffer` as shared bytes that give the buffer back to the pool once
    /// the last of them is dropped.
    pub(crate) fn share(self: &Arc<Self>, buffer: Vec<u8>) -> Bytes {
        Bytes::from_owner(Pooled {
            buffer,
            pool: Arc::clone(self),
        })
    }

    /// Keeps `buffer` (emptied) if there is room and it still has the
    /// pool's capacity; frees it otherwise.
    pub(crate) fn give_back(&self, mut buffer: Vec<u8>) {
        if buffer.capacity() != self.capacity_bytes {
            return;
        }
        buffer.clear();
        let mut kept = self.kept.lock();
        if kept.len() < self.max_kept {
            kept.push(buffer);
        }
    }

    /// Idle buffers kept.
    #[cfg(test)]
    fn kept(&self) -> usize {
        self.kept.lock().len()
    }
}

/// A pool's buffer lent out as [`Bytes`].
struct Pooled {
    buffer: Vec<u8>,
    pool: Arc<BufferPool>,
}

impl AsRef<[u8]> for Pooled {
    fn as_ref(&self) -> &[u8] {
        &self.buffer
    }
}

impl Drop for Pooled {
    fn drop(&mut self) {
        self.pool.give_back(std::mem::take(&mut self.buffer));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_shared_buffer_comes_back_when_its_last_bytes_go() {
        let pool = Arc::new(BufferPool::new(64, 2));
        let mut buffer = pool.take();
        buffer.extend_from_slice(b"frames");
        let address = buffer.as_ptr();
        let bytes = pool.share(buffer);
        let slice = bytes.slice(1..3);
        drop(bytes);
        assert_eq!(pool.kept(), 0, "a slice still holds it");
        assert_eq!(&slice[..], b"ra");
        drop(slice);
        assert_eq!(pool.kept(), 1);
        let again = pool.take();
        assert_eq!(again.as_ptr(), address, "the same memory, used again");
        assert!(again.is_empty());
        assert_eq!(again.capacity(), 64);
    }

    #[test]
    fn no_more_than_max_kept_are_kept_nor_buffers_of_another_size() {
        let pool = Arc::new(BufferPool::new(64, 2));
        let lent: Vec<Bytes> = (0..3).map(|_| pool.share(pool.take())).collect();
        drop(lent);
        assert_eq!(pool.kept(), 2);
        let mut grown = pool.take();
        grown.extend_from_slice(&[0u8; 65]);
        pool.give_back(grown);
        assert_eq!(pool.kept(), 1, "a grown buffer is freed, not kept");
    }
}

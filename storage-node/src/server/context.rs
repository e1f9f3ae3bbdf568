//! What every task of every connection uses: the engine, the frame limit,
//! the connection counters and the permits for blocking disk reads; and
//! the encoding of a plain response.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, AtomicU64};

use bytes::{Bytes, BytesMut};
use splitkv_common::message::{self, Response, ResponseBody, WireError};
use tokio::sync::Semaphore;

use super::buffer_pool::BufferPool;
use crate::StorageEngine;

/// Most blocking disk reads (point reads, range reads, key-log exports)
/// the server runs at once, over all connections.
pub const MAX_CONCURRENT_DISK_READS: usize = 64;

/// What every connection's tasks use: the engine, the frame limit, the
/// count of open connections, and the permits for blocking disk reads.
pub(crate) struct ServerContext {
    pub(crate) engine: Arc<StorageEngine>,
    pub(crate) max_frame_bytes: usize,
    pub(crate) connections: AtomicU32,
    /// How long a following reader may take nothing of its key-log stream
    /// (the server config's `follow_stall_ms`).
    pub(crate) follow_stall_ms: u64,
    /// Key-log streams closed for stalling.
    pub(crate) stalled_streams_closed: AtomicU64,
    /// [`MAX_CONCURRENT_DISK_READS`] permits.
    pub(crate) disk_reads: Arc<Semaphore>,
    /// Key-log export chunks' buffers, used again.
    pub(crate) export_buffers: Arc<BufferPool>,
}

impl ServerContext {
    /// Runs `read` on a blocking thread once a disk-read permit is free
    /// (waiting for one without holding a thread) and returns its result;
    /// `None` if the read panicked.
    pub(crate) async fn disk_read<T: Send + 'static>(
        &self,
        read: impl FnOnce(&StorageEngine) -> T + Send + 'static,
    ) -> Option<T> {
        let _permit = Arc::clone(&self.disk_reads).acquire_owned().await.ok()?;
        let engine = Arc::clone(&self.engine);
        tokio::task::spawn_blocking(move || read(&engine))
            .await
            .ok()
    }
}

/// Encodes a response without a blob into one frame, reusing `scratch`'s
/// capacity.
pub(crate) fn encode_response(
    scratch: &mut BytesMut,
    id: u64,
    body: Result<ResponseBody, WireError>,
) -> Bytes {
    message::encode(scratch, &Response { id, body }, &[])
}

//! The storage client as the compute node sends through it: the limits a
//! request is checked against before it is built, how long a request waits
//! for a connection that is down or full, and whether this node may write
//! (the writer, or a reader whose writes are refused before sending).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use bytes::Bytes;
use splitkv_common::client::{Call, ClientError, KeyWrite, StorageClient};
use splitkv_common::limits::Limits;

use crate::error::{EngineError, Result};

/// The storage client and what sending through it takes (see the module
/// documentation).
pub(crate) struct Storage {
    pub(crate) client: Arc<StorageClient>,
    limits: Limits,
    reconnect_wait: Duration,
    request_timeout: Duration,
    /// True for the writer (configured as one, or a promoted reader).
    writer: AtomicBool,
}

/// What [`Storage::submit`] does when the connection is down.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum WhenDown {
    /// Wait for it to come back (up to the reconnect wait), then send.
    Wait,
    /// Fail at once.
    Fail,
}

impl Storage {
    pub(crate) fn new(
        client: Arc<StorageClient>,
        limits: Limits,
        reconnect_wait: Duration,
        request_timeout: Duration,
        writer: bool,
    ) -> Self {
        Self {
            client,
            limits,
            reconnect_wait,
            request_timeout,
            writer: AtomicBool::new(writer),
        }
    }

    /// The limits of keys and values.
    pub(crate) fn limits(&self) -> &Limits {
        &self.limits
    }

    pub(crate) fn reconnect_wait(&self) -> Duration {
        self.reconnect_wait
    }

    pub(crate) fn is_writer(&self) -> bool {
        self.writer.load(Ordering::Acquire)
    }

    /// Makes this node the writer or a reader; returns whether it was the
    /// writer.
    pub(crate) fn set_writer(&self, writer: bool) -> bool {
        self.writer.swap(writer, Ordering::AcqRel)
    }

    pub(crate) fn check_key(&self, key: &[u8]) -> Result<()> {
        self.limits.check_key(key).map_err(EngineError::Invalid)
    }

    fn check_value(&self, value: &[u8]) -> Result<()> {
        self.limits.check_value(value).map_err(EngineError::Invalid)
    }

    /// Checks a write's key (and a put's value) against the limits: the
    /// one check a write gets, where the route takes it.
    pub(crate) fn check_write(&self, write: &KeyWrite<Bytes>) -> Result<()> {
        self.check_key(write.key())?;
        match write.value() {
            Some(value) => self.check_value(value),
            None => Ok(()),
        }
    }

    /// Sends a request with `send`. While the connection of `partition` is
    /// full it waits for room (up to a request deadline each time); if the
    /// connection is down it waits for it to come back once, or fails, as
    /// `when_down` says. A request that was never sent can be sent again
    /// safely.
    pub(crate) async fn submit<T>(
        &self,
        partition: usize,
        when_down: WhenDown,
        send: impl Fn() -> std::result::Result<Call<T>, ClientError>,
    ) -> Result<Call<T>> {
        let mut waited_up = when_down == WhenDown::Fail;
        loop {
            match send() {
                Err(ClientError::Unavailable { .. }) if !waited_up => {
                    waited_up = true;
                    self.client.wait_up(partition, self.reconnect_wait).await?;
                }
                Err(ClientError::Busy { .. }) => {
                    self.client
                        .wait_for_room(partition, self.request_timeout)
                        .await?;
                }
                other => return Ok(other?),
            }
        }
    }

    /// Sends a write with `send` as [`Storage::submit`] does, waiting for a
    /// connection that is down; a reader refuses it before sending.
    pub(crate) async fn submit_write<T>(
        &self,
        partition: usize,
        send: impl Fn() -> std::result::Result<Call<T>, ClientError>,
    ) -> Result<Call<T>> {
        if !self.is_writer() {
            return Err(EngineError::ReadOnly);
        }
        self.submit(partition, WhenDown::Wait, send).await
    }
}
